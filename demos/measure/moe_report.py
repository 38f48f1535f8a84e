"""`demo moe`'s result for a person (rich; no torch): what each rank holds and sent, each layer's load in
the recorded step, the loss beside one process's, and the recorded step in time.

`render` prints it for the CLI; `evidence_view` gives the quiz's evidence panel the same figures, fitted
to the panel. Both read the result's `moe` block (`result.expert_record`), typed or in its JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from ddpfsdp.demos.base.labels import Fitted
from ddpfsdp.demos.base.units import format_bytes
from ddpfsdp.demos.measure.expert_load import load_per_layer, off_rank_bytes
from ddpfsdp.demos.result.schema import DemoResult, ExpertRun, as_result

THEORY_NOTE = ("theory: demos/theory/expert_parallel.py (routed evenly: T·k·d·c·(ep-1)/ep off-rank per all-to-all, "
               "four per layer and step); every other figure is this run's.")


def _moe(result: DemoResult) -> ExpertRun:
    return result.moe or ExpertRun()


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def _mib(num_bytes: float) -> str:
    return format_bytes(num_bytes, "MiB", digits=2)


def ranks_table(result: DemoResult) -> Table:
    """Per rank: its place in its ep group, the experts it holds, its parameter bytes (its experts whole, its
    FSDP shard of the dense part) and the bytes its all-to-alls carried in the recorded step."""
    moe = _moe(result)
    table = _table(f"Each rank: {moe.experts} experts per layer over ep {moe.ep}, top-{moe.top_k}, capacity factor "
                   f"{moe.capacity_factor:g}", "rank", "ep group.rank", "experts", "experts' params",
                   "dense shard", "all-to-all")
    for rank in moe.ranks:
        table.add_row(str(rank["rank"]), f"{rank['ep_group']}.{rank['ep_rank']}",
                      ",".join(str(e) for e in rank["experts"]), _mib(rank["expert_param_bytes"]),
                      _mib(rank["dense_param_bytes"]), _mib(sum(rank["all_to_all_bytes"])))
    return table


def load_table(result: DemoResult) -> Table:
    """Per layer: slots per expert over every rank, slots dropped, rows each rank's experts computed, the
    busiest expert's load over the mean, and the aux loss."""
    moe = _moe(result)
    capacity = moe.ranks[0]["layers"][0]["capacity"] if moe.ranks and moe.ranks[0]["layers"] else 0
    table = _table(f"Load in the recorded step ({capacity} slots per expert per rank)", "layer",
                   "slots per expert", "dropped", "rows per rank", "busiest", "aux loss")
    for index, layer in enumerate(load_per_layer(moe)):
        table.add_row(str(index), " ".join(str(x) for x in layer["loads"]), str(layer["dropped"]),
                      " ".join(str(x) for x in layer["computed"]), f"{layer['expert_imbalance']:.2f}x",
                      f"{layer['aux']:.5f}")
    return table


def loss_line(result: DemoResult) -> str:
    moe = _moe(result)
    reference = moe.reference["losses"] if moe.reference else []
    measured = ", ".join(f"{x:.5f}" for x in result.loss or [])
    return (f"loss per step: {measured}; the same MoE on one process: {', '.join(f'{x:.5f}' for x in reference)}"
            if reference else f"loss per step: {measured}")


def theory_line(result: DemoResult) -> str:
    """Bytes each rank sent to other ranks in the recorded step's all-to-alls, beside theory's for an even,
    dropless routing of the same tokens."""
    routed = ((result.theory or {}).get("all_to_all") or {}).get("bytes")
    sent = off_rank_bytes(_moe(result))
    if routed is None or not sent:
        return ""
    return (f"sent to other ranks by the all-to-alls of the recorded step, per rank (from the split sizes): "
            f"{', '.join(_mib(x) for x in sent.values())}; theory {_mib(routed)} for an even, dropless routing")


def render(result: DemoResult | Mapping[str, Any], console: Any) -> None:
    from ddpfsdp.demos.measure.report import _fit, timeline_lines

    result = as_result(result)
    console.print(result.config.description or "")
    console.print(Fitted(ranks_table(result)))
    console.print(Fitted(load_table(result)))
    console.print(loss_line(result))
    line = theory_line(result)
    if line:
        console.print(line)
    for text in timeline_lines(result.timeline, _fit(console, 12)):
        console.print(text, markup=False, highlight=False)
    console.print(f"[dim]{THEORY_NOTE}[/]")
    for note in result.extra.get("notes") or []:
        console.print(f"[dim]{note}[/]")


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """What the quiz's evidence panel shows of an MoE run under its checks: each layer's load and drops,
    what each rank holds and sent, and the loss beside one process's, at most `width` columns wide."""
    from rich.text import Text

    result = as_result(result)
    if result.moe is None:
        return []
    return [Fitted(load_table(result)), Fitted(ranks_table(result)), Text(loss_line(result))]
