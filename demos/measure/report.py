"""Print a training demo's result for a person: per-rank memory, throughput, traffic, loss.

Every figure printed is the run's own measurement; the analytic model's figures appear beside
them in columns labelled theory. The table of checks is printed by the CLI after these tables.
Importable without torch (rich only).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.labels import Fitted
from ddpfsdp.demos.measure import lanes
from ddpfsdp.demos.measure.comm_table import comm_table
from ddpfsdp.demos.units import format_iec

# What a peak is made of, in the order a reader builds it up: state, communication buffers, the rest.
PEAK_CATEGORIES = (
    ("params", "params"),  # FSDP: the local shards
    ("unsharded_params", "unsharded params"),
    ("grads", "grads"),
    ("optimizer", "optimizer state"),
    ("all_gather", "all-gather buffer"),
    ("reduce_scatter", "reduce-scatter buffer"),
    ("ddp_buckets", "DDP buckets"),
    ("buffers", "module buffers"),
    ("inputs", "inputs"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
    ("transient", "the rest (by difference)"),
)


def peak_where(memory: dict[str, Any]) -> str:
    """'backward, in blocks.3.mlp' from a rank's peak_phase and peak_module."""
    phase = memory.get("peak_phase")
    if not phase:
        return "n/a"
    module = memory.get("peak_module")
    return f"{phase}, in {module}" if module else f"{phase}, outside the model's modules"


def peak_breakdown_table(result: dict[str, Any]) -> Table | None:
    """One column per rank: the categories of its peak, the phase and module, the measured peak."""
    ranks = result["memory"]["ranks"]
    if not ranks or not any(r.get("peak_breakdown") for r in ranks):
        return None
    source = ranks[0].get("breakdown_source") or ""
    table = Table(title="What the peak is made of (measured, at the moment of peak)",
                  caption=f"categories: {source}; the measured peak is the project's own figure")
    table.add_column("category")
    for r in range(len(ranks)):
        table.add_column(f"rank {r}", justify="right")
    present = [(key, label) for key, label in PEAK_CATEGORIES
               if any((r.get("peak_breakdown") or {}).get(key) for r in ranks)]
    for key, label in present:
        table.add_row(label, *(format_iec((r.get("peak_breakdown") or {}).get(key, 0)) for r in ranks))
    table.add_row("[bold]sum (tracker's peak)[/bold]",
                  *(format_iec(sum((r.get("peak_breakdown") or {}).values())) for r in ranks))
    table.add_row("[bold]measured peak[/bold]", *(format_iec(r.get("peak")) for r in ranks))
    table.add_row("where", *(peak_where(r) for r in ranks))
    return table


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f} {unit}".rstrip()


def _headline(result: dict[str, Any]) -> str:
    c = result["config"]
    what = c.get("description") or c.get("strategy", result.get("demo", ""))
    impl = f" ({c['optimizer_impl']})" if c.get("optimizer_impl") else ""
    return (
        f"[bold]{result.get('demo', '')}[/bold]: {what}\n"
        f"{c.get('arch', 'gpt')} {c.get('model')} ({c.get('params', 0):,} parameters), "
        f"{c.get('world_size')} ranks on {c.get('device')} ({c.get('backend')}), {c.get('precision')}, "
        f"{c.get('optimizer')}{impl}, batch {c.get('batch_size')} per rank, {c.get('steps')} steps "
        f"({c.get('warmup')} warm-up)"
    ) + (f"\n[yellow]{c['shared_gpu']}[/yellow]" if c.get("shared_gpu") else "")


def memory_table(result: dict[str, Any]) -> Table:
    theory = result.get("theory") or {}
    ranks = result["memory"]["ranks"]
    kind = ranks[0].get("peak_kind", "") if ranks else ""
    follows = f"; theory follows {theory['implementation']}" if theory.get("implementation") else ""
    table = Table(title="Memory per rank (measured)", caption=f"peak: {kind}; model state after the optimizer step{follows}")
    for column in ("rank", "params", "grads", "optimizer state", "model state", "peak of one step"):
        table.add_column(column, justify="right")
    for r, held in enumerate(ranks):
        state = sum(held.get(k) or 0 for k in ("params", "grads", "optimizer"))
        table.add_row(str(r), format_iec(held.get("params")), format_iec(held.get("grads")),
                      format_iec(held.get("optimizer")), format_iec(state), format_iec(held.get("peak")))
    if theory:
        table.add_row(
            "[dim]theory[/dim]",
            *(f"[dim]{format_iec(theory.get(k))}[/dim]" for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                                                                     "model_state_bytes")),
            f"[dim]{format_iec(theory.get('working_set_bytes'))} working set[/dim]",
        )
    return table


