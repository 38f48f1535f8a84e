"""Offload: which implementation moves which model state to host RAM, per strategy, and what then
stays on the GPU, fills the host, and crosses PCIe each step. Also how GPUs fill nodes, since host
RAM is shared by the processes of one node."""

from __future__ import annotations

import math
from typing import Iterable, TypedDict

from ddpfsdp.demos.theory.arguments import read_choice
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.sharding import STRATEGIES, STRATEGY_TITLES, canonical_strategy, resolve_group_size
from ddpfsdp.demos.theory.state import ModelState, model_state

OFFLOADS: tuple[str, ...] = ("none", "optimizer", "all")
"""What lives in host RAM between steps: nothing; the optimizer state (and the gradient shard the
optimizer steps on, on the host); or parameters, gradients and optimizer state of the shards."""

DEFAULT_GPUS_PER_NODE = 8

OFFLOAD_SUPPORT: dict[str, dict[str, str]] = {
    "ddp": {},
    "zro": {},
    "zero1": {"optimizer": "DeepSpeed ZeRO-1 offload_optimizer (PyTorch's ZeroRedundancyOptimizer has no offload)"},
    "zero2": {"optimizer": "DeepSpeed ZeRO-2 offload_optimizer"},
    "grad-op": {
        "all": "FSDP2 fully_shard(reshard_after_forward=False, offload_policy=CPUOffloadPolicy()), "
        "FSDP1 SHARD_GRAD_OP with CPUOffload(offload_params=True)",
    },
    "zero3": {
        "optimizer": "DeepSpeed ZeRO-3 offload_optimizer without offload_param (FSDP has no optimizer-only offload)",
        "all": "FSDP2 fully_shard(offload_policy=CPUOffloadPolicy()), FSDP1 CPUOffload(offload_params=True), "
        "DeepSpeed ZeRO-3 offload_param + offload_optimizer",
    },
    "hsdp": {"all": "FSDP2 fully_shard(offload_policy=CPUOffloadPolicy()) on a 2-D (replicate, shard) mesh"},
}
"""Which implementation offloads what, per strategy; a level missing here has no implementation."""

_OFFLOAD_INSTEAD: dict[tuple[str, str], str] = {
    ("ddp", "optimizer"): "DDP keeps everything on the GPU and has no offload; shard first, then use zero1 or zero2 "
    "with --offload optimizer (DeepSpeed), or zero3 with --offload all (FSDP2 CPUOffloadPolicy)",
    ("ddp", "all"): "DDP keeps everything on the GPU and has no offload; use zero3 with --offload all "
    "(FSDP2 CPUOffloadPolicy), or zero1/zero2 with --offload optimizer (DeepSpeed)",
    ("zro", "optimizer"): "ZeroRedundancyOptimizer keeps its optimizer state on the GPU and has no offload; use "
    "zero1 or zero2 with --offload optimizer (DeepSpeed), or zero3 with --offload all (FSDP2 CPUOffloadPolicy)",
    ("zro", "all"): "ZeroRedundancyOptimizer replicates parameters and gradients and has no offload; use zero3 or "
    "grad-op with --offload all (FSDP2 CPUOffloadPolicy), or zero1/zero2 with --offload optimizer (DeepSpeed)",
    ("grad-op", "optimizer"): "FSDP offloads parameters, gradients and optimizer state together "
    "(CPUOffloadPolicy); there is no optimizer-only offload: use --offload all, or zero3 with "
    "--offload optimizer (DeepSpeed)",
    ("zero1", "all"): "ZeRO-1 replicates parameters and gradients and nothing offloads them (DeepSpeed's "
    "offload_param needs stage 3); use --offload optimizer, or zero3 with --offload all",
    ("zero2", "all"): "ZeRO-2 replicates the parameters and nothing offloads them (DeepSpeed's offload_param "
    "needs stage 3); use --offload optimizer, or zero3 with --offload all",
    ("hsdp", "optimizer"): "FSDP offloads parameters, gradients and optimizer state together "
    "(CPUOffloadPolicy); there is no optimizer-only offload: use --offload all, or zero3 with "
    "--offload optimizer (DeepSpeed)",
}


def check_offload(offload: str) -> str:
    return read_choice(offload, OFFLOADS, "offload")


