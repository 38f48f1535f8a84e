"""Home: review what is due, a mock interview, the topics with mastery and due counts, progress."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.messages import (BookmarksRequested, DrillRequested, InterviewRequested, KatasRequested,
                                   SessionRequested)
from ddpfsdp.quiz.widgets.menu_rows import ActionRow, Menu, TopicRow
from ddpfsdp.quiz.widgets.key_bar import KeyBar


class HomeScreen(Screen):
    # Below 20 rows the menu needs every row: the subtitle and the summary make way (-short in app.tcss).
    VERTICAL_BREAKPOINTS = [(0, "-short"), (20, "-tall")]
    BINDINGS = [
        # Short names, each a word of its menu row, so every key fits one line at 80 columns.
        Binding("r", "review", "Due"),
        Binding("m", "mock", "Mock"),
        Binding("s", "drill", "Drill"),
        Binding("i", "interview", "Design"),
        Binding("w", "katas", "Katas"),
        Binding("p", "progress", "Progress"),
        Binding("slash", "search", "Find"),
        Binding("l", "levels", "Levels", show=False),
        Binding("b", "bookmarked", "Bookmarked", show=False),
        Binding("n", "numbers", "Numbers", show=False),
        Binding("g", "glossary", "Glossary", show=False),
        Binding("?", "app.help", "Help"),
        Binding("q", "app.quit", "Quit"),
    ]

    def compose(self) -> ComposeResult:
        bank = self.app.bank
        self.rows: dict[str, ActionRow | TopicRow] = {
            "item-review": ActionRow("Review due"),
            "item-mock": ActionRow("Mock interview"),
            "item-drill": ActionRow("Sizing drill"),
            "item-interview": ActionRow("Design interview", "a scenario step by step: memory, strategy, traffic, "
                                        "step time, follow-ups, a debrief"),
            "item-katas": ActionRow("Katas", "write the ring all-reduce, the sampler, an FSDP unit yourself; checked "
                                    "on real ranks against torch"),
            **{f"topic-{t.id}": TopicRow(t.title, t.description) for t in bank.topics.values()},
            "item-progress": ActionRow("Progress by topic", "mastery, accuracy and what is due, weakest first"),
            **self._more_rows(),
        }
        # Filled in before the first render, so the first screen is drawn once.
        summary = self._update_rows()
        with Vertical(id="home", classes="page"):
            yield Static(Text("ddpfsdp quiz", style="bold"), id="title")
            yield Static("DDP and FSDP for ML-systems interviews: answer, read the model answer, measure the claim.", id="subtitle", classes="muted")
            yield Menu(self.rows, id="menu")
            yield Static(summary, id="home-summary", classes="muted")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(Menu).focus()

    def on_screen_resume(self) -> None:
        # The first resume is the first showing, already up to date; later ones come back from a session.
        if getattr(self, "_shown", False):
            self.refresh_menu()
        self._shown = True

    def refresh_menu(self) -> None:
        summary = self._update_rows()
        self.query_one(Menu).update_rows()
        self.query_one("#home-summary", Static).update(summary)

    def _update_rows(self) -> str:
        """Put the current progress into the rows; the summary line."""
        app = self.app
        report = {p.topic: p for p in scheduler.progress(app.bank, app.store, app.now())}
        due_total = sum(p.due for p in report.values())
        rows = self.rows
        rows["item-review"].detail = f"{due_total} card{'s' if due_total != 1 else ''} due now"
        rows["item-mock"].detail = (
            f"{min(scheduler.MOCK_SIZE, len(app.bank.questions))} mixed questions, explain included, "
            f"{scheduler.MOCK_MINUTES} minutes, score by topic"
        )
        rows["item-drill"].detail = "endless napkin-math problems, answered by the analytic model"
        for topic in app.bank.topics.values():
            p = report[topic.id]
            row = rows[f"topic-{topic.id}"]
            row.mastery, row.seen, row.questions, row.due = p.mastery, p.seen, p.questions, p.due
        attempts = sum(p.attempts for p in report.values())
        correct = sum(p.correct for p in report.values())
        summary = f"{attempts} answers so far" + (f", {correct / attempts:.0%} right" if attempts else "; pick a topic to start") + "."
        return summary + self._update_more_rows()

    def row_text(self, key: str, width: int = 96) -> str:
        """What a row of the menu shows at `width`, as plain text."""
        from rich.console import Console

        console = Console(width=width, color_system=None, legacy_windows=False)
        with console.capture() as capture:
            console.print(self.rows[key])
        return capture.get()

    def on_menu_chosen(self, event: Menu.Chosen) -> None:
        item_id = event.key
        if self._chose_more(item_id):
            return
        if item_id == "item-review":
            self.action_review()
        elif item_id == "item-mock":
            self.action_mock()
        elif item_id == "item-drill":
            self.action_drill()
        elif item_id == "item-interview":
            self.action_interview()
        elif item_id == "item-katas":
            self.action_katas()
        elif item_id == "item-progress":
            self.action_progress()
        elif item_id.startswith("topic-"):
            self.app.post_message(SessionRequested("practice", topic=item_id.removeprefix("topic-")))

    def action_review(self) -> None:
        self.app.post_message(SessionRequested("review"))

    def action_mock(self) -> None:
        self.app.post_message(SessionRequested("mock"))

    def action_drill(self) -> None:
        self.app.post_message(DrillRequested())

    def action_interview(self) -> None:
        self.app.post_message(InterviewRequested())

    def action_katas(self) -> None:
        self.app.post_message(KatasRequested())

    def action_progress(self) -> None:
        from ddpfsdp.quiz.screens.progress import ProgressScreen

        self.app.push_screen(ProgressScreen())

    # --- finding, levels, bookmarks, the numbers and the glossary -------------------------------------

    def _more_rows(self) -> dict[str, ActionRow]:
        return {
            "item-bookmarked": ActionRow("Bookmarked"),
            "item-search": ActionRow("Find a question", "by any words in its prompt, choices, reasons or answer (/)"),
            "item-numbers": ActionRow("The numbers", "bytes per parameter, GPUs, links, collectives, bubbles, MFU (n)"),
            "item-glossary": ActionRow("Glossary", "every term the questions use, and the questions that use it (g)"),
        }

    def _update_more_rows(self) -> str:
        """Bookmarks' count into its row; mastery by level and the levels asked, for the summary."""
        app = self.app
        marked = sum(1 for q in app.store.bookmarks() if q in app.bank.questions)
        self.rows["item-bookmarked"].detail = (f"{marked} question{'s' if marked != 1 else ''} you marked (b)" if marked
                                               else "none yet: b on a question marks it")
        by_level = scheduler.level_progress(app.bank, app.store, app.now())
        mastery = " · ".join(f"{p.level}: {p.mastery:.0%}" for p in by_level)
        return f" Mastery by level {mastery}. Asking {app.levels.label()} (l to change)."

    def _chose_more(self, item_id: str) -> bool:
        actions = {"item-bookmarked": self.action_bookmarked, "item-search": self.action_search,
                   "item-numbers": self.action_numbers, "item-glossary": self.action_glossary}
        if item_id in actions:
            actions[item_id]()
            return True
        return False

    def action_search(self) -> None:
        from ddpfsdp.quiz.screens.search import SearchScreen

        self.app.push_screen(SearchScreen())

    def action_levels(self) -> None:
        from ddpfsdp.quiz.screens.levels import LevelScreen

        self.app.push_screen(LevelScreen())

    def action_bookmarked(self) -> None:
        self.app.post_message(BookmarksRequested())

    def action_numbers(self) -> None:
        from ddpfsdp.quiz.screens.numbers import NumbersScreen

        self.app.push_screen(NumbersScreen())

    def action_glossary(self) -> None:
        from ddpfsdp.quiz.screens.glossary import GlossaryScreen

        self.app.push_screen(GlossaryScreen())
