"""A fault's result printed for a person: each run's symptom as torch produced it, then the cause and the fix.

The symptom lines are printed as they are, without markup, so torch's text reaches the terminal
unchanged. Imports no torch.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddpfsdp.demos.faults.catalog import FAULTS
from ddpfsdp.demos.result import DemoResult, FaultLab, FaultPhase, as_result

_STYLE = {"broken": "bold red", "fixed": "bold green"}


def list_lines() -> list[str]:
    """`ddpfsdp demo fault --list`: one fault per line with its summary."""
    width = max(map(len, FAULTS)) + 2
    return [f"{name.ljust(width)}{fault.summary}" for name, fault in FAULTS.items()]


def render_fault(result: DemoResult | Mapping[str, Any], console: Any) -> None:
    from rich.markup import escape

    result = as_result(result)
    lab = result.fault or FaultLab()
    console.print(f"[bold]{escape(str(lab.name))}[/]: {escape(str(lab.summary))}")
    console.print(f"[dim]{result.config.world_size} CPU processes (gloo), process-group timeout {result.config.timeout_s:g} s "
                  f"per program; the fixed program ran first.[/]")
    for phase, run in (("broken", lab.broken), ("fixed", lab.fixed)):
        run = run or FaultPhase()
        took = f" ({run.wall_s:.2f} s)" if isinstance(run.wall_s, (int, float)) else ""
        console.print(f"\n[{_STYLE[phase]}]{phase.capitalize()}[/]{took}: {escape(str(run.program))}")
        for line in run.symptom:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"\n[bold]Cause:[/] {escape(str(lab.cause))}")
    console.print(f"[bold]Fix:[/] {escape(str(lab.fix))}")
