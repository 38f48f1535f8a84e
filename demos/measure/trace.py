"""A training result's recorded step as Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

One process per rank (per run and rank for `compare`), with a compute thread (forward, backward
and optimizer of each unit), a communication thread (each collective from issue to completion,
its op, bytes and process group in `args`), and counter tracks for live memory and the parameter
bytes held. Timestamps are microseconds from the start of the recorded step. Torch-free.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

COMPUTE_TID = 1
COMM_TID = 2


def _runs(result: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(result.get("runs"), dict):
        for name, run in result["runs"].items():
            if run.get("timeline"):
                yield name, run["timeline"]
    elif result.get("timeline"):
        yield result.get("demo", "run"), result["timeline"]


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def events(result: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pid = 0
    for run_name, timeline in _runs(result):
        for rank in timeline.get("ranks", []):
            if not rank:
                continue
            pid += 1
            label = f"rank {rank['rank']}" if run_name == result.get("demo") else f"{run_name} rank {rank['rank']}"
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


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    found = events(result)
    if not found:
        raise ValueError("this result holds no recorded step to trace")
    return {"traceEvents": found, "displayTimeUnit": "ms",
            "otherData": {"demo": result.get("demo"), "schema": result.get("schema")}}


def write(result: dict[str, Any], path: str | Path) -> Path:
    target = Path(path).expanduser().resolve()
    target.write_text(json.dumps(to_json(result)))
    return target
