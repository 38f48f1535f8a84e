"""Which implementation each strategy's figures follow, under each precision, and the bytes per element
it holds, gathers and reduces there.

A strategy name means one implementation; the precision recipe says what that implementation keeps:

    strategy  fp32, bf16-mixed, bf16                           bf16-master
    ddp       PyTorch DDP (torch.autocast under bf16-mixed)    DDP on bf16 weights, fp32 master weights in
    zro       ZeroRedundancyOptimizer under DDP                  the optimizer (the recipe's: torch.optim
                                                                 and FSDP keep none)
    zero1/2   DeepSpeed ZeRO stage 1/2: fp32; torch_autocast;  DeepSpeed ZeRO stage 1/2, bf16 enabled
              bf16 with bf16 master weights and states
    grad-op   FSDP2 fully_shard(reshard_after_forward=False)   as ddp, on sharded bf16 weights
    zero3     FSDP2 fully_shard                                DeepSpeed ZeRO stage 3, bf16 enabled
    hsdp      FSDP2 on a (replicate, shard) mesh               DeepSpeed ZeRO stage 3 with MiCS

What the DeepSpeed rows hold, from DeepSpeed 0.19's source:
- `runtime/zero/stage_1_and_2.py`: ZeRO-1/2 step a flat copy of the rank's partition
  (`single_partition_of_fp32_groups`, a `.clone()` in the master dtype, fp32 unless
  `bf16_master_weights_and_grads`), even when the parameters are fp32 already; after the step they
  all-gather the updated partitions of the model's own parameters (`all_gather_dp_groups` over
  `bit16_groups_flat`), in the dtype those are held in.
- `runtime/engine.py`: the model is cast to bf16 only when `bf16` is enabled; under `torch_autocast`
  it stays fp32. Gradients are reduced in `communication_data_type`, bf16 when bf16 is enabled.
- `runtime/torch_autocast.py`, `docs/code-docs/source/training.rst`: under `torch_autocast` the
  gradients of Linear and Conv layers are reduced in the autocast dtype, the others (embeddings,
  norms) in fp32; parameters are all-gathered in it only by ZeRO-3. This model reduces all of them
  in bf16, which undercounts by the non-Linear share (under 1% of a 7B Llama).
- `runtime/zero/stage3.py` `_create_fp32_partitions`: ZeRO-3 reuses the partition as its master
  when the dtypes match (fp32, torch_autocast), and copies it otherwise or when it offloads the
  optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpfsdp.demos.theory.precision import Precision, precision_for
from ddpfsdp.demos.theory.sharding import canonical_strategy


@dataclass(frozen=True)
class Implementation:
    """What one strategy holds and sends under one precision: bytes per element of each kind."""

    strategy: str
    name: str  # the implementation and mode its figures follow, as a reader would look it up
    param_bytes: int  # parameters held between steps
    grad_bytes: int  # gradients held after backward
    master_bytes: int  # the optimizer's own copy of the parameters it steps (0: none)
    state_bytes: int  # each optimizer state tensor
    gather_bytes: int  # parameters as the strategy all-gathers or broadcasts them
    reduce_bytes: int  # gradients as they are reduced
    autocast: bool  # torch.autocast casts a bf16 copy of the replicated weights for compute
    cast: str = "autocast"  # how the precision reaches the forward (`precision.CASTS`): the activations' dtype

    def optimizer_bytes_per_param(self, state_tensors: int) -> int:
        return self.master_bytes + state_tensors * self.state_bytes


_DDP_MODE = {
    "fp32": "fp32",
    "bf16-mixed": "torch.autocast(bf16): fp32 weights and gradients",
    "bf16-master": "bf16 weights, fp32 master weights in the optimizer (the recipe's; torch.optim keeps none)",
    "bf16": "a bf16 model",
}
_FSDP_MODE = {
    "fp32": "fp32",
    "bf16-mixed": "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32 shards",
    "bf16-master": "bf16 weights, fp32 master weights in the optimizer (the recipe's; FSDP keeps none)",
    "bf16": "a bf16 model",
}
_DEEPSPEED_MODE = {
    "fp32": "fp32",
    "bf16-mixed": "torch_autocast (bf16): fp32 weights",
    "bf16-master": "bf16 enabled",
    "bf16": "bf16 with bf16_master_weights_and_grads and bf16_optimizer_states",
}


def implementation(strategy: str, precision: str, offload: str = "none") -> Implementation:
    """The implementation `strategy`'s figures follow under `precision` (and `offload`), with its bytes."""
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    deepspeed = (
        strategy in ("zero1", "zero2")
        or (strategy in ("zero3", "hsdp") and spec.name == "bf16-master")
        or (strategy == "zero3" and offload == "optimizer")  # FSDP has no optimizer-only offload
    )
    if deepspeed:
        return _deepspeed(strategy, spec, offload)
    gather = spec.param_bytes if strategy in ("ddp", "zro") else spec.gather_bytes
    return Implementation(
        strategy, _pytorch_name(strategy, spec.name), spec.param_bytes, spec.grad_bytes, spec.master_bytes,
        spec.state_bytes, gather, spec.reduce_bytes, autocast=strategy in ("ddp", "zro") and spec.name == "bf16-mixed",
        cast="autocast" if strategy in ("ddp", "zro") else "param-dtype",
    )


