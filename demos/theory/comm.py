"""Communication per training step, per rank, of each strategy, on rings (`collectives.wire_factor`).

DDP all-reduces the gradients (2 Psi); ZeRO-1 and ZeRO-2 reduce-scatter gradients and all-gather
the updated parameters (2 Psi, the same volume as DDP); ZeRO-3 / FSDP full all-gathers the
parameters in forward and again in backward and reduce-scatters the gradients (3 Psi, 1.5x DDP);
HSDP does ZeRO-3's within its groups and all-reduces the gradient shard across them.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ddpfsdp.demos.collectives import wire_factor
from ddpfsdp.demos.theory.arguments import read_choice
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size

COMM_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
"""The collectives data-parallel training issues, and the model answers questions about."""


def check_collective(op: str) -> str:
    return read_choice(op, COMM_OPS, "collective")


def op_figures(count: int | None, logical_bytes: int, factor: float) -> dict[str, int | None]:
    """One op's row: calls (None: unknown), logical bytes, and the bytes one rank sends at `factor`."""
    return {"count": count, "bytes": int(logical_bytes), "wire_bytes_per_rank": round(logical_bytes * factor)}


def step_comm(
    strategy: str,
    params: int,
    gpus: int,
    precision: str,
    group_size: int | None = None,
    unit_params: Iterable[int] | None = None,
) -> dict[str, dict[str, int | None]]:
    """Collectives per training step, per rank: {op: {count, bytes, wire_bytes_per_rank}}.

    `bytes` is the logical buffer size summed over calls (all-gather: the gathered output;
    reduce-scatter: the full input); wire bytes apply the ring factor of the op's group. `count`
    is given where it can be known: one all-gather and one reduce-scatter per non-empty FSDP unit
    (and a second all-gather per unit resharded after forward; FSDP2 does not reshard the root);
    None where it depends on how an implementation packs tensors into buckets (DDP, ZeRO-1/2).
    ZeRO-1/2 follow the paper: reduce-scatter the gradients, all-gather the updated parameters.
    """
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    group_size = resolve_group_size(strategy, gpus, group_size)
    units = list(unit_params) if unit_params is not None else None
    known_units = units is not None and len(units) > 0
    nonempty = sum(1 for count in units if count > 0) if known_units else None
    grad_bytes = params * spec.reduce_bytes
    if strategy == "ddp":
        return {"all_reduce": op_figures(None, grad_bytes, wire_factor("all_reduce", gpus))}
    if strategy in ("zero1", "zero2"):
        # Each rank updates its shard of the held parameters, in the held precision, and the
        # updated shards are gathered; how many calls that takes is the implementation's choice.
        return {
            "reduce_scatter": op_figures(None, grad_bytes, wire_factor("reduce_scatter", gpus)),
            "all_gather": op_figures(None, params * spec.param_bytes, wire_factor("all_gather", gpus)),
        }
    shard_group = gpus if strategy == "zero3" else group_size
    if known_units:
        resharded = sum(units[:-1])
        gathered = (sum(units) + resharded) * spec.gather_bytes
        gathers = nonempty + sum(1 for count in units[:-1] if count > 0)
    else:
        gathered = 2 * params * spec.gather_bytes
        gathers = None
    ops = {
        "all_gather": op_figures(gathers, gathered, wire_factor("all_gather", shard_group)),
        "reduce_scatter": op_figures(nonempty, grad_bytes, wire_factor("reduce_scatter", shard_group)),
    }
    if strategy == "hsdp":
        replicas = gpus // group_size
        if replicas > 1:
            shard_bytes = math.ceil(params / group_size) * spec.reduce_bytes
            ops["all_reduce"] = op_figures(nonempty, shard_bytes, wire_factor("all_reduce", replicas))
    return ops


def total_wire_bytes(ops: dict[str, dict[str, Any]]) -> int:
    return sum(op["wire_bytes_per_rank"] for op in ops.values())

