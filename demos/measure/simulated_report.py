"""Print a simulated run for a person: rank 0's shards, the step's peak and where, every collective.

Every table says "simulated" in its title: the figures come from fake tensors over a fake process
group (`ddpfsdp.demos.train.simulate`), beside the analytic model's, with the difference in percent.
No throughput is printed, since nothing was computed. Importable without torch (rich only).
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

from ddpfsdp.demos.measure.comm_table import comm_table
from ddpfsdp.demos.result.schema import DemoResult, Memory, SimulatedPeak, as_result
from ddpfsdp.demos.base.units import format_iec

Result = DemoResult | Mapping[str, Any]

SIMULATED_NOTE = (
    "Simulated: the real strategy code on fake tensors over a fake process group, in one process. "
    "It measures real sharding, the real collectives issued and the real allocation pattern of one "
    "step; it cannot measure time, NCCL or allocator fragmentation, so no throughput is reported."
)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}%"


def _peak(run: DemoResult) -> SimulatedPeak:
    return (run.memory or Memory()).peak or SimulatedPeak()


def peak_line(run: Result) -> str:
    peak = _peak(as_result(run))
    module, phase = peak.module, peak.phase
    if module:
        where = f"at {module}"
    elif phase == "backward":
        where = "before backward reaches the model's last module (the loss's own gradient)"
    else:
        where = "outside the model's modules"
    if peak.unit and peak.unit != module:
        where += f" (unit {peak.unit})"
    parts = sorted((peak.categories or {}).items(), key=lambda item: -item[1])
    held = ", ".join(f"{name} {format_iec(size)}" for name, size in parts)
    return f"Peak of one step (simulated): {format_iec(peak.bytes)} in {peak.phase or 'n/a'}, {where}; held then: {held}"


def fit_line(run: Result) -> str | None:
    """The simulated peak against a stated GPU's memory (--gpu-mem)."""
    run = as_result(run)
    limit = run.config.gpu_mem_bytes
    peak = _peak(run).bytes
    if not limit or peak is None:
        return None
    verdict = "fits in" if peak <= limit else "does NOT fit in"
    return (f"The simulated peak {format_iec(peak)} {verdict} --gpu-mem {format_iec(limit)} ({peak / limit:.0%}); "
            "the CUDA context, NCCL buffers and fragmentation come on top")


def largest_unit_line(run: Result) -> str | None:
    unit = (as_result(run).memory or Memory()).largest_unit
    if not unit or not (unit.to_json()):
        return None
    params = f"{unit.params:,} parameters, " if unit.params else ""
    return (f"Largest FSDP unit: {unit.name} ({params}{format_iec(unit.unsharded_bytes)} unsharded, "
            "as its all-gather brings it into being)")


def versus_table(run: Result, world_size: int) -> Table:
    table = Table(title=f"Rank 0 of {world_size}, simulated, beside the analytic model",
                  caption="simulated: measured on fake tensors; theory: ddpfsdp calc for this configuration")
    for column in ("figure", "simulated", "theory", "difference"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in as_result(run).versus_theory or []:
        table.add_row(row.figure, format_iec(row.simulated), f"[dim]{format_iec(row.theory)}[/dim]",
                      _percent(row.diff_percent))
    return table


def _heading(result: DemoResult) -> str:
    c = result.config
    model = c.shape or f"{c.params or 0:,} parameters"
    return (
        f"[bold reverse] SIMULATED [/] [bold]{result.demo or ''}[/bold]: {c.description or ''}\n"
        f"{c.arch or 'gpt'} {c.model} ({model}); a world of {c.world_size} ranks, rank 0 "
        f"simulated; {c.precision}, {c.optimizer}, batch {c.batch_size} per rank"
    )


def render_simulated(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    result = as_result(result)
    if result.runs is not None:
        render_simulated_compare(result, console)
        return
    console.print(_heading(result))
    console.print(versus_table(result, result.config.world_size))
    console.print(peak_line(result))
    for line in (fit_line(result), largest_unit_line(result)):
        if line:
            console.print(line)
    console.print(comm_table(result, simulated=True))
    console.print(f"[yellow]{SIMULATED_NOTE}[/yellow]")
    if result.wall_s is not None:
        console.print(f"Simulation time: {result.wall_s:.1f} s (not a training time)")


def render_simulated_compare(result: DemoResult, console: Console) -> None:
    c = result.config
    runs = result.runs or {}
    console.print(
        f"[bold reverse] SIMULATED [/] [bold]compare[/bold]: {', '.join(runs)} on {c.arch or 'gpt'} "
        f"{c.model} ({c.shape or c.params}); a world of {c.world_size} ranks, rank 0 "
        f"simulated; {c.precision}"
    )
    table = Table(title=f"Rank 0 of {c.world_size}, simulated (theory in brackets)",
                  caption="model state after the optimizer step; wire bytes per rank per step")
    table.add_column("figure")
    for name in runs:
        table.add_column(name, justify="right")

    def row_for(run: DemoResult, figure: str) -> str:
        for row in run.versus_theory or []:
            if row.figure == figure:
                return f"{format_iec(row.simulated)} [dim]({format_iec(row.theory)})[/dim]"
        return "n/a"

    for figure in ("params", "grads", "optimizer state", "model state", "wire bytes per step"):
        table.add_row(figure, *(row_for(run, figure) for run in runs.values()))
    table.add_row("peak of one step", *(format_iec(_peak(run).bytes) for run in runs.values()))
    table.add_row("peak in", *(_peak(run).phase or "n/a" for run in runs.values()))
    checks = []
    for run in runs.values():
        checks.append(f"{sum(1 for ch in run.checks if ch.passed)}/{len(run.checks)} passed")
    table.add_row("own checks", *checks)
    console.print(table)
    for name, run in runs.items():
        console.print(f"{name}: {peak_line(run)}")
        fit = fit_line(run)
        if fit:
            console.print(f"{name}: {fit}")
        for ch in run.checks:
            if not ch.passed:
                console.print(f"[red]{name}: {ch.name} failed[/red]: {ch.detail}")
    console.print(f"[yellow]{SIMULATED_NOTE}[/yellow]")
