"""A screen that explains a problem the app cannot work around (a broken bank, an unusable store), and a
notice shown over the first screen before anything else (a damaged progress file moved aside)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Static
from ddpfsdp.quiz.widgets.key_bar import KeyBar


class ProblemScreen(Screen):
    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, title: str, message: str, advice: str):
        super().__init__()
        self.title_text = title
        self.message = message
        self.advice = advice

    def compose(self) -> ComposeResult:
        with Vertical(id="problem", classes="page"):
            yield Static(Text(self.title_text, style="bold red"), id="problem-title")
            yield Static(Text(self.message), id="problem-message")
            yield Static(Text(self.advice, style="italic"), id="problem-advice")
        yield KeyBar()


class NoticeScreen(ModalScreen[None]):
    """Something to read before going on, over the first screen; Enter or Escape closes it."""

    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("enter,escape", "dismiss", "Continue")]

    def __init__(self, title: str, message: str):
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notice"):
            yield Static(Text(self.title_text, style="bold yellow"), id="notice-title")
            yield Static(Text(self.message), id="notice-message")
            yield Static(Text("Enter to go on", style="dim"), id="notice-keys")


class ConfirmScreen(ModalScreen[None]):
    """A question before a step that ends something: y or Enter posts `confirmed` to the app, n or Escape
    goes back to where the person was."""

    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("y,enter", "yes", "Yes"), Binding("n,escape", "dismiss", "No, go on")]

    def __init__(self, title: str, message: str, confirmed: Message):
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirmed = confirmed

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notice"):
            yield Static(Text(self.title_text, style="bold yellow"), id="notice-title")
            yield Static(Text(self.message), id="notice-message")
            yield Static(Text("y or Enter: yes · n or Esc: no, go on", style="dim"), id="notice-keys")

    def action_yes(self) -> None:
        self.dismiss()
        self.app.post_message(self.confirmed)
