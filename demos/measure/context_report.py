"""Print `demo cp`'s result for a person, and the quiz's evidence panel of it.

The training report of every training demo (memory per rank, throughput, traffic, loss, the recorded
step), then the ring's own figures, each measured beside the analytic model's (labelled theory): what
each rank sent per attention layer and step, the query-key pairs each rank scored under each split,
and what one block saves for backward against the whole sequence on one process. Importable without
torch (rich only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.result.schema import DemoResult, as_result

Result = DemoResult | Mapping[str, Any]


def _block(result: DemoResult) -> Mapping[str, Any]:
    return result.extra.get("context_parallel") or {}


def _theory(result: DemoResult) -> Mapping[str, Any]:
    return (result.theory or {}).get("context_parallel") or {}


def sends_table(result: Result) -> Table | None:
    """Per rank: the K/V and dK/dV blocks it sent per layer and step, and their bytes, beside theory's."""
    result = as_result(result)
    block = _block(result)
    sends = block.get("sends") or []
    if not sends:
        return None
    theory = _theory(result).get("ring_per_layer") or {}
    how = f"simulated, rank 0 of {result.config.world_size}" if result.config.simulated else "measured"
    table = Table(title=f"The ring's sends per attention layer and step ({how}; cp {block.get('cp')})",
                  caption="counted from the tensors each rank handed to batch_isend_irecv; dK/dV travel in fp32")
    for column in ("rank", "chunks", "forward K/V", "backward K/V", "backward dK/dV", "bytes"):
        table.add_column(column, justify="right")
    chunks = block.get("chunks") or []
    for r, rank in enumerate(sends):
        table.add_row(str(r), ", ".join(map(str, chunks[r])) if r < len(chunks) else "-",
                      f"{rank['forward_kv_blocks']:g}", f"{rank['backward_kv_blocks']:g}",
                      f"{rank['backward_dkv_blocks']:g}", format_iec(rank["bytes"]))
    if theory:
        table.add_row("[dim]theory[/dim]", "", *(f"[dim]{theory[k]}[/dim]" for k in
                                                 ("forward_kv_blocks", "backward_kv_blocks", "backward_dkv_blocks")),
                      f"[dim]{format_iec(theory['bytes'])}[/dim]")
    return table


def compute_table(result: Result) -> Table | None:
    """Per split and rank: the share of the causal attention's query-key pairs its kernels scored."""
    result = as_result(result)
    block = _block(result)
    pairs = block.get("pairs") or {}
    theory = _theory(result)
    if not pairs:
        return None
    cp = int(block.get("cp") or len(next(iter(pairs.values()))))
    table = Table(title="Causal attention's work per rank (measured: query-key pairs scored, one forward)",
                  caption="theory: chunk c of n costs c + 1/2 blocks (the diagonal half done)")
    table.add_column("split")
    for r in range(cp):
        table.add_column(f"rank {r}", justify="right")
    table.add_column("busiest / ideal", justify="right")
    for split, counts in pairs.items():
        total = sum(counts) or 1
        shares = [c / total for c in counts]
        table.add_row(split, *(f"{s:.3f}" for s in shares), f"{max(shares) * cp:.2f}x")
        key = "compute_share_balanced" if split == "head-tail" else "compute_share_unbalanced"
        if theory.get(key):
            table.add_row(f"[dim]{split} theory[/dim]", *(f"[dim]{s:.3f}[/dim]" for s in theory[key]),
                          f"[dim]{max(theory[key]) * cp:.2f}x[/dim]")
    return table


def activation_lines(result: Result) -> list[str]:
    result = as_result(result)
    block = _block(result)
    saved, whole, cp = block.get("block_saved") or [], block.get("block_saved_whole"), block.get("cp")
    if not saved or not whole or not cp:
        return []
    theory = _theory(result)
    how = "simulated, rank 0" if result.config.simulated else "measured"
    lines = [f"One block saves for backward ({how}): {', '.join(format_iec(s) for s in saved)} per rank at "
             f"S/cp = {result.config.seq_len // cp if result.config.seq_len else '?'} tokens, against "
             f"{format_iec(whole)} for the whole sequence on one process: "
             f"{(saved[0] or 0) / whole:.3f} of it (1/cp = {1 / cp:.3f})"]
    if theory.get("activation_bytes") and theory.get("activation_bytes_cp1"):
        lines.append(f"  theory, whole model at its peak: {format_iec(theory['activation_bytes'])} per rank at cp {cp} "
                     f"against {format_iec(theory['activation_bytes_cp1'])} at cp 1 (ring buffers included)")
    ulysses = theory.get("ulysses_per_layer")
    if ulysses:
        refusal = theory.get("ulysses_refusal")
        lines.append(f"  theory, Ulysses instead of the ring: {format_iec(ulysses['bytes'])} per rank per layer in "
                     f"{ulysses['all_to_alls']} all-to-alls" + (f" ({refusal})" if refusal else ""))
    return lines


def render(result: Result, console: Console | None = None) -> None:
    """The training report, then the ring's figures."""
    from ddpfsdp.demos.measure.report import render_training

    console = console or Console()
    result = as_result(result)
    render_training(result, console)
    for table in (sends_table(result), compute_table(result)):
        if table is not None:
            console.print(table)
    for line in activation_lines(result):
        console.print(line)


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """The quiz's panel: the ring's sends per rank against theory, and each split's compute shares."""
    shown = [t for t in (sends_table(result), compute_table(result)) if t is not None]
    for table in shown:
        table.expand = width >= 60
        table.caption = None
    return shown
