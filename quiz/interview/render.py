"""The debrief as Rich renderables, the same in plain mode and in the app: scores per skill, the
working of every step, and what the simulation measured beside the answers and the model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from ddpfsdp.demos.result.schema import DemoResult, as_result
from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.interview import debrief
from ddpfsdp.quiz.interview.scenario import Scenario, Step, gb


def score_style(score: float) -> str:
    return "green" if score >= 0.7 else "yellow" if score >= 0.4 else "red"


def skills_table(scenario: Scenario, grades: dict[str, Grade]) -> Table:
    table = Table(title="Score per skill", title_justify="left", expand=True, show_edge=False, pad_edge=False)
    table.add_column("skill")
    table.add_column("steps", justify="right")
    table.add_column("answered", justify="right")
    table.add_column("score", justify="right")
    for row in debrief.skill_scores(scenario.steps, grades).values():
        table.add_row(row["title"], str(row["steps"]), str(row["answered"]),
                      Text(f"{row['score']:.0%}", style=score_style(row["score"])))
    return table


def verdict_mark(grade: Grade | None) -> Text:
    if grade is None:
        return Text("–", style="dim")
    if grade.self_grade is not None:
        return Text(grade.self_grade, style=score_style(grade.score))
    return Text("✔", style="bold green") if grade.correct else Text("✘", style="bold red")


def working_table(scenario: Scenario, grades: dict[str, Grade]) -> Table:
    table = Table(title="Every step, with the analytic model's working", title_justify="left", expand=True,
                  show_edge=False, pad_edge=False, show_lines=True)
    table.add_column("#", width=2, no_wrap=True)
    table.add_column("", width=5, no_wrap=True)
    table.add_column("step and working", ratio=1)
    for step in scenario.steps:
        grade = grades.get(step.id)
        text = Text.assemble((step.title, "bold"), f" ({step.skill})")
        if step.change:
            text.append(f"\nFollow-up: {step.change}", style="yellow")
        if step.unit == "explain":
            text.append("\nTalking points: " + " · ".join(step.talking_points))
        else:
            yours = grade.given.get("text") if grade is not None and isinstance(grade.given, dict) else None
            shown = (yours or 'skipped') if grade is not None else 'not reached'
            text.append(f"\nYou: {shown} · model: {step.answer_text}")
            text.append(f"\n{step.working}", style="dim")
        table.add_row(step.id, verdict_mark(grade), text)
    return table


def _figure(value: float | None) -> str:
    return "–" if value is None else gb(value)


def comparison_table(scenario: Scenario, grades: dict[str, Grade], result: DemoResult | Mapping[str, Any]) -> Table:
    result = as_result(result)
    config = result.config
    table = Table(title=f"Simulated: rank 0 of {config.world_size} ({config.model}, {config.precision}), "
                  "beside your answers and the analytic model", title_justify="left", expand=True, show_edge=False,
                  pad_edge=False)
    for column, justify in (("figure", "left"), ("you", "right"), ("model: scenario", "right"),
                            ("model: as simulated", "right"), ("simulated", "right"), ("diff", "right")):
        table.add_column(column, justify=justify)
    rows = debrief.compare(scenario, grades, result)
    for row in rows:
        diff = row.difference
        table.add_row(row.figure, _figure(row.yours), _figure(row.scenario), _figure(row.simulated_theory),
                      _figure(row.measured), "–" if diff is None else f"{diff:+.1%}")
    whys = "".join(f"\n{row.figure}: {row.why}" for row in rows if row.why)
    table.caption = ("diff: simulated against the model for what was simulated. Simulated, not measured on hardware: "
                     "real sharding, real collectives issued, real allocations of one step; no time." + whys)
    table.caption_justify = "left"
    return table


def simulation_block(scenario: Scenario) -> Group:
    sim = debrief.simulation(scenario)
    parts: list[Any] = [Text.assemble(("Measure it: ", "bold"), (sim.command, "bold cyan"))]
    parts += [Text(f"· {note}", style="dim") for note in sim.notes]
    return Group(*parts)


def prompt(step: Step, with_change: bool = True, with_options: bool = True) -> Group:
    """A step as it is asked: what changed (for a follow-up), the question, and its numbered options."""
    parts: list[Any] = []
    if step.change and with_change:
        parts.append(Text.assemble(("Follow-up: ", "bold yellow"), (step.change, "yellow")))
    parts.append(Markdown(step.prompt))
    if step.options and with_options:
        parts.append(options(step))
    return Group(*parts)


def options(step: Step, grade: Grade | None = None) -> Table:
    """The numbered options, each with its detail under it (dim); once graded, only the right one, ticked, and
    a wrong pick, crossed, without their details: the working below the verdict names every option with its
    figures, and needs the rows the list took (at 80x24 it was cut after three lines)."""
    picked = grade.given.get("value") if grade is not None and isinstance(grade.given, dict) else None
    table = Table.grid(padding=(0, 1))
    table.add_column(width=1, no_wrap=True)
    table.add_column(width=2, justify="right", no_wrap=True)
    table.add_column(ratio=1)
    for number, option in enumerate(step.options, start=1):
        if grade is not None and number not in (step.answer, picked):
            continue
        mark = Text(" ")
        if grade is not None and number == step.answer:
            mark = Text("✔", style="bold green")
        elif picked == number:
            mark = Text("✘", style="bold red")
        label = Text()
        label.append(option.text, style="bold" if picked == number else "")
        if picked == number and number != step.answer:
            label.append("  ← yours", style="italic")
        if option.detail and grade is None:
            label.append(f"\n{option.detail}", style="dim")
        table.add_row(mark, Text(f"{number}."), label)
    return table


def step_line(step: Step, total: int) -> str:
    return f"Step {step.id} of {total} · {step.title} · {step.skill} · graded {step.tolerance_text}"
