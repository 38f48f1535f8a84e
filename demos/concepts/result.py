"""The result a concept demo returns: the common envelope (demos/result/schema.py) around the demo's own measurements."""

from __future__ import annotations

from typing import Any, Mapping

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject
from ddpfsdp.demos.result.schema import envelope as result_envelope


def envelope(ctx: Any, demo: str, config: Mapping[str, Any], checks: list[Check], **measurements: Any) -> JsonObject:
    """The result of one run in its JSON form; `config` gains where the run happened."""
    from ddpfsdp.demos.measure.memory import environment

    placed = {**config, "world_size": ctx.world_size, "device": ctx.device.type, "backend": ctx.backend}
    return result_envelope(demo, placed, environment(ctx), checks, **measurements).to_json()