def throughput_lines(result: dict[str, Any]) -> list[str]:
    t = result["throughput"]
    step = t.get("step_time_s") or {}
    mfu = t.get("mfu")
    if isinstance(mfu, (int, float)):
        mfu_text = f"{mfu * 100:.1f}%"
    elif t.get("peak_flops_per_s"):
        mfu_text = "n/a (this model's FLOPs are not modelled)"
    else:
        # fp32 with TF32 allowed has no single peak, and unlisted GPUs get no guess
        mfu_text = "n/a (no dense peak FLOP/s known for this device and precision)"
    lines = [
        f"Throughput over all ranks after warm-up ({t.get('timed_steps')} timed steps): "
        f"{_rate(t.get('samples_per_s'), 'samples/s')}, {_rate(t.get('tokens_per_s'), 'tokens/s')}",
        f"Step time: median {step.get('median', 0) * 1000:.1f} ms (min {step.get('min', 0) * 1000:.1f} ms, "
        f"max {step.get('max', 0) * 1000:.1f} ms); MFU: {mfu_text}",
    ]
    if t.get("note"):
        lines.append(f"[yellow]{t['note']}[/yellow]")
    return lines


def loss_line(result: dict[str, Any]) -> str:
    losses = result.get("loss") or []
    if not losses:
        return "Loss: none recorded"
    return f"Loss (mean over ranks): {losses[0]:.4f} at step 1 -> {losses[-1]:.4f} at step {len(losses)}"


TIMELINE_WIDTH = 64
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


def timeline_lines(timeline: dict[str, Any] | None, width: int = TIMELINE_WIDTH) -> list[str]:
    """The recorded step per rank in text: forward (F), backward (B) and optimizer (O) compute, the
    collectives in flight (the first letter of each op), live bytes and parameter bytes held."""
    if not timeline or not timeline.get("ranks"):
        return []
    lines = [f"Timeline of step {timeline.get('step')} (measured; {width} columns = the step on each rank):"]
    exposed = (timeline.get("exposed") or {}).get("share") or []
    for index, rank in enumerate(timeline["ranks"]):
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
        comm = [" "] * width
        for c in rank.get("collectives", []):
            letter = {"all_reduce": "R", "all_gather": "G", "reduce_scatter": "S", "broadcast": "b"}.get(c["op"], "c")
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
    lines.append("F forward, B backward, O optimizer; R all_reduce, G all_gather, S reduce_scatter, b broadcast; "
                 "live: live bytes, params: parameter bytes held (each on its own scale)")
    return lines


def compile_lines(result: dict[str, Any]) -> list[str]:
    """A --compile run's compile, as torch recorded it: time and graphs apart from the timed steps, breaks."""
    compiled = result.get("compile")
    if not compiled:
        return []
    median = (result.get("throughput") or {}).get("step_time_s", {}).get("median")
    steps = ", ".join(f"{s:.2f} s" for s in compiled["warmup_step_s"])
    lines = [f"Compiled with {compiled['backend']} ({compiled['backend_reason']}): {compiled['graphs']} graphs in "
             f"{compiled['compile_s']:.2f} s, measured in the warm-up (its steps {steps}; timed median "
             f"{median:.3f} s), {compiled['graphs_in_timed_steps']} compiled in the timed steps",
             f"Graph breaks: {compiled['graph_breaks']}"]
    lines += [f"  x{r['count']} {r['reason']}" for r in compiled["graph_break_reasons"]]
    return lines


