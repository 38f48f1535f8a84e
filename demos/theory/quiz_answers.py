"""The functions every numeric question computes its answer with (`QUIZ_FUNCTIONS`), for the bank
(`calc = { fn, args }`) and the drills.

Keywords only; counts and sizes may be strings ("7.5B", "80GB"), as a TOML bank writes them;
results are in base units (bytes, counts, ratios).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.accounting import accounting_refusal
from ddpfsdp.demos.theory.at_scale import QUIZ_FUNCTIONS as AT_SCALE_FUNCTIONS
from ddpfsdp.demos.theory.activations import gpt_activation_bytes, transformer_activation_bytes
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.arguments import read_count, read_flag
from ddpfsdp.demos.theory.buckets import ddp_bucket_bytes
from ddpfsdp.demos.theory.comm import check_collective, step_comm, total_wire_bytes
from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels, gpt_shape_of
from ddpfsdp.demos.theory.offload import (
    DEFAULT_GPUS_PER_NODE,
    check_offload,
    node_layout,
    offload_refusal,
    offloaded_state,
)
from ddpfsdp.demos.theory.context_parallel import QUIZ_FUNCTIONS as CONTEXT_PARALLEL_FUNCTIONS
from ddpfsdp.demos.theory.expert_parallel import QUIZ_FUNCTIONS as EXPERT_PARALLEL_FUNCTIONS
from ddpfsdp.demos.theory.pipeline import QUIZ_FUNCTIONS as PIPELINE_FUNCTIONS
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown
from ddpfsdp.demos.theory.sampler import sampler_indices
from ddpfsdp.demos.theory.sharding import ZERO_STAGES, canonical_strategy, resolve_group_size
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.tensor_parallel import q_tp_block_wire_bytes
from ddpfsdp.demos.base.units import format_bytes, parse_bytes


def _state_args(params: Any, gpus: Any, strategy: str, group_size: Any) -> tuple[int, int, str, int | None]:
    strategy = canonical_strategy(strategy)
    count = read_count(params, "params")
    world = read_count(gpus, "gpus")
    return count, world, strategy, resolve_group_size(strategy, world, group_size)


def q_param_count(*, model: str) -> int:
    return gpt_shape_of(model).params


def q_bytes_per_param(*, precision: str, optimizer: str) -> int:
    return bytes_per_param_breakdown(precision, optimizer)["total"]


def _state_field(field: str) -> Callable[..., int]:
    def answer(*, params: Any, gpus: Any, strategy: str, precision: str, optimizer: str, group_size: Any = None) -> int:
        count, world, name, group = _state_args(params, gpus, strategy, group_size)
        return model_state(count, world, name, precision, optimizer, group)[field]

    answer.__name__ = f"q_{field}"
    answer.__doc__ = f"Per-GPU {field.replace('_', ' ')} between steps."
    return answer


def q_activation_bytes(
    *, model: str, batch_size: Any, seq_len: Any = None, checkpoint_activations: Any = False, precision: str = "fp32",
    strategy: str = "ddp",
) -> int:
    seq = read_count(seq_len, "seq len") if seq_len is not None else None
    return gpt_activation_bytes(
        model, read_count(batch_size, "batch size"), seq, read_flag(checkpoint_activations), precision,
        cast=implementation(strategy, precision).cast,
    )["activation_bytes"]


def q_wire_bytes_per_rank(*, op: str, bytes: Any, ranks: Any) -> int:  # noqa: A002 - the bank's keyword
    return round(parse_bytes(bytes) * wire_factor(check_collective(op), read_count(ranks, "ranks")))


def q_step_wire_bytes(*, params: Any, gpus: Any, strategy: str, precision: str, group_size: Any = None) -> int:
    count, world, name, group = _state_args(params, gpus, strategy, group_size)
    return total_wire_bytes(step_comm(name, count, world, precision, group))


def q_comm_ratio(
    *, strategy: str, baseline: str = "ddp", gpus: Any = 8, precision: str = "fp32", group_size: Any = None
) -> float:
    """Wire bytes per rank per step of `strategy` over `baseline`, same model (zero3/ddp = 1.5)."""
    reference = 10**12  # large enough that shard rounding does not show
    ours = q_step_wire_bytes(params=reference, gpus=gpus, strategy=strategy, precision=precision, group_size=group_size)
    base_group = group_size if canonical_strategy(baseline) == "hsdp" else None
    theirs = q_step_wire_bytes(params=reference, gpus=gpus, strategy=baseline, precision=precision, group_size=base_group)
    if theirs == 0:
        raise ValueError(f"{baseline} sends nothing on {gpus} GPU(s); a ratio needs at least 2")
    return ours / theirs


def q_max_params(*, gpu_mem: Any, gpus: Any, strategy: str, precision: str, optimizer: str, group_size: Any = None) -> int:
    """The largest parameter count whose per-GPU model state fits in `gpu_mem` (no activations)."""
    limit = parse_bytes(gpu_mem)
    _, world, name, group = _state_args(1, gpus, strategy, group_size)
    fits = lambda count: model_state(count, world, name, precision, optimizer, group)["model_state_bytes"] <= limit  # noqa: E731
    low, high = 0, limit * world + 1  # every parameter costs at least 1/world bytes per GPU
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def q_min_gpus(*, params: Any, gpu_mem: Any, strategy: str, precision: str, optimizer: str) -> int:
    """The fewest GPUs on which the per-GPU model state fits in `gpu_mem` (no activations)."""
    count = read_count(params, "params")
    limit = parse_bytes(gpu_mem)
    name = canonical_strategy(strategy)
    if name == "hsdp":
        raise ValueError("HSDP's per-GPU state depends on the group size, not the GPU count; ask about zero3")
    state = lambda world: model_state(count, world, name, precision, optimizer)["model_state_bytes"]  # noqa: E731
    largest = 2**24
    if state(largest) > limit:
        raise ValueError(f"{name} cannot fit {count:,} parameters in {format_bytes(limit)} on any number of GPUs")
    low, high = 0, largest  # state(high) fits; state decreases with more GPUs
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if state(middle) <= limit else (middle, high)
    return high


def q_min_zero_stage(*, params: Any, gpus: Any, gpu_mem: Any, precision: str, optimizer: str) -> int:
    """The lowest ZeRO stage (0 = DDP) whose per-GPU model state fits in `gpu_mem`."""
    count, world = read_count(params, "params"), read_count(gpus, "gpus")
    limit = parse_bytes(gpu_mem)
    for stage, strategy in enumerate(ZERO_STAGES):
        if model_state(count, world, strategy, precision, optimizer)["model_state_bytes"] <= limit:
            return stage
    raise ValueError(f"even ZeRO-3 cannot fit {count:,} parameters in {format_bytes(limit)} on {world} GPUs")


def q_ddp_buckets(
    *, layers: Any, d_model: Any, vocab: Any, seq_len: Any, grad_bytes: Any, bucket_cap_mb: Any = None
) -> int:
    """Gradient buckets per step of DDP on a GPT decoder, gradients ready in reverse registration order."""
    numels = gpt_param_numels(read_count(layers, "layers"), read_count(d_model, "d_model"), read_count(vocab, "vocab"), read_count(seq_len, "seq len"))
    size = read_count(grad_bytes, "grad bytes")
    cap = None if bucket_cap_mb is None else float(bucket_cap_mb)
    return len(ddp_bucket_bytes([n * size for n in reversed(numels)], cap))


def q_sampler_index(*, dataset_len: Any, num_replicas: Any, rank: Any, position: Any, drop_last: Any = False) -> int:
    """The `position`-th (1-based) index that `rank` draws from DistributedSampler(shuffle=False)."""
    indices = sampler_indices(read_count(dataset_len, "dataset length"), read_count(num_replicas, "replicas"), int(rank), read_flag(drop_last))
    place = read_count(position, "position")
    if place > len(indices):
        raise ValueError(f"rank {rank} draws only {len(indices)} indices; position {place} is past the end")
    return indices[place - 1]


def q_sampler_count(*, dataset_len: Any, num_replicas: Any, drop_last: Any = False) -> int:
    """How many indices each rank draws from DistributedSampler in one epoch."""
    return len(sampler_indices(read_count(dataset_len, "dataset length"), read_count(num_replicas, "replicas"), 0, read_flag(drop_last)))


def q_transformer_activation_bytes(
    *, layers: Any, d_model: Any, vocab: Any, seq_len: Any, batch_size: Any, precision: str, checkpoint_activations: Any = False,
    strategy: str = "ddp",
) -> int:
    """Peak activation bytes of a GPT-style decoder of this shape (see `transformer_activation_bytes`), with the
    precision applied as `strategy`'s implementation applies it (DDP: torch.autocast; FSDP2: param_dtype)."""
    seq = read_count(seq_len, "seq len")
    return transformer_activation_bytes(
        layers=read_count(layers, "layers"), d_model=read_count(d_model, "d_model"), tokens=seq,
        batch_size=read_count(batch_size, "batch size"), head_outputs=read_count(vocab, "vocab"), head_tokens=seq,
        precision=precision, checkpoint_activations=read_flag(checkpoint_activations),
        cast=implementation(strategy, precision).cast,
    )["activation_bytes"]


