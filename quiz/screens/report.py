"""The end of a mock interview: score by topic, time used, what to review.

Every topic that was asked is listed, whether its questions were answered, skipped or left when the
time ran out: an unanswered question scores zero, so skipping cannot hide a weak topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.loader import Bank, Question
from ddpfsdp.quiz.widgets.key_bar import KeyBar


def topic_scores(asked: Sequence[Question], results: Sequence[tuple[Question, Grade]]) -> list[tuple[str, int, int, float]]:
    """(topic, asked, answered, score) for every topic asked, weakest first; unanswered counts 0."""
    scores: dict[str, float] = {}
    for question, grade in results:
        scores[question.id] = grade.score
    by_topic: dict[str, list[str]] = {}
    for question in asked:
        by_topic.setdefault(question.topic, []).append(question.id)
    rows = []
    for topic, ids in by_topic.items():
        answered = [scores[i] for i in ids if i in scores]
        rows.append((topic, len(ids), len(answered), sum(answered) / len(ids)))
    return sorted(rows, key=lambda row: (row[3], row[0]))


def score_table(bank: Bank, rows: list[tuple[str, int, int, float]]) -> Table:
    table = Table(title="Mock interview: score by topic, weakest first", title_justify="left", expand=True)
    table.add_column("topic", ratio=1, overflow="ellipsis", no_wrap=True)
    table.add_column("asked", justify="right")
    table.add_column("answered", justify="right")
    table.add_column("score", justify="right")
    for topic, asked, answered, score in rows:
        table.add_row(bank.topics[topic].title, str(asked), str(answered),
                      Text(f"{score:.0%}", style="green" if score >= 0.7 else "red"))
    return table


class MockReportScreen(Screen):
    CSS_PATH = "session.tcss"
    BINDINGS = [Binding("escape,enter,q", "app.pop_screen", "Home")]

    def __init__(self, results: list[tuple[Question, Grade]], asked: list[Question], total: int, elapsed_s: float, timed_out: bool,
                 left: bool = False):
        super().__init__()
        self.results = results  # (question, grade) for each answered question
        self.asked = asked  # every question shown, answered or not
        self.total = total
        self.elapsed_s = elapsed_s
        self.timed_out = timed_out
        self.left = left  # the person left before the end

    def compose(self) -> ComposeResult:
        answered = len(self.results)
        overall = sum(g.score for _, g in self.results) / self.total if self.total else 0.0
        minutes, seconds = divmod(int(self.elapsed_s), 60)
        summary = Text.assemble(
            ("Time is up. " if self.timed_out else "Left early. " if self.left else "", "bold yellow"),
            (f"Overall {overall:.0%}", "bold"),
            f" over {self.total} questions ({answered} answered, {len(self.asked)} asked) in {minutes}:{seconds:02d}. ",
            "Unanswered questions count as zero. Review the weakest topic first.",
        )
        with Vertical(id="report", classes="page"), VerticalScroll():
            yield Static(summary, id="report-summary")
            yield Static(score_table(self.app.bank, topic_scores(self.asked, self.results)), id="report-table")
        yield KeyBar()
