"""A chart with its legend underneath: each series in its own colour, named outside the plotted area.

plotext draws its legend inside the plot, over the data; these charts give plotext no labels and
draw the legend here instead, from the same colours they gave the series. One palette serves every
chart, and `LegendPlot.use` hands out a colour per series so that no two entries of one chart share one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.containers import Vertical
from textual.widget import Widget
from textual_plotext import PlotextPlot

RGB = tuple[int, int, int]

# Fourteen colours at least 85 apart (RGB distance), each clear on the app's dark background,
# in the order charts hand them out.
PALETTE: tuple[RGB, ...] = (
    (0, 130, 200),  # blue
    (245, 130, 48),  # orange
    (60, 180, 75),  # green
    (230, 25, 75),  # red
    (145, 30, 180),  # purple
    (70, 240, 240),  # cyan
    (240, 50, 230),  # magenta
    (255, 225, 25),  # yellow
    (250, 190, 212),  # pink
    (0, 200, 150),  # sea green
    (170, 255, 195),  # mint
    (140, 70, 20),  # brown
    (128, 128, 128),  # grey
    (110, 110, 255),  # periwinkle
)


@dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: RGB
    glyph: str = "█"

    def text(self) -> Text:
        r, g, b = self.colour
        return Text.assemble((self.glyph, f"rgb({r},{g},{b})"), " ", self.label)


class Legend(Widget):
    """The entries of a legend, packed into as many lines as the width needs; an entry never breaks."""

    DEFAULT_CSS = "Legend { height: auto; padding: 0 1; color: $text-muted; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.entries: list[LegendEntry] = []

    def show(self, entries: list[LegendEntry]) -> None:
        self.entries = list(entries)
        self.refresh(layout=True)

    def lines(self, width: int) -> list[Text]:
        lines: list[Text] = []
        for entry in self.entries:
            part = entry.text()
            if lines and lines[-1].cell_len + 3 + part.cell_len <= width:
                lines[-1].append("   ")
                lines[-1].append_text(part)
            else:
                lines.append(part)
        return lines

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text("\n").join(self.lines(self.size.width))


class LegendPlot(Vertical):
    """A plotext plot of a fixed height with its legend underneath.

    Drawing code calls `begin()`, then `use(label)` for the colour of each series it draws (the same
    label gets the same colour), then `finish()`; the legend lists what was used, in that order.
    """

    DEFAULT_CSS = """
    LegendPlot { height: auto; }
    LegendPlot > PlotextPlot { height: 14; }
    """
    PLOT_HEIGHT = 14
    CANVAS: type[Widget] = PlotextPlot

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.legend: list[LegendEntry] = []
        self._colours: dict[str, RGB] = {}

    def compose(self):
        yield self.CANVAS()
        yield Legend()

    @property
    def plot(self) -> Widget:
        """What the chart draws on: a plotext plot, unless the chart draws its own."""
        return self.query_one(self.CANVAS)

    @property
    def plt(self):
        return self.plot.plt

    def begin(self, height: int | None = None) -> None:
        self.legend = []
        self._colours = {}
        if isinstance(self.plot, PlotextPlot):
            self.plt.clear_figure()
        self.plot.styles.height = height or self.PLOT_HEIGHT

    def use(self, label: str, glyph: str = "█", colour: RGB | None = None) -> RGB:
        """The colour of the series `label`: the next free one of the palette, unless given."""
        if label not in self._colours:
            taken = set(self._colours.values())
            if colour is None:
                free = [c for c in PALETTE if c not in taken]
                if not free:
                    raise ValueError(f"more series than the palette has colours ({len(PALETTE)})")
                colour = free[0]
            elif colour in taken:
                raise ValueError(f"the colour of {label!r} is taken by another series")
            self._colours[label] = colour
            self.legend.append(LegendEntry(label, colour, glyph))
        return self._colours[label]

    def finish(self) -> None:
        self.query_one(Legend).show(self.legend)
        self.plot.refresh()


def nice_ticks(end: float, count: int = 5) -> list[float]:
    """About `count` + 1 round ticks from 0 to `end` (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if end <= 0:
        return [0.0]
    raw = end / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(end / step + 1e-9) + 1)]


def padded(labels: list[str], width: int) -> list[str]:
    """Tick labels right-aligned to one width, so plots stacked above each other line up."""
    return [" " * max(0, width - cell_len(label)) + label for label in labels]
