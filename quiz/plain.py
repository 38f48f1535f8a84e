"""`ddpfsdp quiz --plain`: the quiz line by line on stdin/stdout, for small terminals and screen readers.

It grades, saves and schedules exactly as the app does (same grading, store and scheduler); only
the showing differs. Every answer is committed as soon as it is graded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime

from rich.console import Console
from rich.markdown import Markdown
from rich.rule import Rule

from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz import grading, scheduler
from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.levels import LevelRange
from ddpfsdp.quiz.loader import Bank, Question
from ddpfsdp.quiz.plain_console import plain_console
from ddpfsdp.quiz.plain_input import Quit, Skip, read
from ddpfsdp.quiz.store import Store, StoreError, utc_now


def open_store(console: Console, store: Store | None = None) -> Store | None:
    """The progress store, with any warning about it printed; None (said why) when it cannot open."""
    try:
        store = store or Store.open()
    except StoreError as error:
        console.print(f"[red]The progress file cannot be opened:[/] {error}")
        return None
    if store.warning:
        console.print(f"[yellow]warning:[/] {store.warning}")
    return store


def run_plain(
    bank: Bank,
    *,
    topic: str | None = None,
    review: bool = False,
    mock: bool = False,
    seed: int | None = None,
    console: Console | None = None,
    store: Store | None = None,
    clock: Callable[[], datetime] = utc_now,
    bookmarked: bool = False,
    levels: LevelRange | None = None,
) -> int:
    if levels is not None:
        bank = levels.restrict(bank)
    console = console or plain_console()
    store = open_store(console, store)
    if store is None:
        return 1
    rng = random.Random(seed)
    now = clock()
    if bookmarked:
        questions, mode = [bank.questions[q] for q in store.bookmarks() if q in bank.questions], "practice"
        if not questions:
            console.print("No bookmarked questions yet. Bookmark one with b on a question in the app, or with "
                          "`ddpfsdp quiz --bookmark ID` (find ids with `ddpfsdp quiz --search WORDS`).")
            return 0
    elif review:
        questions, mode = scheduler.due_questions(bank, store, now), "review"
    elif mock:
        questions, mode = scheduler.mock_interview(bank, rng), "mock"
    else:
        questions, mode = scheduler.practice_queue(bank, store, now, topic), "practice"
    if not questions:
        console.print("Nothing is due for review now. Try `ddpfsdp quiz --plain --topic TOPIC`; topics: " + ", ".join(bank.topics))
        return 0
    console.print(f"[bold]ddpfsdp quiz[/] ({mode}): {len(questions)} questions. Type [bold]s[/] to skip, [bold]q[/] to stop; every answer is saved as you go.")
    results: list[Grade] = []
    for index, question in enumerate(questions, start=1):
        try:
            grade = _ask(console, question, index, len(questions), rng, store, clock, mode)
        except Skip:
            console.print("Skipped: it stays unanswered, and comes back in a later session.")
            continue
        except Quit:
            break
        if grade is not None:
            results.append(grade)
    right = sum(1 for g in results if g.correct)
    console.print(Rule())
    if results:
        console.print(f"{len(results)} answered, {right} right ({right / len(results):.0%}). Progress is saved; see it with `ddpfsdp progress`.")
    else:
        console.print("No answers this time.")
    return 0


def _digits(text: str, count: int) -> list[int] | None:
    parts = text.replace(",", " ").split()
    if len(parts) == 1 and parts[0].isdigit() and len(parts[0]) > 1 and count < 10:
        parts = list(parts[0])  # "312" is read as 3, 1, 2
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        return None
    if not numbers or any(not 1 <= n <= count for n in numbers):
        return None
    return [n - 1 for n in numbers]


def _ask(console: Console, q: Question, index: int, total: int, rng: random.Random, store: Store, clock, mode: str) -> Grade | None:
    console.print(Rule(f"{index}/{total} · {q.topic} · level {q.level} · {q.kind}", align="left"))
    if q.spot_the_flaw:
        console.print("[magenta]Spot the flaw.[/]")
    console.print(Markdown(q.prompt))
    started = time.monotonic()
    if q.kind in ("single", "multi"):
        order = grading.shuffled(q.choices, rng)
        for number, choice in enumerate(order, start=1):
            console.print(f"  {number}. {choice}", markup=False)
        ask = "Your answer (a number)" if q.kind == "single" else "Your answers (numbers separated by spaces)"
        while True:
            picked = _digits(read(console, ask), len(order))
            if picked is not None and (q.kind == "multi" or len(picked) == 1):
                break
            console.print(f"[red]Type {'one number' if q.kind == 'single' else 'numbers'} from 1 to {len(order)}.[/]")
        chosen = [order[i] for i in picked]
        grade = grading.grade_single(q, chosen[0], order) if q.kind == "single" else grading.grade_multi(q, chosen, order)
    elif q.kind == "order":
        order = grading.shuffled(q.steps, rng)
        for number, step in enumerate(order, start=1):
            console.print(f"  {number}. {step}", markup=False)
        while True:
            picked = _digits(read(console, "The steps in order (e.g. 3 1 2)"), len(order))
            if picked is not None and sorted(picked) == list(range(len(order))):
                break
            console.print(f"[red]Give each number from 1 to {len(order)} once, in order.[/]")
        grade = grading.grade_order(q, [order[i] for i in picked])
    elif q.kind == "numeric":
        console.print(f"[dim]{grading.input_hint(q.unit)}[/]")
        while True:
            try:
                grade = grading.grade_numeric(q, read(console, "Your answer"))
                break
            except grading.QuantityError as error:
                console.print(f"[red]{error}[/]")
    else:
        notes = read(console, "Answer aloud, or type notes; Enter reveals the model answer")
        console.print("[bold]What an interviewer listens for:[/]")
        for point in q.talking_points:
            console.print(f"  • {point}", markup=False)
        _show_answer(console, q)
        while True:
            picked = _digits(read(console, "Grade yourself: 1 Again, 2 Hard, 3 Good, 4 Easy"), 4)
            if picked is not None and len(picked) == 1:
                break
            console.print("[red]Type 1, 2, 3 or 4.[/]")
        grade = grading.grade_explain(q, notes, grading.SELF_GRADES[picked[0]])
    elapsed_s = time.monotonic() - started
    _save(console, store, q, grade, elapsed_s, clock(), mode)
    if q.kind != "explain":
        style = "bold green" if grade.correct else "bold red"
        console.print(f"[{style}]{'✔' if grade.correct else '✘'} {grade.verdict}[/]", markup=True, highlight=False)
        if q.kind in ("single", "multi"):
            _show_choices(console, q, grade, order)
        elif q.kind == "order" and not grade.correct:
            _show_steps(console, q, grade)
        _show_answer(console, q)
    _show_evidence(console, q, store)
    return grade


def _save(console: Console, store: Store, q: Question, grade: Grade, elapsed_s: float, now: datetime, mode: str) -> None:
    try:
        scheduler.record_answer(store, q, grade, time_s=elapsed_s, now=now, mode=mode)
    except Exception as error:  # noqa: BLE001 - the person must hear about it, and keep going
        console.print(f"[red]This answer could not be saved: {error}[/]")


def _show_choices(console: Console, q: Question, grade: Grade, order: list[str]) -> None:
    """Every choice as it was shown, marked right (✔) or picked wrongly (✘), each with its reason."""
    for item in grading.review_choices(q, grade, order):
        mark = "✔" if item.right else "✘" if item.picked else " "
        yours = "  <- yours" if item.picked else ""
        console.print(f"{mark} {item.number}. {item.text}{yours}", markup=False)
        if item.reason:
            console.print(f"     {item.reason}", markup=False)


def _show_steps(console: Console, q: Question, grade: Grade) -> None:
    """The right order, each misplaced step with what was put there and why the step belongs there."""
    for step in grading.review_steps(q, grade):
        console.print(f"{'✔' if step.in_place else '✘'} {step.number}. {step.text}", markup=False)
        if not step.in_place:
            console.print(f"     you put: {step.yours}", markup=False)
            if step.reason:
                console.print(f"     why here: {step.reason}", markup=False)


def _show_answer(console: Console, q: Question) -> None:
    console.print("[bold underline]Model answer[/]")
    try:
        console.print(Markdown(q.model_answer()))
    except OSError as error:
        console.print(f"[red]The model answer {q.answer_file} could not be read ({error.strerror}).[/]")
    if q.kata is not None:
        console.print(f"[bold]Write it yourself:[/] ddpfsdp kata start {q.kata}", highlight=False)


def _show_evidence(console: Console, q: Question, store: Store) -> None:
    if q.demo is None:
        return
    saved = store.last_demo_result(q.demo.name, list(q.demo.args))
    if saved is None:
        console.print(f"[dim]Evidence: not measured here yet. Run it: {q.demo.command()}[/]")
        return
    console.print(f"[bold]Evidence[/] (last measured {ev.age(saved.saved_at, utc_now())}, {ev.where(saved.result)}):")
    items = ev.evidence(q, saved.result) if q.evidence else ev.all_checks(saved.result)
    for item in items:
        mark = "–" if item.not_judged else "?" if item.passed is None else "✔" if item.passed else "✘"
        console.print(f"  {mark} {item.name}: {item.detail}", markup=False)
