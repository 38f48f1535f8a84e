"""Print a simulated run for a person: rank 0's shards, the step's peak and where, every collective.

Every table says "simulated" in its title: the figures come from fake tensors over a fake process
group (`ddpfsdp.demos.train.simulate`), beside the analytic model's, with the difference in percent.
No throughput is printed, since nothing was computed. Importable without torch (rich only).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.measure.comm_table import comm_table
from ddpfsdp.demos.units import format_iec

SIMULATED_NOTE = (
    "Simulated: the real strategy code on fake tensors over a fake process group, in one process. "
    "It measures real sharding, the real collectives issued and the real allocation pattern of one "
    "step; it cannot measure time, NCCL or allocator fragmentation, so no throughput is reported."
)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}%"


def peak_line(run: dict[str, Any]) -> str:
    peak = run["memory"].get("peak") or {}
    module, phase = peak.get("module"), peak.get("phase")
    if module:
        where = f"at {module}"
    elif phase == "backward":
        where = "before backward reaches the model's last module (the loss's own gradient)"
    else:
        where = "outside the model's modules"
    if peak.get("unit") and peak.get("unit") != module:
        where += f" (unit {peak['unit']})"
    parts = sorted((peak.get("categories") or {}).items(), key=lambda item: -item[1])
    held = ", ".join(f"{name} {format_iec(size)}" for name, size in parts)
    return f"Peak of one step (simulated): {format_iec(peak.get('bytes'))} in {peak.get('phase') or 'n/a'}, {where}; held then: {held}"


def fit_line(run: dict[str, Any]) -> str | None:
    """The simulated peak against a stated GPU's memory (--gpu-mem)."""
    limit = run["config"].get("gpu_mem_bytes")
    peak = (run["memory"].get("peak") or {}).get("bytes")
    if not limit or peak is None:
        return None
    verdict = "fits in" if peak <= limit else "does NOT fit in"
    return (f"The simulated peak {format_iec(peak)} {verdict} --gpu-mem {format_iec(limit)} ({peak / limit:.0%}); "
            "the CUDA context, NCCL buffers and fragmentation come on top")


def largest_unit_line(run: dict[str, Any]) -> str | None:
    unit = run["memory"].get("largest_unit")
    if not unit:
        return None
    params = f"{unit['params']:,} parameters, " if unit.get("params") else ""
    return (f"Largest FSDP unit: {unit['name']} ({params}{format_iec(unit['unsharded_bytes'])} unsharded, "
            "as its all-gather brings it into being)")


def versus_table(run: dict[str, Any], world_size: int) -> Table:
    table = Table(title=f"Rank 0 of {world_size}, simulated, beside the analytic model",
                  caption="simulated: measured on fake tensors; theory: ddpfsdp calc for this configuration")
    for column in ("figure", "simulated", "theory", "difference"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in run.get("versus_theory") or []:
        table.add_row(row["figure"], format_iec(row["simulated"]), f"[dim]{format_iec(row['theory'])}[/dim]",
                      _percent(row["diff_percent"]))
    return table


def _heading(result: dict[str, Any]) -> str:
    c = result["config"]
    model = c.get("shape") or f"{c.get('params', 0):,} parameters"
    return (
        f"[bold reverse] SIMULATED [/] [bold]{result.get('demo', '')}[/bold]: {c.get('description') or ''}\n"
        f"{c.get('arch', 'gpt')} {c.get('model')} ({model}); a world of {c.get('world_size')} ranks, rank 0 "
        f"simulated; {c.get('precision')}, {c.get('optimizer')}, batch {c.get('batch_size')} per rank"
    )


def render_simulated(result: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    if "runs" in result:
        render_simulated_compare(result, console)
        return
    console.print(_heading(result))
    console.print(versus_table(result, result["config"]["world_size"]))
    console.print(peak_line(result))
    for line in (fit_line(result), largest_unit_line(result)):
        if line:
            console.print(line)
    console.print(comm_table(result, simulated=True))
    console.print(f"[yellow]{SIMULATED_NOTE}[/yellow]")
    if result.get("wall_s") is not None:
        console.print(f"Simulation time: {result['wall_s']:.1f} s (not a training time)")


def render_simulated_compare(result: dict[str, Any], console: Console) -> None:
    c = result["config"]
    runs = result["runs"]
    console.print(
        f"[bold reverse] SIMULATED [/] [bold]compare[/bold]: {', '.join(runs)} on {c.get('arch', 'gpt')} "
        f"{c.get('model')} ({c.get('shape') or c.get('params')}); a world of {c.get('world_size')} ranks, rank 0 "
        f"simulated; {c.get('precision')}"
    )
    table = Table(title=f"Rank 0 of {c.get('world_size')}, simulated (theory in brackets)",
                  caption="model state after the optimizer step; wire bytes per rank per step")
    table.add_column("figure")
    for name in runs:
        table.add_column(name, justify="right")

    def row_for(run: dict[str, Any], figure: str) -> str:
        for row in run.get("versus_theory") or []:
            if row["figure"] == figure:
                return f"{format_iec(row['simulated'])} [dim]({format_iec(row['theory'])})[/dim]"
        return "n/a"

    for figure in ("params", "grads", "optimizer state", "model state", "wire bytes per step"):
        table.add_row(figure, *(row_for(run, figure) for run in runs.values()))
    table.add_row("peak of one step", *(format_iec(run["memory"]["peak"]["bytes"]) for run in runs.values()))
    table.add_row("peak in", *(run["memory"]["peak"].get("phase") or "n/a" for run in runs.values()))
    checks = []
    for run in runs.values():
        own = run.get("checks", [])
        checks.append(f"{sum(1 for ch in own if ch.get('passed'))}/{len(own)} passed")
    table.add_row("own checks", *checks)
    console.print(table)
    for name, run in runs.items():
        console.print(f"{name}: {peak_line(run)}")
        fit = fit_line(run)
        if fit:
            console.print(f"{name}: {fit}")
        for ch in run.get("checks", []):
            if not ch["passed"]:
                console.print(f"[red]{name}: {ch['name']} failed[/red]: {ch['detail']}")
    console.print(f"[yellow]{SIMULATED_NOTE}[/yellow]")
