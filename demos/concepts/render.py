"""Concept demo results as tables for a person, after the run (rich; no torch).

The step-by-step view streams while a demo runs; these tables put its measurements side by side
once it is done, from the result alone, so a saved result renders the same way. `evidence_view` is
what the quiz's evidence panel shows of any concept demo (the registry's default for the kind).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpfsdp.demos.concepts.allreduce import byte_count
from ddpfsdp.demos.concepts.measured import (AllReduce, Equivalence, Measured, NoSync, ReduceScatter, Traffic, Trial,
                                             Trials, op)
from ddpfsdp.demos.base.labels import Fitted
from ddpfsdp.demos.result.schema import GLOO_CAVEAT, DemoResult, as_result
from ddpfsdp.demos.base.units import format_bytes

Result = DemoResult | Mapping[str, Any]


def _mib(num_bytes: float | None) -> str:
    return "n/a" if num_bytes is None else format_bytes(num_bytes, "MiB")


def _table(title: str, *columns: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def _notes(measured: Measured, console: Any) -> None:
    """The result's own notes, and what CPU figures mean when the run was on gloo."""
    notes = list(measured.notes)
    if measured.config.backend == "gloo" and not any("gloo" in n for n in notes):
        notes.insert(0, GLOO_CAVEAT)
    for note in notes:
        console.print(f"[dim]{note}[/]")


def render_allreduce(result: Result, console: Any) -> None:
    m = AllReduce.of(result)
    table = _table(f"Ring all-reduce of {m.buffer_bytes} B on {m.config.world_size} ranks",
                   "rank", "sent (own count)", "sent (intercepted)", "x buffer", "theory 2(N-1)/N")
    theory = m.theory.ring_wire_bytes_per_rank
    for rank, sent in enumerate(m.sent_bytes_per_rank):
        table.add_row(str(rank), f"{sent} B", f"{m.intercepted_send_bytes_per_rank[rank]} B",
                      f"{sent / m.buffer_bytes:.3f}", f"{byte_count(theory)} B")
    console.print(Fitted(table))
    _notes(m, console)


def render_reduce_scatter(result: Result, console: Any) -> None:
    m = ReduceScatter.of(result)
    world = m.config.world_size or 0
    table = _table(f"Bytes sent per rank, {m.buffer_bytes} B buffer on {world} ranks "
                   f"(theory (N-1)/N: {byte_count(m.theory.wire_bytes_per_rank_each)} B each)",
                   "source", *(f"rank {r}" for r in range(world)))
    for source, per_rank in m.sent_bytes_per_rank.items():
        table.add_row(source, *(f"{byte_count(b)}" for b in per_rank))
    console.print(Fitted(table))
    _notes(m, console)


def _memory_and_comm(title: str, trials: list[Trial], by_sharding: bool = False) -> Any:
    table = _table(title, "configuration", "units", "all-gathers", "reduce-scatters", "gathered",
                   "peak fwd+bwd (max rank)")
    for trial in trials:
        ag, rs = op(trial.comm, "all_gather"), op(trial.comm, "reduce_scatter")
        table.add_row((trial.sharding or "") if by_sharding else trial.label, str(trial.units_with_params),
                      str(ag.count), str(rs.count), _mib(ag.bytes), _mib(trial.peak_bytes))
    return table


def render_wrap(result: Result, console: Any) -> None:
    m = Trials.of(result)
    console.print(Fitted(_memory_and_comm(f"FSDP wrap granularity, {m.config.params or 0:,} params, per step",
                                          m.configs)))
    for trial in m.configs:
        console.print(f"  {trial.label}: largest unit {trial.largest_unit_params or 0:,} params "
                      f"({_mib(trial.largest_unit_bytes)}) unsharded at once")
    _notes(m, console)


def render_reshard(result: Result, console: Any) -> None:
    m = Trials.of(result)
    console.print(Fitted(_memory_and_comm(f"Reshard after forward, {m.config.params or 0:,} params, per step",
                                          m.configs, by_sharding=True)))
    _notes(m, console)


