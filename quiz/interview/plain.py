"""`ddpfsdp interview --plain`: the interview line by line on stdin/stdout.

It grades and saves exactly as the app does: each step is committed the moment it is graded, so
stopping (q, end of input, Ctrl+C, or a killed process) loses no finished step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markdown import Markdown
from rich.prompt import Prompt
from rich.rule import Rule
from rich.text import Text

from ddpfsdp.quiz.grading import SELF_GRADES, Grade, QuantityError
from ddpfsdp.quiz.interview import answers, debrief, render
from ddpfsdp.quiz.interview.scenario import Scenario, Step
from ddpfsdp.demos.base.prose import Prose
from ddpfsdp.quiz.plain import open_store
from ddpfsdp.quiz.plain_console import plain_console, titled_rule
from ddpfsdp.quiz.plain_input import Quit, Skip, read
from ddpfsdp.quiz.store import Store, utc_now

if TYPE_CHECKING:
    from ddpfsdp.demos.result.schema import DemoResult


def _ask(console: Console, step: Step) -> Grade:
    if step.unit == "explain":
        notes = read(console, "Your notes (Enter when done)")
        console.print("[bold]Talking points:[/]")
        for point in step.talking_points:
            console.print(f"  • {point}", markup=False, highlight=False)
        while True:
            grade = read(console, "Grade yourself: 1 again, 2 hard, 3 good, 4 easy").lower()
            named = SELF_GRADES[int(grade) - 1] if grade in ("1", "2", "3", "4") else grade
            if named in SELF_GRADES:
                return answers.grade_explain(step, notes, named)
            console.print("[red]Type 1, 2, 3 or 4 (again, hard, good, easy).[/]")
    while True:
        try:
            return answers.grade(step, read(console))
        except QuantityError as error:
            console.print(f"[red]{error}[/]", markup=True, highlight=False)


def _show(console: Console, step: Step, grade: Grade) -> None:
    style = "bold green" if grade.correct else "bold red"
    mark = "✔" if grade.correct else "✘"
    console.print(f"[{style}]{mark} {grade.verdict}[/]", highlight=False)
    if step.working:
        # One Text, so rich wraps the label and the working together, at spaces, to the console's width.
        console.print(Text.assemble(("Working:", "bold"), " ", step.working), highlight=False)


def run_interview_plain(
    scenario: Scenario,
    *,
    console: Console | None = None,
    store: Store | None = None,
    clock: Callable[[], datetime] = utc_now,
    runner: Callable[[str, list[str]], Any] | None = None,
) -> int:
    console = console or plain_console()
    store = open_store(console, store)
    if store is None:
        return 1
    console.print(f"[bold]ddpfsdp interview[/] · {scenario.title} (seed {scenario.seed})")
    console.print(Markdown(scenario.setup.describe()))
    console.print("[dim]Each step is graded and saved as you go; type s to skip (a skipped step counts as a miss), "
                  "q to stop.[/]")
    grades: dict[str, Grade] = {}
    for step in scenario.steps:
        titled_rule(console, render.step_line(step, len(scenario.steps)))
        console.print(render.prompt(step))
        console.print(f"[dim]{answers.hint(step)}[/]")
        started = time.monotonic()
        try:
            grade = _ask(console, step)
        except Skip:
            grade = answers.skipped(step)
        except Quit:
            console.print(Prose(Text(f"Stopped at step {step.id} of {len(scenario.steps)}. {len(grades)} answered step"
                                     f"{'s are' if len(grades) != 1 else ' is'} saved; `{again(scenario)}` starts this "
                                     "scenario again.")), crop=False)
            return 0
        grades[step.id] = grade
        try:
            answers.record(store, scenario, step, grade, time_s=time.monotonic() - started, now=clock())
        except Exception as error:  # noqa: BLE001 - the person must hear about it, and keep going
            console.print(f"[red]This step could not be saved: {error}[/]")
        _show(console, step, grade)
    _debrief(console, scenario, grades, runner)
    return 0


def again(scenario: Scenario) -> str:
    return f"ddpfsdp interview --seed {scenario.seed} --family {scenario.family}"


def _debrief(console: Console, scenario: Scenario, grades: dict[str, Grade], runner) -> None:
    console.print(Rule("Debrief"))
    console.print(f"[bold]Overall {debrief.overall(scenario.steps, grades):.0%}[/] over {len(scenario.steps)} steps.")
    console.print(render.skills_table(scenario, grades))
    console.print(render.working_table(scenario, grades))
    console.print(render.simulation_block(scenario))
    if runner is None:
        return
    try:
        choice = Prompt.ask("Type r to run the simulation now, Enter to finish", console=console, default="",
                            show_default=False)
    except (EOFError, KeyboardInterrupt):
        return
    if choice.strip().lower() == "r":
        sim = debrief.simulation(scenario)
        result = _simulate(console, runner, sim)
        if result is not None:
            console.print(render.comparison_table(scenario, grades, result))


def _simulate(console: Console, runner, sim: debrief.Simulation) -> DemoResult | None:
    console.print(f"Running {sim.command} … (Ctrl+C stops it)")
    run = runner(sim.demo, list(sim.args))
    try:
        for event in run.events():
            if event.get("event") == "log":
                console.print(f"[dim]{event.get('message', '')}[/]", highlight=False)
    except KeyboardInterrupt:
        run.cancel()
        console.print("Stopped; nothing was measured.")
        return None
    if run.result is None:
        console.print(f"[red]The simulation failed: {(run.error or {}).get('message', 'no result')}[/]")
    return run.result
