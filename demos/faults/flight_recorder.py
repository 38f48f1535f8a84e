"""The rank side of torch's flight recorder: this group's entries, a dump per rank, and torch's analyzer.

torch 2.13 records every gloo collective in the flight recorder (torch/csrc/distributed/c10d/
FlightRecorder.hpp: a ring of TORCH_FR_BUFFER_SIZE entries, 2000 by default; older releases read
TORCH_NCCL_TRACE_BUFFER_SIZE, default 0, so the launcher sets the size). `_dump_fr_trace(collectives,
stack_traces, only_active)` returns a pickle: {version, pg_config, pg_status, entries}, each entry with
`collective_seq_id`, `profiling_name` ("gloo:all_reduce"), `process_group` (name, desc), `input_sizes`,
`input_dtypes`, `frames` (the Python stack of the call, innermost first) and `state`.

Two things differ from NCCL's dumps on gloo. `state` is "scheduled" for every entry, finished or
not (no start or end event is discovered for a gloo collective), so the stuck collective is found by
comparing ranks, not by its state. And `pg_config` names no group the entries use: it holds one group
named "" (empty; its ranks "[0, 1]" with only the default group, "[]" once a subgroup exists) while
the entries name theirs "0", "1", ...; torch's analyzer (torch/distributed/flight_recorder/fr_trace.py,
components/builder.py) looks each entry's group up in pg_config and stops with `KeyError: ('0', 0)`
(with `-j` too). `write_dump` therefore writes torch's dump with one change: pg_config filled in from
this rank's own groups (`dist.get_process_group_ranks`), keeping what torch wrote beside it; with
that, torch's analyzer reads gloo dumps and finds the mismatch itself.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
from pathlib import Path
from typing import Any

from ddpfsdp.demos.faults.fault import Analysis, Finding
from ddpfsdp.demos.faults.fr_table import FlightEntry

DUMP_PREFIX = "fr_"
ANALYZER_LOGGER = "Flight Recorder"  # torch/distributed/flight_recorder/components/fr_logger.py


def _dump() -> dict[str, Any]:
    """torch's flight-recorder dump as it pickles it: its own keys, which change between versions."""
    import torch

    return pickle.loads(torch._C._distributed_c10d._dump_fr_trace(True, True, False))


def _user_frame(frames: list[dict[str, Any]] | None) -> str | None:
    """The innermost frame outside torch: the line of the program that issued the collective."""
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    for frame in frames or []:
        filename = str(frame.get("filename", ""))
        if filename and not filename.startswith(torch_dir):
            return f"{os.path.basename(filename)}:{frame.get('line')} in {frame.get('name')}"
    return None


def warm_up() -> None:
    """Load what symbolising a Python stack needs (torch imports torch._inductor for it: seconds of CPU)
    before any timed group exists, so the first dump with frames does not eat into a fault's deadline."""
    from torch.utils._traceback import CapturedTraceback

    CapturedTraceback.extract(cpp=False).format()


def group_entries(group: Any, frames: bool = True) -> list[FlightEntry]:
    """This rank's recorded collectives of `group`, oldest first, trimmed to what the table shows;
    `frames=False` leaves out the calling line (and the cost of symbolising the stacks)."""
    import torch

    name = group.group_name
    kept: list[FlightEntry] = []
    dump = pickle.loads(torch._C._distributed_c10d._dump_fr_trace(True, frames, False))
    for entry in dump.get("entries", []):
        if (entry.get("process_group") or ("",))[0] != name:
            continue
        kept.append(FlightEntry(
            seq=entry.get("collective_seq_id"),
            op=entry.get("profiling_name"),
            input_sizes=entry.get("input_sizes"),
            input_dtypes=entry.get("input_dtypes"),
            p2p=bool(entry.get("is_p2p")),
            frame=_user_frame(entry.get("frames")),
        ))
    return kept


def _groups_config() -> dict[str, dict[str, str]]:
    """pg_config as the analyzer expects it, for every process group this rank has."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _world

    return {
        name: {"name": name, "desc": getattr(group, "group_desc", ""), "ranks": str(dist.get_process_group_ranks(group))}
        for group, name in _world.pg_names.items()
    }


def write_dump(directory: Path, rank: int) -> dict[str, Any]:
    """Write this rank's dump for torch's analyzer; returns the pg_config torch itself wrote."""
    dump = _dump()
    as_dumped = dump.get("pg_config")
    dump["pg_config"] = _groups_config()
    dump["pg_config_as_dumped"] = as_dumped
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{DUMP_PREFIX}{rank}"
    partial.write_bytes(pickle.dumps(dump))
    partial.rename(directory / f"{DUMP_PREFIX}{rank}")
    return as_dumped


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.extend(record.getMessage().splitlines())


def analyze(directory: Path, group_name: str) -> Analysis:
    """Torch's analyzer (fr_trace's build_db) over the dumps in `directory`: its log and its verdicts.

    The log is captured from torch's own logger, so its lines are torch's words. Only the verdicts
    about `group_name` (the broken program's group) are kept.
    """
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    logger = logging.getLogger(ANALYZER_LOGGER)
    handlers, propagate = logger.handlers[:], logger.propagate
    capture = _Lines()
    logger.handlers, logger.propagate = [capture], False
    try:
        args = JobConfig().parse_args([str(directory), "--prefix", DUMP_PREFIX])
        details, version = read_dir(args)
        db = build_db(details, args, version)
    except Exception as exc:  # noqa: BLE001 - the analyzer's own failure is part of what we report
        return Analysis(ran=False, error=f"{type(exc).__name__}: {exc}", log=capture.lines, errors=[])
    finally:
        logger.handlers, logger.propagate = handlers, propagate
        gc.enable()  # read_dir disables the garbage collector and leaves it off
    errors = [
        Finding(
            seq=c.collective_seq_id,
            op=c.collective_name,
            # In the analyzer's own words ("error msg: Culprit rank 1; Error type: ..."), per culprit.
            mismatch=", ".join(f"Culprit rank {rank}; {other.type_of_mismatch}"
                               for rank, other in sorted((c.mismatch_collectives or {}).items())) or None,
            missing_ranks=sorted(c.missing_ranks or []),
        )
        for c in db.collectives
        if not c.pass_check and str(c.group_id) == group_name
    ]
    return Analysis(ran=True, error=None, log=_blocks_about(capture.lines, group_name), errors=errors)


_BLOCK_STARTS = ("Collective sequence number", "Not all ranks joining collective", "Input/output mismatch")


def _blocks_about(lines: list[str], group_name: str) -> list[str]:
    """The analyzer's reports about one group: it logs one block per finding, each with a "group info:"
    line naming the group ("2" or "2:desc")."""
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith(_BLOCK_STARTS) or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return [line for block in blocks if _group_of(block) == group_name for line in block]


def _group_of(block: list[str]) -> str | None:
    info = next((line.split(":", 1)[1].strip() for line in block if line.startswith("group info:")), None)
    return info.split(":")[0] if info else None