def render_comm(result: Result, console: Any) -> None:
    m = Traffic.of(result)
    table = _table(f"Traffic per step on {m.config.world_size} ranks, Ψ = {_mib(m.param_bytes)}", "strategy", "op",
                   "calls", "buffers", "sent per rank", "theory sent per rank")
    for strategy, traffic in m.runs.items():
        for name, entry in traffic.comm.items():
            theory = op(traffic.theory, name).wire_bytes_per_rank
            table.add_row(strategy, name, str(entry.count), _mib(entry.bytes),
                          _mib(entry.wire_bytes_per_rank), _mib(theory) + " (theory)" if theory else "n/a")
    console.print(Fitted(table))
    if m.fsdp_to_ddp_wire_ratio:
        console.print(f"FSDP full sends {m.fsdp_to_ddp_wire_ratio:.3f}x DDP's bytes per step "
                      "(theory 1.5x: 3(N-1)/N vs 2(N-1)/N of Ψ)")
    _notes(m, console)


def render_no_sync(result: Result, console: Any) -> None:
    m = NoSync.of(result)
    table = _table(f"Collectives per optimizer step of {m.config.micro_batches} micro-batches", "strategy", "mode",
                   "all_reduce", "reduce_scatter", "all_gather", "largest gradient difference")
    for strategy, modes in m.runs.items():
        worst = m.worst_gradient_diff(strategy)
        for mode, step in modes.items():
            table.add_row(strategy, mode, *(str(op(step.comm, name).count) for name in
                                             ("all_reduce", "reduce_scatter", "all_gather")),
                          f"{worst:.3g}" if mode.startswith("skip") else "")
    console.print(Fitted(table))
    _notes(m, console)


def render_equivalence(result: Result, console: Any) -> None:
    m = Equivalence.of(result)
    table = _table(f"Loss per step, global batch {m.config.global_batch_size}", "step",
                   "single process", "DDP", "FSDP")
    for step, ref in enumerate(m.single_process.losses):
        table.add_row(str(step), f"{ref:.7f}", f"{m.ddp.losses[step]:.7f}", f"{m.fsdp.losses[step]:.7f}")
    console.print(Fitted(table))
    update = m.single_process.max_abs_weight_update or 0.0
    for name, losses in (("DDP", m.ddp), ("FSDP", m.fsdp)):
        console.print(f"  {name} weights: largest difference from one process "
                      f"{losses.max_abs_weight_diff or 0.0:.3g} (largest weight update {update:.3g})")
    _notes(m, console)


def render_checkpoint(result: Result, console: Any) -> None:
    m = Trials.of(result)
    table = _table(f"Activation checkpointing, {(m.config.strategy or '').upper()}, "
                   f"{m.config.blocks} blocks", "setting", "peak fwd+bwd (max rank)", "forward matmuls",
                   "backward matmuls", "recomputed", "step time (rank 0)")
    for trial in m.configs:
        median = trial.step_time_s.median
        table.add_row(trial.label, _mib(trial.peak_bytes), str(trial.matmuls.forward),
                      str(trial.matmuls.backward), str(trial.block_matmuls.backward),
                      f"{median:.3f} s" if median is not None else "n/a")
    console.print(Fitted(table))
    if m.step_time_ratio:
        console.print(f"  step time x{m.step_time_ratio:.2f} with checkpointing (reported, not checked)")
    _notes(m, console)


# ----------------------------------------------------------------------------- the quiz's evidence panel

# What the envelope and the training figures hold; a concept demo's own measurements are the rest.
_NOT_MEASURED_HERE = {"schema", "demo", "config", "env", "checks", "runs", "memory", "throughput", "comm", "loss",
                      "theory"}


def measured_numbers(result: Result, limit: int = 12) -> list[tuple[str, str]]:
    """(dotted name, value) of the numbers a concept demo measured, for a table any concept shares: a walk
    over its JSON, two levels deep, bytes in binary units."""
    rows: list[tuple[str, str]] = []

    def visit(prefix: str, value: Any, depth: int) -> None:
        if len(rows) >= limit:
            return
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, (int, float)):
            rows.append((prefix, format_bytes(value, "iec") if "bytes" in prefix else f"{value:,.6g}"))
        elif isinstance(value, dict) and depth < 2:
            for key, inner in value.items():
                visit(f"{prefix}.{key}" if prefix else str(key), inner, depth + 1)
        elif isinstance(value, list) and value and len(value) <= 8 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            rows.append((prefix, ", ".join(f"{v:,.6g}" for v in value)))

    for key, value in as_result(result).to_json().items():
        if key not in _NOT_MEASURED_HERE:
            visit(key, value, 0)
    return rows


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """What the quiz's evidence panel shows of a concept demo under its checks: its measured numbers, one
    per row (the table stretches to `width`)."""
    from rich.table import Table

    rows = measured_numbers(result)
    if not rows:
        return []
    table = Table(title="Measured", title_justify="left", show_edge=False, expand=True, pad_edge=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return [table]
