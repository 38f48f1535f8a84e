"""Home's rows, laid out for the width they get: what gives way first is the text, never the numbers.

A topic row keeps its mastery bar, seen count and due count whole at any width; its title is cut
first (with an ellipsis) and its description ends after a whole word. An action row (review, mock,
drill) keeps its name and cuts its detail the same way.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widget import Widget

from ddpfsdp.quiz.widgets.fitting import ellipsize
from ddpfsdp.quiz.widgets.mastery import mastery_bar

# The numbers' columns: bar and percentage, "28/28 seen", "12 due".
_SEEN_WIDTH = 10
_DUE_WIDTH = 6
_GAP = "  "
_MIN_TITLE = 8


class ActionRow(Widget):
    """One line: a bold name, then what it does, cut to fit."""

    DEFAULT_CSS = "ActionRow { height: 1; }"

    def __init__(self, name: str, detail: str = "", **kwargs):
        super().__init__(**kwargs)
        self.label = name
        self.detail = detail

    def show(self, detail: str) -> None:
        self.detail = detail
        self.refresh()

    def render(self) -> Text:
        width = self.size.width
        line = Text(ellipsize(self.label, width), style="bold")
        room = width - line.cell_len - 3
        if self.detail and room > 0:
            line.append("   " + ellipsize(self.detail, room))
        return line


class TopicRow(Widget):
    """Two lines: title, mastery bar, seen and due; then the description."""

    DEFAULT_CSS = "TopicRow { height: 2; }"

    def __init__(self, title: str, description: str, **kwargs):
        super().__init__(**kwargs)
        self.title = title
        self.description = description
        self.mastery = 0.0
        self.seen = 0
        self.questions = 0
        self.due = 0

    def show(self, *, mastery: float, seen: int, questions: int, due: int) -> None:
        self.mastery, self.seen, self.questions, self.due = mastery, seen, questions, due
        self.refresh()

    def numbers(self, with_bar: bool = True) -> Text:
        """The right-hand columns, always whole."""
        numbers = Text()
        if with_bar:
            numbers.append_text(mastery_bar(self.mastery))
            numbers.append(_GAP)
        numbers.append(f"{self.seen}/{self.questions} seen".rjust(_SEEN_WIDTH))
        numbers.append(_GAP)
        numbers.append((f"{self.due} due" if self.due else "").rjust(_DUE_WIDTH), style="yellow")
        return numbers

    def render(self) -> Text:
        width = self.size.width
        numbers = self.numbers()
        if width - numbers.cell_len - 1 < _MIN_TITLE:
            numbers = self.numbers(with_bar=False)
        room = max(0, width - numbers.cell_len - 1)
        title = ellipsize(self.title, room)
        line = Text(title + " " * (room - cell_len(title) + 1), style="bold")
        line.append_text(numbers)
        line.append("\n")
        line.append(ellipsize(self.description, width), style="dim")
        return line
