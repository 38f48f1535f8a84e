"""Progress: attempts, accuracy, mastery and due cards by topic, weakest first."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.messages import SessionRequested
from ddpfsdp.quiz.widgets.fitting import ellipsize
from ddpfsdp.quiz.widgets.mastery import mastery_bar
from ddpfsdp.quiz.widgets.key_bar import KeyBar


# The page's padding and scrollbar, and the number columns with their cell padding: mastery 17,
# "accuracy" 8, "attempts" 8, "seen" 5, "due" 3, each with one cell each side, and the topic's own.
PAGE_PADDING = 6
NUMBER_COLUMNS_WIDTH = 17 + 8 + 8 + 5 + 3 + 2 * 6


class ProgressScreen(Screen):
    """One page that scrolls as a whole: the topics (↑ ↓ choose one, Enter practises it), the summary and the
    readiness tables below them, which PageDown and End reach from the start, whatever has the focus."""

    CSS_PATH = "pages.tcss"
    DEFAULT_CSS = "#progress-readiness { margin-top: 1; }"
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        # The table would take these to move its cursor; here they move the page, readiness included.
        Binding("pagedown", "page('down')", "Page down", priority=True),
        Binding("pageup", "page('up')", "Page up", show=False, priority=True),
        Binding("end", "page('end')", "End", show=False, priority=True),
        Binding("home", "page('home')", "Top", show=False, priority=True),
        Binding("?", "app.help", "Help"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="progress", classes="page"):
            with VerticalScroll(id="progress-page"):
                yield Static(Text("Progress by topic, weakest first", style="bold"), id="title")
                yield DataTable(id="progress-table", cursor_type="row", zebra_stripes=True)
                yield Static(id="progress-summary", classes="muted")
                yield Static(id="progress-readiness")
        yield KeyBar()

    def action_page(self, where: str) -> None:
        page = self.query_one("#progress-page", VerticalScroll)
        {"down": page.scroll_page_down, "up": page.scroll_page_up, "end": page.scroll_end,
         "home": page.scroll_home}[where](animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The page follows the table's cursor: the table shows every row, so the page scrolls, not the table."""
        table = event.data_table
        row = table.region.y - self.query_one("#progress-page").region.y + table.header_height + event.cursor_row
        page = self.query_one("#progress-page", VerticalScroll)
        top = row + page.scroll_y
        if top < page.scroll_y or top >= page.scroll_y + page.size.height:
            page.scroll_to(y=max(0, top - page.size.height // 2), animate=False)

    def on_mount(self) -> None:
        app = self.app
        report = scheduler.progress(app.bank, app.store, app.now())
        table = self.query_one(DataTable)
        table.add_columns("topic", "mastery", "accuracy", "attempts", "seen", "due")
        # The topic gives way (ellipsis) so every number column fits the terminal.
        title_width = max(12, app.size.width - PAGE_PADDING - NUMBER_COLUMNS_WIDTH)
        for p in report:
            table.add_row(
                ellipsize(p.title, title_width),
                mastery_bar(p.mastery),
                "–" if p.accuracy is None else f"{p.accuracy:.0%}",
                str(p.attempts),
                f"{p.seen}/{p.questions}",
                Text(str(p.due), style="yellow") if p.due else "",
                key=p.topic,
            )
        attempts = sum(p.attempts for p in report)
        correct = sum(p.correct for p in report)
        due = sum(p.due for p in report)
        summary = f"{attempts} attempts" + (f", {correct / attempts:.0%} right" if attempts else "") + f"; {due} card{'s' if due != 1 else ''} due now."
        drilled = scheduler.drill_progress(app.store, app.now())
        if drilled:
            tries = sum(d.attempts for d in drilled)
            right = sum(d.correct for d in drilled)
            summary += (
                f"  Sizing drills: {tries} answered, {right / tries:.0%} right, over {len(drilled)} kind"
                f"{'s' if len(drilled) != 1 else ''}; each kind counts as one card of its topic."
            )
        summary += "  Mastery is the chance of recalling a question now (FSRS), counted only when its last answer was right."
        self.query_one("#progress-summary", Static).update(summary)
        from ddpfsdp.quiz import readiness

        self.query_one("#progress-readiness", Static).update(readiness.render(readiness.report(app.bank, app.store, app.now())))
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.app.pop_screen()
        self.app.post_message(SessionRequested("practice", topic=str(event.row_key.value)))
