"""Communication per training step, per rank, of each strategy, on rings (`collectives.wire_factor`).

DDP all-reduces the gradients (2 Psi); ZeroRedundancyOptimizer keeps that all-reduce and then each
rank broadcasts the parameters it updated (3 Psi); ZeRO-1 and ZeRO-2 reduce-scatter gradients and
all-gather the updated parameters (2 Psi, the same volume as DDP at equal element sizes); FSDP grad-op
all-gathers each unit once and reduce-scatters the gradients (2 Psi); ZeRO-3 / FSDP full all-gathers
the parameters in forward and again in backward and reduce-scatters the gradients (3 Psi, 1.5x DDP);
HSDP does ZeRO-3's within its groups and all-reduces the gradient shard across them. Element sizes
differ by implementation: see `implementations`.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, TypedDict

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.arguments import read_choice
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size

COMM_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
"""The collectives data-parallel training issues, and the model answers questions about."""


def check_collective(op: str) -> str:
    return read_choice(op, COMM_OPS, "collective")


class OpFigures(TypedDict):
    """One collective's figures per step: calls (None: unknown), logical bytes, bytes one rank sends."""

    count: int | None
    bytes: int
    wire_bytes_per_rank: int


def op_figures(count: int | None, logical_bytes: int, factor: float) -> OpFigures:
    """One op's row: calls (None: unknown), logical bytes, and the bytes one rank sends at `factor`."""
    return {"count": count, "bytes": int(logical_bytes), "wire_bytes_per_rank": round(logical_bytes * factor)}


def step_comm(
    strategy: str,
    params: int,
    gpus: int,
    precision: str,
    group_size: int | None = None,
    unit_params: Iterable[int] | None = None,
    offload: str = "none",
) -> dict[str, OpFigures]:
    """Collectives per training step, per rank: {op: {count, bytes, wire_bytes_per_rank}}.

    `bytes` is the logical buffer size summed over calls (all-gather: the gathered output;
    reduce-scatter: the full input); wire bytes apply the ring factor of the op's group. Element
    sizes are what the strategy's implementation sends under `precision` (`implementations`).
    `count` is given where it can be known: one all-gather and one reduce-scatter per non-empty FSDP
    unit (and a second all-gather per unit resharded after forward; FSDP2 does not reshard the root);
    None where it depends on how an implementation packs tensors into buckets (DDP, ZeRO-1/2).
    """
    strategy = canonical_strategy(strategy)
    held = implementation(strategy, precision, offload)
    group_size = resolve_group_size(strategy, gpus, group_size)
    units = list(unit_params) if unit_params is not None else []
    nonempty = sum(1 for count in units if count > 0) if units else None
    grad_bytes = params * held.reduce_bytes
    gathered_bytes = params * held.gather_bytes
    if strategy in ("ddp", "zro"):
        ops = {"all_reduce": op_figures(None, grad_bytes, wire_factor("all_reduce", gpus))}
        if strategy == "zro":
            # ZeroRedundancyOptimizer.step: each rank broadcasts the parameters it updated, as held.
            ops["broadcast"] = op_figures(None, gathered_bytes, wire_factor("broadcast", gpus))
        return ops
    if strategy in ("zero1", "zero2"):
        # Each rank updates its partition and the updated partitions are all-gathered, in the dtype
        # the parameters are held in; how many calls that takes is the implementation's choice.
        return {
            "reduce_scatter": op_figures(None, grad_bytes, wire_factor("reduce_scatter", gpus)),
            "all_gather": op_figures(None, gathered_bytes, wire_factor("all_gather", gpus)),
        }
    shard_group = group_size if strategy == "hsdp" else gpus
    if strategy == "grad-op":
        # Gathered once in forward and kept until backward ends: one all-gather per unit.
        gathered, gathers = gathered_bytes, nonempty
    elif units:
        gathered = (sum(units) + sum(units[:-1])) * held.gather_bytes
        gathers = nonempty + sum(1 for count in units[:-1] if count > 0)
    else:
        gathered, gathers = 2 * gathered_bytes, None
    ops = {
        "all_gather": op_figures(gathers, gathered, wire_factor("all_gather", shard_group)),
        "reduce_scatter": op_figures(nonempty, grad_bytes, wire_factor("reduce_scatter", shard_group)),
    }
    if strategy == "hsdp":
        replicas = gpus // group_size
        if replicas > 1:
            shard_bytes = math.ceil(params / group_size) * held.reduce_bytes
            ops["all_reduce"] = op_figures(nonempty, shard_bytes, wire_factor("all_reduce", replicas))
    return ops


def total_wire_bytes(ops: Mapping[str, OpFigures]) -> int:
    return sum(op["wire_bytes_per_rank"] for op in ops.values())

