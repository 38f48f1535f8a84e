"""The at-scale demos' results for a person (rich; no torch): a straggler's step times and waits beside
the analytic model's step, a checkpoint's bytes, times and resumed state, and local SGD against DDP step by
step.

`render_*` print a result after the run (the CLI); `*_view` are what the quiz's evidence panel shows
under the checks, at most `width` columns wide. Every figure comes from the result alone, so a saved
result renders the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.base.labels import Fitted
from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.result.schema import CheckpointResume, DemoResult, LocalSgd, LocalSgdStep, Straggler, as_result

Result = DemoResult | Mapping[str, Any]


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:,.0f} ms"


def _bytes(value: float | None) -> str:
    return "–" if value is None else format_iec(value)


def _caveat(result: DemoResult, console: Console) -> None:
    if result.caveat:
        console.print(f"[dim]{result.caveat}[/]")


def _print_report(result: DemoResult, console: Console, heading: str, table: Table, lines: list[str]) -> None:
    """A demo's report as checkpoint-resume and local-sgd print it: a heading, the table, the lines, the caveat."""
    console.print(heading)
    console.print(Fitted(table))
    for line in lines:
        console.print(line, markup=False, highlight=False)
    _caveat(result, console)


# --- straggler ---------------------------------------------------------------------------------------------


def _straggler(result: DemoResult) -> Straggler:
    if result.straggler is None:
        raise ValueError(f"the {result.demo or 'demo'} result carries no straggler block")
    return result.straggler


def straggler_table(result: Result) -> Table:
    """Per rank: the median step without and with the delay, and the first collective of the recorded step."""
    result = as_result(result)
    block = _straggler(result)
    table = Table(title=f"Rank {block.slow_rank} sleeps {_ms(block.delay_s)} before each slowed step ({block.steps_each} "
                        "steps timed without it and as many slowed, in turn: medians); the recorded step's first "
                        "collective, issued and waited in, from the ranks' aligned start", title_justify="left")
    for column in ("rank", "step", "slowed", "added", "first", "issued", "waited"):
        table.add_column(column, justify="left" if column in ("rank", "first") else "right")
    for r in block.ranks:
        base = r.base_step_s.median if r.base_step_s else None
        slowed = r.slowed_step_s.median if r.slowed_step_s else None
        added = None if base is None or slowed is None else slowed - base
        who = f"{r.rank} (slow)" if r.rank == block.slow_rank else str(r.rank)
        table.add_row(who, _ms(base), _ms(slowed), _ms(added), r.first_op or "–", _ms(r.first_issued_s),
                      _ms(r.first_wait_s))
    return table


def straggler_theory_line(result: Result) -> str:
    """The analytic model's step beside the measurement (theory, from the slow rank's own step)."""
    result = as_result(result)
    theory = result.theory or {}
    if "step_s" not in theory:
        return "Theory: no delay, no straggler: every step is the ranks' own."
    return (f"Theory (the step at N ranks is the maximum of the N): step {_ms(theory['step_s'])}, the others wait "
            f"{_ms(theory['others_wait_s'])} of it, running at {theory['efficiency']:.0%} of their compute rate; "
            f"with one rank slow in every step, 1 - (1 - p)^N = {theory['p_slow_step']:.0%} of steps are slow")


def render_straggler(result: Result, console: Console | None = None) -> None:
    from ddpfsdp.demos.measure.report import _fit, timeline_lines

    console = console or Console()
    result = as_result(result)
    config = result.config
    console.print(f"straggler: {config.strategy} on {config.world_size} ranks ({config.backend}), "
                  f"{config.model} GPT, {config.params or 0:,} parameters")
    console.print(Fitted(straggler_table(result)))
    console.print(straggler_theory_line(result))
    for line in timeline_lines(result.timeline, _fit(console, 12)):
        console.print(line, markup=False, highlight=False)
    _caveat(result, console)


def straggler_view(result: DemoResult, width: int) -> list[Any]:
    """The evidence panel's: the table and the theory line; nothing for a result without the block."""
    if result.straggler is None:
        return []
    return [straggler_table(result), straggler_theory_line(result)]


# --- checkpoint-resume -------------------------------------------------------------------------------------


def _resume(result: DemoResult) -> CheckpointResume:
    if result.checkpoint_resume is None:
        raise ValueError(f"the {result.demo or 'demo'} result carries no checkpoint_resume block")
    return result.checkpoint_resume


