"""The end of a mock interview: score by topic, time used, what to review."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


class MockReportScreen(Screen):
    BINDINGS = [Binding("escape,enter,q", "app.pop_screen", "Home")]

    def __init__(self, results: list[tuple[object, object]], total: int, elapsed_s: float, timed_out: bool):
        super().__init__()
        self.results = results  # (question, grade) for each answered question
        self.total = total
        self.elapsed_s = elapsed_s
        self.timed_out = timed_out

    def compose(self) -> ComposeResult:
        bank = self.app.bank
        by_topic: dict[str, list[float]] = {}
        for question, grade in self.results:
            by_topic.setdefault(question.topic, []).append(grade.score)
        table = Table(title="Mock interview: score by topic", title_justify="left", expand=True)
        table.add_column("topic")
        table.add_column("answered", justify="right")
        table.add_column("score", justify="right")
        for topic_id, scores in sorted(by_topic.items(), key=lambda kv: sum(kv[1]) / len(kv[1])):
            mean = sum(scores) / len(scores)
            table.add_row(bank.topics[topic_id].title, str(len(scores)), Text(f"{mean:.0%}", style="green" if mean >= 0.7 else "red"))
        answered = len(self.results)
        overall = sum(g.score for _, g in self.results) / self.total if self.total else 0.0
        minutes, seconds = divmod(int(self.elapsed_s), 60)
        summary = Text.assemble(
            ("Time is up. " if self.timed_out else "", "bold yellow"),
            (f"Overall {overall:.0%}", "bold"),
            f" over {self.total} questions ({answered} answered) in {minutes}:{seconds:02d}. ",
            "Unanswered questions count as zero. The weakest topic is listed first: review it next.",
        )
        with Vertical(id="report"):
            with VerticalScroll():
                yield Static(summary, id="report-summary")
                yield Static(table, id="report-table")
        yield Footer()
