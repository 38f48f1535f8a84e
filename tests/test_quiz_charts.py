"""The evidence charts: every series in a colour of its own, named in a legend under the plot, and the
two timeline plots on one time axis."""

from __future__ import annotations

import itertools

import pytest
from rich.style import Style
from saved_results import compare_result, training_run, wrap_result
from textual.app import App
from textual_plotext import PlotextPlot

from ddpfsdp.quiz.widgets.charts import CompareChart, MemoryChart
from ddpfsdp.quiz.widgets.legend import PALETTE, Legend, LegendEntry, LegendPlot
from ddpfsdp.quiz.widgets.timeline_chart import LanesPlot, StepMemoryPlot, TimelineChart

RESULTS = {
    "ddp": lambda: training_run("ddp"),
    "fsdp-full": lambda: training_run("fsdp-full"),
    "compare": compare_result,
    "ddp without a breakdown": lambda: _without_breakdown(training_run("ddp", timeline=False)),
}


def _without_breakdown(result: dict) -> dict:
    for rank in result["memory"]["ranks"]:
        rank.pop("peak_breakdown", None)  # both ranks may be one dict
    return result


class Charts(App):
    def compose(self):
        yield MemoryChart()
        yield CompareChart()
        yield TimelineChart()


def _drawn_colours(plot: PlotextPlot) -> set[tuple[int, int, int]]:
    """Every foreground colour in the plot as drawn."""
    rendered = plot.render()
    colours = set()
    for span in rendered.spans:
        style = Style.parse(span.style) if isinstance(span.style, str) else span.style
        if style.color is not None and style.color.triplet is not None:
            colours.add(tuple(style.color.triplet))
    return colours


def assert_legend_sound(chart: LegendPlot) -> None:
    """No two entries share a colour, and each entry's colour is drawn in the plot."""
    colours = [entry.colour for entry in chart.legend]
    shared = [(a.label, b.label) for a, b in itertools.combinations(chart.legend, 2) if a.colour == b.colour]
    assert not shared, f"legend entries share a colour: {shared}"
    assert len(set(colours)) == len(colours)
    drawn = _drawn_colours(chart.plot)
    missing = [entry.label for entry in chart.legend if entry.colour not in drawn]
    assert not missing, f"in the legend but not drawn in its colour: {missing}"


@pytest.mark.parametrize("name", list(RESULTS))
async def test_no_two_legend_entries_of_any_chart_share_a_colour(name):
    app = Charts()
    async with app.run_test(size=(100, 80)) as pilot:
        result = RESULTS[name]()
        assert app.query_one(MemoryChart).plot_result(result)
        assert app.query_one(CompareChart).plot_result(result) == (name == "compare")
        assert app.query_one(TimelineChart).plot_result(result) == (name != "ddp without a breakdown")
        await pilot.pause()
        charts = [app.query_one(MemoryChart), app.query_one(StepMemoryPlot), app.query_one(LanesPlot)]
        if name == "compare":
            charts.append(app.query_one(CompareChart))
        for chart in charts:
            if chart.legend:
                assert_legend_sound(chart)
        memory = [entry.label for entry in app.query_one(MemoryChart).legend]
        if name == "compare":
            # Every category of the peak appears in some strategy, plus the analytic model's mark:
            # 13 entries, 13 colours.
            assert len(memory) == 13 and "theory: model state (analytic)" in memory
        # Each legend is under its plot, not drawn over it.
        for chart in charts:
            assert chart.query_one(Legend).region.y >= chart.plot.region.bottom


def test_the_check_fails_when_two_entries_share_a_colour():
    class Fake:
        legend = [LegendEntry("params", PALETTE[0]), LegendEntry("ddp buckets", PALETTE[0])]

    with pytest.raises(AssertionError, match="share a colour"):
        assert_legend_sound(Fake())


def test_the_palette_is_distinct_enough_to_tell_apart():
    assert len(set(PALETTE)) == len(PALETTE)
    for a, b in itertools.combinations(PALETTE, 2):
        assert sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5 >= 85, (a, b)


async def test_a_chart_refuses_a_colour_already_taken_and_more_series_than_colours():
    app = Charts()
    async with app.run_test(size=(100, 40)):
        chart = app.query_one(MemoryChart)
        chart.begin()
        first = chart.use("params")
        assert chart.use("params") == first  # one series, one colour
        with pytest.raises(ValueError, match="taken"):
            chart.use("grads", colour=first)
        for index in range(len(PALETTE) - 1):
            chart.use(f"series {index}")
        with pytest.raises(ValueError, match="more series than the palette"):
            chart.use("one too many")


async def test_the_timeline_plots_share_one_time_axis_in_ms():
    app = Charts()
    async with app.run_test(size=(100, 80)) as pilot:
        result = training_run("ddp")
        assert app.query_one(TimelineChart).plot_result(result)
        await pilot.pause()
        memory, lanes = app.query_one(StepMemoryPlot), app.query_one(LanesPlot)

        def axis(chart):
            lines = chart.plot.render().plain.splitlines()
            bottom = next(i for i, line in enumerate(lines) if "└" in line)
            return lines[bottom : bottom + 3]  # the frame with its ticks, the tick labels, the unit

        # Same frame, same ticks at the same columns, same labels: a time above is the same time below.
        # (The upper plot's unit boundaries meet its frame as ┴; they are not ticks.)
        upper = axis(memory)
        assert [upper[0].replace("┴", "─"), *upper[1:]] == axis(lanes)
        ticks = axis(memory)[1].split()
        # From 0 to the longer of the two ranks' steps (110 ms), in round steps of 25 ms.
        assert ticks == ["0", "25", "50", "75", "100"]
        rendered = memory.plot.render().plain + lanes.plot.render().plain
        assert rendered.count("ms from the start of the recorded step") == 2
        assert "Rank 0: memory over the step (MiB), measured" in rendered
        assert "ddp: compute and communication per rank, measured" in rendered


async def test_a_concept_demo_has_no_training_charts():
    app = Charts()
    async with app.run_test(size=(100, 40)):
        assert not app.query_one(MemoryChart).plot_result(wrap_result())
        assert not app.query_one(CompareChart).plot_result(wrap_result())
        assert not app.query_one(TimelineChart).plot_result(wrap_result())
