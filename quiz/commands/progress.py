"""`ddpfsdp progress`: attempts, accuracy and mastery by topic, weakest first."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def progress(as_json: bool) -> None:
    """Show attempts, accuracy, mastery and cards due by topic, weakest first, and sizing drills by kind;
    then readiness per interview skill and per topic, and the three things to study next.

    Each drill kind, each kind of interview step and each kata you have written (passed or given up)
    counts as one more card of its topic (`ddpfsdp drill`, `ddpfsdp interview`, `ddpfsdp kata`). Readiness is half FSRS mastery, half your recent
    mock-interview and interview scores, each in proportion to the answers behind it until there are 5.
    """
    from ddpfsdp.quiz import katas, readiness, scheduler
    from ddpfsdp.quiz.loader import BankError, load_bank
    from ddpfsdp.quiz.store import Store, StoreError, utc_now

    try:
        bank = load_bank()
    except BankError as error:
        raise click.ClickException(f"the question bank has a problem: {error}") from None
    try:
        store = Store.open()
    except StoreError as error:
        raise click.ClickException(str(error)) from None
    if store.warning:
        click.echo(f"warning: {store.warning}", err=True)
    with store:
        now = utc_now()
        report = scheduler.progress(bank, store, now)
        drill_report = scheduler.drill_progress(store, now)
        ready = readiness.report(bank, store, now)
        attempts = store.attempts()
        written = katas.statuses(store, now)
    total = len(attempts)
    correct = sum(a.correct for a in attempts)
    due = sum(p.due for p in report)
    if as_json:
        click.echo(json.dumps({
            "schema": "ddpfsdp.progress/1",
            "attempts": total,
            "correct": correct,
            "accuracy": correct / total if total else None,
            "due": due,
            "topics": [p.to_dict() for p in report],
            "drills": [d.to_dict() for d in drill_report],
            "readiness": readiness.to_dict(ready),
            "katas": [status.to_dict() for status in written],
        }, indent=2))
        return

    from rich.console import Console
    from rich.table import Table

    table = Table(title="Progress by topic, weakest first", title_justify="left")
    table.add_column("topic")
    table.add_column("mastery", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("accuracy", justify="right")
    table.add_column("attempts", justify="right")
    table.add_column("seen", justify="right")
    table.add_column("due", justify="right")
    table.add_column("katas", justify="right")
    for p in report:
        bar = "█" * round(p.mastery * 10) + "░" * (10 - round(p.mastery * 10))
        table.add_row(
            f"{p.title} [dim]({p.topic})[/]",
            f"{p.mastery:.0%}",
            bar,
            "–" if p.accuracy is None else f"{p.accuracy:.0%}",
            str(p.attempts),
            f"{p.seen}/{p.questions}",
            str(p.due) if p.due else "",
            str(p.katas) if p.katas else "",
        )
    console = Console()
    console.print(table)
    if drill_report:
        console.print(_drill_table(drill_report))
    console.print(readiness.render(ready))
    console.print(_katas_line(written))
    summary = f"{total} attempts" + (f", {correct / total:.0%} correct" if total else "") + f"; {due} cards due now."
    if not total:
        summary += " Start with `ddpfsdp quiz`."
    elif not drill_report:
        summary += " Try the sizing drills: `ddpfsdp drill`."
    console.print(summary)


def _katas_line(written) -> str:
    """What the learner has written, beside what they have recognised."""
    passed = sum(s.state == "passed" for s in written)
    given_up = sum(s.state == "gave up" for s in written)
    due = sum(s.due for s in written)
    line = f"Katas written: {passed} of {len(written)} passed"
    if given_up:
        line += f", {given_up} given up"
    if due:
        line += f"; {due} due to write again"
    return line + " (ddpfsdp kata list)."


def _drill_table(drill_report):
    from rich.table import Table

    from ddpfsdp.quiz.drill import KINDS

    table = Table(title="Sizing drills (ddpfsdp drill), weakest first; each counts toward its topic", title_justify="left")
    for column, justify in (("drill", "left"), ("topic", "left"), ("mastery", "right"), ("accuracy", "right"), ("attempts", "right")):
        table.add_column(column, justify=justify)
    for d in drill_report:
        title = KINDS[d.kind].title if d.kind in KINDS else d.kind
        table.add_row(title, d.topic, f"{d.mastery:.0%}", f"{d.accuracy:.0%}", str(d.attempts))
    return table
