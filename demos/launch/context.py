"""What a demo's code gets on every rank: who it is, where it runs, and how it reports.

Demos call `ctx.step(i, steps, ...)` once per step: rank 0 streams a progress event, and a fault
injected for tests (`--fail-rank R --fail-step S`) fires there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.launch import events
from ddpfsdp.demos.result.build import build
from ddpfsdp.demos.result.schema import DemoResult

TIMEOUT_ENV = "DDPFSDP_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0  # short on purpose: a dead peer should not hang a user for the default 10-30 min
FAIL_RANK_ENV = "DDPFSDP_FAIL_RANK"
FAIL_STEP_ENV = "DDPFSDP_FAIL_STEP"
# "raise" (an exception: the rank reports it) or "exit" (the process vanishes with no report, as a crash
# in native code or the kernel's OOM killer would leave it).
FAIL_MODE_ENV = "DDPFSDP_FAIL_MODE"
HARD_EXIT_CODE = 7


class InjectedFault(RuntimeError):
    """Raised on purpose on a chosen rank at a chosen step, to test crash handling."""


@dataclass
class DemoContext:
    rank: int
    world_size: int
    local_rank: int
    device: Any  # torch.device
    placement: Placement  # where the run's ranks are: the device, the world, ranks sharing a GPU
    fail_rank: int | None = None
    fail_step: int | None = None
    _stdout: Any = field(default=None, repr=False)

    @classmethod
    def from_env(cls, device: Any, placement: Placement) -> DemoContext:
        import torch.distributed as dist

        fail_rank = os.environ.get(FAIL_RANK_ENV)
        fail_step = os.environ.get(FAIL_STEP_ENV)
        return cls(
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            device=device,
            placement=placement,
            fail_rank=int(fail_rank) if fail_rank not in (None, "") else None,
            fail_step=int(fail_step) if fail_step not in (None, "") else None,
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def backend(self) -> str:
        return self.placement.backend

    def result(self, demo: str, config: Any, checks: Sequence[Any], **fields: Any) -> DemoResult:
        """This run's result, made in the one place results are made (`result.build`), with this rank's
        environment and the run's placement."""
        from ddpfsdp.demos.measure.memory import environment

        return build(demo, self.placement, environment(self), config, checks, **fields)

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event line; only rank 0 writes."""
        if self.is_main:
            self.emit_any_rank(event, **fields)

    def emit_any_rank(self, event: str, **fields: Any) -> None:
        stream = self._stdout or sys.stdout
        stream.write(events.encode({"event": event, **fields}) + "\n")
        stream.flush()

    def log(self, message: str) -> None:
        self.emit("log", message=message)

    def step(self, step: int, steps: int, **metrics: Any) -> None:
        """Report progress at a step (0-based) and fire an injected fault if one is due here."""
        if self.fail_rank == self.rank and self.fail_step == step:
            if os.environ.get(FAIL_MODE_ENV) == "exit":
                os._exit(HARD_EXIT_CODE)
            raise InjectedFault(f"fault injected on rank {self.rank} at step {step}")
        self.emit("progress", step=step, steps=steps, **metrics)

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0; None on other ranks."""
        import torch.distributed as dist

        out = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, out, dst=0)
        return out
