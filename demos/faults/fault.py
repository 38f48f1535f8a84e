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
from typing import Any, TypedDict

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults.fr_table import FlightEntry

PHASES = ("broken", "fixed")
# The fixed program runs first: after a hang, gloo pairs and functional-collective state can stay
# broken in the process, so nothing but the report runs after a broken program.
RUN_ORDER = ("fixed", "broken")


class RaisedError(TypedDict):
    """An error as torch raised it on a rank."""

    type: str
    message: str


class RankRecord(TypedDict):
    """What one rank recorded of one program (`rank.run_phase`)."""

    rank: int
    phase: str  # "broken" or "fixed"
    error: RaisedError | None
    measured: dict[str, Any]  # each fault's own quantities, by its own names (`FaultContext.measured`)
    wall_s: float | None  # None: the rank wrote no record
    flight_recorder: list[FlightEntry]


class Finding(TypedDict):
    """One collective torch's flight-recorder analyzer did not pass."""

    seq: int
    op: str
    mismatch: str | None  # in the analyzer's words, per culprit rank
    missing_ranks: list[int]


class Analysis(TypedDict):
    """Torch's analyzer over one program's dumps (`flight_recorder.analyze`)."""

    ran: bool
    error: str | None
    log: list[str]
    errors: list[Finding]


class PhaseBlock(TypedDict, total=False):
    """One program, broken or fixed, as a fault result carries it (result.FaultPhase in its JSON form)."""

    program: str
    wall_s: float
    ranks: list[RankRecord]
    analyzer: Analysis | None  # a fault that hangs
    symptom: list[str]


class FaultBlock(TypedDict, total=False):
    """A fault result's own block (result.FaultLab in its JSON form): what a fault's checks judge."""

    name: str
    summary: str
    cause: str
    fix: str
    hangs: bool
    timeout_s: float
    broken: PhaseBlock
    fixed: PhaseBlock


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
    judge: Callable[[FaultBlock], list[Check]]  # the fault block of a result -> its checks
    describe: Callable[[PhaseBlock], list[str]] = field(default=lambda phase: [])  # one phase -> measured lines
    hangs: bool = False  # the broken program waits for a peer until the process-group timeout
    raises: bool = False  # the broken program ends with an error raised on the ranks
    # False: the program talks by send and recv only (a pipeline), which gloo's flight recorder does not
    # record, so a hang of it has no flight-recorder table and torch's analyzer is not run on it.
    collectives: bool = True
    # Imported before the process group starts: DDP's first construction imports torch._dynamo
    # (seconds of CPU), which inside a timed group would let a fast rank time out on a slow one.
    imports: tuple[str, ...] = ()


def phase_ranks(phase: PhaseBlock) -> list[RankRecord]:
    """The per-rank records of one phase, in rank order."""
    ranks = phase.get("ranks")
    return sorted((r for r in ranks if isinstance(r, dict)), key=lambda r: r.get("rank", 0)) if isinstance(ranks, list) else []


def measured(phase: PhaseBlock, key: str) -> list[Any]:
    """`key` as each rank measured it, in rank order (None where a rank has no such value)."""
    return [(r.get("measured") or {}).get(key) for r in phase_ranks(phase)]
