"""DeepSpeed's memory estimator for ZeRO-2 and ZeRO-3, as a second accounting convention beside ours.

Theory, like the rest of `theory`: these are the formulas of DeepSpeed 0.19's
`deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs` and
`deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs` (unchanged since 0.14.3 for
ZeRO-2), written out here so `ddpfsdp calc --accounting deepspeed` can print them without
DeepSpeed installed. Both assume DeepSpeed's mixed-precision Adam: 16-bit parameters and gradients,
fp32 master weights and two fp32 moments. For P parameters on N GPUs in total, n per node:

    per GPU                          ZeRO-2                  ZeRO-3
    no offload                       2P + 18P/N              4L + 18P/N
    offload_optimizer                2P                      4L + 2P/N
    offload_optimizer + offload_param   (no such option)     4L

L is the largest layer's parameter count: DeepSpeed gathers one layer's 16-bit parameters and
computes its 16-bit gradients at a time (2 + 2 bytes each). Its 18 bytes per sharded parameter are
an fp32 gradient partition (4), fp32 master weights (4) and Adam's two moments (8), plus 16-bit
gradients (2, ZeRO-2) or 16-bit parameters (2, ZeRO-3).

Host RAM per node, times `additional_buffer_factor` (1.5, "to be conservative"):

    ZeRO-2  no offload           4P * n          (fp32 weights of n processes while the model is built)
            offload_optimizer    max(4N, 16) * P (N: all GPUs, as DeepSpeed writes it)
    ZeRO-3  no offload           4L * n with zero.Init, else 4P * n
            offload_optimizer    16P / nodes with zero.Init, else max(4n, 16 / nodes) * P
            + offload_param      18P / nodes with zero.Init, else max(4n, 18 / nodes) * P

Where ours differs (`state` and `working_set`, precision bf16-master): ZeRO-2 2P + 14P/N and ZeRO-3 16P/N. We count
the gradient shard once, in the dtype it is held in (2 bytes), as FSDP holds it; DeepSpeed also
counts an fp32 copy of it (4 bytes), because its optimizer converts the gradients of a whole
parameter group to fp32 before the update. And our ZeRO-3 working term is two FSDP units (the one
computing and the one prefetched, parameters and gradients), not one layer: DeepSpeed's "layer" is
one module's own parameters (a Linear, an Embedding), far smaller than a transformer block.
"""

from __future__ import annotations

ADDITIONAL_BUFFER_FACTOR = 1.5
"""DeepSpeed's default margin on host RAM."""

OFFLOAD_OPTIONS: dict[str, dict[str, str]] = {
    "zero2": {
        "none": "offload_optimizer=none",
        "optimizer": "offload_optimizer=cpu",
    },
    "zero3": {
        "none": "offload_param=none, offload_optimizer=none",
        "optimizer": "offload_param=none, offload_optimizer=cpu",
        "all": "offload_param=cpu, offload_optimizer=cpu",
    },
}
"""The DeepSpeed configuration each offload level stands for; a level missing here has none."""


def zero2_mem_needs(
    total_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    additional_buffer_factor: float = ADDITIONAL_BUFFER_FACTOR,
) -> tuple[int, int]:
    """(host bytes per node, bytes per GPU), as DeepSpeed 0.19's ZeRO-2 estimator returns them."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        per_gpu = 2 * total_params
        host = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        per_gpu = 2 * total_params + int(18 * total_params / total_gpus)
        host = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(host), int(per_gpu)


def zero3_mem_needs(
    total_params: int,
    largest_layer_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    cpu_offload_params: bool = True,
    zero_init: bool = True,
    additional_buffer_factor: float = ADDITIONAL_BUFFER_FACTOR,
) -> tuple[int, int, int]:
    """(host bytes per node, bytes per GPU, largest-layer bytes), as DeepSpeed 0.19's ZeRO-3 estimator
    returns them. `cpu_offload_params` counts only together with `cpu_offload`, as in DeepSpeed."""
    total_gpus = num_nodes * num_gpus_per_node
    node_share = 1 / num_nodes
    largest_layer_bytes = 4 * largest_layer_params
    if cpu_offload and cpu_offload_params:
        per_gpu = largest_layer_bytes
        factor = 18 * node_share if zero_init else max(4 * num_gpus_per_node, 18 * node_share)
        host = total_params * factor * additional_buffer_factor
    elif cpu_offload:
        per_gpu = largest_layer_bytes + int(2 * total_params / total_gpus)
        factor = 16 * node_share if zero_init else max(4 * num_gpus_per_node, 16 * node_share)
        host = total_params * factor * additional_buffer_factor
    else:
        per_gpu = largest_layer_bytes + int(18 * total_params / total_gpus)
        built = largest_layer_params if zero_init else total_params
        host = built * 4 * num_gpus_per_node * additional_buffer_factor
    return int(host), int(per_gpu), largest_layer_bytes


def per_gpu_parts(strategy: str, offload: str, total_params: int, total_gpus: int) -> dict[str, int]:
    """The model-state bytes per GPU split as DeepSpeed's comments and memory page explain its
    multipliers (16-bit params; 16-bit and fp32 gradients; fp32 master weights and Adam's moments).
    The parts are rounded down each; `model_state_bytes` is DeepSpeed's own (rounded once)."""
    def per_shard(multiplier: int) -> int:
        return int(multiplier * total_params / total_gpus)  # DeepSpeed's own order of operations

    if strategy == "zero2":
        params = 2 * total_params
        if offload == "optimizer":
            return {"params_bytes": params, "grads_bytes": 0, "optimizer_bytes": 0, "model_state_bytes": params}
        optimizer = per_shard(12)
        state = params + per_shard(18)
        return {"params_bytes": params, "grads_bytes": state - params - optimizer,
                "optimizer_bytes": optimizer, "model_state_bytes": state}
    if offload == "all":
        return {"params_bytes": 0, "grads_bytes": 0, "optimizer_bytes": 0, "model_state_bytes": 0}
    if offload == "optimizer":
        params = per_shard(2)
        return {"params_bytes": params, "grads_bytes": 0, "optimizer_bytes": 0, "model_state_bytes": params}
    params = per_shard(2)
    optimizer = per_shard(12)
    state = per_shard(18)
    return {"params_bytes": params, "grads_bytes": state - params - optimizer,
            "optimizer_bytes": optimizer, "model_state_bytes": state}
