"""The sizing drill: one generated problem at a time, graded with units, the working shown on a miss."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Input, Markdown, Static

from ddpfsdp.quiz import drill as drills
from ddpfsdp.quiz import grading
from ddpfsdp.quiz.grading import Grade, QuantityError
from ddpfsdp.quiz.messages import DrillAnswered
from ddpfsdp.quiz.widgets.session_header import SessionHeader
from ddpfsdp.quiz.widgets.key_bar import KeyBar
from ddpfsdp.quiz.widgets.target_scroll import TargetScroll


class DrillScreen(Screen):
    CSS_PATH = "session.tcss"
    BINDINGS = [
        Binding("enter", "submit", "Submit / Next", priority=False),
        Binding("n", "next", "Next"),
        # n is a letter in the answer box; ctrl+n skips from there too.
        Binding("ctrl+n", "next", "Skip", show=False, priority=True),
        Binding("escape", "leave", "Home"),
        Binding("?", "app.help", "Help"),
    ]

    def __init__(self, *, seed: int, kinds: tuple[str, ...] | None = None):
        super().__init__()
        self.drill = drills.Drill(seed, kinds)
        self.problem = next(self.drill)
        self.grade: Grade | None = None
        self.answered = 0
        self.right = 0
        self.started_s = 0.0

    def compose(self) -> ComposeResult:
        with Vertical(id="drill", classes="page"):
            yield SessionHeader(self._title(), position=self._position(), id="drill-header")
            with TargetScroll(id="drill-body"):
                yield Markdown(self.problem.prompt, id="drill-prompt")
                yield Input(placeholder=self._placeholder(), id="drill-input")
                yield Static(id="drill-error")
                yield Static(id="drill-result")
            yield Static(self._hint(), id="drill-hint", classes="muted")
        yield KeyBar()

    def on_mount(self) -> None:
        self.started_s = self.app.monotonic()
        self.query_one("#drill-input", Input).focus()

    def _title(self) -> Text:
        problem = self.problem
        kind = drills.KINDS[problem.kind]
        return Text.assemble(("Sizing drill", "bold"), f" · {kind.title} · topic {problem.topic} · graded {problem.tolerance_text} · seed {self.drill.seed}")

    def _position(self) -> str:
        return f"problem {self.drill.count} · {self.right}/{self.answered} right"

    def _show_header(self) -> None:
        header = self.query_one("#drill-header", SessionHeader)
        header.title, header.position = self._title(), self._position()
        header.refresh()

    def _placeholder(self) -> str:
        if self.problem.answers:
            return self.problem.answers[2]
        if self.problem.base_unit == "bytes":
            return grading.input_placeholder(self.problem.unit)
        return "a whole number, e.g. 12"

    def _hint(self) -> str:
        if self.grade is None:
            bare = f"a bare small number is read in {self.problem.unit} · " if self.problem.base_unit == "bytes" else ""
            return f"{bare}Enter submit · ctrl+n skip · Esc home"
        return "n or Enter: next problem · Esc home · ? help"

    def _result(self, result: Text | None) -> None:
        # An empty result would still take its margin, the line a long prompt needs at 80x24.
        shown = self.query_one("#drill-result", Static)
        shown.update(result or "")
        shown.display = result is not None
        body = self.query_one("#drill-body", TargetScroll)
        if result is None:
            body.show(self.query_one("#drill-prompt"), top=True)
        else:
            body.show(shown, top=True)  # the verdict and its working, under a prompt too long to share the screen

    def _error(self, message: str) -> None:
        error = self.query_one("#drill-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)
        if message:
            self.call_after_refresh(error.scroll_visible)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def action_submit(self) -> None:
        if self.grade is not None:
            self.action_next()
            return
        answer = self.query_one("#drill-input", Input)
        try:
            grade = drills.grade(self.problem, answer.value)
        except QuantityError as error:
            self._error(str(error))
            return
        elapsed_s = max(0.0, self.app.monotonic() - self.started_s)
        self.grade = grade
        self.answered += 1
        self.right += grade.correct
        self.app.post_message(DrillAnswered(self.problem, grade, elapsed_s))
        result = Text.assemble(("✔ " if grade.correct else "✘ ", "bold green" if grade.correct else "bold red"), (grade.verdict, "bold"))
        if not grade.correct:
            result.append("\n\nWorking\n", style="bold underline")
            result.append(self.problem.working)
        self._result(result)
        self._error("")
        answer.disabled = True
        self._show_header()
        self.query_one("#drill-hint", Static).update(self._hint())
        self.query_one("#drill-body").focus()

    def action_next(self) -> None:
        self.problem = next(self.drill)
        if self.drill.note:
            self.app.notify(self.drill.note, title="Sizing drill")
        self.grade = None
        self.query_one("#drill-prompt", Markdown).update(self.problem.prompt)
        answer = self.query_one("#drill-input", Input)
        answer.disabled = False
        answer.value = ""
        answer.placeholder = self._placeholder()
        self._result(None)
        self._error("")
        self._show_header()
        self.query_one("#drill-hint", Static).update(self._hint())
        answer.focus()
        self.started_s = self.app.monotonic()

    def action_leave(self) -> None:
        self.app.pop_screen()
        if self.answered:
            self.app.notify(f"Drill: {self.right} of {self.answered} right. Every answer is saved.", title="Sizing drill")
