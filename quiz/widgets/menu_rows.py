"""Home's rows, laid out for the width they get: what gives way first is the text, never the numbers.

A topic row keeps its mastery bar, seen count and due count whole at any width; its title is cut
first (with an ellipsis) and its description ends after a whole word. An action row (review, mock,
drill) keeps its name and cuts its detail the same way. Each gives its lines for a width, and
`Menu` draws them all as one widget (home is the first screen: a widget per row, or an OptionList
measuring every row through rich, costs more start-up time than the rest of the screen).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Region
from textual.message import Message
from textual.widget import Widget

from ddpfsdp.quiz.widgets.fitting import ellipsize
from ddpfsdp.quiz.widgets.mastery import mastery_bar

# The numbers' columns: bar and percentage, "28/28 seen", "12 due".
_SEEN_WIDTH = 10
_DUE_WIDTH = 6
_GAP = "  "
_MIN_TITLE = 8


@dataclass
class ActionRow:
    """One line: a bold name, then what it does, cut to fit."""

    label: str
    detail: str = ""

    def lines(self, width: int) -> list[Text]:
        line = Text.assemble((ellipsize(self.label, width), "bold"))
        room = width - line.cell_len - 3
        if self.detail and room > 0:
            line.append("   " + ellipsize(self.detail, room))
        return [line]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _segments(console, self.lines(options.max_width))


@dataclass
class TopicRow:
    """Two lines: title, mastery bar, seen and due; then the description."""

    title: str
    description: str
    mastery: float = 0.0
    seen: int = 0
    questions: int = 0
    due: int = 0

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

    def lines(self, width: int) -> list[Text]:
        numbers = self.numbers()
        if width - numbers.cell_len - 1 < _MIN_TITLE:
            numbers = self.numbers(with_bar=False)
        room = max(0, width - numbers.cell_len - 1)
        title = ellipsize(self.title, room)
        first = Text.assemble((title, "bold"), " " * (room - cell_len(title) + 1))
        first.append_text(numbers)
        return [first, Text(ellipsize(self.description, width), style="dim")]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _segments(console, self.lines(options.max_width))


def _segments(console: Console, lines: list[Text]) -> RenderResult:
    """The lines as segments: each is laid out to fit already, so rich need not wrap them again."""
    for line in lines:
        yield from line.render(console)
        yield Segment.line()


class Menu(Widget, can_focus=True):
    """Rows to choose from, drawn as one widget: arrows or j/k move, Enter or a click chooses.

    It grows to its rows' height; put it in a scrolling container, and it keeps the highlighted row
    in view.
    """

    DEFAULT_CSS = """
    Menu { height: auto; padding: 0 1; }
    Menu > .menu--highlight { background: $block-cursor-background 30%; }
    Menu:focus > .menu--highlight { background: $block-cursor-background; color: $block-cursor-foreground; }
    """
    COMPONENT_CLASSES = {"menu--highlight"}
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("home", "move_to(0)", show=False),
        Binding("end", "move_to(-1)", show=False),
        Binding("enter", "choose", "Choose", show=False),
    ]

    @dataclass
    class Chosen(Message):
        key: str

    def __init__(self, rows: dict[str, ActionRow | TopicRow], **kwargs):
        super().__init__(**kwargs)
        self.rows = rows
        self.highlighted = 0
        self._laid_out: tuple[int, list[list[Text]]] | None = None  # (width, each row's lines)

    def update_rows(self) -> None:
        """Draw the rows again after their figures changed."""
        self._laid_out = None
        self.refresh(layout=True)

    def _lines(self, width: int) -> list[list[Text]]:
        # Laid out once per width: the layout asks for the height several times before the first draw.
        if self._laid_out is None or self._laid_out[0] != width:
            self._laid_out = (width, [row.lines(width) for row in self.rows.values()])
        return self._laid_out[1]

    @property
    def keys(self) -> list[str]:
        return list(self.rows)

    def get_content_height(self, container, viewport, width: int) -> int:
        return sum(len(lines) for lines in self._lines(width))

    def render(self) -> Text:
        width = self.content_region.width or self.size.width
        highlight = self.get_component_rich_style("menu--highlight")
        lines = []
        for index, row_lines in enumerate(self._lines(width)):
            for line in row_lines:
                if index == self.highlighted:
                    line = line.copy()
                    line.pad_right(width - line.cell_len)
                    line.stylize(highlight)
                lines.append(line)
        return Text("\n").join(lines)

    def row_span(self, index: int) -> tuple[int, int]:
        """(first line, number of lines) of row `index` at the current width."""
        heights = [len(lines) for lines in self._lines(self.content_region.width or self.size.width)]
        return sum(heights[:index]), heights[index]

    def action_move(self, delta: int) -> None:
        self.action_move_to((self.highlighted + delta) % len(self.rows))

    def action_move_to(self, index: int) -> None:
        self.highlighted = index % len(self.rows)
        self.refresh()
        top, height = self.row_span(self.highlighted)
        if self.parent is not None and hasattr(self.parent, "scroll_to_region"):
            self.parent.scroll_to_region(Region(0, top, self.size.width, height), animate=False)

    def action_choose(self) -> None:
        self.post_message(self.Chosen(self.keys[self.highlighted]))

    def on_click(self, event: Click) -> None:
        line, index = event.y, 0
        for index in range(len(self.rows)):
            top, height = self.row_span(index)
            if top <= line < top + height:
                break
        self.action_move_to(index)
        self.action_choose()
