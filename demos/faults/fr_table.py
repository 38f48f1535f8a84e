"""The project's own flight-recorder table: each rank's collectives by sequence id, and where they part.

The flight recorder gives every collective a `collective_seq_id` counted per process group on each
rank. Ranks that run the same program issue the same op with the same sizes at every id; the first
id at which they do not (or at which a rank issued nothing) is where the program went wrong, and its
`frames` say which line issued it. Entries here are what `flight_recorder.group_entries` keeps:
{seq, op, input_sizes, input_dtypes, frame}. Pure Python: the launcher side reads it without torch.
"""

from __future__ import annotations

from typing import TypedDict

MISSING = "(nothing)"
SHOWN_ROWS = 6


class FlightEntry(TypedDict):
    """One collective of a rank's flight recorder, as `flight_recorder.group_entries` keeps it."""

    seq: int | None  # collective_seq_id, per process group
    op: str | None  # profiling_name: "gloo:all_reduce"
    input_sizes: list[list[int]] | None
    input_dtypes: list[str] | None
    p2p: bool
    frame: str | None  # the program's line that issued it; None when frames were not asked for


class Divergence(TypedDict):
    """The first sequence id at which the ranks' collectives differ: each rank's op and calling line there."""

    seq: int
    ops: dict[str, str]  # rank -> op_text
    frames: dict[str, str | None]  # rank -> the issuing line


EntriesByRank = dict[int, list[FlightEntry]]


def op_text(entry: FlightEntry | None) -> str:
    """`gloo:all_reduce [[1]]`: the op and its input sizes, as the flight recorder names them."""
    if entry is None:
        return MISSING
    return f"{entry.get('op')} {entry.get('input_sizes')}"


def _by_seq(entries_by_rank: EntriesByRank) -> dict[int, dict[int, FlightEntry]]:
    return {
        rank: {entry["seq"]: entry for entry in entries if not entry.get("p2p") and isinstance(entry.get("seq"), int)}
        for rank, entries in entries_by_rank.items()
    }


def sequence_ids(entries_by_rank: EntriesByRank) -> list[int]:
    return sorted({seq for seqs in _by_seq(entries_by_rank).values() for seq in seqs})


def divergence(entries_by_rank: EntriesByRank) -> Divergence | None:
    """The first sequence id at which the ranks' collectives differ, or None when they all agree."""
    by_seq = _by_seq(entries_by_rank)
    for seq in sequence_ids(entries_by_rank):
        entries = {rank: seqs.get(seq) for rank, seqs in sorted(by_seq.items())}
        ops = {rank: op_text(entry) for rank, entry in entries.items()}
        if len(set(ops.values())) > 1:
            return Divergence(seq=seq, ops={str(rank): op for rank, op in ops.items()},
                              frames={str(rank): entry.get("frame") if entry else None for rank, entry in entries.items()})
    return None


def divergence_line(found: Divergence | None, entries_by_rank: EntriesByRank) -> str:
    """One line: where the ranks part, or that they never do."""
    if found is None:
        count = len(sequence_ids(entries_by_rank))
        return f"flight recorder: every rank issued the same {count} collectives, in the same order"
    parts = ", ".join(f"rank {rank} {op}" for rank, op in found["ops"].items())
    return f"first divergence at sequence id {found['seq']}: {parts}"


def table_lines(entries_by_rank: EntriesByRank, rows: int = SHOWN_ROWS) -> list[str]:
    """The last `rows` sequence ids up to the first divergence (or the end), one column per rank."""
    by_seq = _by_seq(entries_by_rank)
    if not by_seq or not any(by_seq.values()):
        return ["flight recorder: no collective recorded in this process group"]
    found = divergence(entries_by_rank)
    seqs = [seq for seq in sequence_ids(entries_by_rank) if found is None or seq <= found["seq"]][-rows:]
    ranks = sorted(by_seq)
    cells = [[op_text(by_seq[rank].get(seq)) for rank in ranks] for seq in seqs]
    widths = [max(len(f"rank {rank}"), *(len(row[i]) for row in cells)) for i, rank in enumerate(ranks)]
    lines = ["  seq    " + "  ".join(f"rank {rank}".ljust(width) for rank, width in zip(ranks, widths))]
    for seq, row in zip(seqs, cells):
        mark = "✘" if found is not None and seq == found["seq"] else " "
        lines.append(f"{seq:>5} {mark}  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    every = [seq for seq in sequence_ids(entries_by_rank) if found is None or seq <= found["seq"]]
    if len(seqs) < len(every):  # the line above the table counts them all: say which of them are shown
        lines.append(f"  (the last {len(seqs)} of {len(every)} sequence ids)")
    if found is not None:
        for rank, frame in found["frames"].items():
            if frame:
                lines.append(f"  rank {rank} issued sequence id {found['seq']} at {frame}")
    return lines
