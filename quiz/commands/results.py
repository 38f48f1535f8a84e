"""What `ddpfsdp demo` does with a result, for every demo (the failure lab's command too): its checks as a
table, and a copy in the progress store under what the demo was asked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddpfsdp.demos import registry
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult


def check_table(checks: Sequence[Check]):
    from rich.table import Table

    from ddpfsdp.demos.base.labels import Label

    table = Table(title="Checks: the claims this run illustrates", title_justify="left", expand=False)
    table.add_column("", width=1)
    table.add_column("check")
    table.add_column("what was measured")
    for check in checks:
        mark = "[green]✔[/]" if check.passed else "[yellow]–[/]" if check.not_judged else "[red]✘[/]"
        table.add_row(mark, Label(check.name), check.detail)
    return table


def save_result(demo: registry.Demo, asked: Any, result: DemoResult, console) -> None:
    """Save the result under what the demo was asked (its RunSpec, its options, or its words)."""
    try:
        from ddpfsdp.quiz.store import Store

        with Store.open() as store:
            if store.warning:
                console.print(f"[yellow]warning:[/] {store.warning}")
            store.save_demo_result(demo.name, asked, result)
    except Exception as exc:  # noqa: BLE001 - the result on screen matters more than the copy on disk
        console.print(f"[yellow]warning:[/] the result was not saved to the progress store: {exc}")
