"""Home: review what is due, a mock interview, the topics with mastery and due counts, progress."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Label, ListItem, ListView, Static

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.widgets.mastery import mastery_bar


class HomeScreen(Screen):
    BINDINGS = [
        Binding("r", "review", "Review due"),
        Binding("m", "mock", "Mock interview"),
        Binding("s", "drill", "Sizing drill"),
        Binding("i", "interview", "Interview"),
        Binding("p", "progress", "Progress"),
        Binding("?", "app.help", "Help"),
        Binding("q", "app.quit", "Quit"),
    ]

    def compose(self) -> ComposeResult:
        items = [
            ListItem(Label(id="label-review"), id="item-review"),
            ListItem(Label(id="label-mock"), id="item-mock"),
            ListItem(Label(id="label-drill"), id="item-drill"),
            ListItem(Label(Text.assemble(("Design interview", "bold"), "   a scenario step by step: memory, strategy, "
                                         "traffic, step time, follow-ups, a debrief")), id="item-interview"),
        ]
        items += [ListItem(Label(id=f"label-{t}"), id=f"topic-{t}") for t in self.app.bank.topics]
        items.append(ListItem(Label(Text("Progress by topic", style="bold")), id="item-progress"))
        with Vertical(id="home"):
            yield Static(Text("ddpfsdp quiz", style="bold"), id="title")
            yield Static("DDP and FSDP for ML-systems interviews: answer, read the model answer, measure the claim.", id="subtitle")
            yield ListView(*items, id="menu")
            yield Static(id="home-summary")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_menu()
        self.query_one("#menu", ListView).focus()

    def on_screen_resume(self) -> None:
        self.refresh_menu()

    def refresh_menu(self) -> None:
        app = self.app
        now = app.now()
        report = {p.topic: p for p in scheduler.progress(app.bank, app.store, now)}
        due_total = sum(p.due for p in report.values())
        self.query_one("#label-review", Label).update(
            Text.assemble(("Review due", "bold"), f"   {due_total} card{'s' if due_total != 1 else ''} due now")
        )
        self.query_one("#label-mock", Label).update(
            Text.assemble(
                ("Mock interview", "bold"),
                f"   {min(scheduler.MOCK_SIZE, len(app.bank.questions))} mixed questions, explain included, {scheduler.MOCK_MINUTES} minutes, score by topic",
            )
        )
        self.query_one("#label-drill", Label).update(
            Text.assemble(
                ("Sizing drill", "bold"),
                "   endless napkin-math problems, answered by the analytic model",
            )
        )
        title_width = max([30, *(len(topic.title) + 2 for topic in app.bank.topics.values())])
        for topic in app.bank.topics.values():
            p = report[topic.id]
            row = Text.assemble(
                (f"{topic.title:<{title_width}}", "bold"),
                mastery_bar(p.mastery),
                f"   {p.seen:>2}/{p.questions:<2} seen",
                (f"   {p.due} due" if p.due else "", "yellow"),
            )
            row.append(f"\n{topic.description}", style="dim")
            self.query_one(f"#label-{topic.id}", Label).update(row)
        attempts = sum(p.attempts for p in report.values())
        correct = sum(p.correct for p in report.values())
        summary = f"{attempts} answers so far" + (f", {correct / attempts:.0%} right" if attempts else "; pick a topic to start") + "."
        self.query_one("#home-summary", Static).update(summary)

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        item_id = event.item.id or ""
        if item_id == "item-review":
            self.action_review()
        elif item_id == "item-mock":
            self.action_mock()
        elif item_id == "item-drill":
            self.action_drill()
        elif item_id == "item-interview":
            self.action_interview()
        elif item_id == "item-progress":
            self.action_progress()
        elif item_id.startswith("topic-"):
            self.app.start_session("practice", topic=item_id.removeprefix("topic-"))

    def action_review(self) -> None:
        self.app.start_session("review")

    def action_mock(self) -> None:
        self.app.start_session("mock")

    def action_drill(self) -> None:
        self.app.start_drill()

    def action_interview(self) -> None:
        self.app.start_interview()

    def action_progress(self) -> None:
        from ddpfsdp.quiz.screens.progress import ProgressScreen

        self.app.push_screen(ProgressScreen())
