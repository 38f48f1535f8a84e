"""A fault's result (schema ddpfsdp.demo/1) from its ranks' records: the symptom of each run, and the checks.

The symptom of a run is a list of lines, in this order: each rank's error as torch raised it (or that
none raised); for a hang, the flight-recorder table with the first divergence and what torch's
analyzer said; then the fault's own measured lines. The CLI prints them, the evidence panel shows the
broken run's beside the fixed run's, and the question bank quotes them.
"""

from __future__ import annotations

from typing import Mapping, cast

from ddpfsdp.demos.faults import fr_table
from ddpfsdp.demos.faults.fault import PHASES, Analysis, Fault, FaultBlock, PhaseBlock, RaisedError, RankRecord, phase_ranks
from ddpfsdp.demos.result.schema import FaultLab, FaultPhase

# The analyzer's lines worth quoting: where it found a problem and what it calls it.
_ANALYZER_LINES = ("Collective sequence number", "error msg:", "Not all ranks joining", "missing ranks:")


def _missing(rank: int, phase: str) -> RankRecord:
    """The record of a rank that wrote none, in the shape a rank writes (faults.rank)."""
    return RankRecord(rank=rank, phase=phase, measured={}, wall_s=None, flight_recorder=[],
                      error=RaisedError(type="NoRecord",
                                        message="this rank wrote no record: it was stopped before the program ended"))


def _records(phase: FaultPhase) -> list[RankRecord]:
    return phase_ranks(PhaseBlock(ranks=phase.ranks))


def error_lines(phase: FaultPhase) -> list[str]:
    lines = []
    for record in _records(phase):
        error = record.get("error")
        if error:
            first, *rest = (error.get("message") or "").splitlines() or [""]
            lines.append(f"rank {record['rank']}: {error.get('type')}: {first}")
            lines.extend(f"    {line}" for line in rest)
    return lines or ["no rank raised an error"]


def analyzer_lines(analysis: Analysis | None) -> list[str]:
    if not analysis:
        return []
    if not analysis.get("ran"):
        return [f"torch's analyzer failed: {analysis.get('error')}"]
    if not analysis.get("errors"):
        return ["torch's analyzer: no mismatch in this run's process group"]
    said = [line.strip() for line in analysis.get("log", []) if line.strip().startswith(_ANALYZER_LINES)]
    return [f"torch's analyzer: {line}" for line in said]


def entries_by_rank(phase: FaultPhase) -> fr_table.EntriesByRank:
    return {record["rank"]: list(record.get("flight_recorder") or []) for record in _records(phase)}


def symptom_lines(fault: Fault, phase: FaultPhase) -> list[str]:
    lines = error_lines(phase)
    if fault.hangs and fault.collectives:
        entries = entries_by_rank(phase)
        lines.append(fr_table.divergence_line(fr_table.divergence(entries), entries))
        lines.extend(fr_table.table_lines(entries))
        lines.extend(analyzer_lines(phase.analyzer))
    return lines + list(fault.describe(_as_block(phase)))


def _as_block(phase: FaultPhase) -> PhaseBlock:
    """The JSON form of a phase, which a fault's `describe` and `judge` read."""
    return cast(PhaseBlock, phase.to_json())


def phase_result(fault: Fault, phase: str, records: list[RankRecord | None],
                 analysis: Analysis | None) -> FaultPhase:
    """One program's run from its ranks' records (a rank that wrote none is said to have none)."""
    ranks = [record if record is not None else _missing(rank, phase) for rank, record in enumerate(records)]
    walls = [wall for r in ranks if isinstance(wall := r.get("wall_s"), (int, float))]
    result = FaultPhase(program=fault.broken if phase == "broken" else fault.fixed, wall_s=max(walls) if walls else None,
                        ranks=ranks, analyzer=analysis)
    result.symptom = symptom_lines(fault, result)
    return result


def fault_lab(fault: Fault, phases: Mapping[str, FaultPhase], timeout_s: float) -> FaultLab:
    """A fault's own block of its result: the bug, its cause and fix, and its two runs."""
    return FaultLab(name=fault.name, summary=fault.summary, cause=fault.cause, fix=fault.fix, hangs=fault.hangs,
                    timeout_s=timeout_s, **{phase: phases[phase] for phase in PHASES})


def fault_block(fault: Fault, phases: Mapping[str, FaultPhase], timeout_s: float) -> FaultBlock:
    """The fault's block in the JSON form its checks (`Fault.judge`) read."""
    return cast(FaultBlock, fault_lab(fault, phases, timeout_s).to_json())
