"""Model state per GPU: the parameters, gradients and optimizer state held between steps.

Each kind costs its bytes per parameter (`precision`) times the parameters this GPU holds of it,
ceil(Psi / ways) for the ways the strategy splits it (`sharding`): FSDP pads every parameter to a
multiple of the shard group, so a shard is rounded up, never down.
"""

from __future__ import annotations

import math

from ddpfsdp.demos.theory.precision import check_optimizer, precision_for
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size, shard_ways


def model_state(
    params: int, gpus: int, strategy: str, precision: str, optimizer: str, group_size: int | None = None
) -> dict[str, int]:
    """Per-GPU bytes of parameters, gradients and optimizer state held between steps."""
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    group_size = resolve_group_size(strategy, gpus, group_size)
    per_param = {
        "params": spec.param_bytes,
        "grads": spec.grad_bytes,
        "optimizer": spec.optimizer_bytes_per_param(optimizer),
    }
    held = {
        kind: math.ceil(params / shard_ways(strategy, kind, gpus, group_size)) * size
        for kind, size in per_param.items()
    }
    return {
        "params_bytes": held["params"],
        "grads_bytes": held["grads"],
        "optimizer_bytes": held["optimizer"],
        "model_state_bytes": sum(held.values()),
    }
