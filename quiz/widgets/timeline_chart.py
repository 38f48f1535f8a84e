"""The recorded step in time: memory over the step above, a compute and a communication lane per
rank below, on one time axis in ms.

Both plots get the same x range (0 to the longest recorded rank step), the same ticks and y labels
of the same width, so a time on one sits straight above the same time on the other. For `compare`
the upper plot holds each strategy's parameter bytes over its own recorded step (DDP's flat line
beside FSDP's sawtooth) and the lanes are FSDP full sharding's.
"""

from __future__ import annotations

from typing import Any, Mapping

from textual.containers import Vertical

from ddpfsdp.demos.measure import lanes
from ddpfsdp.demos.result.schema import DemoResult, Timeline, as_result
from ddpfsdp.demos.result.step_record import RankStep
from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz.widgets.legend import LegendPlot, nice_ticks, padded

MIB = 2**20
LABEL_WIDTH = 10  # "r0 compute": the y labels of both plots are this wide, so their plots line up


def _value_ticks(top: float) -> list[float]:
    return [top * i / 3 for i in range(4)] if top > 0 else [0.0]


def _shared_time_axis(plot: Any, end_ms: float) -> None:
    plot.xlim(0, end_ms)
    ticks = nice_ticks(end_ms)
    plot.xticks(ticks, [f"{t:g}" for t in ticks])
    plot.xlabel("ms from the start of the recorded step")


def _steps(times: list[float], values: list[float], end: float | None) -> tuple[list[float], list[float]]:
    """A step line through sparse samples: each value holds until the next sample."""
    out_t, out_v = [], []
    for i, (t, v) in enumerate(zip(times, values)):
        out_t.append(t)
        out_v.append(v)
        following = times[i + 1] if i + 1 < len(times) else end
        if following is not None:
            out_t.append(following)
            out_v.append(v)
    return out_t, out_v


class StepMemoryPlot(LegendPlot):
    PLOT_HEIGHT = 12

    def draw(self, timelines: Mapping[str, Timeline], end_ms: float) -> None:
        self.begin()
        top = self._compare(timelines) if len(timelines) > 1 else self._one(next(iter(timelines.values())).ranks[0])
        plt = self.plt
        ticks = _value_ticks(top * 1.05)
        plt.ylim(0, ticks[-1])
        plt.yticks(ticks, padded([f"{t:.3g}" for t in ticks], LABEL_WIDTH))
        _shared_time_axis(plt, end_ms)
        self.finish()

    def _one(self, rank: RankStep) -> float:
        plt, top = self.plt, 0.0
        samples = rank.get("memory", {}).get("samples", [])
        if samples:
            values = [b / MIB for _, b in samples]
            plt.plot([t * 1000 for t, _ in samples], values, color=self.use("live bytes", glyph="━"))
            top = max(values)
        params = rank.get("params", [])
        if params:
            times, held = _steps([t for t, _, _ in params], [h / MIB for _, h, _ in params], rank.get("duration_s"))
            plt.plot([t * 1000 for t in times], held, color=self.use("parameter bytes held", glyph="━"))
            top = max(top, max(held))
        ends = lanes.unit_spans(rank, "forward")
        if ends:
            colour = self.use("end of a unit's forward", glyph="│")
            for span in ends:
                plt.vline(span["end_s"] * 1000, colour)
        plt.title(f"Rank {rank.get('rank')}: memory over the step (MiB), measured")
        return top

    def _compare(self, timelines: Mapping[str, Timeline]) -> float:
        """Each strategy's parameter bytes over its own step; strategies that hold the same bytes
        throughout (DDP and zro both keep full parameters) share one line and one legend entry,
        since one line drawn over the other would hide it."""
        plt, top = self.plt, 0.0
        lines: dict[tuple[int, ...], list[str]] = {}
        ranks: dict[tuple[int, ...], RankStep] = {}
        for name, timeline in timelines.items():
            rank = timeline.ranks[0]
            held = tuple(h for _, h, _ in rank.get("params", []))
            if held:
                lines.setdefault(held, []).append(name)
                longest = ranks.get(held)
                if longest is None or (rank.get("duration_s") or 0) > (longest.get("duration_s") or 0):
                    ranks[held] = rank
        for held, names in lines.items():
            rank = ranks[held]
            times, values = _steps([t for t, _, _ in rank["params"]], [h / MIB for h in held], rank.get("duration_s"))
            plt.plot([t * 1000 for t in times], values, color=self.use(" = ".join(names), glyph="━"))
            top = max(top, max(values))
        plt.title("Parameter bytes held by rank 0 (MiB), measured")
        return top


class LanesPlot(LegendPlot):
    """Per rank, a compute lane and a communication lane (each collective from issue to completion)."""

    def draw(self, ranks: list[RankStep], name: str, end_ms: float) -> None:
        # Three rows per rank (compute, communication, a gap), one row per y unit.
        self.begin(height=3 * len(ranks) + 6)
        plt = self.plt
        compute, comm = self.use("compute", glyph="━"), self.use("communication in flight", glyph="━")
        ticks, labels = [], []
        for index, rank in enumerate(ranks):
            base = 3 * index
            for start, end in lanes.compute_intervals(rank):
                plt.plot([start * 1000, end * 1000], [base + 1, base + 1], color=compute, marker="━")
            for start, end in lanes.comm_intervals(rank):
                plt.plot([start * 1000, end * 1000], [base, base], color=comm, marker="━")
            ticks += [base, base + 1]
            labels += [f"r{rank.get('rank')} comm", f"r{rank.get('rank')} compute"]
        plt.yticks(ticks, padded(labels, LABEL_WIDTH))
        plt.ylim(-1, 3 * len(ranks) - 1)
        _shared_time_axis(plt, end_ms)
        plt.title(f"{name}: compute and communication per rank, measured")
        self.finish()


class TimelineChart(Vertical):
    DEFAULT_CSS = "TimelineChart { height: auto; }"

    def compose(self):
        yield StepMemoryPlot()
        yield LanesPlot()

    def plot_result(self, result: DemoResult | Mapping[str, Any]) -> bool:
        """Draw the timeline; False when the result has none."""
        recorded = {name: run.timeline for name, run in ev.runs(as_result(result)).items()}
        timelines = {name: t for name, t in recorded.items() if t is not None and t.ranks and t.ranks[0]}
        if not timelines:
            return False
        name = "fsdp-full" if "fsdp-full" in timelines else next(iter(timelines))
        shown = [t.ranks[0] for t in timelines.values()] + timelines[name].ranks
        end_ms = max((rank.get("duration_s") or 0.0) * 1000 for rank in shown) or 1.0
        self.query_one(StepMemoryPlot).draw(timelines, end_ms)
        self.query_one(LanesPlot).draw(timelines[name].ranks, name, end_ms)
        return True
