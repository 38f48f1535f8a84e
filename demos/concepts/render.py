"""Concept demo results as tables for a person, after the run (rich; no torch).

The step-by-step view streams while a demo runs; these tables put its measurements side by side
once it is done, from the result alone, so a saved result renders the same way.
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.concepts.allreduce import byte_count
from ddpfsdp.demos.labels import Fitted
from ddpfsdp.demos.result import GLOO_CAVEAT
from ddpfsdp.demos.units import format_bytes


def _mib(num_bytes: float | None) -> str:
    return "n/a" if num_bytes is None else format_bytes(num_bytes, "MiB")


def _table(title: str, *columns: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table




def _notes(result: dict, console: Any) -> None:
    """The result's own notes, and what CPU figures mean when the run was on gloo."""
    notes = list(result.get("notes") or [])
    if (result.get("config") or {}).get("backend") == "gloo" and not any("gloo" in n for n in notes):
        notes.insert(0, GLOO_CAVEAT)
    for note in notes:
        console.print(f"[dim]{note}[/]")


def _op(comm: dict, op: str) -> dict:
    return comm.get(op) or {"count": 0, "bytes": 0, "wire_bytes_per_rank": 0}


def render_allreduce(result: dict, console: Any) -> None:
    table = _table(f"Ring all-reduce of {result['buffer_bytes']} B on {result['config']['world_size']} ranks",
                   "rank", "sent (own count)", "sent (intercepted)", "x buffer", "theory 2(N-1)/N")
    theory = result["theory"]["ring_wire_bytes_per_rank"]
    for rank, sent in enumerate(result["sent_bytes_per_rank"]):
        table.add_row(str(rank), f"{sent} B", f"{result['intercepted_send_bytes_per_rank'][rank]} B",
                      f"{sent / result['buffer_bytes']:.3f}", f"{byte_count(theory)} B")
    console.print(Fitted(table))
    _notes(result, console)


def render_reduce_scatter(result: dict, console: Any) -> None:
    world = result["config"]["world_size"]
    table = _table(f"Bytes sent per rank, {result['buffer_bytes']} B buffer on {world} ranks "
                   f"(theory (N-1)/N: {byte_count(result['theory']['wire_bytes_per_rank_each'])} B each)",
                   "source", *(f"rank {r}" for r in range(world)))
    for source, per_rank in result["sent_bytes_per_rank"].items():
        table.add_row(source, *(f"{byte_count(b)}" for b in per_rank))
    console.print(Fitted(table))
    _notes(result, console)


def _memory_and_comm(title: str, configs: list[dict], label_key: str = "label") -> Any:
    table = _table(title, "configuration", "units", "all-gathers", "reduce-scatters", "gathered",
                   "peak fwd+bwd (max rank)")
    for c in configs:
        ag, rs = _op(c["comm"], "all_gather"), _op(c["comm"], "reduce_scatter")
        table.add_row(c[label_key], str(c["units_with_params"]), str(ag["count"]), str(rs["count"]),
                      _mib(ag["bytes"]), _mib(max(c["peak_bytes_by_rank"])))
    return table


def render_wrap(result: dict, console: Any) -> None:
    console.print(Fitted(_memory_and_comm(f"FSDP wrap granularity, {result['config']['params']:,} params, per step",
                                          result["configs"])))
    for c in result["configs"]:
        console.print(f"  {c['label']}: largest unit {c['largest_unit_params']:,} params "
                      f"({_mib(c['largest_unit_bytes'])}) unsharded at once")
    _notes(result, console)


def render_reshard(result: dict, console: Any) -> None:
    console.print(Fitted(_memory_and_comm(f"Reshard after forward, {result['config']['params']:,} params, per step",
                                          result["configs"], "sharding")))
    _notes(result, console)


def render_comm(result: dict, console: Any) -> None:
    world = result["config"]["world_size"]
    table = _table(f"Traffic per step on {world} ranks, Ψ = {_mib(result['param_bytes'])}", "strategy", "op",
                   "calls", "buffers", "sent per rank", "theory sent per rank")
    for strategy, run in result["runs"].items():
        for op, entry in run["comm"].items():
            theory = run["theory"].get(op, {}).get("wire_bytes_per_rank")
            table.add_row(strategy, op, str(entry["count"]), _mib(entry["bytes"]),
                          _mib(entry["wire_bytes_per_rank"]), _mib(theory) + " (theory)" if theory else "n/a")
    console.print(Fitted(table))
    ratio = result.get("fsdp_to_ddp_wire_ratio")
    if ratio:
        console.print(f"FSDP full sends {ratio:.3f}x DDP's bytes per step (theory 1.5x: 3(N-1)/N vs 2(N-1)/N of Ψ)")
    _notes(result, console)


def render_no_sync(result: dict, console: Any) -> None:
    k = result["config"]["micro_batches"]
    table = _table(f"Collectives per optimizer step of {k} micro-batches", "strategy", "mode", "all_reduce",
                   "reduce_scatter", "all_gather", "largest gradient difference")
    for strategy, modes in result["runs"].items():
        worst = max(d["max_abs_diff"] for d in result["gradient_diff_by_rank"][strategy])
        for mode, entry in modes.items():
            comm = entry["comm"]
            table.add_row(strategy, mode, *(str(_op(comm, op)["count"]) for op in
                                             ("all_reduce", "reduce_scatter", "all_gather")),
                          f"{worst:.3g}" if mode.startswith("skip") else "")
    console.print(Fitted(table))
    _notes(result, console)


def render_equivalence(result: dict, console: Any) -> None:
    table = _table(f"Loss per step, global batch {result['config']['global_batch_size']}", "step",
                   "single process", "DDP", "FSDP")
    for step, ref in enumerate(result["single_process"]["losses"]):
        table.add_row(str(step), f"{ref:.7f}", f"{result['ddp']['losses'][step]:.7f}",
                      f"{result['fsdp']['losses'][step]:.7f}")
    console.print(Fitted(table))
    update = result["single_process"]["max_abs_weight_update"]
    for strategy in ("ddp", "fsdp"):
        console.print(f"  {strategy.upper()} weights: largest difference from one process "
                      f"{result[strategy]['max_abs_weight_diff']:.3g} (largest weight update {update:.3g})")
    _notes(result, console)


def render_checkpoint(result: dict, console: Any) -> None:
    table = _table(f"Activation checkpointing, {result['config']['strategy'].upper()}, "
                   f"{result['config']['blocks']} blocks", "setting", "peak fwd+bwd (max rank)", "forward matmuls",
                   "backward matmuls", "recomputed", "step time (rank 0)")
    for c in result["configs"]:
        table.add_row(c["label"], _mib(max(c["peak_bytes_by_rank"])), str(c["matmuls"]["forward"]),
                      str(c["matmuls"]["backward"]), str(c["block_matmuls"]["backward"]),
                      f"{c['step_time_s']['median']:.3f} s")
    console.print(Fitted(table))
    ratio = result.get("step_time_ratio")
    if ratio:
        console.print(f"  step time x{ratio:.2f} with checkpointing (reported, not checked)")
    _notes(result, console)
