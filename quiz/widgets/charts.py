"""Charts of a training result: rank 0's peak per strategy, and for `compare` the strategies side by
side (throughput, and the bytes each rank sends beside the analytic model's figure).

Each chart is a `LegendPlot`: its series get distinct colours and its legend sits under the plot.
The recorded step in time is drawn by `timeline_chart`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rich.cells import cell_len
from rich.text import Text
from textual.widget import Widget

from ddpfsdp.demos.result.schema import PEAK_CATEGORY_NAMES, STATE_KINDS, CommOp, DemoResult, as_result
from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz.widgets.legend import RGB, LegendPlot, nice_ticks

MIB = 2**20

# Short names for the x axis, so four strategies fit under their bars at 80 columns.
SHORT_NAMES = {"fsdp-grad-op": "grad-op", "fsdp-full": "full"}


def _kind(result: DemoResult) -> str:
    return "simulated" if result.config.simulated else "measured"


@dataclass(frozen=True)
class Bar:
    label: str
    parts: list[tuple[RGB, float]]  # (colour, value), bottom of the stack first
    mark: float | None = None  # a value to mark on the bar (the analytic figure)


def apportion(values: list[float], cells: int) -> list[int]:
    """Whole cells for each value summing to `cells` (largest remainders); a value above zero gets at
    least one cell, taken from the largest part, so every part on a bar can be seen."""
    total = sum(values)
    if total <= 0 or cells <= 0:
        return [0] * len(values)
    exact = [v / total * cells for v in values]
    whole = [int(x) for x in exact]
    for index in sorted(range(len(values)), key=lambda i: exact[i] - whole[i], reverse=True)[: cells - sum(whole)]:
        whole[index] += 1
    for index, value in enumerate(values):
        if value > 0 and whole[index] == 0:
            largest = max(range(len(whole)), key=whole.__getitem__)
            if whole[largest] > 1:
                whole[largest] -= 1
                whole[index] = 1
    return whole


class StackedBars(Widget):
    """Horizontal stacked bars, one line each, on a shared scale with an axis: a part of a few percent
    still gets its cells, which a bar plotted in whole rows would round away."""

    DEFAULT_CSS = "StackedBars { height: auto; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.title, self.unit = "", "MiB"
        self.bars: list[Bar] = []
        self.mark_colour: RGB | None = None

    def show(self, title: str, bars: list[Bar], mark_colour: RGB | None = None) -> None:
        self.title, self.bars, self.mark_colour = title, bars, mark_colour
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text("\n").join(self.lines(self.size.width))

    def lines(self, width: int) -> list[Text]:
        if not self.bars:
            return []
        label_width = max(cell_len(bar.label) for bar in self.bars) + 1
        cells = max(10, width - label_width - 1)
        top = max(max(sum(v for _, v in bar.parts), bar.mark or 0.0) for bar in self.bars) or 1.0
        per_cell = top / cells
        lines = [Text(self.title, style="bold")]
        for bar in self.bars:
            line = Text(bar.label.ljust(label_width))
            counts = apportion([v for _, v in bar.parts], round(sum(v for _, v in bar.parts) / per_cell))
            drawn = "".join("█" * n for n in counts)
            line.append(drawn)
            start = label_width
            for (colour, _), count in zip(bar.parts, counts):
                line.stylize(_style(colour), start, start + count)
                start += count
            if bar.mark is not None and self.mark_colour is not None:
                line = _with_mark(line, label_width + min(cells - 1, round(bar.mark / per_cell)), self.mark_colour)
            lines.append(line)
        lines += _axis(label_width, cells, per_cell, self.unit)
        return lines


def _style(colour: RGB) -> str:
    r, g, b = colour
    return f"rgb({r},{g},{b})"


def _with_mark(line: Text, column: int, colour: RGB) -> Text:
    """`line` with "┃" in `colour` at `column` (over the bar, or past its end)."""
    if line.cell_len <= column:
        line.append(" " * (column - line.cell_len))
        line.append("┃", style=_style(colour))
        return line
    marked = line[:column]
    marked.append("┃", style=_style(colour))
    marked.append_text(line[column + 1 :])
    return marked


def _axis(label_width: int, cells: int, per_cell: float, unit: str) -> list[Text]:
    ticks = [(t, round(t / per_cell)) for t in nice_ticks(per_cell * cells)]
    ticks = [(t, min(p, cells - 1)) for t, p in ticks]
    rule = "".join("┬" if any(p == i for _, p in ticks) else "─" for i in range(cells))
    labels = [" "] * (cells + 8)
    for value, position in ticks:
        text = f"{value:g}"
        start = min(position, cells - len(text))
        if all(c == " " for c in labels[max(0, start - 1) : start + len(text) + 1]):
            labels[start : start + len(text)] = list(text)
    shown = "".join(labels).rstrip()
    return [Text(" " * label_width + rule, style="dim"),
            Text(" " * label_width + shown + f"  {unit}", style="dim")]


class MemoryChart(LegendPlot):
    """Rank 0's peak per strategy, stacked by what it is made of (memory by component for a result
    without the breakdown), with the analytic model's model state marked on each bar."""

    CANVAS = StackedBars
    DEFAULT_CSS = "MemoryChart > StackedBars { height: auto; }"

    def begin(self, height: int | None = None) -> None:
        super().begin(height)
        self.plot.styles.height = "auto"

    def plot_result(self, result: DemoResult | Mapping[str, Any]) -> bool:
        """Draw the result; False when it has nothing to chart (concept demos)."""
        result = as_result(result)
        runs = ev.runs(result)
        memory = {name: ev.memory_by_component(run) for name, run in runs.items()}
        names = [name for name, m in memory.items() if m]
        self.begin()
        if not names:
            self.plot.show("", [])
            self.finish()
            return False
        breakdowns = {name: ev.peak_breakdown(runs[name]) for name in names}
        categories = [c for c in PEAK_CATEGORY_NAMES if any(c in b for b in breakdowns.values())]
        if categories:
            values = breakdowns
            title = f"Peak of rank 0 by category (MiB), {_kind(result)}"
        else:
            categories = [c for c in STATE_KINDS if any(c in memory[n] for n in names)]
            values = memory
            title = f"Model state of rank 0 (MiB), {_kind(result)}"
        colours = {c: self.use(c.replace("_", " ")) for c in categories}
        bars = [Bar(name, [(colours[c], values[name].get(c, 0.0) / MIB) for c in categories], _theory_state(runs[name]))
                for name in names]
        marked = any(bar.mark is not None for bar in bars)
        mark = self.use("theory: model state (analytic)", glyph="┃") if marked else None
        self.plot.show(title, bars, mark)
        self.finish()
        return True


