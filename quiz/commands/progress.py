"""`ddpfsdp progress`: attempts, accuracy and mastery by topic, weakest first."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--export", "export_to", type=click.Path(path_type=Path), metavar="FILE",
              help="Write every attempt, card, bookmark, kata event and saved result to FILE (JSON), to import "
                   "elsewhere.")
@click.option("--import", "import_from", type=click.Path(path_type=Path), metavar="FILE",
              help="Merge an export into this machine's progress: no attempt or kata event twice, the newer card "
                   "kept.")
@click.option("--reset", is_flag=True,
              help="Forget every attempt, card, bookmark and kata event (asks first; a backup is written and named).")
@click.option("--recover", "recover_from", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Bring back what can still be read from a damaged progress file (the ones moved aside, or FILE).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before --reset, and let --export replace FILE.")
def progress(as_json: bool, export_to: Path | None, import_from: Path | None, reset: bool, recover_from: str | None,
             yes: bool) -> None:
    """Show attempts, accuracy, mastery and cards due by topic, weakest first, mastery by question level,
    and sizing drills by kind; then readiness per interview skill and per topic, and the three things to
    study next.

    Each drill kind, each kind of interview step and each kata you have written (passed or given up)
    counts as one more card of its topic (`ddpfsdp drill`, `ddpfsdp interview`, `ddpfsdp kata`). Readiness is half FSRS mastery, half your recent
    mock-interview and interview scores, each in proportion to the answers behind it until there are 5.

    \b
    Examples:
      ddpfsdp progress --export progress.json    take your progress to another machine
      ddpfsdp progress --import progress.json    and merge it in there
      ddpfsdp progress --reset                   start again (a backup is kept)
      ddpfsdp progress --recover                 read back a damaged progress file's answers
    """
    actions = [name for name, given in (("--export", export_to is not None), ("--import", import_from is not None),
                                        ("--reset", reset), ("--recover", recover_from is not None)) if given]
    if len(actions) > 1:
        raise click.UsageError(f"{' and '.join(actions)} each do one thing; give one of them at a time")
    if actions and as_json:
        raise click.UsageError(f"--json prints the report; leave it out with {actions[0]}")
    if yes and not (reset or export_to is not None):
        raise click.UsageError("--yes goes with --reset or --export")
    if export_to is not None:
        _export(export_to, yes)
    elif import_from is not None:
        _import(import_from)
    elif reset:
        _reset(yes)
    elif recover_from is not None:
        _recover(Path(recover_from) if recover_from else None)
    else:
        _report(as_json)


def _open_for_writing():
    """The store, for a command that writes: a damaged file is moved aside, and that is said first."""
    from ddpfsdp.quiz.store import Store, StoreError

    try:
        store = Store.open()
    except StoreError as error:
        raise click.ClickException(str(error)) from None
    if store.warning:
        say(f"warning: {store.warning}")
    return store


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def say(text: str, err: bool = False) -> None:
    """Text wrapped to the terminal (80 columns at most); a line indented by two spaces (a command to
    copy) is kept whole."""
    import shutil
    import textwrap

    width = min(80, shutil.get_terminal_size((80, 24)).columns)
    lines = [line if line.startswith("  ") else textwrap.fill(line, width, break_long_words=False,
                                                              break_on_hyphens=False)
             for line in text.splitlines()]
    click.echo("\n".join(lines), err=err)


def _damaged_notice(error, readable) -> str:
    from ddpfsdp.quiz.store import RECOVER_COMMAND

    count = len(readable.attempts)
    return (f"warning: the progress file {error.path} is damaged ({error.reason}); it was left as it is. "
            f"{count} attempt{'s' if count != 1 else ''} can still be read from it, and the figures below are "
            f"theirs. To keep them and go on answering, run:\n  {RECOVER_COMMAND}")


def _export(path: Path, overwrite: bool) -> None:
    from ddpfsdp.quiz import portable
    from ddpfsdp.quiz.store import DamagedStore, Store, StoreError

    try:
        portable.check_writable(path, overwrite=overwrite)  # before reading anything: say it at once
        store = Store.open(move_damaged=False)
    except portable.PortableError as error:
        raise click.ClickException(f"{error}; nothing was written") from None
    except DamagedStore as error:
        raise click.ClickException(f"{error}; bring back what can be read with `ddpfsdp progress --recover`, "
                                   "then export") from None
    except StoreError as error:
        raise click.ClickException(str(error)) from None
    with store:
        document = portable.export_document(store)
    try:
        portable.write_json(path, document, overwrite=overwrite)
    except portable.PortableError as error:
        raise click.ClickException(str(error)) from None
    say(f"Wrote {_n(len(document['attempts']), 'attempt')}, {_n(len(document['cards']), 'card')}, "
        f"{_n(len(document['bookmarks']), 'bookmark')}, {_n(len(document['kata_events']), 'kata event')} and "
        f"{_n(len(document['demo_results']), 'saved result')} to {path}. On another machine, merge it in "
        f"with:\n  ddpfsdp progress --import {path.name}")


def _import(path: Path) -> None:
    from ddpfsdp.quiz import portable

    try:
        rows = portable.store_rows(portable.read_document(path), path)
    except portable.PortableError as error:
        raise click.ClickException(f"{error}. Nothing was imported") from None
    with _open_for_writing() as store:
        merged = store.merge(rows)
    say(f"Imported from {path}: {_n(merged.attempts, 'new attempt')} ({merged.attempts_known} already here), "
        f"{_n(merged.cards, 'card')} newer than this machine's ({merged.cards_kept} kept as they were), "
        f"{_n(merged.bookmarks, 'new bookmark')}, {_n(merged.kata_events, 'new kata event')} "
        f"({merged.kata_events_known} already here), {_n(merged.demo_results, 'saved result')}.")


def _reset(yes: bool) -> None:
    from ddpfsdp.quiz import portable
    from ddpfsdp.quiz.paths import data_dir

    with _open_for_writing() as store:
        held = portable.counts(store)
        if not (held["attempts"] or held["cards"] or held["bookmarks"] or held["kata_events"] or held["kata_files"]):
            say("There is no progress to reset: no attempts, cards, bookmarks or kata events.")
            return
        if not yes:
            try:
                click.confirm(f"Forget {_n(held['attempts'], 'attempt')}, {_n(held['cards'], 'card')}, "
                              f"{_n(held['bookmarks'], 'bookmark')} and {_n(held['kata_events'], 'kata event')}? "
                              "A backup is written first; saved demo results and your kata files stay.", abort=True)
            except click.Abort:
                raise click.ClickException("nothing was reset; answer y to reset, or add --yes") from None
        try:
            backup = portable.reset(store, data_dir())
        except portable.PortableError as error:
            raise click.ClickException(f"{error}; nothing was reset") from None
    say(f"Progress reset. The backup is {backup}; bring it back with:\n  ddpfsdp progress --import {backup}")


def _recover(path: Path | None) -> None:
    from ddpfsdp.quiz.paths import data_dir
    from ddpfsdp.quiz.recovery import damaged_files, read_damaged

    if path is not None and not path.is_file():
        raise click.BadParameter(f"{path} is not a file; give a damaged progress file, or leave FILE out to use the "
                                 f"ones moved aside in {data_dir()}", param_hint="'--recover'")
    with _open_for_writing() as store:
        sources = [path] if path is not None else damaged_files(data_dir())
        if not sources:
            say(f"No damaged progress file in {data_dir()}: nothing to recover.")
            return
        for source in sources:
            if store.path is not None and source.resolve() == store.path.resolve():
                raise click.BadParameter("that is the progress file in use; give a damaged copy",
                                         param_hint="'--recover'")
            readable = read_damaged(source)
            merged = store.merge(readable.rows)
            rows = readable.rows
            how = "through SQLite" if set(readable.how.values()) == {"SQLite"} else "from its pages"
            say(f"{source.name}: read {_n(len(rows.attempts), 'attempt')}, {_n(len(rows.cards), 'card')}, "
                f"{_n(len(rows.bookmarks), 'bookmark')}, {_n(len(rows.kata_events), 'kata event')} and "
                f"{_n(len(rows.demo_results), 'saved result')} ({how}). Brought back "
                f"{_n(merged.attempts, 'attempt')} ({merged.attempts_known} already here), "
                f"{_n(merged.cards, 'card')}, {_n(merged.bookmarks, 'bookmark')}, "
                f"{_n(merged.kata_events, 'kata event')} ({merged.kata_events_known} already here) and "
                f"{_n(merged.demo_results, 'saved result')}.")
        say("The damaged files are left where they are; delete them once your progress looks right.")


def _report(as_json: bool) -> None:
    from ddpfsdp.quiz import katas, readiness, scheduler
    from ddpfsdp.quiz.loader import BankError, load_bank
    from ddpfsdp.quiz.store import DamagedStore, Store, StoreError, utc_now

    try:
        bank = load_bank()
    except BankError as error:
        raise click.ClickException(f"the question bank has a problem: {error}") from None
    notice = None
    try:
        store = Store.open(move_damaged=False)
    except DamagedStore as error:
        from ddpfsdp.quiz.recovery import read_damaged

        # Read-only: the file stays where it is; what can be read from it is shown, and said to be so.
        readable = read_damaged(error.path)
        notice = _damaged_notice(error, readable)
        store = Store.memory()
        store.merge(readable.rows)
    except StoreError as error:
        raise click.ClickException(str(error)) from None
    if notice:
        say(notice, err=as_json)
    with store:
        now = utc_now()
        report = scheduler.progress(bank, store, now)
        by_level = scheduler.level_progress(bank, store, now)
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
            "levels": [p.to_dict() for p in by_level],
            "drills": [d.to_dict() for d in drill_report],
            "readiness": readiness.to_dict(ready),
            **({"warning": " ".join(notice.removeprefix("warning: ").split())} if notice else {}),
            "katas": [status.to_dict() for status in written],
        }, indent=2))
        return

    from ddpfsdp.quiz.plain_console import trimmed_console
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
    console = trimmed_console()
    console.print(table)
    console.print(_level_table(by_level))
    if drill_report:
        console.print(_drill_table(drill_report))
    console.print(readiness.render(ready))
    console.print(_katas_line(written))
    summary = (f"{total} attempt{'s' if total != 1 else ''}" + (f", {correct / total:.0%} correct" if total else "")
               + f"; {due} card{'s' if due != 1 else ''} due now.")
    if not total:
        summary += " Start with `ddpfsdp quiz`."
    elif not drill_report:
        summary += " Try the sizing drills: `ddpfsdp drill`."
    console.print(summary)


def _level_table(by_level):
    """Mastery by question level: how far up, from fundamentals to staff-level trade-offs, it holds."""
    from rich.table import Table

    table = Table(title="Progress by level (ddpfsdp quiz --level N studies one)", title_justify="left")
    table.add_column("level")
    for column in ("mastery", "", "accuracy", "attempts", "seen"):
        table.add_column(column, justify="right", no_wrap=not column)
    for p in by_level:
        bar = "█" * round(p.mastery * 10) + "░" * (10 - round(p.mastery * 10))
        table.add_row(f"{p.level} {p.name}", f"{p.mastery:.0%}", bar,
                      "–" if p.accuracy is None else f"{p.accuracy:.0%}", str(p.attempts), f"{p.seen}/{p.questions}")
    return table


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
