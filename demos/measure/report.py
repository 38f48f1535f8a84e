"""Print a training demo's result for a person: per-rank memory, throughput, traffic, loss.

Every figure printed is the run's own measurement; the analytic model's figures appear beside
them in columns labelled theory. The table of checks is printed by the CLI after these tables.
`evidence_view` is the quiz evidence panel's shorter table of the same run. Importable without
torch (rich only).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.base.labels import Fitted
from ddpfsdp.demos.measure import lanes
from ddpfsdp.demos.measure.comm_table import comm_table
from ddpfsdp.demos.result.schema import (PEAK_CATEGORIES, STATE_KINDS, CommOp, DemoResult, Diverged, Memory, RankMemory,
                                         Throughput, Timeline, as_result)
from ddpfsdp.demos.base.units import BYTE_UNITS, format_iec

Result = DemoResult | Mapping[str, Any]


def _ranks(result: DemoResult) -> list[RankMemory]:
    return (result.memory or Memory()).ranks


def _where(held: RankMemory | None) -> str:
    return (held.peak_where() if held else None) or "n/a"


def peak_breakdown_table(result: Result) -> Table | None:
    """One column per rank: the categories of its peak, the phase and module, the measured peak."""
    ranks = _ranks(as_result(result))
    if not ranks or not any(r.peak_breakdown for r in ranks):
        return None
    source = ranks[0].breakdown_source or ""
    table = Table(title="What the peak is made of (measured, at the moment of peak)",
                  caption=f"categories: {source}; the measured peak is the project's own figure")
    table.add_column("category")
    for r in range(len(ranks)):
        table.add_column(f"rank {r}", justify="right")
    parts = [r.peak_parts() for r in ranks]
    for key, label in PEAK_CATEGORIES:
        if any(part.get(key) for part in parts):
            table.add_row(label, *(format_iec(part.get(key, 0)) for part in parts))
    table.add_row("[bold]sum (tracker's peak)[/bold]", *(format_iec(sum((r.peak_breakdown or {}).values()))
                                                        for r in ranks))
    table.add_row("[bold]measured peak[/bold]", *(format_iec(r.peak) for r in ranks))
    table.add_row("where", *(_where(r) for r in ranks))
    return table


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f} {unit}".rstrip()


def _headline(result: DemoResult) -> str:
    c = result.config
    what = c.description or c.strategy or result.demo or ""
    impl = c.extra.get("optimizer_impl")
    return (
        f"[bold]{result.demo or ''}[/bold]: {what}\n"
        f"{c.arch or 'gpt'} {c.model} ({c.params or 0:,} parameters), "
        f"{c.world_size} ranks on {c.device} ({c.backend}), {c.precision}, "
        f"{c.optimizer}{f' ({impl})' if impl else ''}, batch {c.batch_size} per rank, {c.steps} steps "
        f"({c.warmup} warm-up)"
    ) + (f"\n[yellow]{c.shared_gpu}[/yellow]" if c.shared_gpu else "")


def memory_table(result: Result) -> Table:
    result = as_result(result)
    theory = result.theory or {}
    ranks = _ranks(result)
    kind = (ranks[0].peak_kind or "") if ranks else ""
    follows = f"; theory follows {theory['implementation']}" if theory.get("implementation") else ""
    table = Table(title="Memory per rank (measured)", caption=f"peak: {kind}; model state after the optimizer step{follows}")
    for column in ("rank", "params", "grads", "optimizer state", "model state", "peak of one step"):
        table.add_column(column, justify="right")
    for r, held in enumerate(ranks):
        table.add_row(str(r), format_iec(held.params), format_iec(held.grads),
                      format_iec(held.optimizer), format_iec(held.model_state), format_iec(held.peak))
    if theory:
        table.add_row(
            "[dim]theory[/dim]",
            *(f"[dim]{format_iec(theory.get(f'{k}_bytes'))}[/dim]" for k in (*STATE_KINDS, "model_state")),
            f"[dim]{format_iec(theory.get('working_set_bytes'))} working set[/dim]",
        )
    return table


def throughput_lines(result: Result) -> list[str]:
    t = as_result(result).throughput or Throughput()
    step = t.step_time_s
    mfu = t.mfu
    if isinstance(mfu, (int, float)):
        mfu_text = f"{mfu * 100:.1f}%"
    elif t.peak_flops_per_s:
        mfu_text = "n/a (this model's FLOPs are not modelled)"
    else:
        # fp32 with TF32 allowed has no single peak, and unlisted GPUs get no guess
        mfu_text = "n/a (no dense peak FLOP/s known for this device and precision)"

    def ms(seconds: float | None) -> str:
        return f"{(seconds or 0) * 1000:.1f} ms"

    lines = [
        f"Throughput over all ranks after warm-up ({t.timed_steps} timed steps): "
        f"{_rate(t.samples_per_s, 'samples/s')}, {_rate(t.tokens_per_s, 'tokens/s')}",
        f"Step time: median {ms(step and step.median)} (min {ms(step and step.min)}, "
        f"max {ms(step and step.max)}); MFU: {mfu_text}",
    ]
    if t.note:
        lines.append(f"[yellow]{t.note}[/yellow]")
    return lines


def diverged(result: DemoResult) -> Diverged | None:
    """Where the run's loss stopped being a number: as the run recorded it, or, for a result saved before
    runs did, the first step whose loss JSON holds as null (nan or infinity, which it cannot write)."""
    if result.diverged is not None:
        return result.diverged
    losses = result.loss or []
    step = next((step for step, value in enumerate(losses, start=1) if value is None or not math.isfinite(value)), None)
    return Diverged(step=step, loss="not a number") if step is not None else None


def loss_line(result: Result) -> str:
    result = as_result(result)
    losses = result.loss or []
    if not losses:
        return "Loss: none recorded"
    where = diverged(result)
    if where is None:
        return f"Loss (mean over ranks): {losses[0]:.4f} at step 1 -> {losses[-1]:.4f} at step {len(losses)}"
    before = f"{losses[0]:.4f} at step 1 -> " if where.step and where.step > 1 and losses[0] is not None else ""
    lr = result.config.extra.get("lr")
    # the first step's loss comes before any update, so only a later one can be the learning rate's doing
    advice = (f"; try a smaller --lr than this run's {lr:g}" if isinstance(lr, (int, float)) and where.step
              and where.step > 1 else "")
    return f"Loss (mean over ranks): {before}[bold red]{where.loss} at step {where.step}[/]: the run diverged{advice}"


TIMELINE_WIDTH = 64
COMM_LETTERS = {"all_reduce": "R", "all_gather": "G", "reduce_scatter": "S", "broadcast": "b", "all_to_all": "A", "send": ">",
                "recv": "<"}
SPARK = " ▁▂▃▄▅▆▇█"


def _cells(intervals: list[tuple[float, float]], duration: float, width: int) -> list[bool]:
    cells = []
    for i in range(width):
        start, end = duration * i / width, duration * (i + 1) / width
        cells.append(lanes.length(lanes.intersect(intervals, [(start, end)])) > 0)
    return cells


def _spark(samples: list[list[float]], duration: float, width: int,
           scale: tuple[float, float] | None = None) -> str:
    """One character per slice of the step: the highest sample in it, or the last one before it."""
    if not samples:
        return ""
    values = []
    for i in range(width):
        start, end = duration * i / width, duration * (i + 1) / width
        inside = [b for t, b in samples if start <= t < end]
        before = [b for t, b in samples if t < start]
        values.append(max(inside) if inside else (before[-1] if before else samples[0][1]))
    low, high = scale or (min(values), max(values))
    span = (high - low) or 1
    return "".join(SPARK[1 + int((v - low) / span * (len(SPARK) - 2))] for v in values)


def _fit(console: Console, margin: int) -> int:
    """Columns for a text timeline that leave `margin` for its label and frame on this console."""
    return max(16, min(TIMELINE_WIDTH, console.width - margin))


def timeline_lines(timeline: Timeline | Mapping[str, Any] | None, width: int = TIMELINE_WIDTH) -> list[str]:
    """The recorded step per rank in text: forward (F), backward (B) and optimizer (O) compute, the
    collectives in flight (the first letter of each op), live bytes and parameter bytes held."""
    if timeline is None:
        return []
    timeline = Timeline.from_json(timeline)
    if not timeline.ranks:
        return []
    lines = [f"Timeline of step {timeline.step} (measured; {width} columns = the step on each rank):"]
    exposed = timeline.exposed_share
    for index, rank in enumerate(timeline.ranks):
        duration = rank.get("duration_s") or 0.0
        if duration <= 0:
            continue
        compute = [" "] * width
        for phase, letter in (("forward", "F"), ("backward", "B")):
            hit = _cells([(s["start_s"], s["end_s"]) for s in lanes.unit_spans(rank, phase)], duration, width)
            compute = [letter if h else c for h, c in zip(hit, compute)]
        optimizer = lanes.span(rank, "optimizer")
        if optimizer:
            hit = _cells([(optimizer["start_s"], optimizer["end_s"])], duration, width)
            compute = [("O" if h else c) for h, c in zip(hit, compute)]
        slept = [(s["start_s"], s["end_s"]) for s in rank.get("spans", []) if s["phase"] == "delay"]
        if slept:  # a straggler's sleep (demo straggler): not compute, but the rank is busy being slow
            compute = [("z" if h else c) for h, c in zip(_cells(slept, duration, width), compute)]
        comm = [" "] * width
        for c in rank.get("collectives", []):
            letter = COMM_LETTERS.get(c["op"], "c")
            hit = _cells([lanes.collective_interval(c)], duration, width)
            comm = [letter if h and ch == " " else ch for h, ch in zip(hit, comm)]
        share = f", exposed comm {exposed[index]:.0%}" if index < len(exposed) else ""
        params = [[t, held] for t, held, _ in rank.get("params", [])]
        lines += [
            f"rank {rank.get('rank')}  {duration * 1000:.1f} ms{share}",
            f"  compute |{''.join(compute)}|",
            f"  comm    |{''.join(comm)}|",
            f"  live    |{_spark(rank.get('memory', {}).get('samples', []), duration, width)}|",
            f"  params  |{_spark(params, duration, width)}|",
        ]
    slept = any(s["phase"] == "delay" for rank in timeline.ranks for s in rank.get("spans", []))
    p2p = any(c["op"] in ("send", "recv") for rank in timeline.ranks for c in rank.get("collectives", []))
    lines.append("F forward, B backward, O optimizer" + (", z the straggler's sleep" if slept else "")
                 + "; R all_reduce, G all_gather, S reduce_scatter, b broadcast, A all_to_all"
                 + ("; > send, < recv" if p2p else "")
                 + "; live: live bytes, params: parameter bytes held (each on its own scale)")
    return lines


def compile_lines(result: Result) -> list[str]:
    """A --compile run's compile, as torch recorded it: time and graphs apart from the timed steps, breaks."""
    result = as_result(result)
    compiled = result.extra.get("compile")
    if not compiled:
        return []
    median = result.throughput.step_time_s.median if result.throughput and result.throughput.step_time_s else None
    steps = ", ".join(f"{s:.2f} s" for s in compiled["warmup_step_s"])
    timed = f"; timed median {median:.3f} s" if median is not None else ""
    lines = [f"Compiled with {compiled['backend']} ({compiled['backend_reason']}): {compiled['graphs']} graphs in "
             f"{compiled['compile_s']:.2f} s, measured in the warm-up (its steps {steps}{timed}), "
             f"{compiled['graphs_in_timed_steps']} compiled in the timed steps",
             f"Graph breaks: {compiled['graph_breaks']}"]
    lines += [f"  x{r['count']} {r['reason']}" for r in compiled["graph_break_reasons"]]
    return lines


