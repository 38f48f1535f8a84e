"""Model state per GPU: the parameters, gradients and optimizer state held between steps.

Each kind costs its bytes per parameter (what the strategy's implementation holds under the precision,
`implementations`) times the parameters this GPU holds of it, ceil(Psi / ways) for the ways the
strategy splits it (`sharding`): FSDP pads every parameter to a multiple of the shard group, so a
shard is rounded up, never down.
"""

from __future__ import annotations

import math
from typing import TypedDict

from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import OPTIMIZER_STATES, BytesPerParam, check_optimizer
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size, shard_ways


class ModelState(TypedDict):
    """Per-GPU bytes of each kind of model state, and their sum."""

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    model_state_bytes: int


def bytes_per_param(strategy: str, precision: str, optimizer: str, offload: str = "none") -> BytesPerParam:
    """What `strategy`'s implementation holds per parameter under `precision`, before sharding."""
    held = implementation(strategy, precision, offload)
    optimizer_bytes = held.optimizer_bytes_per_param(OPTIMIZER_STATES[check_optimizer(optimizer)])
    return {
        "params": held.param_bytes,
        "grads": held.grad_bytes,
        "optimizer": optimizer_bytes,
        "total": held.param_bytes + held.grad_bytes + optimizer_bytes,
    }


def model_state(
    params: int, gpus: int, strategy: str, precision: str, optimizer: str, group_size: int | None = None,
    offload: str = "none",
) -> ModelState:
    """Per-GPU bytes of parameters, gradients and optimizer state held between steps."""
    strategy = canonical_strategy(strategy)
    group_size = resolve_group_size(strategy, gpus, group_size)
    per_param = bytes_per_param(strategy, precision, optimizer, offload)
    held = {
        kind: math.ceil(params / shard_ways(strategy, kind, gpus, group_size)) * per_param[kind]
        for kind in ("params", "grads", "optimizer")
    }
    return {
        "params_bytes": held["params"],
        "grads_bytes": held["grads"],
        "optimizer_bytes": held["optimizer"],
        "model_state_bytes": sum(held.values()),
    }