def q_host_bytes(
    *, params: Any, gpus: Any, strategy: str, precision: str, optimizer: str, offload: str,
    gpus_per_node: Any = DEFAULT_GPUS_PER_NODE, group_size: Any = None,
) -> int:
    """Host RAM per node that `offload` fills with model state (ddpfsdp accounting, no margin)."""
    count, world, name, group = _state_args(params, gpus, strategy, group_size)
    per_node, _ = node_layout(world, read_count(gpus_per_node, "gpus per node"))
    return offloaded_state(count, world, name, precision, optimizer, offload, group)["host_bytes_per_gpu"] * per_node


def q_pcie_bytes_per_step(
    *, params: Any, gpus: Any, strategy: str, precision: str, offload: str, units: Any = None, group_size: Any = None,
) -> int:
    """Bytes one GPU copies to and from the host per step under `offload` (`units`: equal FSDP units;
    the root holds none). The optimizer's choice does not change what crosses PCIe."""
    count, world, name, group = _state_args(params, gpus, strategy, group_size)
    unit_params = None
    if units is not None:
        parts = read_count(units, "units")
        unit_params = [math.ceil(count / parts)] * parts + [0]
    return offloaded_state(count, world, name, precision, "adam", offload, group, unit_params)["pcie_bytes_per_step"]