def files_table(result: Result) -> Table:
    """Per saving rank: its items, their bytes, its file on disk, and its dcp.save's time."""
    result = as_result(result)
    block = _resume(result)
    table = Table(title=f"Sharded save on {block.saved_world} ranks (torch.distributed.checkpoint)",
                  title_justify="left")
    for column in ("rank", "items", "data", "file", "file / data", "dcp.save"):
        table.add_column(column, justify="left" if column == "rank" else "right")
    for f in block.files:
        ratio = (f.file_bytes or 0) / f.data_bytes if f.data_bytes else None
        table.add_row(str(f.rank), str(f.items), _bytes(f.data_bytes), _bytes(f.file_bytes),
                      "–" if ratio is None else f"{ratio:.3f}", _ms(f.save_s))
    total = block.file_bytes / block.data_bytes if block.data_bytes else None
    table.add_row("all", str(sum(f.items or 0 for f in block.files)), _bytes(block.data_bytes),
                  f"{_bytes(block.file_bytes)} (with .metadata)", "–" if total is None else f"{total:.3f}",
                  _ms(block.write_s))
    return table


def resume_lines(result: Result) -> list[str]:
    """The figures beside the table: theory, the overhead, the write rate, memory, the resume and the losses."""
    result = as_result(result)
    block = _resume(result)
    theory = result.theory or {}
    lines = []
    if theory.get("total_bytes"):
        lines.append(f"Theory: {theory['bytes_per_param']} bytes per parameter (parameters and optimizer state, no "
                     f"gradients) = {_bytes(theory['total_bytes'])}, {_bytes(theory['sharded_bytes_per_rank'])} per "
                     f"rank on {block.saved_world}; measured from the tensors: {_bytes(block.state_bytes)} in "
                     f"{block.state_tensors} tensors")
    items = sum(f.items or 0 for f in block.files)
    overhead = sum((f.file_bytes or 0) - (f.data_bytes or 0) for f in block.files)
    if items:
        lines.append(f"Files against data: each item is written with torch.save (a zip archive of its own): "
                     f"{_bytes(overhead / items)} per item over its data, {_bytes(overhead)} in all; the .metadata "
                     f"(every item's chunks and where they sit) {_bytes(block.metadata_bytes)}")
    if block.write_s:
        lines.append(f"Write: the slowest rank's dcp.save took {_ms(block.write_s)}: {_bytes(block.file_bytes / block.write_s)}/s "
                     f"in all; rank 0's torch.save of the gathered state dict {_ms(block.full_write_s)} for "
                     f"{_bytes(block.full_file_bytes)}")
    for m in block.memory:
        lines.append(f"Rank {m.rank} allocated {_bytes(m.sharded_bytes)} building the sharded state dict, "
                     f"{_bytes(m.full_bytes)} building the full one, full_state_dict=True and cpu_offload=True "
                     f"({m.peak_kind})")
    compared = block.compared
    if compared is not None:
        lines.append(f"Resumed on {block.resumed_world} ranks in {_ms(block.load_s)} (dcp.load, set_state_dict): "
                     f"{compared.equal} of {compared.entries} entries equal, largest difference "
                     f"{compared.max_abs_diff if compared.max_abs_diff is not None else '–'}")
    if block.losses_resumed:
        pairs = ", ".join(f"{a:.6f}/{b:.6f}" for a, b in zip(block.losses_uninterrupted, block.losses_resumed))
        lines.append(f"Loss after the save, uninterrupted/resumed: {pairs}")
    where = "a temporary folder, removed after the run" if block.temporary else "kept"
    lines.append(f"Checkpoint folder: {block.folder} ({where})")
    return lines


def render_checkpoint_resume(result: Result, console: Console | None = None) -> None:
    result = as_result(result)
    config = result.config
    _print_report(result, console or Console(), f"checkpoint-resume: {config.strategy}, {config.model} GPT, "
                  f"{config.params or 0:,} parameters, {config.optimizer}", files_table(result), resume_lines(result))


def checkpoint_resume_view(result: DemoResult, width: int) -> list[Any]:
    """The evidence panel's: the files table and the lines under it; nothing for a result without the block."""
    if result.checkpoint_resume is None:
        return []
    return [files_table(result), *resume_lines(result)]


# --- local-sgd ---------------------------------------------------------------------------------------------


def _local_sgd(result: DemoResult) -> LocalSgd:
    if result.local_sgd is None:
        raise ValueError(f"the {result.demo or 'demo'} result carries no local_sgd block")
    return result.local_sgd


def _reduced(step: LocalSgdStep) -> str:
    """Rank 0's all-reduced MiB in the step and its calls, marked where another rank issued otherwise."""
    count = step.all_reduces[0] if step.all_reduces else 0
    same = len(set(step.all_reduces)) <= 1 and len(set(step.all_reduce_bytes)) <= 1
    text = "–" if not count else f"{step.all_reduce_bytes[0] / 2**20:.2f} ({count})"
    return text if same else f"{text} (ranks differ)"