def render_training(result: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    if result["config"].get("simulated"):
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
    for line in timeline_lines(result.get("timeline"), _fit(console, 12)):
        console.print(line, markup=False, highlight=False)
    if result.get("wall_s") is not None:
        console.print(f"Run time on rank 0: {result['wall_s']:.1f} s")


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "n/a"
    return f"{value / base:.2f}x"


def _wire(run: dict[str, Any]) -> float:
    return sum(v.get("wire_bytes_per_rank", 0) for v in run["comm"]["per_step"].values())


def _exposed(run: dict[str, Any]) -> float | None:
    shares = ((run.get("timeline") or {}).get("exposed") or {}).get("share") or []
    return shares[0] if shares else None


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def compare_table(result: dict[str, Any]) -> Table:
    runs = result["runs"]
    base = runs.get("ddp")
    table = Table(title="Per rank, measured in one run each, as a ratio to DDP",
                  caption="memory is rank 0's; wire bytes per rank per step; peak of one step")
    table.add_column("figure")
    for name in runs:
        table.add_column(name, justify="right")

    def mem(run: dict[str, Any], kind: str) -> float | None:
        return run["memory"]["ranks"][0].get(kind)

    rows = [
        ("params", lambda run: mem(run, "params"), format_iec),
        ("grads", lambda run: mem(run, "grads"), format_iec),
        ("optimizer state", lambda run: mem(run, "optimizer"), format_iec),
        ("peak", lambda run: mem(run, "peak"), format_iec),
        *((f"  peak: {label}", lambda run, key=key: (mem(run, "peak_breakdown") or {}).get(key), format_iec)
          for key, label in PEAK_CATEGORIES
          if any((mem(run, "peak_breakdown") or {}).get(key) for run in runs.values())),
        ("samples/s", lambda run: run["throughput"].get("samples_per_s"), lambda v: _rate(v, "")),
        ("wire bytes per step", _wire, format_iec),
        ("exposed comm (share of step)", _exposed, _percent),
        *((("compile s (warm-up)", lambda run: run["compile"]["compile_s"], lambda v: f"{v:.2f}"),
           ("compiled graphs", lambda run: run["compile"]["graphs"], str),
           ("graph breaks", lambda run: run["compile"]["graph_breaks"], str))
          if all(run.get("compile") for run in runs.values()) else ()),
    ]
    for label, get, fmt in rows:
        cells = []
        for run in runs.values():
            value = get(run)
            cells.append(f"{fmt(value)} ({_ratio(value, get(base) if base else None)})" if value is not None else "-")
        table.add_row(label, *cells)
    table.add_row("  peak: where", *(peak_where(run["memory"]["ranks"][0]) for run in runs.values()))
    checks_row = []
    for run in runs.values():
        checks = run.get("checks", [])
        passed = sum(1 for c in checks if c.get("passed"))
        unjudged = sum(1 for c in checks if c.get("passed") is None and c.get("not_judged"))
        checks_row.append(f"{passed}/{len(checks) - unjudged} passed" + (f", {unjudged} not judged" if unjudged else ""))
    table.add_row("own checks", *checks_row)
    return table


def params_over_step_lines(runs: dict[str, Any], width: int = TIMELINE_WIDTH) -> list[str]:
    """Rank 0's parameter bytes held over its recorded step, one line per strategy, on one scale."""
    series = {}
    for name, run in runs.items():
        ranks = (run.get("timeline") or {}).get("ranks") or []
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


def render_compare(result: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    if result["config"].get("simulated"):
        from ddpfsdp.demos.measure.simulated_report import render_simulated

        render_simulated(result, console)
        return
    c = result["config"]
    console.print(
        f"[bold]compare[/bold]: {', '.join(result['runs'])} on {c.get('arch', 'gpt')} {c.get('model')} "
        f"({c.get('params', 0):,} parameters), {c.get('world_size')} ranks on {c.get('device')} "
        f"({c.get('backend')}), {c.get('precision')}, same data and seed"
    )
    if c.get("shared_gpu"):
        console.print(f"[yellow]{c['shared_gpu']}[/yellow]")
    console.print(Fitted(compare_table(result)))
    agree = next((ch for ch in result.get("checks", []) if ch["name"] == "losses_agree"), None)
    if agree is not None:
        verdict = "agree" if agree["passed"] else "do NOT agree"
        console.print(f"Losses {verdict}: {agree['detail']}")
    for name, run in result["runs"].items():
        losses = run.get("loss") or []
        if losses:
            console.print(f"  {name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    label = max((len(name) for name in result["runs"]), default=0)
    for line in params_over_step_lines(result["runs"], _fit(console, label + 6)):
        console.print(line, markup=False, highlight=False)
    ddp = result["runs"].get("ddp")
    note = ddp and ddp["throughput"].get("note")
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    failed = [(name, ch) for name, run in result["runs"].items() for ch in run.get("checks", []) if ch["passed"] is False]
    for name, ch in failed:
        console.print(f"[red]{name}: {ch['name']} failed[/red]: {ch['detail']}")
