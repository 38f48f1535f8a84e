"""One rank's recorded step, in the JSON form a training result's `timeline` carries (no torch).

`measure.timeline.TimelineRecorder.to_dict` writes it, `measure.lanes` and the timeline claims read it,
the Chrome trace and the app's chart draw it. Times are seconds from the start of the step; `seq` is
the order in which the host reached each edge, shared by spans and collectives.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Span(TypedDict):
    """Compute: a unit's forward or backward, or a whole phase (unit None: forward, backward, optimizer)."""

    name: str
    phase: str
    unit: str | None
    start_s: float | None
    end_s: float | None
    seq_start: int
    seq_end: int


class CollectiveSpan(TypedDict):
    """One collective from issue to completion (completed_s None: its completion was not seen)."""

    op: str
    bytes: int
    group_size: int
    group: str
    issued_s: float
    completed_s: float | None
    seq: int


class MemorySamples(TypedDict):
    kind: str  # what was sampled: CUDA memory_allocated at each edge, or CPU live tensor bytes
    samples: list[list[float]]  # [seconds, bytes]


class RankStep(TypedDict, total=False):
    """What one rank recorded of one step."""

    rank: int
    clock: str  # "cuda events" or "host"
    duration_s: float
    spans: list[Span]
    collectives: list[CollectiveSpan]
    waits: list[list[float]]  # [start_s, end_s]: blocked on a functional collective's result
    memory: MemorySamples
    params: list[list[Any]]  # [seconds, parameter bytes held, "<unit> forward" and the like]


class Exposed(TypedDict):
    """Per rank: the step's time with a collective in flight and no compute running, and its share."""

    exposed_s: list[float]
    share: list[float]
    comm_s: list[float]
    step_s: list[float | None]
