"""The design interview: one step at a time, graded and explained before the next, then the debrief.

Every step is saved the moment it is graded (a skipped one as a miss), so leaving, quitting or a
killed process loses no finished step.
"""

from __future__ import annotations

from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Collapsible, Footer, Input, Static

from ddpfsdp.quiz.grading import SELF_GRADES, Grade, QuantityError
from ddpfsdp.quiz.interview import answers, render
from ddpfsdp.quiz.interview.generate import FAMILIES
from ddpfsdp.quiz.interview.scenario import Scenario, Step
from ddpfsdp.quiz.widgets.target_scroll import TargetScroll


def interview_header(scenario: Scenario, position: str, elapsed_s: float, right: int, answered: int) -> Text:
    """The interview's header line: what it is, where you are, and the time taken so far."""
    minutes, seconds = divmod(int(elapsed_s), 60)
    header = Text.assemble(("Interview", "bold"), f" · {FAMILIES[scenario.family].title} · {position}")
    header.append(f" · ⏱ {minutes:02d}:{seconds:02d}", style="bold yellow")
    header.append(f" · {right}/{answered} right", style="dim")
    return header


class InterviewScreen(Screen):
    DEFAULT_CSS = """
    #interview { height: 1fr; padding: 1 2 0 2; }
    #interview-header { padding: 0 1; background: $boost; }
    #interview-body { height: 1fr; }
    #interview-job { margin: 1 0 0 0; }
    #interview-title { height: auto; padding: 0 1; margin: 1 0 0 0; text-style: bold; }
    #interview-change { height: auto; padding: 0 1; color: $warning; }
    #interview-summary { height: auto; padding: 0 1; color: $text-muted; }
    #interview-prompt, #interview-setup { height: auto; padding: 0 1; }
    #interview-input { margin: 1 0; }
    #interview-result { height: auto; margin: 0 1; }
    #interview-hint { padding: 0 1; color: $text-muted; }
    #interview-error { height: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("enter", "submit", "Submit / Next", priority=False),
        Binding("ctrl+n", "skip", "Skip", priority=True),
        Binding("escape", "leave", "Home"),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
        Binding("?", "app.help", "Help"),
        *(Binding(str(i), f"self_grade({i})", show=False) for i in range(1, 5)),
    ]

    def __init__(self, scenario: Scenario):
        super().__init__()
        self.scenario = scenario
        self.index = 0
        self.grades: dict[str, Grade] = {}
        self.grade: Grade | None = None
        self.revealed = False
        self.started_s = 0.0
        self.interview_started_s = 0.0

    @property
    def step(self) -> Step:
        return self.scenario.steps[self.index]

    def compose(self) -> ComposeResult:
        with Vertical(id="interview"):
            yield Static(id="interview-header")
            yield Static(self.scenario.setup.summary(), id="interview-summary")
            yield Static(id="interview-change")
            with TargetScroll(id="interview-body"):
                job = f"The job (seed {self.scenario.seed}): {self.scenario.title}"
                with Collapsible(title=job, collapsed=self.index > 0, id="interview-job"):
                    yield Static(Markdown(self.scenario.setup.describe()), id="interview-setup")
                yield Static(id="interview-title")
                yield Static(id="interview-prompt")
                yield Input(placeholder=answers.PLACEHOLDERS[self.step.unit], id="interview-input")
                yield Static(id="interview-result")
            yield Static(id="interview-hint")
            yield Static(id="interview-error")
        yield Footer()

    def on_mount(self) -> None:
        self.interview_started_s = self.started_s = self.app.monotonic()
        self._show_step()
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.query_one("#interview-header", Static).update(self._header())

    def _header(self) -> Text:
        right = sum(1 for g in self.grades.values() if g.correct)
        position = f"step {self.index + 1}/{len(self.scenario.steps)}"
        return interview_header(self.scenario, position, self.app.monotonic() - self.interview_started_s, right,
                                len(self.grades))

    def _hint(self) -> str:
        if self.grade is not None:
            last = self.index + 1 == len(self.scenario.steps)
            return f"Enter: {'the debrief' if last else 'next step'}  ·  Esc home  ·  ? help"
        if self.step.unit == "explain" and self.revealed:
            return "Grade yourself against the talking points: 1 again · 2 hard · 3 good · 4 easy"
        return f"{answers.hint(self.step)}; graded {self.step.tolerance_text}"

    def _show_step(self) -> None:
        step = self.step
        self.query_one("#interview-header", Static).update(self._header())
        follow = " · follow-up" if step.change else ""
        self.query_one("#interview-title", Static).update(f"Step {step.id}{follow} · {step.title} ({step.skill})")
        # What changed stays in view above the scrolling question, however long the question is.
        change = self.query_one("#interview-change", Static)
        change.update(Text.assemble(("Follow-up: ", "bold"), step.change or ""))
        change.display = bool(step.change)
        self.query_one("#interview-prompt", Static).update(render.prompt(step, with_change=False))
        answer = self.query_one("#interview-input", Input)
        answer.disabled = False
        answer.value = ""
        answer.placeholder = answers.PLACEHOLDERS[step.unit]
        answer.focus()
        self.query_one("#interview-result", Static).update("")
        self._error("")
        self.query_one("#interview-hint", Static).update(self._hint())
        self.started_s = self.app.monotonic()
        self._scroll_to(answer)

    def _scroll_to(self, widget) -> None:
        self.query_one("#interview-body", TargetScroll).show(widget, top=widget.id == "interview-result")

    def _error(self, message: str) -> None:
        self.query_one("#interview-error", Static).update(Text(message, style="bold red"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def action_submit(self) -> None:
        if self.grade is not None:
            self._advance()
            return
        if self.step.unit == "explain":
            if not self.revealed:
                self._reveal()
            return
        try:
            graded = answers.grade(self.step, self.query_one("#interview-input", Input).value)
        except QuantityError as error:
            self._error(str(error))
            return
        self._graded(graded)

    def _reveal(self) -> None:
        self.revealed = True
        points = Text("Talking points\n", style="bold underline")
        for point in self.step.talking_points:
            points.append(f"• {point}\n", style="")
        result = self.query_one("#interview-result", Static)
        result.update(points)
        self._scroll_to(result)
        self.query_one("#interview-input", Input).disabled = True
        self.query_one("#interview-body").focus()
        self.query_one("#interview-hint", Static).update(self._hint())

    def action_self_grade(self, number: int) -> None:
        if self.step.unit != "explain" or not self.revealed or self.grade is not None:
            return
        notes = self.query_one("#interview-input", Input).value
        self._graded(answers.grade_explain(self.step, notes, SELF_GRADES[number - 1]))

    def action_skip(self) -> None:
        if self.grade is None:
            self._graded(answers.skipped(self.step))

    def _graded(self, graded: Grade) -> None:
        step = self.step
        self.grade = graded
        self.grades[step.id] = graded
        error = self.app.record_interview_step(self.scenario, step, graded, max(0.0, self.app.monotonic() - self.started_s))
        if error:
            self.app.notify(error, severity="error", timeout=10)
        good = graded.correct
        shown = Text.assemble(("✔ " if good else "✘ ", "bold green" if good else "bold red"), (graded.verdict, "bold"))
        if step.unit == "explain":
            shown.append("\n\nTalking points\n", style="bold underline")
            shown.append("\n".join(f"• {p}" for p in step.talking_points))
        else:
            shown.append("\n\nWorking\n", style="bold underline")
            shown.append(step.working)
        result = self.query_one("#interview-result", Static)
        result.update(shown)
        self._scroll_to(result)
        self._error("")
        self.query_one("#interview-input", Input).disabled = True
        self.query_one("#interview-header", Static).update(self._header())
        self.query_one("#interview-hint", Static).update(self._hint())
        self.query_one("#interview-body").focus()

    def _advance(self) -> None:
        if self.index + 1 == len(self.scenario.steps):
            from ddpfsdp.quiz.screens.debrief import DebriefScreen

            self.app.switch_screen(DebriefScreen(self.scenario, self.grades))
            return
        self.index += 1
        self.grade = None
        self.revealed = False
        if self.index == 1:
            self.query_one("#interview-job", Collapsible).collapsed = True
        self._show_step()

    def action_leave(self) -> None:
        self.app.pop_screen()
        self.app.notify(f"Interview left at step {self.index + 1} of {len(self.scenario.steps)}; "
                        f"{len(self.grades)} answered step{'s are' if len(self.grades) != 1 else ' is'} saved.",
                        title="Interview")

    def action_interrupt(self) -> None:
        self.app.notify(f"Every answered step is already saved ({len(self.grades)} so far). Escape leaves the "
                        "interview; ctrl+q quits the app.", title="Ctrl+C")
