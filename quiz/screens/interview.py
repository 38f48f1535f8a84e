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
from textual.widgets import Collapsible, Input, Static

from ddpfsdp.quiz.grading import SELF_GRADES, Grade, QuantityError
from ddpfsdp.quiz.interview import answers, render
from ddpfsdp.quiz.interview.generate import FAMILIES
from ddpfsdp.quiz.interview.scenario import Scenario, Step
from ddpfsdp.quiz.messages import InterviewStepAnswered
from ddpfsdp.quiz.widgets.key_bar import KeyBar
from ddpfsdp.quiz.widgets.room import Room
from ddpfsdp.quiz.widgets.session_header import SessionHeader
from ddpfsdp.quiz.widgets.target_scroll import TargetScroll


def interview_title(scenario: Scenario) -> Text:
    """What the session header names (the job itself is on the summary line under it)."""
    return Text.assemble(("Interview", "bold"), f" · {FAMILIES[scenario.family].title}")


class InterviewScreen(Screen):
    """The question scrolls; the choices (of a choice step) and the answer stay in view under it."""

    DEFAULT_CSS = """
    #interview-summary { height: 1; padding: 0 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    #interview-change { height: auto; padding: 0 1; color: $warning; }
    #interview-body { height: auto; max-height: 3; }
    #interview-job { margin: 1 0 0 0; padding-bottom: 0; }
    #interview-title { height: auto; padding: 0 1; margin: 1 0 0 0; text-style: bold; }
    #interview-prompt, #interview-setup { height: auto; padding: 0 1; }
    #interview-result { height: auto; margin: 1 1 0 1; }
    #interview-choices { height: auto; padding: 0 1; margin: 1 0 0 0; }
    #interview-input { margin: 1 0 0 0; }
    InterviewScreen.-choices #interview-input { margin: 0; }
    #interview-error { display: none; height: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("enter", "submit", "Submit / Next", priority=False),
        Binding("ctrl+n", "skip", "Skip", priority=True),
        Binding("ctrl+o", "job", "The job", priority=True),
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
        self.job_fitted = False  # whether the first layout has decided if the job stays open

    @property
    def step(self) -> Step:
        return self.scenario.steps[self.index]

    def compose(self) -> ComposeResult:
        with Vertical(id="interview", classes="page"):
            yield SessionHeader(interview_title(self.scenario), position=self._position(), elapsed_s=self.elapsed_s,
                                id="interview-header")
            yield Static(self.scenario.setup.summary(), id="interview-summary")
            yield Static(id="interview-change")
            with TargetScroll(id="interview-body"):
                # The header names the family; the model and the cluster fit an 80-column title after it.
                what = self.scenario.title.removeprefix(f"{FAMILIES[self.scenario.family].title}: ")
                job = f"The job (seed {self.scenario.seed}): {what}"
                with Collapsible(title=job, collapsed=self.index > 0, id="interview-job"):
                    yield Static(Markdown(self.scenario.setup.describe()), id="interview-setup")
                yield Static(id="interview-title")
                yield Static(id="interview-prompt")
                yield Static(id="interview-result")
            yield Static(id="interview-choices")
            yield Input(placeholder=answers.PLACEHOLDERS[self.step.unit], id="interview-input")
            # Under the input it is about, so a mistake is read where it was made.
            yield Static(id="interview-error")
            yield Static(id="interview-hint", classes="muted")
            # What the parts above leave; the question's scroll grows into it, so the choices follow it.
            yield Room("#interview-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.interview_started_s = self.started_s = self.app.monotonic()
        self._show_step()

    def action_job(self) -> None:
        job = self.query_one("#interview-job", Collapsible)
        job.collapsed = not job.collapsed
        body = self.query_one("#interview-body", TargetScroll)
        body.show(job if not job.collapsed else self.query_one("#interview-title"), top=True)

    def elapsed_s(self) -> float:
        return self.app.monotonic() - self.interview_started_s

    def _position(self) -> str:
        right = sum(1 for g in self.grades.values() if g.correct)
        return f"step {self.index + 1} of {len(self.scenario.steps)} · {right}/{len(self.grades)} right"

    def _show_header(self) -> None:
        header = self.query_one("#interview-header", SessionHeader)
        header.position = self._position()
        header.refresh()

    def _hint(self) -> str:
        if self.grade is not None:
            last = self.index + 1 == len(self.scenario.steps)
            return f"Enter: {'the debrief' if last else 'next step'} · ↑↓ scroll · Esc home · ? help"
        if self.step.unit == "explain" and self.revealed:
            return "Grade yourself on the talking points: 1 again · 2 hard · 3 good · 4 easy"
        return f"{answers.hint(self.step)}; graded {self.step.tolerance_text}"

    def on_collapsible_expanded(self) -> None:
        # The job in full says what the one-line summary says.
        self.query_one("#interview-summary").display = False
        self._relayout()

    def on_collapsible_collapsed(self) -> None:
        self.query_one("#interview-summary").display = True
        self._relayout()

    def _show_step(self) -> None:
        step = self.step
        self._show_header()
        self.query_one("#interview-summary").display = self.query_one("#interview-job", Collapsible).collapsed
        self._fit_summary()
        follow = " · follow-up" if step.change else ""
        self.query_one("#interview-title", Static).update(f"Step {step.id}{follow} · {step.title} ({step.skill})")
        # What changed stays in view above the scrolling question, however long the question is.
        change = self.query_one("#interview-change", Static)
        change.update(Text.assemble(("Follow-up: ", "bold"), step.change or ""))
        change.display = bool(step.change)
        self.query_one("#interview-prompt", Static).update(render.prompt(step, with_change=False, with_options=False))
        self._show_choices()
        answer = self.query_one("#interview-input", Input)
        answer.display = True
        answer.disabled = False
        answer.value = ""
        answer.placeholder = answers.PLACEHOLDERS[step.unit]
        answer.focus()
        result = self.query_one("#interview-result", Static)
        result.update("")
        result.display = False  # an empty result would still take its margin
        self._error("")
        self.query_one("#interview-hint", Static).update(self._hint())
        self.started_s = self.app.monotonic()
        body = self.query_one("#interview-body", TargetScroll)
        if self.index == 0:
            body.show(self.query_one("#interview-job"), top=True)
        else:
            body.show(self.query_one("#interview-title"), top=True)
        self._relayout()

    def on_resize(self) -> None:
        self._fit_summary()
        self._relayout()

    def _fit_summary(self) -> None:
        summary = self.query_one("#interview-summary", Static)
        width = summary.content_region.width or self.size.width - 6  # the page's padding and its own
        summary.update(self.scenario.setup.summary(width))

    def _relayout(self) -> None:
        """A part around the question may have grown: let its scroll find its height again."""
        self.query_one(Room).shrink()

    def on_room_grown(self, event: Room.Grown) -> None:
        if not self.job_fitted:
            # Fold the job away when it and the first question do not fit together (80x24): the question must
            # be seen; the summary line stays, and ctrl+o opens the job.
            self.job_fitted = True
            if self.index == 0 and self.query_one("#interview-body").virtual_size.height > event.rows:
                self.query_one("#interview-job", Collapsible).collapsed = True

    def _show_choices(self) -> None:
        """A choice step's options, pinned above the answer; once graded, with the right one ticked."""
        choices = self.query_one("#interview-choices", Static)
        choices.display = bool(self.step.options)
        self.set_class(bool(self.step.options), "-choices")  # the answer sits right under its choices
        if self.step.options:
            choices.update(render.options(self.step, self.grade))

    def _scroll_to(self, widget) -> None:
        self.query_one("#interview-body", TargetScroll).show(widget, top=widget.id == "interview-result")

    def _error(self, message: str) -> None:
        error = self.query_one("#interview-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)
        # The message repeats the hint's advice; showing one of them keeps the question in view.
        self.query_one("#interview-hint").display = not message
        self._relayout()

    def on_input_changed(self, event: Input.Changed) -> None:
        # An error is about what was submitted; editing the answer puts the hint back.
        if self.query_one("#interview-error").display:
            self._error("")

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
        result.display = True
        self._scroll_to(result)
        self.query_one("#interview-input", Input).disabled = True
        self.query_one("#interview-body").focus()
        self.query_one("#interview-hint", Static).update(self._hint())
        self._relayout()

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
        self.app.post_message(InterviewStepAnswered(self.scenario, step, graded, max(0.0, self.app.monotonic() - self.started_s)))
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
        result.display = True
        self._scroll_to(result)
        self._error("")
        # The verdict repeats the answer; the working gets the room the answer box took.
        self.query_one("#interview-input", Input).display = False
        self._show_choices()
        self._show_header()
        self.query_one("#interview-hint", Static).update(self._hint())
        self.query_one("#interview-body").focus()
        self._relayout()

    def _advance(self) -> None:
        if self.index + 1 == len(self.scenario.steps):
            from ddpfsdp.quiz.screens.debrief import DebriefScreen

            self.app.switch_screen(DebriefScreen(self.scenario, self.grades, elapsed_s=self.elapsed_s()))
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
