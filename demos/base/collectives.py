"""The collectives by name, and what one rank sends of each on a ring: the wire factor that the
analytic model (`theory.comm`) and the collective counter (`measure.comm`) both apply.

For a buffer of B bytes (all_reduce and broadcast: the tensor; all_gather: the gathered output;
reduce_scatter: the unreduced input) a ring over n ranks sends per rank:
  all_reduce 2(n-1)/n B (a reduce-scatter, then an all-gather), all_gather, reduce_scatter and
  all_to_all (n-1)/n B, broadcast (n-1)/n B (pipelined; the root sends more than the others),
  send B, recv nothing. One rank alone sends nothing.
"""

from __future__ import annotations

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send", "recv")


def wire_factor(op: str, ranks: int) -> float:
    """Bytes one rank sends per byte of the op's full buffer, on a ring of `ranks` ranks."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; choose one of {', '.join(OPS)}")
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if op == "send":
        return 1.0
    if op == "recv":
        return 0.0
    fraction = (ranks - 1) / ranks
    return 2 * fraction if op == "all_reduce" else fraction
