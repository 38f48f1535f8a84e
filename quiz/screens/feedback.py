"""Feedback: the verdict, the model answer, and the evidence panel (saved result, live re-run).

For an `explain` question this screen is where the answer is revealed: the talking points and the
model answer are shown, and the person grades themselves 1–4; the attempt is saved then.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Markdown, Static

from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz import grading
from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.loader import Question
from ddpfsdp.quiz.messages import DemoFinished, ExplanationGraded, NextQuestion, SessionLeft
from ddpfsdp.quiz.screens.question import question_title
from ddpfsdp.quiz.widgets.session_header import SessionHeader
from ddpfsdp.quiz.widgets.key_bar import KeyBar


class FeedbackScreen(Screen):
    CSS_PATH = "session.tcss"
    BINDINGS = [
        Binding("n", "next", "Next"),
        Binding("d", "show_evidence", "Evidence"),
        Binding("r", "run_demo", "Run demo", show=False),
        # One key, named for what it does now: the footer says "Cancel demo" only while one runs.
        Binding("escape", "cancel_demo", "Cancel demo"),
        Binding("escape", "escape", "Home"),
        Binding("?", "app.help", "Help"),
        Binding("g", "glossary", "Glossary", show=False),
        *(Binding(str(i), f"self_grade({i})", show=False) for i in range(1, 5)),
    ]

    def __init__(
        self,
        question: Question,
        grade: Grade | None,
        *,
        display_order: list[str] | None = None,
        notes: str = "",
        elapsed_s: float = 0.0,
        position: str = "",
        save_error: str | None = None,
    ):
        super().__init__()
        self.question = question
        self.grade = grade
        self.display_order = display_order or []
        self.notes = notes
        self.elapsed_s = elapsed_s
        self.position = position
        self.save_error = save_error

    @property
    def awaiting_self_grade(self) -> bool:
        return self.question.kind == "explain" and self.grade is None

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical(id="feedback", classes="page"):
            yield SessionHeader(question_title(self.app.bank, q), position=self.position,
                                remaining_s=self.app.session_remaining_s, id="feedback-header")
            yield Static(self._verdict(), id="verdict")
            with VerticalScroll(id="feedback-body"):
                detail = self._detail()
                if detail is not None:
                    yield Static(detail, id="answer-detail")
                if q.kind == "numeric":
                    yield Static(id="predict-measure")
                yield Static(Text("Model answer", style="bold underline"), classes="section-title")
                yield Markdown(self._linked_answer(), id="model-answer", open_links=False)
                if q.kata is not None:
                    yield Static(self._write_it_yourself(q.kata), id="write-it-yourself")
                if q.demo is not None:
                    from ddpfsdp.quiz.widgets.evidence import EvidencePanel

                    yield EvidencePanel(q, id="evidence")
            yield Static(self._hint(), id="feedback-hint", classes="muted")
        yield KeyBar()

    def on_mount(self) -> None:
        if self.question.kind == "numeric":
            self._update_predict_measure()
        if self.save_error:
            self.app.notify(self.save_error, severity="error", timeout=10)

    # --- pieces -------------------------------------------------------------------------------------

    @staticmethod
    def _write_it_yourself(name: str) -> Text:
        from ddpfsdp.demos.katas.catalog import KATAS

        kata = KATAS[name]
        return Text.assemble(("Write it yourself: ", "bold"), f"{kata.title}, checked on real ranks: ",
                             (f"ddpfsdp kata start {name}", "bold cyan"), " (or w on the home screen)")

    def _verdict(self) -> Text:
        if self.awaiting_self_grade:
            return Text.assemble(("How did you do, against the talking points? ", "bold"), ("1", "bold reverse"), " Again ", ("2", "bold reverse"), " Hard ", ("3", "bold reverse"), " Good ", ("4", "bold reverse"), " Easy")
        grade = self.grade
        assert grade is not None
        style = "bold green" if grade.correct else "bold red"
        mark = "✔ " if grade.correct else "✘ "
        return Text.assemble((mark + grade.verdict, style))

    def _detail(self) -> Any:
        q = self.question
        grade = self.grade
        if q.kind in ("single", "multi") and grade is not None:
            # Number, choice and reason in their own columns, so wrapped lines stay under their text.
            table = Table(show_header=False, show_edge=False, box=None, expand=True, pad_edge=False)
            table.add_column(width=1, no_wrap=True)
            table.add_column(width=3, justify="right", no_wrap=True)
            table.add_column(ratio=1)
            for item in grading.review_choices(q, grade, self.display_order):
                if item.right:
                    mark = Text("✔", style="bold green")
                elif item.picked:
                    mark = Text("✘", style="bold red")
                else:
                    mark = Text(" ")
                label = Text(item.text, style="bold" if item.picked else "" if item.right else "dim")
                if item.picked:
                    label.append("  ← yours", style="italic")
                table.add_row(mark, Text(f"{item.number}.", style="bold" if item.picked else ""), label)
                if item.reason:
                    table.add_row("", "", Text(item.reason, style="green" if item.right else "yellow" if item.picked else "italic"))
            return table
        if q.kind == "order" and grade is not None:
            return self._steps_detail(grading.review_steps(q, grade))
        if q.kind == "explain":
            points = Table.grid(padding=(0, 1))
            points.add_column(width=3, justify="right")
            points.add_column(ratio=1)
            for point in q.talking_points:
                points.add_row("•", point)
            parts: list[Any] = [Text("What an interviewer listens for:", style="bold"), points]
            if self.notes.strip():
                parts.append(Text.assemble(("Your notes: ", "bold"), (self.notes.strip(), "italic")))
            return Group(*parts)
        return None

    @staticmethod
    def _steps_detail(steps: list[grading.StepReview]) -> Table:
        """The right order; under each misplaced step, what was put there and why the step belongs there."""
        table = Table(show_header=False, show_edge=False, box=None, expand=True, pad_edge=False)
        table.add_column(width=1, no_wrap=True)
        table.add_column(width=3, justify="right", no_wrap=True)
        table.add_column(ratio=1)
        for step in steps:
            mark = Text("✔", style="bold green") if step.in_place else Text("✘", style="bold red")
            table.add_row(mark, f"{step.number}.", step.text)
            if not step.in_place:
                table.add_row("", "", Text(f"you put: {step.yours}", style="italic red"))
                if step.reason:
                    table.add_row("", "", Text(f"why here: {step.reason}", style="yellow"))
        return table

    def _model_answer(self) -> str:
        try:
            return self.question.model_answer()
        except OSError as error:
            return f"*The model answer could not be read:* `{self.question.answer_file}` ({error.strerror}). Reinstall ddpfsdp or restore the file."

    def _hint(self) -> Text:
        parts = []
        if self.awaiting_self_grade:
            parts.append("1–4 grade yourself")
        else:
            parts.append("n next")
        if self.question.demo is not None:
            parts.append("d evidence")
            parts.append("r run the demo (Esc cancels)")
        parts.append("? help")
        return Text(" · ".join(parts), style="dim")

    def _update_predict_measure(self, result: ev.Result | None = None) -> None:
        q = self.question
        grade = self.grade
        table = Table(title="Predict, then measure", title_justify="left", show_edge=False, expand=False, pad_edge=False)
        table.add_column("")
        table.add_column("value", justify="right")
        table.add_column("", style="dim")
        if grade is not None:
            table.add_row("your prediction", grading.format_quantity(grade.given["value"], q.unit), "")
        table.add_row("analytic model (theory)", grading.format_quantity(q.value, q.unit), f"{q.calc.fn}")
        if q.measure:
            if result is None:
                panel = self.query("#evidence")
                saved = panel.first().saved if panel else None
                result = saved.result if saved else None
            measured = ev.measured_value(q, result)
            if measured is None:
                table.add_row("measured", "–", "not measured here yet: press r" if result is None else f"{q.measure} not in the result")
            else:
                ratio = measured / q.value if q.value else float("nan")
                table.add_row("measured", grading.format_quantity(measured, q.unit), f"{ratio:.2f}x theory, in the demo's own configuration")
        self.query_one("#predict-measure", Static).update(table)

    # --- actions ------------------------------------------------------------------------------------

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.refresh_bindings()
        if self.question.kind == "numeric" and message.result is not None:
            self._update_predict_measure(message.result)

    def action_self_grade(self, number: int) -> None:
        if not self.awaiting_self_grade:
            return
        name = grading.SELF_GRADES[number - 1]
        self.grade = grading.grade_explain(self.question, self.notes, name)
        self.app.post_message(ExplanationGraded(self.question, self.grade, self.elapsed_s))
        self.query_one("#verdict", Static).update(self._verdict())
        self.query_one("#feedback-hint", Static).update(self._hint())

    def action_next(self) -> None:
        if self.awaiting_self_grade:
            self.app.notify("Grade yourself first: 1 Again, 2 Hard, 3 Good, 4 Easy.")
            return
        # Leaving the screen unmounts the evidence panel, which stops a running demo.
        self.app.post_message(NextQuestion())

    def action_show_evidence(self) -> None:
        panels = self.query("#evidence")
        if panels:
            panels.first().scroll_visible(top=True)
        else:
            self.app.notify("This question has no linked demo.")

    def action_run_demo(self) -> None:
        panels = self.query("#evidence")
        if panels:
            panels.first().scroll_visible(top=True)
            panels.first().start()
        self.refresh_bindings()

    def _cancel_demo(self) -> bool:
        panels = self.query("#evidence")
        return bool(panels) and panels.first().cancel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("cancel_demo", "escape"):
            running = any(panel.running for panel in self.query("#evidence"))
            return running if action == "cancel_demo" else not running
        return True

    def action_cancel_demo(self) -> None:
        self._cancel_demo()
        self.refresh_bindings()

    def action_escape(self) -> None:
        if self._cancel_demo():
            return
        self.app.post_message(SessionLeft())

    # --- the glossary, from the model answer's terms --------------------------------------------------

    def _linked_answer(self) -> str:
        """The model answer with each glossary term's first use a link to its definition."""
        from ddpfsdp.quiz import glossary

        try:
            return glossary.link_terms(self._model_answer(), glossary.terms())
        except glossary.GlossaryError:
            return self._model_answer()

    def action_glossary(self, term: str | None = None) -> None:
        from ddpfsdp.quiz import glossary
        from ddpfsdp.quiz.screens.glossary import GlossaryScreen

        if term is None:
            found = glossary.terms_in(self._model_answer(), glossary.terms())
            term = found[0] if found else None
        self.app.push_screen(GlossaryScreen(term))

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        from ddpfsdp.quiz.glossary import term_of_link

        event.stop()
        term = term_of_link(event.href)
        if term is None:
            self.app.open_url(event.href)
        else:
            self.action_glossary(term)

