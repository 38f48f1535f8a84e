"""Charts of a training result: the peak by category (or memory by component) per strategy, and
throughput (textual-plotext)."""

from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

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
        if categories:
            left.stacked_bar(
                names,
                [[breakdowns[n].get(c, 0.0) / MIB for n in names] for c in categories],
                labels=[c.replace("_", " ") for c in categories],
            )
            left.title("Peak of rank 0 by category (MiB), measured")
        else:
            left.multiple_bar(
                names,
                [[memory[n].get(c, 0.0) / MIB for n in names] for c in components],
                labels=components,
            )
            left.title("Memory per rank (MiB), measured")
        if speeds:
            right = plt.subplot(1, 2)
            right.bar(list(speeds), list(speeds.values()))
            right.title("Throughput (samples/s), measured")
        self.refresh()
        return True
