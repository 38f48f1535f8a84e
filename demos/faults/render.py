"""A fault's result printed for a person: each run's symptom as torch produced it, then the cause and the fix.

The symptom lines are printed as they are, without markup, so torch's text reaches the terminal
unchanged; `evidence_view` sets the two symptoms side by side for the quiz's evidence panel. Imports no torch.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddpfsdp.demos.result.schema import DemoResult, FaultLab, FaultPhase, as_result

_STYLE = {"broken": "bold red", "fixed": "bold green"}

# What torch's flight-recorder analyzer says that a reader would take the wrong way, and how to read it
# (torch/distributed/flight_recorder/components/utils.py matches each entry of the first rank against the
# others; types.py words a rank that differs as "Culprit rank N" and defines SIZE_OR_SYNTAX_MISMATCH).
ANALYZER_CAVEATS = {
    "Culprit rank": "The analyzer compares every rank with the first, so \"Culprit rank N\" means rank N differs "
    "from rank 0, not that rank N holds the bug: it may be the rank that did nothing wrong.",
    "SIZE_OR_SYNTAX_MISMATCH": "On gloo the analyzer flags DTensor's all-gathers as SIZE_OR_SYNTAX_MISMATCH even in a "
    "correct run (gloo records their output as one rank's share): only its collective-type and missing-rank "
    "findings count as a desync.",
}


def analyzer_caveats(lines: list[str]) -> list[str]:
    """The caveats for what the analyzer said in `lines`, each once."""
    return [caveat for phrase, caveat in ANALYZER_CAVEATS.items() if any(phrase in line for line in lines)]


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
        for caveat in analyzer_caveats(list(run.symptom)):
            console.print(f"  [dim]Note: {escape(caveat)}[/]")
    console.print(f"\n[bold]Cause:[/] {escape(str(lab.cause))}")
    console.print(f"[bold]Fix:[/] {escape(str(lab.fix))}")


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """What the quiz's evidence panel shows of a fault under its checks: the broken run's symptom beside the
    fixed run's, as torch produced them, then the cause and the fix (the table stretches to `width`)."""
    from rich.table import Table
    from rich.text import Text

    lab = result.fault
    if lab is None:
        return []
    table = Table(title="The symptom, broken and fixed", title_justify="left", show_edge=False, expand=True,
                  pad_edge=False)
    runs = {"broken": lab.broken, "fixed": lab.fixed}
    for phase, run in runs.items():
        table.add_column(Text(f"{phase}: {str(run.program or '') if run else ''}", style=_STYLE[phase]), ratio=1)
    table.add_row(*(Text("\n".join(str(line) for line in run.symptom) if run else "") for run in runs.values()))
    table.caption = Text(f"Cause: {lab.cause or ''}\nFix: {lab.fix or ''}")  # not markup: "Join([model])"
    table.caption_justify = "left"
    return [table]
