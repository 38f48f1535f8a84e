"""The result a concept demo returns: the common envelope around the demo's own measurements."""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.checks import Check

SCHEMA = "ddpfsdp.demo/1"


def envelope(ctx: Any, demo: str, config: dict[str, Any], checks: list[Check], **measurements: Any) -> dict:
    """The ddpfsdp.demo/1 dict for one run; `config` gains where the run happened."""
    from ddpfsdp.demos.measure.memory import environment

    config = {
        **config,
        "world_size": ctx.world_size,
        "device": ctx.device.type,
        "backend": ctx.backend,
    }
    return {
        "schema": SCHEMA,
        "demo": demo,
        "config": config,
        "env": environment(ctx),
        "checks": [check.to_dict() for check in checks],
        **measurements,
    }
