"""One question: the prompt as Markdown and the input its kind needs."""

from __future__ import annotations

import random

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Markdown, Static

from ddpfsdp.quiz import grading
from ddpfsdp.quiz.loader import BYTE_UNITS, LEVELS, Bank, Question
from ddpfsdp.quiz.messages import AnswerGiven, ExplanationRevealed, NextQuestion, SessionEnded, SessionLeft
from ddpfsdp.quiz.widgets.choices import ChoiceList, OrderInput
from ddpfsdp.quiz.widgets.session_header import SessionHeader
from ddpfsdp.quiz.widgets.key_bar import KeyBar

KIND_NAMES = {
    "single": "one answer",
    "multi": "every right answer",
    "numeric": "a number with its unit",
    "order": "put the steps in order",
    "explain": "explain it aloud or in notes",
}


def question_title(bank: Bank, question: Question) -> Text:
    """'Memory math · one answer · level 2 (working knowledge)': what the session header names."""
    # Cut from the end when narrow, so the least needed part (the level) comes last.
    title = Text.assemble((bank.topics[question.topic].title, "bold"), f" · {KIND_NAMES[question.kind]}")
    if question.spot_the_flaw:
        title.append(" · spot the flaw", style="bold magenta")
    title.append(f" · level {question.level} ({LEVELS[question.level]})")
    return title


class QuestionScreen(Screen):
    CSS_PATH = "session.tcss"
    BINDINGS = [
        Binding("enter", "submit", "Submit", priority=False),
        Binding("n", "skip", "Skip"),
        # n is a letter in a text box; ctrl+n skips from there too.
        Binding("ctrl+n", "skip", "Skip", show=False, priority=True),
        Binding("d", "evidence", "Evidence"),
        # d is a letter in a text box; ctrl+o opens the evidence from there (the footer shows whichever works).
        Binding("ctrl+o", "evidence_from_text", "Evidence", priority=True),
        Binding("b", "bookmark", "Mark"),
        # b is a letter in a text box; ctrl+b marks from there.
        Binding("ctrl+b", "bookmark_from_text", "Mark", priority=True),
        Binding("escape", "leave", "Home"),
        Binding("?", "app.help", "Help"),
        *(Binding(str(i), f"digit({i})", show=False) for i in range(1, 10)),
    ]

    def __init__(self, question: Question, *, rng: random.Random, position: str = ""):
        super().__init__()
        self.question = question
        self.position = position
        self.started_s = 0.0
        self.answered = False  # posted to the app, which shows the feedback next: a second Enter is not a second answer
        q = question
        self.display_choices = grading.shuffled(q.choices, rng) if q.kind in ("single", "multi") else []
        self.display_steps = grading.shuffled(q.steps, rng) if q.kind == "order" else []

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical(id="question", classes="page"):
            yield SessionHeader(question_title(self.app.bank, q), position=self.position,
                                remaining_s=self.app.session_remaining_s, id="question-header")
            with VerticalScroll(id="question-body"):
                yield Markdown(q.prompt, id="prompt")
                if q.kind in ("single", "multi"):
                    yield ChoiceList(self.display_choices, multi=q.kind == "multi", id="answer-input")
                elif q.kind == "order":
                    yield OrderInput(self.display_steps, id="answer-input")
                elif q.kind == "numeric":
                    yield Input(placeholder=grading.input_placeholder(q.unit), id="answer-input")
                else:
                    yield Input(placeholder="notes (optional); Enter shows the model answer", id="answer-input")
                # Under the input it is about, so a mistake is read where it was made.
                yield Static(id="question-error")
            yield Static(self._hint(), id="question-hint", classes="muted")
        yield KeyBar()

    def _hint(self) -> str:
        """The keys for this kind, short enough for one line at 80 columns."""
        q = self.question
        evidence = (f" · {'ctrl+o' if self._typed else 'd'} evidence") if q.demo else ""
        count = len(self.display_choices)
        if q.kind == "single":
            return f"1–{count} choose · Enter submit{evidence} · ? help"
        if q.kind == "multi":
            return f"1–{count} toggle every right one · Enter submit{evidence} · ? help"
        if q.kind == "order":
            return f"digits place the steps in order · backspace undo · Enter submit{evidence}"
        if q.kind == "numeric":
            bare = f"a bare small number is read in {q.unit} · " if q.unit in BYTE_UNITS else ""
            return f"{bare}Enter submit{evidence} · ? help"
        return f"Answer aloud; Enter shows the model answer, then grade yourself{evidence}"

    def on_mount(self) -> None:
        self.started_s = self.app.monotonic()
        # The question opens at its text: on a short terminal, focusing the answer would scroll past it.
        self.query_one("#answer-input").focus(scroll_visible=False)

    def on_session_header_time_up(self, event: SessionHeader.TimeUp) -> None:
        self.app.post_message(SessionEnded(timed_out=True))

    def action_digit(self, digit: int) -> None:
        widget = self.query_one("#answer-input")
        if isinstance(widget, (ChoiceList, OrderInput)):
            widget.press(digit - 1)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def _error(self, message: str) -> None:
        error = self.query_one("#question-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)
        if message:
            self.call_after_refresh(error.scroll_visible)

    def action_submit(self) -> None:
        if self.answered:
            return
        q = self.question
        widget = self.query_one("#answer-input")
        elapsed_s = max(0.0, self.app.monotonic() - self.started_s)
        if q.kind == "single":
            if not widget.value:
                self._error(f"Choose an answer first (1–{len(self.display_choices)}).")
                return
            grade = grading.grade_single(q, widget.value[0], self.display_choices)
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
            self.answered = True
            self.app.post_message(ExplanationRevealed(q, widget.value, elapsed_s))
            return
        self.answered = True
        self.app.post_message(AnswerGiven(q, grade, elapsed_s, self.display_choices or self.display_steps))

    def action_skip(self) -> None:
        self.app.post_message(NextQuestion())

    @property
    def _typed(self) -> bool:
        """Whether the answer is a text box, where letters are typed rather than pressed as keys."""
        return self.question.kind not in ("single", "multi", "order")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("evidence", "evidence_from_text") and self.question.demo is None:
            return False  # no demo is linked: the footer offers no evidence
        if action == "evidence":
            return not self._typed
        if action == "evidence_from_text":
            return self._typed
        if action == "bookmark":
            return not self._typed
        if action == "bookmark_from_text":
            return self._typed
        return True

    def action_bookmark(self) -> None:
        from ddpfsdp.quiz.messages import BookmarkToggled

        self.app.post_message(BookmarkToggled(self.question.id))

    def action_bookmark_from_text(self) -> None:
        self.action_bookmark()

    def action_evidence_from_text(self) -> None:
        self.action_evidence()

    def action_evidence(self) -> None:
        if self.question.demo is None:
            self.app.notify("This question has no linked demo.")
            return
        from ddpfsdp.quiz.screens.evidence import EvidenceScreen

        self.app.push_screen(EvidenceScreen(self.question))

    def action_leave(self) -> None:
        self.app.post_message(SessionLeft())
