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
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

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


class Menu(ScrollView, can_focus=True):
    """Rows to choose from, drawn as one scrolling widget: arrows or j/k move, Enter or a click chooses.

    Only the lines in view are drawn (line by line, as Textual's own lists do), and the highlighted
    row is kept in view.
    """

    DEFAULT_CSS = """
    Menu { height: 1fr; overflow-x: hidden; }
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
    MARGIN = 1  # blank cells each side of a row

    @dataclass
    class Chosen(Message):
        key: str

    def __init__(self, rows: dict[str, ActionRow | TopicRow], **kwargs):
        super().__init__(**kwargs)
        self.rows = rows
        self.highlighted = 0
        self._laid_out: tuple[int, list[list[Text]]] | None = None  # (width, each row's lines)

    @property
    def keys(self) -> list[str]:
        return list(self.rows)

    @property
    def text_width(self) -> int:
        return max(1, self.scrollable_content_region.width - 2 * self.MARGIN)

    def update_rows(self) -> None:
        """Draw the rows again after their figures changed."""
        self._laid_out = None
        self._size_to_rows()
        self.refresh()

    def _lines(self, width: int) -> list[list[Text]]:
        # Laid out once per width, not once per line drawn.
        if self._laid_out is None or self._laid_out[0] != width:
            self._laid_out = (width, [row.lines(width) for row in self.rows.values()])
        return self._laid_out[1]

    def _size_to_rows(self) -> None:
        total = sum(len(lines) for lines in self._lines(self.text_width))
        self.virtual_size = Size(self.scrollable_content_region.width, total)

    def on_resize(self) -> None:
        self._size_to_rows()

    def text_lines(self) -> list[str]:
        """Every line of the menu at its current width, scrolled or not, as plain text."""
        return [line.plain for lines in self._lines(self.text_width) for line in lines]

    def row_span(self, index: int) -> tuple[int, int]:
        """(first line, number of lines) of row `index` at the current width."""
        heights = [len(lines) for lines in self._lines(self.text_width)]
        return sum(heights[:index]), heights[index]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        line_number = self.scroll_offset.y + y
        for index, lines in enumerate(self._lines(self.text_width)):
            if line_number < len(lines):
                return self._strip(lines[line_number], index == self.highlighted, width)
            line_number -= len(lines)
        return Strip.blank(width, self.rich_style)

    def _strip(self, line: Text, highlighted: bool, width: int) -> Strip:
        text = Text(" " * self.MARGIN)
        text.append_text(line)
        text.pad_right(width - text.cell_len)
        if highlighted:
            text.stylize(self.get_component_rich_style("menu--highlight"))
        return Strip(text.render(self.app.console), width).apply_style(self.rich_style)

    def action_move(self, delta: int) -> None:
        self.action_move_to((self.highlighted + delta) % len(self.rows))

    def action_move_to(self, index: int) -> None:
        self.highlighted = index % len(self.rows)
        self.refresh()
        top, height = self.row_span(self.highlighted)
        self.scroll_to_region(Region(0, top, self.size.width, height), animate=False)

    def action_choose(self) -> None:
        self.post_message(self.Chosen(self.keys[self.highlighted]))

    def on_click(self, event: Click) -> None:
        line, index = event.y + self.scroll_offset.y, 0
        for index in range(len(self.rows)):
            top, height = self.row_span(index)
            if top <= line < top + height:
                break
        self.action_move_to(index)
        self.action_choose()
