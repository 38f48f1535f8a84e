"""Search (/ on home): type words, see the questions that match them best, Enter opens one."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ddpfsdp.quiz.messages import SessionRequested
from ddpfsdp.quiz.widgets.key_bar import KeyBar

LIMIT = 20
HINT = "Words from a question's prompt, choices, reasons or model answer; a typo is forgiven."


class SearchScreen(Screen):
    CSS_PATH = "pages.tcss"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("down", "to_results", "Results", show=False),
    ]

    def __init__(self, query: str = ""):
        super().__init__()
        self.query_text = query
        self.hits = []

    def compose(self) -> ComposeResult:
        with Vertical(id="search", classes="page"):
            yield Static(Text("Find a question", style="bold"), id="title")
            yield Input(value=self.query_text, placeholder="e.g. bucket cap, reshard after forward",
                        id="search-input")
            yield Static(HINT, id="search-status", classes="muted")
            yield OptionList(id="search-results")
        yield KeyBar()

    def on_mount(self) -> None:
        from ddpfsdp.quiz.search import index_for

        # Built once per bank and kept: a few hundred milliseconds on first use, then each query takes ms.
        self.index = index_for(self.app.bank)
        self.query_one(Input).focus()
        if self.query_text:
            self._search(self.query_text)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._search(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        results = self.query_one(OptionList)
        if results.option_count:
            self._open(results.highlighted or 0)

    def _search(self, query: str) -> None:
        from ddpfsdp.quiz.search import SearchError
        from ddpfsdp.quiz.search_view import hit_lines

        results = self.query_one(OptionList)
        status = self.query_one("#search-status", Static)
        results.clear_options()
        try:
            self.hits = self.index.search(query, limit=LIMIT)
        except SearchError:
            self.hits = []
            status.update(HINT)
            return
        if not self.hits:
            status.update(f"No question matches {query.strip()!r}. Try fewer or other words.")
            return
        marked = self.app.store.bookmarks() if self.app.store is not None else {}
        for hit in self.hits:
            lines = hit_lines(self.app.bank, hit, one_line_each=True)
            if hit.question_id in marked:
                lines.renderables[0].append(" ★", style="yellow")
            results.add_option(Option(lines, id=hit.question_id))
        results.highlighted = 0
        count = len(self.hits)
        status.update(f"{count}{'+' if count == LIMIT else ''} question{'s' if count != 1 else ''}, best first: "
                      "↓ to the list, Enter opens one")

    def action_to_results(self) -> None:
        results = self.query_one(OptionList)
        if results.option_count:
            results.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._open(event.option_index)

    def _open(self, index: int) -> None:
        question = self.app.bank.questions[self.hits[index].question_id]
        self.app.pop_screen()
        self.app.post_message(SessionRequested("practice", questions=[question]))
