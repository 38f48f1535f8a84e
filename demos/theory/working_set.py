"""The working set: per-GPU bytes that exist only during a step, beyond the model state (an estimate).

DDP's gradient buckets and autocast's weight copies; ZeRO-2's unsharded gradients awaiting their
reduce-scatter; FSDP's few unsharded units, alive at once with prefetching.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.sharding import canonical_strategy

PREFETCH_UNITS = 2
"""FSDP units whose full parameters are alive at once: the one computing and the one prefetched."""

DEFAULT_UNITS = 32
"""Equal-sized FSDP units assumed when only a parameter count is known (a 7B Llama has 32 blocks)."""


def working_set(
    strategy: str,
    params: int,
    precision: str,
    unit_params: Iterable[int] | None = None,
    *,
    prefetch_units: int = PREFETCH_UNITS,
    gradient_as_bucket_view: bool = False,
) -> dict[str, Any]:
    """Per-GPU bytes that exist only during the step, beyond the model state (an estimate).

    - ddp, zero1 (PyTorch DDP underneath): the gradient buckets. DDP copies gradients into flat
      buckets for the all-reduce; unless `gradient_as_bucket_view=True` they are a second copy of
      all gradients. Under bf16-mixed, autocast also caches a bf16 copy of every weight for the
      forward, and backward keeps it until the weight's gradient is computed.
    - zero2: the unsharded gradients of the units waiting for their reduce-scatter, plus the bf16
      copies of the (replicated) weights under bf16-mixed.
    - zero3, hsdp: the largest unit's full parameters (gathered in `gather_bytes`) and, in
      backward, its full gradients (in `reduce_bytes`), times the units alive at once with
      prefetching (2: the one computing and the next one).
    `unit_params`: parameters per FSDP unit; unknown -> `DEFAULT_UNITS` equal units.
    """
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    units = [count for count in (unit_params or []) if count > 0]
    if not units:
        units = [math.ceil(params / DEFAULT_UNITS)] * DEFAULT_UNITS
    largest = max(units)
    alive = min(prefetch_units, len(units))
    autocast_copies = params * spec.compute_bytes if spec.name == "bf16-mixed" else 0
    if strategy in ("ddp", "zero1"):
        buckets = 0 if gradient_as_bucket_view else params * spec.reduce_bytes
        return _figures({"gradient_buckets": buckets, "autocast_weight_copies": autocast_copies}, largest, 0)
    grads = alive * largest * spec.reduce_bytes
    if strategy == "zero2":
        return _figures({"unsharded_unit_grads": grads, "autocast_weight_copies": autocast_copies}, largest, alive)
    gathered = alive * largest * spec.gather_bytes
    return _figures({"unsharded_unit_params": gathered, "unsharded_unit_grads": grads}, largest, alive)


def _figures(parts: dict[str, int], largest_unit_params: int, units_alive: int) -> dict[str, Any]:
    return {
        "working_set_bytes": sum(parts.values()),
        "largest_unit_params": largest_unit_params,
        "units_alive": units_alive,
        "parts": parts,
    }
