"""One question: the prompt as Markdown and the input its kind needs."""

from __future__ import annotations

import random

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Markdown, Static

from ddpfsdp.quiz import grading
from ddpfsdp.quiz.loader import LEVELS, Question
from ddpfsdp.quiz.widgets.choices import ChoiceList, OrderInput

KIND_NAMES = {
    "single": "one answer",
    "multi": "every right answer",
    "numeric": "a number with its unit",
    "order": "put the steps in order",
    "explain": "explain it aloud or in notes",
}


class QuestionScreen(Screen):
    BINDINGS = [
        Binding("enter", "submit", "Submit", priority=False),
        Binding("n", "skip", "Skip"),
        # n is a letter in a text box; ctrl+n skips from there too.
        Binding("ctrl+n", "skip", "Skip", show=False, priority=True),
        Binding("d", "evidence", "Evidence"),
        Binding("escape", "leave", "Home"),
        Binding("?", "app.help", "Help"),
        *(Binding(str(i), f"digit({i})", show=False) for i in range(1, 10)),
    ]

    def __init__(self, question: Question, *, rng: random.Random, position: str = ""):
        super().__init__()
        self.question = question
        self.position = position
        self.started_s = 0.0
        q = question
        self.display_choices = grading.shuffled(q.choices, rng) if q.kind in ("single", "multi") else []
        self.display_steps = grading.shuffled(q.steps, rng) if q.kind == "order" else []

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical(id="question"):
            yield Static(self._header(), id="question-header")
            with VerticalScroll(id="question-body"):
                yield Markdown(q.prompt, id="prompt")
                if q.kind in ("single", "multi"):
                    yield ChoiceList(self.display_choices, multi=q.kind == "multi", id="answer-input")
                elif q.kind == "order":
                    yield OrderInput(self.display_steps, id="answer-input")
                elif q.kind == "numeric":
                    yield Input(placeholder=grading.input_hint(q.unit), id="answer-input")
                else:
                    yield Input(placeholder="notes (optional): answer aloud, then Enter to compare with the model answer", id="answer-input")
            yield Static(self._hint(), id="question-hint")
            yield Static(id="question-error")
        yield Footer()

    def _header(self) -> Text:
        q = self.question
        topic = self.app.bank.topics[q.topic].title
        header = Text.assemble((topic, "bold"), f" · level {q.level} ({LEVELS[q.level]}) · {KIND_NAMES[q.kind]}")
        if q.spot_the_flaw:
            header.append(" · spot the flaw", style="bold magenta")
        if self.position:
            header.append(f"   {self.position}", style="dim")
        remaining = self.app.session_remaining_s()
        if remaining is not None:
            header.append(f"   ⏱ {int(remaining) // 60:02d}:{int(remaining) % 60:02d} left", style="bold yellow")
        return header

    def _hint(self) -> str:
        kind = self.question.kind
        evidence = "  ·  d: evidence" if self.question.demo else ""
        if kind == "single":
            return f"1–{len(self.display_choices)} choose  ·  Enter submit{evidence}  ·  ? help"
        if kind == "multi":
            return f"1–{len(self.display_choices)} toggle (choose every right one)  ·  Enter submit{evidence}  ·  ? help"
        if kind == "order":
            return f"press the steps' numbers in order  ·  backspace undo  ·  Enter submit{evidence}  ·  ? help"
        if kind == "numeric":
            return f"{grading.input_hint(self.question.unit)}  ·  Enter submit{evidence}"
        return f"Answer aloud as in an interview, then Enter reveals the model answer and you grade yourself{evidence}"

    def on_mount(self) -> None:
        self.started_s = self.app.monotonic()
        self.query_one("#answer-input").focus()
        if self.app.session_remaining_s() is not None:
            self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        remaining = self.app.session_remaining_s()
        self.query_one("#question-header", Static).update(self._header())
        if remaining is not None and remaining <= 0:
            self.app.end_session(timed_out=True)

    def action_digit(self, digit: int) -> None:
        widget = self.query_one("#answer-input")
        if isinstance(widget, (ChoiceList, OrderInput)):
            widget.press(digit - 1)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def _error(self, message: str) -> None:
        self.query_one("#question-error", Static).update(Text(message, style="bold red"))

    def action_submit(self) -> None:
        q = self.question
        widget = self.query_one("#answer-input")
        elapsed_s = max(0.0, self.app.monotonic() - self.started_s)
        if q.kind == "single":
            if not widget.value:
                self._error(f"Choose an answer first (1–{len(self.display_choices)}).")
                return
            grade = grading.grade_single(q, widget.value[0])
        elif q.kind == "multi":
            if not widget.value:
                self._error("Choose at least one answer (digits toggle).")
                return
            grade = grading.grade_multi(q, widget.value, self.display_choices)
        elif q.kind == "order":
            if not widget.complete:
                self._error(f"Place every step first: {len(q.steps) - len(widget.placed)} left.")
                return
            grade = grading.grade_order(q, widget.value)
        elif q.kind == "numeric":
            try:
                grade = grading.grade_numeric(q, widget.value)
            except grading.QuantityError as error:
                self._error(str(error))
                return
        else:
            self.app.reveal_explain(self, widget.value, elapsed_s)
            return
        self.app.answer(self, grade, elapsed_s, display_order=self.display_choices or self.display_steps)

    def action_skip(self) -> None:
        self.app.next_question()

    def action_evidence(self) -> None:
        if self.question.demo is None:
            self.app.notify("This question has no linked demo.")
            return
        from ddpfsdp.quiz.screens.evidence import EvidenceScreen

        self.app.push_screen(EvidenceScreen(self.question))

    def action_leave(self) -> None:
        self.app.leave_session()
