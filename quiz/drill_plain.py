"""`ddpfsdp drill --plain`: sizing drills line by line on stdin/stdout.

It grades and saves exactly as the app's drill screen does (same problems, grading and store);
every answer is committed as soon as it is graded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime

from rich.console import Console
from rich.markdown import Markdown
from rich.rule import Rule

from ddpfsdp.quiz import drill as drills
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.grading import QuantityError
from ddpfsdp.quiz.plain import open_store
from ddpfsdp.quiz.plain_console import plain_console, titled_rule
from ddpfsdp.quiz.plain_input import Quit, Skip, read
from ddpfsdp.quiz.store import Store, utc_now


def run_drill_plain(
    *,
    seed: int | None = None,
    kinds: Iterable[str] | None = None,
    count: int | None = None,
    console: Console | None = None,
    store: Store | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> int:
    console = console or plain_console()
    store = open_store(console, store)
    if store is None:
        return 1
    drill = drills.Drill(seed, kinds)
    console.print(
        f"[bold]ddpfsdp drill[/] (seed {drill.seed}): sizing problems answered by the analytic model. "
        "Type [bold]s[/] to skip, [bold]q[/] to stop; every answer is saved as you go."
    )
    answered = right = 0
    while count is None or drill.count < count:
        problem = next(drill)
        if drill.note:
            console.print(f"[yellow]{drill.note}[/]", highlight=False)
        titled_rule(console, f"{drill.count} · {drills.KINDS[problem.kind].title} · {problem.topic}")
        console.print(Markdown(problem.prompt))
        console.print(f"[dim]{problem.hint}; graded {problem.tolerance_text}[/]")
        started = time.monotonic()
        try:
            while True:
                try:
                    grade = drills.grade(problem, read(console))
                    break
                except QuantityError as error:
                    console.print(f"[red]{error}[/]", markup=True, highlight=False)
        except Skip:
            console.print(f"Skipped (not saved). The answer: {problem.answer_text}.", highlight=False)
            _show_working(console, problem)
            continue
        except Quit:
            break
        elapsed_s = time.monotonic() - started
        try:
            scheduler.record_answer(store, scheduler.drill_card(problem.kind, problem.topic), grade,
                                    time_s=elapsed_s, now=clock(), mode="drill")
        except Exception as error:  # noqa: BLE001 - the person must hear about it, and keep going
            console.print(f"[red]This answer could not be saved: {error}[/]")
        answered += 1
        right += grade.correct
        style = "bold green" if grade.correct else "bold red"
        console.print(f"[{style}]{'✔' if grade.correct else '✘'} {grade.verdict}[/]", highlight=False)
        if not grade.correct:
            _show_working(console, problem)
    console.print(Rule())
    if answered:
        console.print(f"{answered} answered, {right} right ({right / answered:.0%}). Progress is saved; see it with `ddpfsdp progress`.")
    else:
        console.print("No answers this time.")
    return 0


def _show_working(console: Console, problem: drills.Problem) -> None:
    console.print("[bold]Working:[/]")
    console.print(problem.working, markup=False, highlight=False)
