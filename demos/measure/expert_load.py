"""The load an MoE run's routers put on its experts and ranks, read from what it recorded
(`result.expert_record`): what `measure.moe_report` prints beside the checks. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddpfsdp.demos.result.expert_record import LayerLoad
from ddpfsdp.demos.result.schema import ExpertRun

Run = ExpertRun | Mapping[str, Any]


def load_per_layer(run: Run) -> list[LayerLoad]:
    """Per layer: the slots each expert drew over every rank, the rows each rank's experts computed, the slots
    dropped over capacity, their imbalance (the largest over the mean) and the mean aux loss."""
    run = ExpertRun.from_json(run)
    out = []
    for layer in range(len(run.ranks[0]["layers"]) if run.ranks else 0):
        rows = [rank["layers"][layer] for rank in run.ranks]
        loads = [sum(r["loads"][e] for r in rows) for e in range(run.experts or 0)]
        computed = [r["computed"] for r in rows]
        out.append(LayerLoad(loads=loads, computed=computed,
                             dropped=sum(max(0, load - r["capacity"]) for r in rows for load in r["loads"]),
                             expert_imbalance=_imbalance(loads), rank_imbalance=_imbalance(computed),
                             aux=sum(r["aux"] for r in rows) / len(rows)))
    return out


def off_rank_bytes(run: Run) -> dict[int, int]:
    """Per rank, the bytes its all-to-alls of one step send to other ranks, from the split sizes: per layer the
    dispatch's slots to others and the combine's outputs to others, forward and again backward."""
    run = ExpertRun.from_json(run)
    row = (run.d_model or 0) * (run.element_bytes or 0)
    out = {}
    for rank in run.ranks:
        me = rank["ep_rank"]
        out[rank["rank"]] = sum(2 * (sum(r["sent"]) - r["sent"][me] + sum(r["received"]) - r["received"][me]) * row
                                for r in rank["layers"])
    return out


def _imbalance(values: Sequence[int]) -> float:
    return max(values) / (sum(values) / len(values)) if values and sum(values) else 0.0
