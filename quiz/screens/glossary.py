"""The glossary (g on home or on a model answer, or a click on a term in it): each term's definition and
the questions that use it; Enter on a question opens it."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ddpfsdp.quiz.messages import SessionRequested
from ddpfsdp.quiz.widgets.key_bar import KeyBar


class GlossaryScreen(Screen):
    CSS_PATH = "pages.tcss"
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("tab", "app.focus_next", "Terms/questions"),
        Binding("?", "app.help", "Help"),
    ]

    def __init__(self, term: str | None = None):
        super().__init__()
        self.start_term = term

    def compose(self) -> ComposeResult:
        from ddpfsdp.quiz import glossary

        self.terms = glossary.terms()
        with Vertical(id="glossary", classes="page"):
            yield Static(Text("Glossary", style="bold"), id="title")
            with Horizontal(id="glossary-panes"):
                yield OptionList(*(Option(name, id=name) for name in self.terms), id="glossary-terms")
                with VerticalScroll(id="glossary-entry"):
                    yield Static(id="glossary-definition")
                    yield OptionList(id="glossary-questions")
        yield KeyBar()

    def on_mount(self) -> None:
        names = list(self.terms)
        listing = self.query_one("#glossary-terms", OptionList)
        listing.highlighted = names.index(self.start_term) if self.start_term in self.terms else 0
        listing.focus()
        self.show(names[listing.highlighted])

    def show(self, name: str) -> None:
        from ddpfsdp.quiz.search import plain_text

        from ddpfsdp.quiz import glossary

        term = self.terms[name]
        self.shown = name
        # One term's questions at a time: a scan of the bank's text for one term takes tens of milliseconds.
        used = glossary.uses(self.app.bank, self.terms, [name])[name]
        body = Text.assemble((term.name, "bold"), "\n", term.definition)
        if term.see:
            body.append("\nSee also: ", style="dim")
            body.append(", ".join(term.see))
        body.append(f"\n\n{len(used)} question{'s' if len(used) != 1 else ''} use it (Enter opens one):", style="bold")
        self.query_one("#glossary-definition", Static).update(body)
        questions = self.query_one("#glossary-questions", OptionList)
        questions.clear_options()
        bank = self.app.bank
        for qid in used:
            # One line each, so a row keeps its height at any width.
            heading = Text.assemble((qid, "bold"), f" · level {bank.questions[qid].level}", no_wrap=True,
                                    overflow="ellipsis")
            prompt = Text(plain_text(bank.questions[qid].prompt), style="dim", no_wrap=True, overflow="ellipsis")
            questions.add_option(Option(Group(heading, prompt), id=qid))
        self.query_one("#glossary-entry", VerticalScroll).scroll_home(animate=False)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "glossary-terms" and event.option.id != getattr(self, "shown", None):
            self.show(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_list.id == "glossary-terms":
            self.query_one("#glossary-questions", OptionList).focus()
            return
        question = self.app.bank.questions[event.option.id]
        self.app.post_message(SessionRequested("practice", questions=[question]))
