"""Reading one rank's recorded step (the `timeline` of a training result): lanes and overlap.

Torch-free: the checks, the text timeline, the Chrome trace and the app's charts all read a saved
result through these functions.

Lanes: compute is the union of the units' forward and backward spans and the optimizer's update,
less the time the step sat blocked on a functional collective's result (`waits`: tensor
parallelism's all-reduces inside a block); communication is the union of collectives from issue to
completion. A collective whose completion was not seen counts as done when issued (it adds no time).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ddpfsdp.demos.result.step_record import CollectiveSpan, RankStep, Span

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[list[float]] = []
    for start, end in sorted((s, e) for s, e in intervals if e is not None and s is not None and e > s):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(intervals: Iterable[Interval]) -> float:
    return sum(e - s for s, e in union(intervals))


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    out = []
    for s1, e1 in union(a):
        for s2, e2 in union(b):
            s, e = max(s1, s2), min(e1, e2)
            if e > s:
                out.append((s, e))
    return union(out)


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The parts of `a` outside `b`."""
    out = []
    for s, e in union(a):
        cursor = s
        for s2, e2 in union(b):
            if e2 <= cursor or s2 >= e:
                continue
            if s2 > cursor:
                out.append((cursor, s2))
            cursor = max(cursor, e2)
        if cursor < e:
            out.append((cursor, e))
    return out


def unit_spans(rank: RankStep, phase: str | None = None) -> list[Span]:
    return [s for s in rank.get("spans", []) if s.get("unit") and (phase is None or s["phase"] == phase)]


def span(rank: RankStep, name: str) -> Span | None:
    return next((s for s in rank.get("spans", []) if s["name"] == name and not s.get("unit")), None)


def compute_intervals(rank: RankStep) -> list[Interval]:
    spans = unit_spans(rank)
    optimizer = span(rank, "optimizer")
    if optimizer is not None:
        spans = [*spans, optimizer]
    busy = union((s["start_s"], s["end_s"]) for s in spans)
    return subtract(busy, [(start, end) for start, end in rank.get("waits", [])])


def collective_interval(c: CollectiveSpan) -> Interval:
    done = c.get("completed_s")
    return c["issued_s"], max(c["issued_s"], done if done is not None else c["issued_s"])


def comm_intervals(rank: RankStep, op: str | None = None) -> list[Interval]:
    return union(collective_interval(c) for c in rank.get("collectives", []) if op is None or c["op"] == op)


def exposed_comm_s(rank: RankStep) -> float:
    """Time with a collective in flight and no compute running."""
    return length(subtract(comm_intervals(rank), compute_intervals(rank)))


def exposed_share(rank: RankStep) -> float:
    duration = rank.get("duration_s") or 0.0
    return exposed_comm_s(rank) / duration if duration > 0 else 0.0


def backward_collectives(rank: RankStep, op: str) -> list[CollectiveSpan]:
    backward = span(rank, "backward")
    forward = span(rank, "forward")
    after = backward["seq_start"] if backward else (forward["seq_end"] if forward else -1)
    optimizer = span(rank, "optimizer")
    before = optimizer["seq_start"] if optimizer else float("inf")
    return [c for c in rank.get("collectives", []) if c["op"] == op and after < c["seq"] < before]


def forward_collectives(rank: RankStep, op: str) -> list[CollectiveSpan]:
    forward = span(rank, "forward")
    if forward is None:
        return []
    return [c for c in rank.get("collectives", []) if c["op"] == op and forward["seq_start"] < c["seq"] < forward["seq_end"]]


def param_drops_after_forward(rank: RankStep) -> dict[str, tuple[int, int]]:
    """{unit: (parameter bytes held when its forward compute began, held right after its forward)}."""
    at_start: dict[str, int] = {}
    after: dict[str, int] = {}
    for _, held, label in rank.get("params", []):
        if label.endswith(" after forward"):
            after.setdefault(label.removesuffix(" after forward"), held)
        elif label.endswith(" forward"):
            at_start.setdefault(label.removesuffix(" forward"), held)
    return {unit: (at_start[unit], after[unit]) for unit in at_start if unit in after}
