"""Charts of a training result: the peak by category (or memory by component) per strategy,
throughput, and the recorded step in time (textual-plotext)."""

from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

from ddpfsdp.demos.measure import lanes
from ddpfsdp.quiz import evidence as ev

MIB = 2**20


class ResultChart(PlotextPlot):
    """Rank 0's peak as a stacked bar of what it is made of, for each strategy (memory by component
    for a result without the breakdown); throughput beside it when measured."""

    def plot_result(self, result: dict[str, Any]) -> bool:
        """Draw the result; False when it has nothing to chart (concept demos)."""
        runs = ev.runs(result)
        memory = {name: ev.memory_by_component(run) for name, run in runs.items()}
        memory = {name: m for name, m in memory.items() if m}
        plt = self.plt
        plt.clear_figure()
        if not memory:
            self.refresh()
            return False
        names = list(memory)
        components = [c for c in ("params", "grads", "optimizer", "peak") if any(c in m for m in memory.values())]
        speeds = {name: ev.throughput(runs[name]).get("samples_per_s") for name in names}
        speeds = {k: v for k, v in speeds.items() if v}
        breakdowns = {name: ev.peak_breakdown(runs[name]) for name in names}
        categories = [c for c in ev.PEAK_CATEGORIES if any(c in b for b in breakdowns.values())]
        # Drawn on subplot objects: plotext's figure-level multiple_bar breaks once subplots exist.
        plt.subplots(1, 2 if speeds else 1)
        left = plt.subplot(1, 1)
        kind = "simulated" if (result.get("config") or {}).get("simulated") else "measured"
        if categories:
            left.stacked_bar(
                names,
                [[breakdowns[n].get(c, 0.0) / MIB for n in names] for c in categories],
                labels=[c.replace("_", " ") for c in categories],
            )
            left.title("Peak of rank 0 by category (MiB), " + kind)
        else:
            left.multiple_bar(
                names,
                [[memory[n].get(c, 0.0) / MIB for n in names] for c in components],
                labels=components,
            )
            left.title("Memory per rank (MiB), " + kind)
        if speeds:
            right = plt.subplot(1, 2)
            right.bar(list(speeds), list(speeds.values()))
            right.title("Throughput (samples/s), measured")
        self.refresh()
        return True


class TimelineChart(PlotextPlot):
    """The recorded step: memory over time with unit boundaries, and a lane chart per rank.

    Left: rank 0's live bytes and parameter bytes held (MiB) over the step, a dotted line at the
    end of each unit's forward; for `compare`, the parameter bytes of every strategy over the
    fraction of its step, so DDP's flat line sits beside FSDP's sawtooth. Right: per rank, a compute
    lane and a communication lane (each collective from issue to completion).
    """

    def plot_result(self, result: dict[str, Any]) -> bool:
        """Draw the timeline; False when the result has none."""
        timelines = {name: run.get("timeline") for name, run in ev.runs(result).items()}
        timelines = {name: t for name, t in timelines.items() if t and t.get("ranks") and t["ranks"][0]}
        plt = self.plt
        plt.clear_figure()
        if not timelines:
            self.refresh()
            return False
        plt.subplots(1, 2)
        left, right = plt.subplot(1, 1), plt.subplot(1, 2)
        if len(timelines) > 1:
            self._compare_memory(left, timelines)
        else:
            self._memory(left, next(iter(timelines.values()))["ranks"][0])
        name, timeline = next(iter(timelines.items())) if len(timelines) == 1 else (
            next(((n, t) for n, t in timelines.items() if n == "fsdp-full"), next(iter(timelines.items()))))
        self._lanes(right, timeline["ranks"], name)
        self.refresh()
        return True

    @staticmethod
    def _memory(plot: Any, rank: dict[str, Any]) -> None:
        samples = rank.get("memory", {}).get("samples", [])
        if samples:
            plot.plot([t * 1000 for t, _ in samples], [b / MIB for _, b in samples], label="live")
        params = rank.get("params", [])
        if params:
            times, held = _steps([t for t, _, _ in params], [h for _, h, _ in params], rank.get("duration_s"))
            plot.plot([t * 1000 for t in times], [h / MIB for h in held], label="params held")
        for span in lanes.unit_spans(rank, "forward"):
            plot.vline(span["end_s"] * 1000, "gray")
        plot.title(f"Rank {rank.get('rank')}: memory over the step (MiB), measured")
        plot.xlabel("ms")

    @staticmethod
    def _compare_memory(plot: Any, timelines: dict[str, dict[str, Any]]) -> None:
        highest = 0.0
        for name, timeline in timelines.items():
            rank = timeline["ranks"][0]
            duration = rank.get("duration_s") or 1.0
            params = rank.get("params", [])
            if not params:
                continue
            times, held = _steps([t for t, _, _ in params], [h for _, h, _ in params], duration)
            plot.plot([t / duration for t in times], [h / MIB for h in held], label=name)
            highest = max(highest, max(held) / MIB)
        if highest:
            plot.ylim(0, highest * 1.05)  # from zero, so a strategy holding a shard sits visibly lower
        plot.title("Parameter bytes held over the step (MiB), rank 0, measured")
        plot.xlabel("fraction of the step")

    @staticmethod
    def _lanes(plot: Any, ranks: list[dict[str, Any]], name: str) -> None:
        ticks, labels = [], []
        for index, rank in enumerate(ranks):
            base = 3 * index
            for start, end in lanes.compute_intervals(rank):
                plot.plot([start * 1000, end * 1000], [base + 1, base + 1], color="green", marker="hd")
            for start, end in lanes.comm_intervals(rank):
                plot.plot([start * 1000, end * 1000], [base, base], color="orange", marker="hd")
            ticks += [base, base + 1]
            labels += [f"r{rank.get('rank')} comm", f"r{rank.get('rank')} compute"]
        plot.yticks(ticks, labels)
        plot.ylim(-1, 3 * len(ranks) - 1)
        plot.title(f"{name}: compute and communication lanes per rank (ms)")


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
