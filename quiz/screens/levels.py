"""The level picker (l on home): which levels of question the sessions ask."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ddpfsdp.quiz.levels import LevelRange
from ddpfsdp.quiz.loader import LEVELS
from ddpfsdp.quiz.messages import LevelsChosen

CHOICES: tuple[LevelRange, ...] = (
    LevelRange(), *(LevelRange(level, level) for level in LEVELS), LevelRange(1, 2), LevelRange(2, 3),
    LevelRange(3, 4),
)


class LevelScreen(ModalScreen[None]):
    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        bank = self.app.bank
        current = self.app.levels
        options = []
        for levels in CHOICES:
            count = len(levels.keep(list(bank.questions.values())))
            label = Text.assemble(("● " if levels == current else "  ", "bold"), (levels.label(), "bold"),
                                  (f"  {count} questions", "dim"))
            options.append(Option(label, id=levels.option()))
        with Vertical(id="levels"):
            yield Static(Text("Study which levels?", style="bold"))
            yield OptionList(*options, id="level-options")
            yield Static(Text("Enter chooses; ddpfsdp quiz --level 2-3 does the same from the command line.",
                              style="dim"))

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = CHOICES.index(self.app.levels) if self.app.levels in CHOICES else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.app.post_message(LevelsChosen(CHOICES[event.option_index]))
        self.dismiss()