def _deepspeed_figures(params: Any, gpus: Any, strategy: str, offload: str, largest_layer: Any, gpus_per_node: Any,
                       zero_init: Any) -> tuple[int, int]:
    from ddpfsdp.demos.theory import deepspeed_accounting as ds

    count, world, name = read_count(params, "params"), read_count(gpus, "gpus"), canonical_strategy(strategy)
    offload = check_offload(offload)
    refusal = accounting_refusal(name, "deepspeed") or offload_refusal(name, offload)
    if refusal:
        raise ValueError(refusal)
    per_node, nodes = node_layout(world, read_count(gpus_per_node, "gpus per node"))
    if name == "zero2":
        return ds.zero2_mem_needs(count, per_node, nodes, cpu_offload=offload == "optimizer")
    if largest_layer is None:
        raise ValueError("DeepSpeed's ZeRO-3 estimate needs largest_layer (parameters of the largest layer)")
    host, per_gpu, _ = ds.zero3_mem_needs(
        count, read_count(largest_layer, "largest layer"), per_node, nodes,
        cpu_offload=offload != "none", cpu_offload_params=offload == "all", zero_init=read_flag(zero_init),
    )
    return host, per_gpu


def q_deepspeed_gpu_bytes(
    *, params: Any, gpus: Any, strategy: str, offload: str = "none", largest_layer: Any = None,
    gpus_per_node: Any = DEFAULT_GPUS_PER_NODE, zero_init: Any = True,
) -> int:
    """DeepSpeed 0.19's estimate of model-state bytes per GPU (ZeRO-2 or ZeRO-3)."""
    return _deepspeed_figures(params, gpus, strategy, offload, largest_layer, gpus_per_node, zero_init)[1]


def q_deepspeed_host_bytes(
    *, params: Any, gpus: Any, strategy: str, offload: str = "none", largest_layer: Any = None,
    gpus_per_node: Any = DEFAULT_GPUS_PER_NODE, zero_init: Any = True,
) -> int:
    """DeepSpeed 0.19's estimate of host RAM per node (with its 1.5x buffer factor)."""
    return _deepspeed_figures(params, gpus, strategy, offload, largest_layer, gpus_per_node, zero_init)[0]


QUIZ_FUNCTIONS: dict[str, Callable[..., int | float]] = {
    "param_count": q_param_count,
    "bytes_per_param": q_bytes_per_param,
    "model_state_bytes": _state_field("model_state_bytes"),
    "params_bytes": _state_field("params_bytes"),
    "grads_bytes": _state_field("grads_bytes"),
    "optimizer_bytes": _state_field("optimizer_bytes"),
    "activation_bytes": q_activation_bytes,
    "wire_bytes_per_rank": q_wire_bytes_per_rank,
    "step_wire_bytes": q_step_wire_bytes,
    "comm_ratio": q_comm_ratio,
    "max_params": q_max_params,
    "min_gpus": q_min_gpus,
    "min_zero_stage": q_min_zero_stage,
    "ddp_buckets": q_ddp_buckets,
    "sampler_index": q_sampler_index,
    "sampler_count": q_sampler_count,
    "transformer_activation_bytes": q_transformer_activation_bytes,
    "tp_block_wire_bytes": q_tp_block_wire_bytes,
    "host_bytes": q_host_bytes,
    "pcie_bytes_per_step": q_pcie_bytes_per_step,
    "deepspeed_gpu_bytes": q_deepspeed_gpu_bytes,
    "deepspeed_host_bytes": q_deepspeed_host_bytes,
    **PIPELINE_FUNCTIONS,
    **CONTEXT_PARALLEL_FUNCTIONS,
    **EXPERT_PARALLEL_FUNCTIONS,
    **AT_SCALE_FUNCTIONS,
}
