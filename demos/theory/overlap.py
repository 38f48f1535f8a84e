"""What each strategy's collectives can overlap: forward, backward, or nothing.

A collective hides only behind compute that runs while it is in flight, so the question is when each
implementation issues it and when it waits for it. Read from the sources (torch 2.13; DeepSpeed 0.19):

- DDP (`torch/nn/parallel/distributed.py`, `bucket_cap_mb`; the reducer): each gradient bucket is
  all-reduced as soon as backward has produced all of its gradients, so the all-reduce runs during
  backward; the reducer waits for the last bucket when backward ends. Window: backward.
- ZeroRedundancyOptimizer under DDP (`torch/distributed/optim/zero_redundancy_optimizer.py`):
  DDP's all-reduce as above; then `step()` updates this rank's parameters and `_sync_params()`
  broadcasts every rank's updated parameters and waits for all of them, after backward and before
  the next forward (unless `overlap_with_ddp=True`, which needs a DDP communication hook and is not
  the default). The broadcast overlaps nothing.
- DeepSpeed ZeRO-1 and ZeRO-2 (`deepspeed/runtime/zero/stage_1_and_2.py`): with `overlap_comm`
  the gradient hooks reduce each bucket on a separate `reduction_stream` as backward fills it
  (`process_gradients`, `average_tensor`); without it ZeRO-2 reduces on the compute stream and ZeRO-1
  after backward (`reduce_gradients`). `overlap_comm` defaults to true only for stage 3
  (`deepspeed/runtime/zero/config.py`, `overlap_comm_valid`); this model assumes it is on. Then
  `step()` runs the optimizer on the partition and only after it calls `all_gather_dp_groups`
  (`deepspeed/runtime/utils.py`: a blocking `all_gather_into_tensor`) to gather the updated
  parameters: that all-gather overlaps nothing.
- FSDP2 (`torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py`): all-gathers run on their own
  stream, the next unit's issued while this one computes (implicit forward prefetching), and in
  backward `pre_backward` prefetches the previous unit's (`_backward_prefetch`); reduce-scatters
  run on their own stream as each unit's backward ends (`post_backward`), and HSDP's all-reduce of
  the shard across groups on `all_reduce_stream`, beside them; the root waits for the last at the
  end of backward (`_fsdp_state.py`, `_root_post_backward_final_callback`). So grad-op
  (`reshard_after_forward=False`) gathers each unit once, in forward, and keeps it through
  backward; full sharding gathers in forward and again in backward. DeepSpeed's ZeRO-3 and MiCS
  (the bf16-master rows) do the same with `overlap_comm` on by default: parameters prefetched in
  forward and backward, reductions on `reduce_and_partition_stream` during backward, and MiCS's
  all-reduce across replica groups inside them (`stage3.py`, `mics.py` `partition_grads`).

Forward is 2 of the 6 FLOPs per parameter and token, backward 4: a collective in the forward window
can hide behind 1/3 of the step's compute, one in the backward window behind 2/3, one in neither
behind none. The first all-gather of a step and the last reduction cannot hide in practice; this
napkin model ignores them, so its "with overlap" is the most overlap allows.

Torch-free: the quiz imports it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ddpfsdp.demos.theory.sharding import canonical_strategy

FORWARD_SHARE = 2 / 6
"""Forward's share of a step's FLOPs: 2 of the 6 per parameter and token."""
BACKWARD_SHARE = 4 / 6
"""Backward's share of a step's FLOPs: 4 of the 6 per parameter and token."""

WINDOWS: dict[str, float] = {"forward": FORWARD_SHARE, "backward": BACKWARD_SHARE, "none": 0.0}
"""Each overlap window and the share of a step's compute a collective in it can hide behind."""

_FSDP_FULL = {"all_gather": {"forward": 0.5, "backward": 0.5}, "reduce_scatter": {"backward": 1.0}}

OVERLAP: dict[str, dict[str, dict[str, float]]] = {
    "ddp": {"all_reduce": {"backward": 1.0}},
    "zro": {"all_reduce": {"backward": 1.0}, "broadcast": {"none": 1.0}},
    "zero1": {"reduce_scatter": {"backward": 1.0}, "all_gather": {"none": 1.0}},
    "zero2": {"reduce_scatter": {"backward": 1.0}, "all_gather": {"none": 1.0}},
    "grad-op": {"all_gather": {"forward": 1.0}, "reduce_scatter": {"backward": 1.0}},
    "zero3": _FSDP_FULL,
    "hsdp": {**_FSDP_FULL, "all_reduce": {"backward": 1.0}},
}
"""Per strategy and collective: the share of its time in each window (the two all-gathers of full
sharding, one per unit in forward and one in backward, split it half and half)."""

ASSUMPTIONS: dict[str, str] = {
    "ddp": "DDP all-reduces each gradient bucket as backward produces it: the all-reduce hides behind backward "
           "(4 of the 6 FLOPs, 2/3 of the compute)",
    "zro": "DDP's all-reduce hides behind backward (2/3 of the compute); ZeroRedundancyOptimizer broadcasts the "
           "updated parameters inside step(), after backward, and the broadcast hides behind nothing",
    "zero1": "the gradient reduce-scatter runs during backward (DeepSpeed's overlap_comm on; its default only for "
             "stage 3) and hides behind it (2/3 of the compute); the all-gather of the updated parameters runs "
             "inside step(), after the optimizer, and hides behind nothing",
    "grad-op": "each unit's all-gather, issued while the unit before computes, hides behind forward (2 of the 6 "
               "FLOPs, 1/3 of the compute); the reduce-scatters hide behind backward (2/3)",
    "zero3": "half the all-gathers run in forward, each a unit ahead, and hide behind it (2 of the 6 FLOPs, 1/3 of "
             "the compute); the other half, prefetched in backward, and the reduce-scatters hide behind backward (2/3)",
    "hsdp": "half the all-gathers run in forward, a unit ahead, and hide behind it (1/3 of the compute); the other "
            "half, prefetched in backward, the reduce-scatters and the all-reduce across the groups hide behind "
            "backward (2/3)",
}
ASSUMPTIONS["zero2"] = ASSUMPTIONS["zero1"]
"""What the overlap model assumes of each strategy, as a prompt states it."""

RULE = ("Each phase hides its collectives up to its compute, the rest shows, and a collective in no phase shows "
        "whole; the first all-gather and last reduction, which cannot hide in practice, are ignored.")


def windows(strategy: str) -> dict[str, dict[str, float]]:
    """{collective: {window: share of its time}} for `strategy`."""
    return OVERLAP[canonical_strategy(strategy)]


def by_window(strategy: str, op_times_s: Mapping[str, float]) -> dict[str, float]:
    """Seconds of communication in each window, from each collective's seconds."""
    table = windows(strategy)
    seconds = dict.fromkeys(WINDOWS, 0.0)
    for op, time_s in op_times_s.items():
        if op not in table:
            raise ValueError(f"{strategy} issues no {op}; it issues {', '.join(table)}")
        for window, share in table[op].items():
            seconds[window] += share * time_s
    return seconds
