"""A kata's result for a person (rich): what went wrong, as a reviewer says it, then every check with its
numbers, then what each rank's code printed. No torch: the CLI and the quiz render saved results."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ddpfsdp.demos.result.checks import Check, verdict


def check_table(checks: list[Check]) -> Table:
    table = Table(title_justify="left", expand=False, show_edge=False, pad_edge=False)
    table.add_column("", width=1)
    table.add_column("check", no_wrap=True)
    table.add_column("what was measured")
    for check in checks:
        mark = {"passed": "[green]✔[/]", "failed": "[red]✘[/]"}.get(verdict(check), "[yellow]–[/]")
        table.add_row(mark, check.name, escape(check.detail))
    return table


def summary(checks: list[Check]) -> tuple[bool, str]:
    """(passed, one line): every check passed, or how many failed."""
    failed = [c for c in checks if verdict(c) == "failed"]
    unjudged = [c for c in checks if verdict(c) == "not judged"]
    if not failed and not unjudged:
        return True, f"all {len(checks)} checks passed"
    parts = [f"{len(failed)} of {len(checks)} checks failed"] if failed else []
    if unjudged:
        parts.append(f"{len(unjudged)} not judged")
    return False, ", ".join(parts)


def _failure(extra: dict) -> list[Any]:
    failure = extra.get("failure") or {}
    parts: list[Any] = [Text(line, style="red") for line in failure.get("lines", [])]
    if failure.get("traceback"):
        parts.append(Text(failure["traceback"], style="dim"))
    return parts


def _outputs(extra: dict) -> list[Any]:
    parts: list[Any] = []
    for rank in extra.get("ranks") or []:
        output = (rank.get("output") or "").rstrip()
        if output:
            parts += [Text(f"rank {rank['rank']} printed:", style="bold"), Text(output)]
    return parts


def renderable(result: Any) -> Group:
    """The result (its JSON or a DemoResult): the failure, the checks, what the ranks printed."""
    from ddpfsdp.demos.result.schema import as_result

    typed = as_result(result)
    failure = _failure(typed.extra)
    return Group(*failure, *([Text("")] if failure else []), check_table(typed.checks), *_outputs(typed.extra))


def evidence_view(result: Any, width: int) -> list:
    """The registry's evidence view: what failed and what the ranks printed, under the panel's checks."""
    from ddpfsdp.demos.result.schema import as_result

    typed = as_result(result)
    return [*_failure(typed.extra), *_outputs(typed.extra)]


def render(result: Any, console: Console) -> None:
    """The registry's render hook: the failure and what the ranks printed (`ddpfsdp demo` adds the checks)."""
    from ddpfsdp.demos.result.schema import as_result

    typed = as_result(result)
    for part in (*_failure(typed.extra), *_outputs(typed.extra)):
        console.print(part)