def offload_refusal(strategy: str, offload: str) -> str | None:
    """Why `strategy` cannot run with `offload`, and what to use instead; None when it can."""
    strategy, offload = canonical_strategy(strategy), check_offload(offload)
    if offload == "none" or offload in OFFLOAD_SUPPORT[strategy]:
        return None
    return f"{STRATEGY_TITLES[strategy]} with offload {offload!r}: {_OFFLOAD_INSTEAD[(strategy, offload)]}"


def offload_strategies(offload: str) -> tuple[str, ...]:
    """The strategies that admit `offload`, in table order."""
    return tuple(name for name in STRATEGIES if offload_refusal(name, offload) is None)


def node_layout(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(GPUs per node, nodes). A job smaller than a node fills part of one node."""
    if gpus_per_node < 1:
        raise ValueError(f"gpus per node must be at least 1, got {gpus_per_node}")
    if gpus <= gpus_per_node:
        return gpus, 1
    if gpus % gpus_per_node:
        raise ValueError(
            f"{gpus} GPUs are not a whole number of nodes of {gpus_per_node}; give a GPU count that is a "
            f"multiple of the GPUs per node, or the GPUs per node that divides it"
        )
    return gpus_per_node, gpus // gpus_per_node


class Pcie(TypedDict):
    """Bytes one GPU copies over PCIe per step, each way."""

    host_to_device_bytes: int
    device_to_host_bytes: int


class OffloadedState(ModelState):
    """Model state left on the GPU under an offload, what its process holds on the host, and the copies."""

    host_bytes_per_gpu: int
    pcie: Pcie
    pcie_bytes_per_step: int


def offloaded_state(
    params: int,
    gpus: int,
    strategy: str,
    precision: str,
    optimizer: str,
    offload: str,
    group_size: int | None = None,
    unit_params: Iterable[int] | None = None,
) -> OffloadedState:
    """Per-GPU model state with `offload` applied, the host bytes each GPU's process holds, and the
    bytes each crosses PCIe per step.

    optimizer (DeepSpeed's offload_optimizer): the optimizer state moves to the host and the step
    runs there, on the gradient shard, which is copied device-to-host; the updated parameter shard
    is copied back. ZeRO-1 still holds the full gradients on the GPU until they are reduced.
    all (FSDP2 CPUOffloadPolicy): the sharded parameters, gradients and optimizer state live on the
    host. Each parameter shard is copied host-to-device before every all-gather (forward, and again
    in backward where the unit was resharded after forward: never under grad-op); each
    reduce-scattered gradient shard is copied device-to-host; the optimizer steps on the host.
    """
    strategy = canonical_strategy(strategy)
    offload = check_offload(offload)
    refusal = offload_refusal(strategy, offload)
    if refusal:
        raise ValueError(refusal)
    spec = precision_for(precision)
    state = model_state(params, gpus, strategy, spec.name, optimizer, group_size, offload)
    gpu = dict(state)
    host = 0
    h2d = d2h = 0
    if offload == "optimizer":
        shard = math.ceil(params / gpus)
        grad_shard = shard * spec.grad_bytes
        host = state["optimizer_bytes"] + grad_shard
        gpu["optimizer_bytes"] = 0
        if strategy != "zero1":
            gpu["grads_bytes"] = 0
        d2h, h2d = grad_shard, shard * spec.param_bytes
    elif offload == "all":
        host = state["model_state_bytes"]
        gpu.update(params_bytes=0, grads_bytes=0, optimizer_bytes=0)
        shard_group = resolve_group_size(strategy, gpus, group_size) if strategy == "hsdp" else gpus
        units = [count for count in (unit_params or []) if count >= 0]
        if units:  # every unit is gathered in forward, and again in backward if resharded after it
            copies = units if strategy == "grad-op" else [*units, *units[:-1]]  # (the root is not)
        else:
            copies = [params] if strategy == "grad-op" else [params, params]
        h2d = sum(math.ceil(count / shard_group) for count in copies if count > 0) * spec.param_bytes
        d2h = state["grads_bytes"]
    gpu["model_state_bytes"] = gpu["params_bytes"] + gpu["grads_bytes"] + gpu["optimizer_bytes"]
    return {
        **gpu,
        "host_bytes_per_gpu": host,
        "pcie": {"host_to_device_bytes": h2d, "device_to_host_bytes": d2h},
        "pcie_bytes_per_step": h2d + d2h,
    }

