"""A training result's recorded step as Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

One process per rank (per run and rank for `compare`), with a compute thread (forward, backward
and optimizer of each unit), a communication thread (each collective from issue to completion,
its op, bytes and process group in `args`), and counter tracks for live memory and the parameter
bytes held. Timestamps are microseconds from the start of the recorded step. Torch-free.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypedDict

from ddpfsdp.demos.result.schema import DemoResult, Timeline, as_result

Result = DemoResult | Mapping[str, Any]

COMPUTE_TID = 1
COMM_TID = 2

# One Chrome trace event (the Trace Event Format): "M" metadata, "X" a complete span, "C" a counter.
TraceEvent = dict[str, object]


class TraceFile(TypedDict):
    traceEvents: list[TraceEvent]
    displayTimeUnit: str
    otherData: dict[str, str | None]


def _timelines(result: DemoResult) -> Iterator[tuple[str, Timeline]]:
    """Each recorded step of a result with its name: compare's per strategy, or the demo's own."""
    if result.runs:
        for name, strategy_result in result.runs.items():
            if strategy_result.timeline:
                yield name, strategy_result.timeline
    elif result.timeline:
        yield result.demo or "run", result.timeline


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def events(result: Result) -> list[TraceEvent]:
    result = as_result(result)
    out: list[TraceEvent] = []
    pid = 0
    for recorded, timeline in _timelines(result):
        for rank in timeline.ranks:
            if not rank:
                continue
            pid += 1
            label = f"rank {rank['rank']}" if recorded == result.demo else f"{recorded} rank {rank['rank']}"
            out += [
                {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}},
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": COMPUTE_TID, "args": {"name": "compute"}},
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": COMM_TID, "args": {"name": "communication"}},
            ]
            for s in rank.get("spans", []):
                if s.get("start_s") is None or s.get("end_s") is None:
                    continue
                name = f"{s['phase']} {s['unit']}" if s.get("unit") else s["name"]
                out.append({"ph": "X", "name": name, "cat": s["phase"], "pid": pid, "tid": COMPUTE_TID,
                            "ts": _us(s["start_s"]), "dur": _us(s["end_s"] - s["start_s"]),
                            "args": {"unit": s.get("unit"), "seq": [s["seq_start"], s["seq_end"]]}})
            for c in rank.get("collectives", []):
                done = c.get("completed_s")
                end = done if done is not None else c["issued_s"]
                out.append({"ph": "X", "name": c["op"], "cat": "collective", "pid": pid, "tid": COMM_TID,
                            "ts": _us(c["issued_s"]), "dur": _us(max(0.0, end - c["issued_s"])),
                            "args": {"bytes": c["bytes"], "group": c["group"], "group_size": c["group_size"],
                                     "seq": c["seq"], "completed": done is not None}})
            for t, held in rank.get("memory", {}).get("samples", []):
                out.append({"ph": "C", "name": "live bytes", "pid": pid, "ts": _us(t), "args": {"bytes": held}})
            for t, held, _ in rank.get("params", []):
                out.append({"ph": "C", "name": "parameter bytes held", "pid": pid, "ts": _us(t),
                            "args": {"bytes": held}})
    return out


def to_json(result: Result) -> TraceFile:
    result = as_result(result)
    found = events(result)
    if not found:
        raise ValueError("this result holds no recorded step to trace")
    return TraceFile(traceEvents=found, displayTimeUnit="ms", otherData={"demo": result.demo, "schema": result.schema})


def write(result: Result, path: str | Path) -> Path:
    target = Path(path).expanduser().resolve()
    target.write_text(json.dumps(to_json(result)))
    return target


def write_logged(log: Callable[[str], None], result: Result, path: str | None) -> None:
    """A demo's `--trace PATH`: the trace is written and its path said; a path it cannot write is said
    too, and the run's result is still returned."""
    if not path:
        return
    try:
        written = write(result, path)
        log(f"trace: {written} (open it in ui.perfetto.dev or chrome://tracing)")
    except (OSError, ValueError) as exc:
        log(f"trace not written: {exc}")