def render_training(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    result = as_result(result)
    if result.config.simulated:
        from ddpfsdp.demos.measure.simulated_report import render_simulated

        render_simulated(result, console)
        return
    console.print(_headline(result))
    console.print(memory_table(result))
    breakdown = peak_breakdown_table(result)
    if breakdown is not None:
        console.print(breakdown)
    for line in throughput_lines(result):
        console.print(line)
    for line in compile_lines(result):
        console.print(line, markup=False, highlight=False)
    console.print(comm_table(result))
    console.print(loss_line(result))
    for line in timeline_lines(result.timeline, _fit(console, 12)):
        console.print(line, markup=False, highlight=False)
    if result.wall_s is not None:
        console.print(f"Run time on rank 0: {result.wall_s:.1f} s")


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "n/a"
    return f"{value / base:.2f}x"


def _wire(run: DemoResult) -> float:
    return run.comm.wire_bytes_per_rank if run.comm else 0.0


def _exposed(run: DemoResult) -> float | None:
    shares = run.timeline.exposed_share if run.timeline else []
    return shares[0] if shares else None


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _rank0(run: DemoResult) -> RankMemory:
    return (run.memory or Memory()).rank(0) or RankMemory()


def compare_table(result: Result) -> Table:
    runs = as_result(result).runs or {}
    base = runs.get("ddp")
    table = Table(title="Per rank, measured in one run each, as a ratio to DDP",
                  caption="memory is rank 0's; wire bytes per rank per step; peak of one step")
    table.add_column("figure")
    for name in runs:
        table.add_column(name, justify="right")

    rows = [
        ("params", lambda run: _rank0(run).params, format_iec),
        ("grads", lambda run: _rank0(run).grads, format_iec),
        ("optimizer state", lambda run: _rank0(run).optimizer, format_iec),
        ("peak", lambda run: _rank0(run).peak, format_iec),
        *((f"  peak: {label}", lambda run, key=key: (_rank0(run).peak_breakdown or {}).get(key), format_iec)
          for key, label in PEAK_CATEGORIES
          if any((_rank0(run).peak_breakdown or {}).get(key) for run in runs.values())),
        ("samples/s", lambda run: (run.throughput or Throughput()).samples_per_s, lambda v: _rate(v, "")),
        ("wire bytes per step", _wire, format_iec),
        ("exposed comm (share of step)", _exposed, _percent),
        *((("compile s (warm-up)", lambda run: run.extra["compile"]["compile_s"], lambda v: f"{v:.2f}"),
           ("compiled graphs", lambda run: run.extra["compile"]["graphs"], str),
           ("graph breaks", lambda run: run.extra["compile"]["graph_breaks"], str))
          if all(run.extra.get("compile") for run in runs.values()) else ()),
    ]
    for label, get, fmt in rows:
        cells = []
        for run in runs.values():
            value = get(run)
            cells.append(f"{fmt(value)} ({_ratio(value, get(base) if base else None)})" if value is not None else "-")
        table.add_row(label, *cells)
    table.add_row("  peak: where", *(_where(_rank0(run)) for run in runs.values()))
    checks_row = []
    for run in runs.values():
        passed = sum(1 for c in run.checks if c.passed)
        unjudged = sum(1 for c in run.checks if c.verdict == "not judged")
        checks_row.append(f"{passed}/{len(run.checks) - unjudged} passed" + (f", {unjudged} not judged" if unjudged else ""))
    table.add_row("own checks", *checks_row)
    return table


def params_over_step_lines(runs: Mapping[str, Result], width: int = TIMELINE_WIDTH) -> list[str]:
    """Rank 0's parameter bytes held over its recorded step, one line per strategy, on one scale."""
    series = {}
    for name, run in runs.items():
        timeline = as_result(run).timeline
        ranks = timeline.ranks if timeline else []
        if ranks and ranks[0] and ranks[0].get("params"):
            series[name] = ranks[0]
    if not series:
        return []
    values = [held for rank in series.values() for _, held, _ in rank["params"]]
    scale = (0.0, float(max(values)))
    label = max(len(name) for name in series)
    lines = [f"Parameter bytes held over the recorded step, rank 0 (measured; full height {format_iec(scale[1])}):"]
    for name, rank in series.items():
        params = [[t, held] for t, held, _ in rank["params"]]
        lines.append(f"  {name:<{label}} |{_spark(params, rank.get('duration_s') or 0.0, width, scale)}|")
    return lines


def render_compare(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    result = as_result(result)
    if result.config.simulated:
        from ddpfsdp.demos.measure.simulated_report import render_simulated

        render_simulated(result, console)
        return
    c, runs = result.config, result.runs or {}
    console.print(
        f"[bold]compare[/bold]: {', '.join(runs)} on {c.arch or 'gpt'} {c.model} "
        f"({c.params or 0:,} parameters), {c.world_size} ranks on {c.device} "
        f"({c.backend}), {c.precision}, same data and seed"
    )
    if c.shared_gpu:
        console.print(f"[yellow]{c.shared_gpu}[/yellow]")
    console.print(Fitted(compare_table(result)))
    agree = result.check("losses_agree")
    if agree is not None:
        verdict = "agree" if agree.passed else "do NOT agree"
        console.print(f"Losses {verdict}: {agree.detail}")
    for name, run in runs.items():
        losses = run.loss or []
        where = diverged(run)
        if where is not None:
            console.print(f"  {name}: loss [bold red]{where.loss} at step {where.step}[/]: the run diverged")
        elif losses:
            console.print(f"  {name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    label = max((len(name) for name in runs), default=0)
    for line in params_over_step_lines(runs, _fit(console, label + 6)):
        console.print(line, markup=False, highlight=False)
    ddp = runs.get("ddp")
    note = ddp and ddp.throughput and ddp.throughput.note
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    failed = [(name, ch) for name, run in runs.items() for ch in run.checks if ch.passed is False]
    for name, ch in failed:
        console.print(f"[red]{name}: {ch.name} failed[/red]: {ch.detail}")


# ----------------------------------------------------------------------------- the quiz's evidence panel

STRATEGY_ORDER = ("ddp", "zro", "fsdp-grad-op", "fsdp-full")


def training_runs(result: Result) -> dict[str, DemoResult]:
    """Strategy -> training result: the runs of `compare`, or the one run of ddp/fsdp. A training run is
    one that measured memory: the per-schedule runs of `demo pipeline` are not, and give none."""
    result = as_result(result)
    if result.runs is not None:
        nested = {k: run for k, run in result.runs.items() if run.memory is not None}
        ordered = [k for k in STRATEGY_ORDER if k in nested] + [k for k in nested if k not in STRATEGY_ORDER]
        return {k: nested[k] for k in ordered}
    if result.memory is not None:
        config = result.config
        label = str(config.strategy or result.demo or "run")
        if config.sharding and label == "fsdp":
            label = f"fsdp-{config.sharding}"
        return {label: result}
    return {}


def _held_rank0(run: DemoResult) -> list[float | None]:
    """Rank 0's params, grads, optimizer state and peak in bytes; None where not measured."""
    held = (run.memory or Memory()).rank(0)
    figures = [getattr(held, kind) if held else None for kind in ("params", "grads", "optimizer", "peak")]
    return [float(v) if isinstance(v, (int, float)) else None for v in figures]


def _sent_per_step(run: DemoResult) -> float | None:
    """Wire bytes rank 0 sends per step over every op; None where no traffic was counted."""
    ops = [op for op in run.comm.per_step.values() if isinstance(op, CommOp)] if run.comm else []
    return sum(float(op.wire_bytes_per_rank or 0) for op in ops) if ops else None


def _samples_per_s(run: DemoResult) -> float | None:
    speed = run.throughput.samples_per_s if run.throughput else None
    return float(speed) if isinstance(speed, (int, float)) and not isinstance(speed, bool) else None


def _common_unit(values: list[float]) -> str:
    """The binary unit of the largest value, so a column of bytes reads in one unit."""
    largest = max((abs(v) for v in values), default=0.0)
    return next((name for name in ("TiB", "GiB", "MiB", "KiB") if largest >= BYTE_UNITS[name]), "B")


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """What the quiz's evidence panel shows of a training run under its checks: per strategy, rank 0's
    model state and peak, the wire bytes it sends per step and the samples per second. The bytes are in
    one unit named in the title, so each cell is a short number and the table fits 80 columns (it
    stretches to `width`)."""
    runs = training_runs(result)
    if not runs:
        return []
    rows = [(name, [*_held_rank0(run), _sent_per_step(run)], _samples_per_s(run)) for name, run in runs.items()]
    unit = _common_unit([v for _, values, _ in rows for v in values if v is not None])
    config = result.config
    who = f"Simulated, rank 0 of {config.world_size}" if config.simulated else "Measured, rank 0"
    table = Table(title=f"{who} ({unit}; sent: wire bytes per step)", title_justify="left", show_edge=False,
                  expand=True, pad_edge=False)
    table.add_column("strategy", no_wrap=True, overflow="ellipsis")
    for column in ("params", "grads", "optim.", "peak", "sent", "samples/s"):
        table.add_column(column, justify="right", no_wrap=True)
    for name, values, speed in rows:
        cells = ["–" if v is None else f"{v / BYTE_UNITS[unit]:,.2f}" for v in values]
        table.add_row(name, *cells, "–" if speed is None else f"{speed:,.1f}")
    where = {name: _rank0(run).peak_where() for name, run in runs.items()}
    where = {name: text for name, text in where.items() if text}
    if where:
        table.caption = "peak of rank 0: " + "; ".join(
            text if len(runs) == 1 else f"{name} {text}" for name, text in where.items())
        table.caption_justify = "left"
    return [table]
