"""A fault: what the broken and the fixed program do, why it breaks, how to fix it, and its checks.

Every rank runs `program(ctx)` twice, once with `ctx.phase == "fixed"` and once with "broken", each on a
fresh process group whose timeout is the run's. A program that raises has its error recorded (type
and message, as torch raised them); what it measures goes into `ctx.measured`, which is kept even when
it raises. `describe` turns one phase's records into the lines a person reads, and `judge` turns the
two phases into named checks. Both are pure: a test feeds them records without the symptom.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ddpfsdp.demos.checks import Check

PHASES = ("broken", "fixed")
# The fixed program runs first: after a hang, gloo pairs and functional-collective state can stay
# broken in the process, so nothing but the report runs after a broken program.
RUN_ORDER = ("fixed", "broken")


@dataclass
class FaultContext:
    """What a fault's program gets on every rank."""

    phase: str  # "broken" or "fixed"
    rank: int
    world_size: int
    group: Any  # the process group this phase runs on (torch.distributed.ProcessGroup)
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        return self.phase == "broken"


@dataclass(frozen=True)
class Fault:
    name: str
    summary: str  # one line for `ddpfsdp demo fault --list`
    broken: str  # what the broken program does
    fixed: str  # what the fixed program does
    cause: str
    fix: str
    program: Callable[[FaultContext], None]
    claims: dict[str, str]  # check name -> the claim it tests
    judge: Callable[[dict[str, Any]], list[Check]]  # the fault block of a result -> its checks
    describe: Callable[[dict[str, Any]], list[str]] = field(default=lambda phase: [])  # one phase -> measured lines
    hangs: bool = False  # the broken program waits for a peer until the process-group timeout
    raises: bool = False  # the broken program ends with an error raised on the ranks
    # False: the program talks by send and recv only (a pipeline), which gloo's flight recorder does not
    # record, so a hang of it has no flight-recorder table and torch's analyzer is not run on it.
    collectives: bool = True
    # Imported before the process group starts: DDP's first construction imports torch._dynamo
    # (seconds of CPU), which inside a timed group would let a fast rank time out on a slow one.
    imports: tuple[str, ...] = ()


def phase_ranks(phase: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-rank records of one phase, in rank order."""
    ranks = phase.get("ranks")
    return sorted((r for r in ranks if isinstance(r, dict)), key=lambda r: r.get("rank", 0)) if isinstance(ranks, list) else []


def measured(phase: dict[str, Any], key: str) -> list[Any]:
    """`key` as each rank measured it, in rank order (None where a rank has no such value)."""
    return [(r.get("measured") or {}).get(key) for r in phase_ranks(phase)]