def _theory_state(run: DemoResult) -> float | None:
    state = (run.theory or {}).get("model_state_bytes")
    return state / MIB if isinstance(state, (int, float)) and state > 0 else None


class CompareChart(LegendPlot):
    """For `compare`: throughput per strategy, and the wire bytes each rank sends per step, measured
    beside the analytic model's figure. Nothing to draw for a single strategy."""

    PLOT_HEIGHT = 13

    def plot_result(self, result: DemoResult | Mapping[str, Any]) -> bool:
        result = as_result(result)
        runs = ev.runs(result)
        self.begin()
        if len(runs) < 2:
            self.finish()
            return False
        names = list(runs)
        labels = [SHORT_NAMES.get(n, n) for n in names]
        speeds = [ev.throughput(runs[n]).get("samples_per_s", 0.0) for n in names]
        wire = [_wire_bytes(ev.comm_per_step(runs[n])) / MIB for n in names]
        theory = [_wire_bytes(ev.theory_comm(runs[n])) / MIB for n in names]
        measured = self.use(f"{_kind(result)}")
        plt = self.plt
        plt.subplots(1, 2)
        left, right = plt.subplot(1, 1), plt.subplot(1, 2)
        if any(speeds):
            left.bar(labels, speeds, color=measured, width=0.6)
            left.title("Throughput (samples/s)")
        else:
            left.title("Throughput: not measured")
        if any(theory):
            right.multiple_bar(labels, [wire, theory], color=[measured, self.use("theory (analytic model)")], width=0.8)
        else:
            right.bar(labels, wire, color=measured, width=0.6)
        right.title("Sent per rank per step (MiB)")
        self.finish()
        return True


def _wire_bytes(per_op: Mapping[str, CommOp | Mapping[str, Any]]) -> float:
    """What a ring sends per rank per step, over every op (measured, or the analytic model's table)."""
    ops = [CommOp.from_json(v) for v in per_op.values() if isinstance(v, (CommOp, Mapping))]
    return sum(float(op.wire_bytes_per_rank or 0) for op in ops)
