"""The strategies, what each shards, and how many ways: DDP, the ZeRO stages, FSDP's and HSDP.

Model state per GPU, for Psi parameters on N GPUs (P, G, K: bytes per parameter of parameters,
gradients and optimizer state, from the implementation each follows, `implementations`):

    strategy   params      grads       optimizer   what is sharded
    ddp        P*Psi       G*Psi       K*Psi       nothing
    zro        P*Psi       G*Psi       K*Psi/N     optimizer state, by whole parameters
                                                   (PyTorch's ZeroRedundancyOptimizer under DDP)
    zero1      P*Psi       G*Psi       K*Psi/N     optimizer state          (P_os)
    zero2      P*Psi       G*Psi/N     K*Psi/N     + gradients              (P_os+g)
    grad-op    P*Psi/N     G*Psi/N     K*Psi/N     all of it at rest; each unit is gathered once
                                                   and kept whole until its backward (FSDP
                                                   SHARD_GRAD_OP, reshard_after_forward=False)
    zero3      P*Psi/N     G*Psi/N     K*Psi/N     + parameters (FSDP full) (P_os+g+p)
    hsdp       P*Psi/G     G*Psi/G     K*Psi/G     all of it, within groups of G; replicated
                                                   across N/G groups
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.theory.arguments import read_count

# FSDP's sharding names, one each (a demo's --sharding, a run's config, the theory of a run); FSDP1's
# (FULL_SHARD, ...) and any case are read as them.
FSDP_SHARDINGS: tuple[str, ...] = ("full", "grad-op", "hybrid", "no-shard")
FSDP1_SHARDINGS: dict[str, str] = {"FULL_SHARD": "full", "SHARD_GRAD_OP": "grad-op", "HYBRID_SHARD": "hybrid",
                                   "NO_SHARD": "no-shard"}


def canonical_sharding(name: str) -> str:
    """full | grad-op | hybrid | no-shard, from those names or FSDP1's (FULL_SHARD, ...), in any case."""
    key = str(name).strip().lower().replace("_", "-")
    aliases = {fsdp1.lower().replace("_", "-"): ours for fsdp1, ours in FSDP1_SHARDINGS.items()}
    key = aliases.get(key, key)
    if key not in FSDP_SHARDINGS:
        raise ValueError(f"unknown sharding {name!r}; choose one of {', '.join([*FSDP_SHARDINGS, *FSDP1_SHARDINGS])}")
    return key


STRATEGIES: tuple[str, ...] = ("ddp", "zro", "zero1", "zero2", "grad-op", "zero3", "hsdp")

STRATEGY_TITLES: dict[str, str] = {
    "ddp": "DDP",
    "zro": "ZeroRedundancyOptimizer",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "grad-op": "FSDP grad-op",
    "zero3": "ZeRO-3 / FSDP full",
    "hsdp": "HSDP",
}

STRATEGY_SHARDS: dict[str, str] = {
    "ddp": "nothing sharded",
    "zro": "optimizer state sharded by whole parameters",
    "zero1": "optimizer state sharded",
    "zero2": "+ gradients sharded",
    "grad-op": "all sharded at rest, parameters gathered once per step",
    "zero3": "+ parameters sharded",
    "hsdp": "all sharded in a group of G, replicated across groups",
}

# Other names people use for the same strategies.
STRATEGY_ALIASES: dict[str, str] = {
    "zeroredundancyoptimizer": "zro",
    "zero-redundancy-optimizer": "zro",
    "shard_grad_op": "grad-op",
    "shard-grad-op": "grad-op",
    "fsdp-grad-op": "grad-op",
    "fsdp": "zero3",
    "fsdp-full": "zero3",
    "full": "zero3",
    "full_shard": "zero3",
    "hybrid": "hsdp",
    "hybrid_shard": "hsdp",
    "fsdp-hybrid": "hsdp",
}

ZERO_STAGES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")
"""Stage 0 (plain DDP) to stage 3, in the order each shards one more kind of model state."""

_SHARDED: dict[str, tuple[str, ...]] = {
    "zro": ("optimizer",),
    "zero1": ("optimizer",),
    "zero2": ("grads", "optimizer"),
    "grad-op": ("params", "grads", "optimizer"),
    "zero3": ("params", "grads", "optimizer"),
}
"""The kinds of model state each strategy splits over all GPUs (HSDP splits all three in a group)."""


def canonical_strategy(name: str) -> str:
    key = str(name).strip().lower()
    key = STRATEGY_ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise ValueError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)} "
            f"(or {', '.join(STRATEGY_ALIASES)})"
        )
    return key


def resolve_group_size(strategy: str, gpus: int, group_size: Any = None) -> int | None:
    """The HSDP shard-group size: as given, else 8 (one node) where it divides the GPUs, else all."""
    if strategy != "hsdp" and group_size is None:
        return None
    if group_size is None:
        return 8 if gpus % 8 == 0 else gpus
    size = read_count(group_size, "group size")
    if size > gpus or gpus % size:
        raise ValueError(
            f"group size {size} must divide the GPU count {gpus} "
            f"(HSDP shards within groups of G and replicates across {gpus}/G groups)"
        )
    return size


def shard_ways(strategy: str, kind: str, gpus: int, group_size: int | None) -> int:
    """How many ways `kind` (params, grads, optimizer) is split for `strategy`."""
    if strategy == "hsdp":
        return group_size or gpus
    return gpus if kind in _SHARDED.get(strategy, ()) else 1
