"""One rank of a failure-lab run: each fault's fixed program, then its broken one, each on its own group.

    python -m ddpfsdp.demos.faults.rank RUN_DIR TIMEOUT_S FAULT [FAULT ...]

`FaultRun` starts one such process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
(no torchrun agent: torchrun stops every rank as soon as one fails, which would cut a hang short
before the other ranks' own timeouts show it). The default process group, with a long timeout, only
brings the ranks together and keeps them in step between programs; every program runs on a fresh
group whose timeout is TIMEOUT_S. Each rank writes one JSON record per phase into RUN_DIR (its error
as torch raised it, what it measured, its flight-recorder entries); for a hang, each rank also dumps
the flight recorder and rank 0 runs torch's analyzer over the dumps. Rank 0 writes JSON-lines events
on stdout. The process group is destroyed in `finally`, and the rank leaves with os._exit.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

from ddpfsdp.demos.faults import catalog, flight_recorder
from ddpfsdp.demos.faults.fault import RUN_ORDER, Fault, FaultContext, RaisedError, RankRecord
from ddpfsdp.demos.launch import events
from ddpfsdp.demos.worker import die_with_parent

# The default group only rendezvouses ranks that finish importing torch at different times, and
# waits at the barriers between programs while a peer sits out a broken program's timeout.
STARTUP_TIMEOUT_S = 120.0


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


def _emit(rank: int, event: str, **fields: Any) -> None:
    if rank == 0:
        sys.stdout.write(events.encode({"event": event, **fields}) + "\n")
        sys.stdout.flush()


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


def run_fault(fault: Fault, run_dir: Path, rank: int, world_size: int, timeout_s: float, step: tuple[int, int]) -> None:
    """Both programs of one fault; `step` is (programs run before this fault's first, programs in all)."""
    import torch.distributed as dist

    for index, phase in enumerate(RUN_ORDER):
        _emit(rank, "progress", step=step[0] + index, steps=step[1], fault=fault.name, phase=phase)
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


def main(argv: list[str]) -> int:
    die_with_parent()
    run_dir, timeout_s, names = Path(argv[0]), float(argv[1]), argv[2:]
    faults = [catalog.get(name) for name in names]
    for module in sorted({module for fault in faults for module in fault.imports}):
        importlib.import_module(module)
    if any(fault.hangs and fault.collectives for fault in faults):
        flight_recorder.warm_up()

    import torch.distributed as dist
    from ddpfsdp.demos.measure.memory import environment

    dist.init_process_group("gloo", timeout=timedelta(seconds=STARTUP_TIMEOUT_S))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    code = 1
    try:
        _emit(rank, "start", demo="fault", world_size=world_size, device="cpu", backend="gloo",
              config={"faults": names, "timeout_s": timeout_s}, env=environment())
        for index, fault in enumerate(faults):
            run_fault(fault, run_dir, rank, world_size, timeout_s, (index * len(RUN_ORDER), len(faults) * len(RUN_ORDER)))
        dist.barrier()
        code = 0
    except Exception as exc:  # noqa: BLE001 - reported as an event and on stderr; the launcher stops the rest
        sys.stdout.write(events.encode({"event": "error", "rank": rank, "message": f"{type(exc).__name__}: {exc}",
                                        "traceback": traceback.format_exc()[-3000:]}) + "\n")
        traceback.print_exc()
    finally:
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Without interpreter teardown, where gloo's destructors can abort a rank after a clean run.
    os._exit(exit_code)