def _pytorch_name(strategy: str, precision: str) -> str:
    if strategy == "ddp":
        return f"PyTorch DDP, {_DDP_MODE[precision]}"
    if strategy == "zro":
        return f"PyTorch ZeroRedundancyOptimizer under DDP, {_DDP_MODE[precision]}"
    api = {
        "grad-op": "FSDP2 fully_shard(reshard_after_forward=False)",
        "zero3": "FSDP2 fully_shard",
        "hsdp": "FSDP2 fully_shard on a (replicate, shard) mesh",
    }[strategy]
    return f"{api}, {_FSDP_MODE[precision]}"


def fsdp_mode(precision: str) -> str:
    """What FSDP2 holds and computes in under `precision`, as a column's implementation names it."""
    return _FSDP_MODE[precision_for(precision).name]


def _deepspeed(strategy: str, spec: Precision, offload: str) -> Implementation:
    """DeepSpeed's ZeRO stages: the optimizer's master copy, and what its collectives carry."""
    stage = {"zero1": 1, "zero2": 2}.get(strategy, 3)
    mics = " with MiCS (mics_shard_size = G)" if strategy == "hsdp" else ""
    offloaded = ", offload_optimizer" if offload == "optimizer" else ""
    name = f"DeepSpeed ZeRO stage {stage}{mics}, {_DEEPSPEED_MODE[spec.name]}{offloaded}"
    master_dtype_bytes = 2 if spec.name == "bf16" else 4
    # ZeRO-1/2 always step a copy; ZeRO-3 reuses the partition where its dtype is the master's.
    copies = stage < 3 or offload == "optimizer" or spec.param_bytes != master_dtype_bytes
    autocast = spec.name == "bf16-mixed"
    reduce_bytes = spec.compute_bytes if autocast else spec.grad_bytes
    # ZeRO-1/2 gather the held parameters after the step; ZeRO-3 gathers them for compute.
    gather_bytes = spec.param_bytes if stage < 3 else (spec.compute_bytes if autocast else spec.param_bytes)
    return Implementation(
        strategy, name, spec.param_bytes, spec.grad_bytes, master_dtype_bytes if copies else 0, spec.state_bytes,
        gather_bytes, reduce_bytes, autocast=autocast and stage < 3, cast="autocast" if autocast else "param-dtype",
    )


def implementations_for(strategies: tuple[str, ...] | list[str], precision: str, offload: str = "none") -> dict[str, Implementation]:
    return {name: implementation(name, precision, offload) for name in strategies}
