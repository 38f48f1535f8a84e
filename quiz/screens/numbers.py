"""The numbers page (n on home): the figures interviews expect, each with its source, as `ddpfsdp numbers`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ddpfsdp.quiz.widgets.key_bar import KeyBar


class NumbersScreen(Screen):
    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back"), Binding("?", "app.help", "Help")]

    def compose(self) -> ComposeResult:
        from ddpfsdp.quiz import numbers

        with VerticalScroll(id="numbers", classes="page"):
            yield Static(numbers.render(), id="numbers-page")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#numbers").focus()
