"""The checks katas share, each a function of measured numbers: a result equals torch's, messages go
around a ring, bytes per rank against theory. Tests feed each one broken numbers and see it fail.

A measurement is `(rank, case label, numbers)`; a mismatch is what `judge.first_mismatch` found.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ddpfsdp.demos.result.checks import Check


class Mismatch(TypedDict, total=False):
    """Where the learner's answer first differs from torch's, with both values."""

    index: list[int] | None  # None: the whole answer differs (its shape, its length, its type)
    got: Any
    expected: Any
    count: int  # how many elements differ
    numel: int
    why: str
    param: str  # which parameter's gradient (grad-accumulation)
    step: int  # after which optimizer step (zero1-adamw)
    name: str  # which tensor (megatron-mlp)


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_mismatch(rank: int | None, case: str, mismatch: Mismatch, oracle: str, what: str = "") -> str:
    """"rank 2, 13 elements: element [7] is 3, dist.all_reduce gives 5 (4 of 13 differ)"."""
    who = f"rank {rank}, " if rank is not None else ""
    where = f"{what} " if what else ""
    if mismatch.get("index") is None:
        return f"{who}{case}: {where}{mismatch.get('why')}: got {mismatch.get('got')}, {oracle} gives {mismatch.get('expected')}"
    index = mismatch["index"]
    place = f"[{', '.join(str(i) for i in index)}]"
    count = mismatch.get("count")
    of = f" ({count} of {mismatch.get('numel')} differ)" if count and count > 1 else ""
    return (f"{who}{case}: {where}element {place} is {_value(mismatch.get('got'))}, {oracle} gives "
            f"{_value(mismatch.get('expected'))}{of}")


def equals_oracle(name: str, oracle: str, mismatches: list[tuple[int | None, str, Mismatch]], compared: int,
                  what: str = "") -> Check:
    """Passed when no comparison found a difference; the detail names the first: rank, case, index, the two values."""
    if not compared:
        return Check(name, False, "nothing was compared: no case ran", {"compared": 0})
    if not mismatches:
        return Check(name, True, f"equal to {oracle} in all {compared} comparisons", {"compared": compared})
    rank, case, mismatch = mismatches[0]
    more = f"; {len(mismatches) - 1} more comparison{'s' if len(mismatches) != 2 else ''} differ" if len(mismatches) > 1 else ""
    return Check(name, False, describe_mismatch(rank, case, mismatch, oracle, what) + more,
                 {"compared": compared, "mismatches": len(mismatches), "first": {"rank": rank, "case": case, **mismatch}})


def ring_messages(name: str, sends: list[tuple[int, str, list[list[int]]]], world_size: int,
                  most: int, exactly: dict[str, int] | None = None) -> Check:
    """Each rank sends its non-empty messages to one neighbour only, every rank in the same direction around the
    ring, at most `most` of them per call (`exactly` a count for named cases).

    `sends` holds, per rank and case, that rank's messages as [peer, elements, bytes].
    """
    directions: dict[int, set[int]] = {}
    for rank, case, messages in sends:
        peers = sorted({peer for peer, elements, _ in messages if elements})
        count = sum(1 for _, elements, _ in messages if elements)
        if len(peers) > 1:
            return Check(name, False, f"rank {rank}, {case}: sends to ranks {', '.join(map(str, peers))}; a ring sends "
                                      "to one neighbour only", {"rank": rank, "case": case, "peers": peers})
        if peers and (peers[0] - rank) % world_size not in (1, world_size - 1):
            return Check(name, False, f"rank {rank}, {case}: sends to rank {peers[0]}, which is not its neighbour on "
                                      f"the ring ({(rank + 1) % world_size} or {(rank - 1) % world_size})",
                         {"rank": rank, "case": case, "peers": peers})
        if peers:
            directions.setdefault((peers[0] - rank) % world_size, set()).add(rank)
        limit = (exactly or {}).get(case)
        if count > most or (limit is not None and count != limit):
            theory = f"exactly {limit}" if limit is not None else f"at most {most}"
            return Check(name, False, f"rank {rank}, {case}: {count} messages; a ring sends {theory} per call",
                         {"rank": rank, "case": case, "messages": count, "theory": limit if limit is not None else most})
    if len(directions) > 1:
        return Check(name, False, "ranks send in both directions around the ring: "
                     + "; ".join(f"ranks {sorted(ranks)} to rank r{'+' if d == 1 else '-'}1" for d, ranks in sorted(directions.items())),
                     {"directions": {str(d): sorted(r) for d, r in directions.items()}})
    direction = next(iter(directions), 1)
    return Check(name, True, f"every rank sends only to rank r{'+' if direction == 1 else '-'}1, at most {most} "
                             "messages per call", {"messages_most": most})


def elements_within(name: str, sent: list[tuple[int, str, int, int, int]], unit_bytes: int, theory: str,
                    totals: dict[str, tuple[int, int]] | None = None) -> Check:
    """Each rank's elements sent per call lie within [low, high] (theory); `totals` gives, per case, the elements
    all ranks together must send and what they did.

    `sent` holds (rank, case, elements sent, low, high)."""
    for rank, case, elements, low, high in sent:
        if not low <= elements <= high:
            bound = f"{low}" if low == high else f"{low} to {high}"
            return Check(name, False, f"rank {rank}, {case}: sent {elements} elements ({elements * unit_bytes} bytes); "
                                      f"{theory} is {bound} elements", {"rank": rank, "case": case, "sent": elements,
                                                                        "low": low, "high": high})
    for case, (expected, measured) in (totals or {}).items():
        if expected != measured:
            return Check(name, False, f"{case}: all ranks together sent {measured} elements; {theory} is {expected} in "
                                      "all", {"case": case, "total": measured, "theory": expected})
    shown = "; ".join(f"rank {rank} sent {elements} for {case}" for rank, case, elements, _, _ in sent[:3])
    return Check(name, True, f"{theory}; measured per call: {shown}" + ("; ..." if len(sent) > 4 else ""),
                 {"sent": [[rank, case, elements] for rank, case, elements, _, _ in sent]})
