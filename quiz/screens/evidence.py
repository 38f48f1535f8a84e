"""The evidence for a question before answering it: its demo, the last saved result, a live run."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ddpfsdp.quiz.loader import Question
from ddpfsdp.quiz.widgets.evidence import EvidencePanel
from ddpfsdp.quiz.widgets.key_bar import KeyBar


class EvidenceScreen(Screen):
    CSS_PATH = "pages.tcss"
    BINDINGS = [
        Binding("r", "run_demo", "Run demo"),
        # One key, named for what it does now: the footer says "Cancel demo" only while one runs.
        Binding("escape", "cancel_demo", "Cancel demo"),
        Binding("escape", "escape", "Back"),
        Binding("?", "app.help", "Help"),
    ]

    def __init__(self, question: Question):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="evidence-screen", classes="page"):
            yield Static(Text.assemble(("Evidence", "bold"), f" for {self.question.id}: what the linked demo measures"), id="title")
            with VerticalScroll():
                yield EvidencePanel(self.question, id="evidence")
        yield KeyBar()

    def action_run_demo(self) -> None:
        self.query_one(EvidencePanel).start()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("cancel_demo", "escape"):
            running = any(panel.running for panel in self.query(EvidencePanel))
            return running if action == "cancel_demo" else not running
        return True

    def on_demo_finished(self) -> None:
        self.refresh_bindings()

    def action_cancel_demo(self) -> None:
        self.query_one(EvidencePanel).cancel()
        self.refresh_bindings()

    def action_escape(self) -> None:
        if not self.query_one(EvidencePanel).cancel():
            self.app.pop_screen()
