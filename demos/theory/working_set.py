"""The working set: per-GPU bytes that exist only during a step, beyond the model state (an estimate).

DDP's gradient buckets and autocast's weight copies; DeepSpeed ZeRO-1/2's contiguous gradient
buckets; FSDP grad-op's full parameters, gathered in forward and kept until backward ends; FSDP
full's few unsharded units, alive at once with prefetching.
"""

from __future__ import annotations

import math
from typing import Iterable, TypedDict

from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.sharding import canonical_strategy

PREFETCH_UNITS = 2
"""FSDP units whose full parameters are alive at once: the one computing and the one prefetched."""

DEFAULT_UNITS = 32
"""Equal-sized FSDP units assumed when only a parameter count is known (a 7B Llama has 32 blocks)."""

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed's `reduce_bucket_size` default (`runtime/zero/config.py`, 5e8 elements)."""


class WorkingSet(TypedDict):
    """The working set's bytes, in all and by part, and the FSDP units it was sized from."""

    working_set_bytes: int
    largest_unit_params: int
    units_alive: int
    parts: dict[str, int]  # bytes by what they hold: gradient_buckets, unsharded_unit_params, ...


def working_set(
    strategy: str,
    params: int,
    precision: str,
    unit_params: Iterable[int] | None = None,
    *,
    prefetch_units: int = PREFETCH_UNITS,
    gradient_as_bucket_view: bool = False,
) -> WorkingSet:
    """Per-GPU bytes that exist only during the step, beyond the model state (an estimate).

    - ddp, zro (PyTorch DDP underneath): the gradient buckets. DDP copies gradients into flat
      buckets for the all-reduce; unless `gradient_as_bucket_view=True` they are a second copy of
      all gradients.
    - zero1, zero2 (DeepSpeed): with `contiguous_gradients` (the default) each gradient is copied
      into a bucket of `reduce_bucket_size` elements, allocated whole in the parameters' dtype, one
      per communication dtype (two under torch_autocast: the Linear layers' bf16 and the rest's fp32).
    - Under bf16-mixed, torch.autocast also caches a bf16 copy of every replicated weight for the
      forward, and backward keeps it until the weight's gradient is computed (ddp, zro, zero1, zero2).
    - grad-op: every unit's full parameters (gathered in `gather_bytes` in forward, kept until the
      unit's backward) and the gradients of the units awaiting their reduce-scatter.
    - zero3, hsdp: the largest unit's full parameters and, in backward, its full gradients (in
      `reduce_bytes`), times the units alive at once with prefetching (2: the one computing and the
      next one).
    `unit_params`: parameters per FSDP unit; unknown -> `DEFAULT_UNITS` equal units.
    """
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    held = implementation(strategy, spec.name)
    units = [count for count in (unit_params or []) if count > 0]
    if not units:
        units = [math.ceil(params / DEFAULT_UNITS)] * DEFAULT_UNITS
    largest = max(units)
    alive = min(prefetch_units, len(units))
    autocast_copies = params * spec.compute_bytes if held.autocast else 0
    if strategy in ("ddp", "zro"):
        buckets = 0 if gradient_as_bucket_view else params * held.reduce_bytes
        return _figures({"gradient_buckets": buckets, "autocast_weight_copies": autocast_copies}, largest, 0)
    if strategy in ("zero1", "zero2"):
        dtypes = 2 if held.autocast else 1
        buckets = dtypes * DEEPSPEED_REDUCE_BUCKET_ELEMENTS * held.param_bytes
        return _figures({"gradient_buckets": buckets, "autocast_weight_copies": autocast_copies}, largest, 0)
    grads = alive * largest * held.reduce_bytes
    if strategy == "grad-op":
        gathered = params * held.gather_bytes
        return _figures({"unsharded_params": gathered, "unsharded_unit_grads": grads}, largest, len(units))
    gathered = alive * largest * held.gather_bytes
    return _figures({"unsharded_unit_params": gathered, "unsharded_unit_grads": grads}, largest, alive)


def _figures(parts: dict[str, int], largest_unit_params: int, units_alive: int) -> WorkingSet:
    return {
        "working_set_bytes": sum(parts.values()),
        "largest_unit_params": largest_unit_params,
        "units_alive": units_alive,
        "parts": parts,
    }
