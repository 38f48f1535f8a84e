"""One rank of a failure-lab run: each fault's fixed program, then its broken one, each on its own group.

The `fault` demo's code on every rank (`run`), started like every demo's by the launcher, its agent
(with `--on-failure wait`: a rank that fails does not cut the others' symptom short) and the worker,
which joins the default group. That group, with the launcher's long timeout, only brings the ranks
together and keeps them in step between programs; every program runs on a fresh group whose timeout is
the fault's. Each rank writes one JSON record per phase into the run's folder (its error as torch raised
it, what it measured, its flight-recorder entries); for a hang, each rank also dumps the flight recorder
and rank 0 runs torch's analyzer over the dumps. When every rank is done, rank 0 makes each fault's
result from the records (`fault_result`).
"""

from __future__ import annotations

import importlib
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from ddpfsdp.demos.faults import catalog, flight_recorder, report
from ddpfsdp.demos.faults.fault import PHASES, RUN_ORDER, Fault, FaultContext, RaisedError, RankRecord
from ddpfsdp.demos.result.schema import DemoResult


def record_path(run_dir: Path, fault: str, phase: str, rank: int) -> Path:
    return run_dir / f"{fault}.{phase}.rank{rank}.json"


def dump_dir(run_dir: Path, fault: str, phase: str) -> Path:
    return run_dir / f"{fault}.{phase}.flight-recorder"


def analysis_path(run_dir: Path, fault: str, phase: str) -> Path:
    return run_dir / f"{fault}.{phase}.analysis.json"


def _write_json(path: Path, data: Any) -> None:
    partial = path.with_name("." + path.name)
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.rename(path)


def run_phase(fault: Fault, phase: str, rank: int, world_size: int, timeout_s: float) -> tuple[RankRecord, Any]:
    """Run one program on a fresh group; its record (error, measurements, flight recorder) and the group."""
    import torch.distributed as dist

    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    ctx = FaultContext(phase, rank, world_size, group)
    started = time.perf_counter()
    error = None
    try:
        fault.program(ctx)
    except Exception as exc:  # noqa: BLE001 - the error is the symptom: recorded as torch raised it
        error = RaisedError(type=type(exc).__name__, message=str(exc))
    record = RankRecord(rank=rank, phase=phase, error=error, measured=ctx.measured, wall_s=time.perf_counter() - started,
                        flight_recorder=flight_recorder.group_entries(group, frames=fault.hangs and fault.collectives))
    return record, group


def run_fault(fault: Fault, run_dir: Path, ctx: Any, timeout_s: float, step: tuple[int, int]) -> None:
    """Both programs of one fault; `step` is (programs run before this fault's first, programs in all)."""
    import torch.distributed as dist

    rank, world_size = ctx.rank, ctx.world_size
    for index, phase in enumerate(RUN_ORDER):
        ctx.emit("progress", step=step[0] + index, steps=step[1], fault=fault.name, phase=phase)
        record, group = run_phase(fault, phase, rank, world_size, timeout_s)
        _write_json(record_path(run_dir, fault.name, phase, rank), record)
        if fault.hangs and fault.collectives:
            flight_recorder.write_dump(dump_dir(run_dir, fault.name, phase), rank)
        dist.barrier()  # every rank is past this program (a hung one, past its timeout)
        if fault.hangs and fault.collectives:
            if rank == 0:
                analysis = flight_recorder.analyze(dump_dir(run_dir, fault.name, phase), group.group_name)
                _write_json(analysis_path(run_dir, fault.name, phase), analysis)
            dist.barrier()  # the next group's set-up waits only its own short timeout


def run(ctx: Any, *, faults: list[str], timeout_s: float, run_dir: str) -> list[DemoResult] | None:
    """Every fault asked, on this rank: each fault's fixed program, then its broken one; rank 0 then makes
    one result per fault from every rank's records. The worker has joined the default group."""
    import torch.distributed as dist

    chosen = [catalog.get(name) for name in faults]
    for module in sorted({module for fault in chosen for module in fault.imports}):
        importlib.import_module(module)
    if any(fault.hangs and fault.collectives for fault in chosen):
        flight_recorder.warm_up()
    folder = Path(run_dir)
    programs = len(chosen) * len(RUN_ORDER)
    walls: dict[str, float] = {}
    for index, fault in enumerate(chosen):
        started = time.perf_counter()
        run_fault(fault, folder, ctx, timeout_s, (index * len(RUN_ORDER), programs))
        walls[fault.name] = time.perf_counter() - started
    dist.barrier()  # every record of every rank is written
    if not ctx.is_main:
        return None
    return [fault_result(ctx, fault, folder, timeout_s, walls[fault.name]) for fault in chosen]


def fault_result(ctx: Any, fault: Fault, run_dir: Path, timeout_s: float, wall_s: float) -> DemoResult:
    """One fault's result, from the records every rank wrote into `run_dir` (and torch's analysis of a hang)."""
    phases = {}
    for phase in PHASES:
        records = []
        for rank in range(ctx.world_size):
            path = record_path(run_dir, fault.name, phase, rank)
            records.append(json.loads(path.read_text()) if path.is_file() else None)
        analysis = analysis_path(run_dir, fault.name, phase)
        phases[phase] = report.phase_result(fault, phase, records,
                                            json.loads(analysis.read_text()) if analysis.is_file() else None)
    return ctx.result("fault", {"timeout_s": timeout_s, "fault": fault.name}, fault.judge(report.fault_block(fault, phases, timeout_s)),
                      fault=report.fault_lab(fault, phases, timeout_s), wall_s=wall_s)