def _loss(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def local_sgd_table(result: Result) -> Table:
    """Per step: what the step is under torch's rule, each run's mean loss and rank 0's all-reduces, and how far
    local SGD's replicas are apart after it."""
    result = as_result(result)
    block = _local_sgd(result)
    ddp, local = block.run("ddp"), block.run("local-sgd")
    table = Table(title=f"DDP against local SGD (H {block.period}, W {block.warmup}), measured per step: the ranks' "
                        "mean loss; MiB all-reduced on rank 0 (calls); local SGD's replicas' largest difference from "
                        "rank 0's after the step", title_justify="left")
    for column in ("step", "is", "loss DDP", "loss local", "MiB DDP", "MiB local", "apart"):
        table.add_column(column, justify="left" if column == "is" else "right")
    averaged, warmup = set(block.averaged_steps), block.warmup or 0
    for d, s in zip(ddp.steps if ddp else [], local.steps if local else []):
        kind = "sync" if (s.step or 0) < warmup else ("average" if s.step in averaged else "local")
        apart = max(s.replica_diff) if s.replica_diff else None
        table.add_row(str(s.step), kind, _loss(d.loss), _loss(s.loss), _reduced(d), _reduced(s),
                      "–" if apart is None else ("0" if apart == 0 else f"{apart:.1e}"))
    return table


def local_sgd_lines(result: Result) -> list[str]:
    """The totals as measured, the theory beside them (labelled), and the loss gap as this run measured it."""
    result = as_result(result)
    block = _local_sgd(result)
    theory = result.theory or {}
    lines = []
    totals = {}
    for run in block.runs:
        totals[run.name] = (sum(s.all_reduces[0] for s in run.steps if s.all_reduces),
                            sum(s.all_reduce_bytes[0] for s in run.steps if s.all_reduce_bytes),
                            sum(s.other_collectives[0] for s in run.steps if s.other_collectives))
    if "ddp" in totals and "local-sgd" in totals:
        (dc, db, do), (lc, lb, lo) = totals["ddp"], totals["local-sgd"]
        ratio = lb / db if db else None
        lines.append(f"Measured on rank 0 over {block.steps} steps: DDP {dc} all-reduces, {_bytes(db)}; local SGD {lc}, "
                     f"{_bytes(lb)}: {'–' if ratio is None else f'{ratio:.2f}'} of DDP's bytes")
        others = sorted({s.step for run in block.runs for s in run.steps if any(s.other_collectives)})
        if others:
            lines.append(f"Other collectives: DDP {do}, local SGD {lo}, at step {', '.join(map(str, others))} (DDP "
                         "rebuilds its buckets before its second forward and broadcasts their order from rank 0)")
    if "bytes_ratio" in theory:
        lines.append(f"Theory: (W + A) / S = ({block.warmup} + {theory['averagings']}) / {block.steps} = "
                     f"{theory['bytes_ratio']:.2f}, {theory['bytes_saved']:.0%} saved; over a long run 1/H = "
                     f"{theory['long_run_ratio']:.2f}. An averaging all-reduces the parameters that hold a gradient "
                     f"({_bytes(theory['param_bytes'])}; not buffers, not optimizer state), as many bytes as a DDP "
                     "step's fp32 gradients")
    from ddpfsdp.demos.claims.local_sgd import loss_gap

    gaps = [g for g in loss_gap(block) if g is not None]
    if gaps:
        lines.append(f"Loss gap (local SGD - DDP), measured in this run only: {gaps[-1]:+.4f} at the last step. A few "
                     "steps of a tiny model say nothing of convergence at scale (Lin et al., ICLR 2020: \"Don't Use "
                     "Large Mini-Batches, Use Local SGD\")")
    return lines


def render_local_sgd(result: Result, console: Console | None = None) -> None:
    result = as_result(result)
    config = result.config
    _print_report(result, console or Console(), f"local-sgd: DDP, then post-local SGD, on {config.world_size} ranks "
                  f"({config.backend}), {config.model} GPT, {config.params or 0:,} parameters, {config.optimizer}",
                  local_sgd_table(result), local_sgd_lines(result))


def local_sgd_view(result: DemoResult, width: int) -> list[Any]:
    """The evidence panel's: the table and the lines under it; nothing for a result without the block."""
    if result.local_sgd is None:
        return []
    return [local_sgd_table(result), *local_sgd_lines(result)]
