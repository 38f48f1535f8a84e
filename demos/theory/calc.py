"""The analytic model: per-GPU memory and per-step communication of DDP, ZeRO-1/2/3 and HSDP.

Everything here is theory, computed from counts and byte sizes; nothing is measured. The demos
show these figures beside what they measured, the quiz computes its numeric answers with
`QUIZ_FUNCTIONS`, and `ddpfsdp calc` prints them. Pure Python: importing this module never imports
torch, so the quiz can use it.

Model state per GPU, for Psi parameters on N GPUs (the ZeRO paper's accounting):

    strategy   params      grads       optimizer   what is sharded
    ddp        P*Psi       G*Psi       K*Psi       nothing
    zero1      P*Psi       G*Psi       K*Psi/N     optimizer state          (P_os)
    zero2      P*Psi       G*Psi/N     K*Psi/N     + gradients              (P_os+g)
    zero3      P*Psi/N     G*Psi/N     K*Psi/N     + parameters (FSDP full) (P_os+g+p)
    hsdp       P*Psi/G     G*Psi/G     K*Psi/G     all of it, within groups of G; replicated
                                                   across N/G groups

P, G and K are bytes per parameter held for parameters, gradients and optimizer state; they come
from the precision and the optimizer (`PRECISIONS`, `OPTIMIZER_STATES`). A shard is ceil(Psi/N)
elements, as FSDP pads every parameter to a multiple of N.

Communication per step, per rank, for a ring over n ranks: all-reduce sends 2(n-1)/n of the
buffer, all-gather (n-1)/n of its output, reduce-scatter (n-1)/n of its input, broadcast (n-1)/n.
DDP all-reduces the gradients (2 Psi); ZeRO-1 and ZeRO-2 reduce-scatter gradients and all-gather
the updated parameters (2 Psi, the same volume as DDP); ZeRO-3 / FSDP full all-gathers the
parameters in forward and again in backward and reduce-scatters the gradients (3 Psi, 1.5x DDP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ddpfsdp.demos.units import format_bytes, parse_bytes, parse_count

SCHEMA = "ddpfsdp.calc/1"

STRATEGIES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3", "hsdp")

STRATEGY_TITLES: dict[str, str] = {
    "ddp": "DDP",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3 / FSDP full",
    "hsdp": "HSDP",
}

STRATEGY_SHARDS: dict[str, str] = {
    "ddp": "nothing sharded",
    "zero1": "optimizer state sharded",
    "zero2": "+ gradients sharded",
    "zero3": "+ parameters sharded",
    "hsdp": "all sharded in a group of G, replicated across groups",
}

# Other names people use for the same strategies.
STRATEGY_ALIASES: dict[str, str] = {
    "fsdp": "zero3",
    "fsdp-full": "zero3",
    "full": "zero3",
    "full_shard": "zero3",
    "hybrid": "hsdp",
    "hybrid_shard": "hsdp",
    "fsdp-hybrid": "hsdp",
}

OPTIMIZER_STATES: dict[str, int] = {"adamw": 2, "adam": 2, "sgd-momentum": 1, "sgd": 0}
"""Tensors of parameter size the optimizer keeps: Adam's two moments, SGD's momentum buffer."""

COMM_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")

PREFETCH_UNITS = 2
"""FSDP units whose full parameters are alive at once: the one computing and the one prefetched."""

DEFAULT_UNITS = 32
"""Equal-sized FSDP units assumed when only a parameter count is known (a 7B Llama has 32 blocks)."""


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each kind of tensor under one precision recipe."""

    name: str
    param_bytes: int  # parameters held between steps
    grad_bytes: int  # gradients held after backward
    state_bytes: int  # each optimizer state tensor (e.g. Adam's exp_avg)
    master_bytes: int  # an fp32 master copy of the parameters inside the optimizer (0: none)
    compute_bytes: int  # parameters as matmuls see them, and most activations
    residual_bytes: int  # the residual stream between blocks
    gather_bytes: int  # parameters as FSDP all-gathers them (MixedPrecisionPolicy.param_dtype)
    reduce_bytes: int  # gradients as they are reduced (DDP all-reduce, FSDP reduce_dtype)
    summary: str

    def optimizer_bytes_per_param(self, optimizer: str) -> int:
        return self.master_bytes + OPTIMIZER_STATES[optimizer] * self.state_bytes


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision(
        "fp32", param_bytes=4, grad_bytes=4, state_bytes=4, master_bytes=0,
        compute_bytes=4, residual_bytes=4, gather_bytes=4, reduce_bytes=4,
        summary="everything in fp32",
    ),
    "bf16-mixed": Precision(
        "bf16-mixed", param_bytes=4, grad_bytes=4, state_bytes=4, master_bytes=0,
        compute_bytes=2, residual_bytes=4, gather_bytes=2, reduce_bytes=4,
        summary="PyTorch's mixed precision (autocast for DDP, FSDP2 MixedPrecisionPolicy(param_dtype="
        "bf16, reduce_dtype=fp32)): fp32 params, grads and optimizer state are held; bf16 copies "
        "exist only for compute",
    ),
    "bf16-master": Precision(
        "bf16-master", param_bytes=2, grad_bytes=2, state_bytes=4, master_bytes=4,
        compute_bytes=2, residual_bytes=2, gather_bytes=2, reduce_bytes=2,
        summary="the ZeRO paper's mixed-precision Adam (DeepSpeed, Megatron): bf16 params and grads "
        "are held; the optimizer keeps an fp32 master copy beside its fp32 states",
    ),
    "bf16": Precision(
        "bf16", param_bytes=2, grad_bytes=2, state_bytes=2, master_bytes=0,
        compute_bytes=2, residual_bytes=2, gather_bytes=2, reduce_bytes=2,
        summary="everything in bf16, optimizer states too",
    ),
}


# ----------------------------------------------------------------------------- argument checking


def canonical_strategy(name: str) -> str:
    key = str(name).strip().lower()
    key = STRATEGY_ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise ValueError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)} "
            f"(or {', '.join(STRATEGY_ALIASES)})"
        )
    return key


def precision_for(name: str) -> Precision:
    key = str(name).strip().lower()
    if key not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")
    return PRECISIONS[key]


def check_optimizer(name: str) -> str:
    key = str(name).strip().lower()
    if key not in OPTIMIZER_STATES:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZER_STATES)}")
    return key


def _count(value: Any, what: str) -> int:
    try:
        return parse_count(value)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        folded = value.strip().lower()
        if folded in ("1", "true", "yes", "on"):
            return True
        if folded in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"cannot read {value!r} as true/false")
    return bool(value)


def resolve_group_size(strategy: str, gpus: int, group_size: Any = None) -> int | None:
    """The HSDP shard-group size: as given, else 8 (one node) where it divides the GPUs, else all."""
    if strategy != "hsdp" and group_size is None:
        return None
    if group_size is None:
        return 8 if gpus % 8 == 0 else gpus
    size = _count(group_size, "group size")
    if size > gpus or gpus % size:
        raise ValueError(
            f"group size {size} must divide the GPU count {gpus} "
            f"(HSDP shards within groups of G and replicates across {gpus}/G groups)"
        )
    return size


def _divisor(strategy: str, kind: str, gpus: int, group_size: int | None) -> int:
    """How many ways `kind` (params, grads, optimizer) is split for `strategy`."""
    if strategy == "hsdp":
        return group_size or gpus
    sharded_from = {"zero1": ("optimizer",), "zero2": ("grads", "optimizer"), "zero3": ("params", "grads", "optimizer")}
    return gpus if kind in sharded_from.get(strategy, ()) else 1


# ----------------------------------------------------------------------------- model state


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
        kind: math.ceil(params / _divisor(strategy, kind, gpus, group_size)) * size
        for kind, size in per_param.items()
    }
    return {
        "params_bytes": held["params"],
        "grads_bytes": held["grads"],
        "optimizer_bytes": held["optimizer"],
        "model_state_bytes": sum(held.values()),
    }


def bytes_per_param_breakdown(precision: str, optimizer: str) -> dict[str, int]:
    spec = precision_for(precision)
    optimizer_bytes = spec.optimizer_bytes_per_param(check_optimizer(optimizer))
    return {
        "params": spec.param_bytes,
        "grads": spec.grad_bytes,
        "optimizer": optimizer_bytes,
        "total": spec.param_bytes + spec.grad_bytes + optimizer_bytes,
    }


# ----------------------------------------------------------------------------- offload

OFFLOADS: tuple[str, ...] = ("none", "optimizer", "all")
"""What lives in host RAM between steps: nothing; the optimizer state (and the gradient shard the
optimizer steps on, on the host); or parameters, gradients and optimizer state of the shards."""

DEFAULT_GPUS_PER_NODE = 8

OFFLOAD_SUPPORT: dict[str, dict[str, str]] = {
    "ddp": {},
    "zero1": {"optimizer": "DeepSpeed ZeRO-1 offload_optimizer (PyTorch's ZeroRedundancyOptimizer has no offload)"},
    "zero2": {"optimizer": "DeepSpeed ZeRO-2 offload_optimizer"},
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
    ("zero1", "all"): "ZeRO-1 replicates parameters and gradients and nothing offloads them (DeepSpeed's "
    "offload_param needs stage 3); use --offload optimizer, or zero3 with --offload all",
    ("zero2", "all"): "ZeRO-2 replicates the parameters and nothing offloads them (DeepSpeed's offload_param "
    "needs stage 3); use --offload optimizer, or zero3 with --offload all",
    ("hsdp", "optimizer"): "FSDP offloads parameters, gradients and optimizer state together "
    "(CPUOffloadPolicy); there is no optimizer-only offload: use --offload all, or zero3 with "
    "--offload optimizer (DeepSpeed)",
}


def check_offload(offload: str) -> str:
    key = str(offload).strip().lower()
    if key not in OFFLOADS:
        raise ValueError(f"unknown offload {offload!r}; choose one of {', '.join(OFFLOADS)}")
    return key


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


def offloaded_state(
    params: int,
    gpus: int,
    strategy: str,
    precision: str,
    optimizer: str,
    offload: str,
    group_size: int | None = None,
    unit_params: Iterable[int] | None = None,
) -> dict[str, Any]:
    """Per-GPU model state with `offload` applied, the host bytes each GPU's process holds, and the
    bytes each crosses PCIe per step.

    optimizer (DeepSpeed's offload_optimizer): the optimizer state moves to the host and the step
    runs there, on the gradient shard, which is copied device-to-host; the updated parameter shard
    is copied back. ZeRO-1 still holds the full gradients on the GPU until they are reduced.
    all (FSDP2 CPUOffloadPolicy): the sharded parameters, gradients and optimizer state live on the
    host. Each parameter shard is copied host-to-device before every all-gather (forward, and again
    in backward where the unit was resharded after forward); each reduce-scattered gradient shard
    is copied device-to-host; the optimizer steps on the host.
    """
    strategy = canonical_strategy(strategy)
    offload = check_offload(offload)
    refusal = offload_refusal(strategy, offload)
    if refusal:
        raise ValueError(refusal)
    spec = precision_for(precision)
    state = model_state(params, gpus, strategy, spec.name, optimizer, group_size)
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
        shard_group = gpus if strategy == "zero3" else resolve_group_size(strategy, gpus, group_size)
        units = [count for count in (unit_params or []) if count >= 0]
        if units:
            copies = [*units, *units[:-1]]  # the root is not resharded after forward
        else:
            copies = [params, params]
        h2d = sum(math.ceil(count / shard_group) for count in copies if count > 0) * spec.param_bytes
        d2h = state["grads_bytes"]
    gpu["model_state_bytes"] = gpu["params_bytes"] + gpu["grads_bytes"] + gpu["optimizer_bytes"]
    return {
        **gpu,
        "host_bytes_per_gpu": host,
        "pcie": {"host_to_device_bytes": h2d, "device_to_host_bytes": d2h},
        "pcie_bytes_per_step": h2d + d2h,
    }


# ----------------------------------------------------------------------------- working set


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
        return {
            "working_set_bytes": buckets + autocast_copies,
            "largest_unit_params": largest,
            "units_alive": 0,
            "parts": {"gradient_buckets": buckets, "autocast_weight_copies": autocast_copies},
        }
    if strategy == "zero2":
        grads = alive * largest * spec.reduce_bytes
        return {
            "working_set_bytes": grads + autocast_copies,
            "largest_unit_params": largest,
            "units_alive": alive,
            "parts": {"unsharded_unit_grads": grads, "autocast_weight_copies": autocast_copies},
        }
    gathered = alive * largest * spec.gather_bytes
    grads = alive * largest * spec.reduce_bytes
    return {
        "working_set_bytes": gathered + grads,
        "largest_unit_params": largest,
        "units_alive": alive,
        "parts": {"unsharded_unit_params": gathered, "unsharded_unit_grads": grads},
    }


# ----------------------------------------------------------------------------- activations


def _transformer_block_bytes(tokens: int, batch_size: int, d_model: int, spec: Precision) -> int:
    """Bytes one pre-norm block saves for backward.

    Per token, in elements of width d: the block input (residual stream) and the input of the
    second LayerNorm (2, in `residual_bytes`), and in `compute_bytes`: the first LayerNorm's output
    as the qkv projection's input (1), q, k, v (3), the attention output, which is also the output
    projection's input (1), the second LayerNorm's output (1), the MLP's hidden layer before and
    after GELU (4 + 4). That is 2r + 14c bytes per element of b*s*d (no dropout; with dropout
    masks Korthikanti et al. count 34 bytes in 16-bit).
    Attention is assumed fused (F.scaled_dot_product_attention, flash or memory-efficient): no
    seq x seq score matrix is stored, and its output is laid out (b, s, heads, d/heads), so
    merging the heads for the projection is a view, not a copy.
    Under autocast the bf16 copies of the weights are saved too; they are counted in the working
    set (`working_set`), not here.
    """
    elements = tokens * batch_size * d_model
    return elements * (2 * spec.residual_bytes + 14 * spec.compute_bytes)


def transformer_activation_bytes(
    *,
    layers: int,
    d_model: int,
    tokens: int,
    batch_size: int,
    head_outputs: int,
    head_tokens: int,
    precision: str,
    checkpoint_activations: bool,
) -> dict[str, int]:
    """Estimated bytes of activations per GPU: what autograd holds at the end of forward
    (`saved_bytes`) and the peak early in backward (`activation_bytes`).

    Without checkpointing: every block's saved tensors, plus the head's. With checkpointing (each
    block under torch.utils.checkpoint) only each block's input is kept; backward recomputes one
    block at a time, so one block's full activations come back at once.
    Head: the final LayerNorm's input and the projection's input (b*s*d each) and the log-softmax
    output the loss saves (b * head_tokens * head_outputs, in fp32 except under pure bf16).
    The peak adds, at the start of backward, the log-softmax's gradient (as large as its output),
    or with checkpointing the recomputed block if that is larger.
    Data parallelism does not shard activations: every strategy holds the same.
    """
    spec = precision_for(precision)
    elements = tokens * batch_size * d_model
    block = _transformer_block_bytes(tokens, batch_size, d_model, spec)
    loss_bytes = 2 if spec.name in ("bf16", "bf16-master") else 4
    log_softmax = batch_size * head_tokens * head_outputs * loss_bytes
    head = elements * (spec.residual_bytes + spec.compute_bytes) + log_softmax
    if checkpoint_activations:
        saved = layers * elements * spec.residual_bytes + head
        extra = max(log_softmax, block)
    else:
        saved = layers * block + head
        extra = log_softmax
    return {
        "activation_bytes": saved + extra,
        "saved_bytes": saved,
        "block_bytes": block,
        "head_bytes": head,
    }


def _gpt_shape(model: Any, seq_len: int | None = None, **overrides: int | None):
    from ddpfsdp.demos.train import presets

    if isinstance(model, presets.GPTShape):
        shape = model
        if seq_len is not None:
            from dataclasses import replace

            shape = replace(shape, seq_len=seq_len)
        return shape
    name = str(model).strip().lower()
    if name not in presets.GPT_PRESETS:
        raise ValueError(f"unknown model {model!r}; choose a GPT preset: {', '.join(presets.GPT_PRESETS)}")
    return presets.gpt_shape(name, seq_len=seq_len, **overrides)


def gpt_activation_bytes(
    model: Any,
    batch_size: int,
    seq_len: int | None = None,
    checkpoint_activations: bool = False,
    precision: str = "fp32",
    **overrides: int | None,
) -> dict[str, int]:
    """Activations of a GPT preset (or shape) for a micro-batch of `batch_size` sequences."""
    shape = _gpt_shape(model, seq_len, **overrides)
    return transformer_activation_bytes(
        layers=shape.layers,
        d_model=shape.d_model,
        tokens=shape.seq_len,
        batch_size=batch_size,
        head_outputs=shape.vocab,
        head_tokens=shape.seq_len,
        precision=precision,
        checkpoint_activations=checkpoint_activations,
    )


def gpt_unit_params(model: Any, seq_len: int | None = None, wrap: str = "block", **overrides: int | None) -> list[int]:
    """Parameters per FSDP unit of a GPT preset, in forward order, root last.

    block: embeddings, each block, head, root (empty); model: one unit, the root.
    layer: embeddings, per block its attention and its MLP (the LayerNorms stay with the block),
    head, root.
    """
    shape = _gpt_shape(model, seq_len, **overrides)
    if wrap == "model":
        return [shape.params]
    if wrap == "layer":
        d = shape.d_model
        attention = 4 * d * d + 4 * d
        mlp = 8 * d * d + 5 * d
        rest = shape.block_params - attention - mlp
        per_block = [attention, mlp, rest]
        return [shape.embedding_params, *per_block * shape.layers, shape.head_params, 0]
    return [shape.embedding_params, *[shape.block_params] * shape.layers, shape.head_params, 0]


# ----------------------------------------------------------------------------- communication


def wire_factor(op: str, ranks: int) -> float:
    """Bytes a ring sends per rank, as a fraction of the op's logical buffer."""
    if op not in COMM_OPS:
        raise ValueError(f"unknown collective {op!r}; choose one of {', '.join(COMM_OPS)}")
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    fraction = (ranks - 1) / ranks
    return 2 * fraction if op == "all_reduce" else fraction


def _op(count: int | None, logical_bytes: int, factor: float) -> dict[str, int | None]:
    return {"count": count, "bytes": int(logical_bytes), "wire_bytes_per_rank": round(logical_bytes * factor)}


def step_comm(
    strategy: str,
    params: int,
    gpus: int,
    precision: str,
    group_size: int | None = None,
    unit_params: Iterable[int] | None = None,
) -> dict[str, dict[str, int | None]]:
    """Collectives per training step, per rank: {op: {count, bytes, wire_bytes_per_rank}}.

    `bytes` is the logical buffer size summed over calls (all-gather: the gathered output;
    reduce-scatter: the full input); wire bytes apply the ring factor of the op's group. `count`
    is given where it can be known: one all-gather and one reduce-scatter per non-empty FSDP unit
    (and a second all-gather per unit resharded after forward; FSDP2 does not reshard the root);
    None where it depends on how an implementation packs tensors into buckets (DDP, ZeRO-1/2).
    ZeRO-1/2 follow the paper: reduce-scatter the gradients, all-gather the updated parameters.
    """
    strategy = canonical_strategy(strategy)
    spec = precision_for(precision)
    group_size = resolve_group_size(strategy, gpus, group_size)
    units = list(unit_params) if unit_params is not None else None
    known_units = units is not None and len(units) > 0
    nonempty = sum(1 for count in units if count > 0) if known_units else None
    grad_bytes = params * spec.reduce_bytes
    if strategy == "ddp":
        return {"all_reduce": _op(None, grad_bytes, wire_factor("all_reduce", gpus))}
    if strategy in ("zero1", "zero2"):
        # Each rank updates its shard of the held parameters, in the held precision, and the
        # updated shards are gathered; how many calls that takes is the implementation's choice.
        return {
            "reduce_scatter": _op(None, grad_bytes, wire_factor("reduce_scatter", gpus)),
            "all_gather": _op(None, params * spec.param_bytes, wire_factor("all_gather", gpus)),
        }
    shard_group = gpus if strategy == "zero3" else group_size
    if known_units:
        resharded = sum(units[:-1])
        gathered = (sum(units) + resharded) * spec.gather_bytes
        gathers = nonempty + sum(1 for count in units[:-1] if count > 0)
    else:
        gathered = 2 * params * spec.gather_bytes
        gathers = None
    ops = {
        "all_gather": _op(gathers, gathered, wire_factor("all_gather", shard_group)),
        "reduce_scatter": _op(nonempty, grad_bytes, wire_factor("reduce_scatter", shard_group)),
    }
    if strategy == "hsdp":
        replicas = gpus // group_size
        if replicas > 1:
            shard_bytes = math.ceil(params / group_size) * spec.reduce_bytes
            ops["all_reduce"] = _op(nonempty, shard_bytes, wire_factor("all_reduce", replicas))
    return ops


def total_wire_bytes(ops: dict[str, dict[str, Any]]) -> int:
    return sum(op["wire_bytes_per_rank"] for op in ops.values())


# ----------------------------------------------------------------------------- DDP buckets

DDP_BUCKET_CAP_MB = 25
"""DDP's default bucket cap in MiB (`bucket_cap_mb=None`)."""

DDP_FIRST_BUCKET_BYTES = 1024 * 1024
"""The smaller cap of DDP's first bucket, used only when `bucket_cap_mb` is left at its default."""


def gpt_param_numels(layers: int, d_model: int, vocab: int, seq_len: int) -> list[int]:
    """Elements of each parameter tensor of the GPT decoder in `presets`, in registration order.

    Token and position embeddings; per block: LayerNorm (weight, bias), qkv (weight, bias), output
    projection (weight, bias), LayerNorm, MLP up (weight, bias), MLP down (weight, bias); the final
    LayerNorm (weight, bias) and the LM head (weight, no bias).
    """
    d = d_model
    block = [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    return [vocab * d, seq_len * d, *block * layers, d, d, d * vocab]


def ddp_bucket_bytes(tensor_bytes: Iterable[int], bucket_cap_mb: float | None = None) -> list[int]:
    """Bytes of each gradient bucket DDP all-reduces, once it has rebuilt its buckets.

    `tensor_bytes`: each gradient's size, in the order gradients become ready in backward (about the
    reverse of registration order). DDP's first iteration all-reduces one bucket of everything
    (unless find_unused_parameters=True); the second iteration's forward rebuilds the buckets in
    the order the first one's gradients arrived, once for the whole run. Filling them, a bucket closes as soon as it holds at least its cap, so a
    bucket may overshoot its cap and a tensor larger than the cap is never split. The first bucket's
    cap is 1 MiB when `bucket_cap_mb` is left at its default (25 MiB), and `bucket_cap_mb` itself
    when it is given. One dtype and one device are assumed (DDP buckets those apart).
    """
    cap_bytes = int((DDP_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
    if cap_bytes <= 0:
        raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb!r}")
    limit = DDP_FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap_bytes
    buckets: list[int] = []
    filled = 0
    for size in tensor_bytes:
        filled += int(size)
        if filled >= limit:
            buckets.append(filled)
            filled = 0
            limit = cap_bytes
    if filled:
        buckets.append(filled)
    return buckets


# ----------------------------------------------------------------------------- DistributedSampler


def sampler_indices(dataset_len: int, num_replicas: int, rank: int, drop_last: bool = False) -> list[int]:
    """The dataset indices one rank draws from DistributedSampler(shuffle=False) in one epoch.

    Every rank gets the same count. Without drop_last the index list is padded to a multiple of
    the world size by repeating indices from its start; with drop_last its tail is cut instead.
    Rank r then takes every num_replicas-th index starting at r.
    """
    if dataset_len < 1 or num_replicas < 1:
        raise ValueError("a sampler needs at least one sample and one replica")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} must be in [0, {num_replicas - 1}]")
    if drop_last and dataset_len % num_replicas:
        per_rank = math.ceil((dataset_len - num_replicas) / num_replicas)
    else:
        per_rank = math.ceil(dataset_len / num_replicas)
    total = per_rank * num_replicas
    indices = list(range(dataset_len))
    if total > dataset_len:
        indices = (indices * math.ceil(total / dataset_len))[:total]
    else:
        indices = indices[:total]
    return indices[rank:total:num_replicas]


# ----------------------------------------------------------------------------- the whole picture


def teaching_notes(precision: str, optimizer: str, gpus: int, group_size: int | None = None) -> list[str]:
    """What the table means and the traps it shows, in sentences computed from the inputs."""
    spec = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    per = bytes_per_param_breakdown(precision, optimizer)
    fp32 = bytes_per_param_breakdown("fp32", optimizer)
    mixed = bytes_per_param_breakdown("bf16-mixed", optimizer)
    master = bytes_per_param_breakdown("bf16-master", optimizer)
    share = lambda b: f"{b['optimizer']} of {b['total']} bytes ({b['optimizer'] / b['total']:.0%})"  # noqa: E731
    notes = [
        "Theory: every figure is the analytic model's estimate, not a measurement. "
        "GB = 1e9 bytes, GiB = 2**30 bytes.",
        f"{spec.name}: {spec.summary}. Per parameter: params {per['params']} + grads {per['grads']} "
        f"+ optimizer {per['optimizer']} = {per['total']} bytes ({optimizer}: "
        f"{OPTIMIZER_STATES[optimizer]} state tensor(s)).",
        f"Mixed precision does not shrink model state: bf16-mixed holds {mixed['params']} + "
        f"{mixed['grads']} + {mixed['optimizer']} = {mixed['total']} bytes per parameter with "
        f"{optimizer}, as fp32 does ({fp32['total']}); autocast and MixedPrecisionPolicy only add bf16 "
        "copies for compute. It shrinks activations and the bytes FSDP all-gathers, and speeds up matmuls.",
        f"ZeRO-1 shards only the optimizer state: {share(master)} per parameter under bf16-master, "
        f"{share(mixed)} under bf16-mixed. It saves more under bf16-master because the fp32 master "
        "weights live inside the optimizer there, while bf16-mixed keeps its fp32 weights as the "
        "parameters, which ZeRO-1 replicates.",
        f"Communication per step per rank on {gpus} GPUs: DDP all-reduces the gradients, 2(N-1)/N "
        "of them; ZeRO-1/2 reduce-scatter gradients and all-gather parameters, the same volume; "
        "ZeRO-3 / FSDP full all-gathers parameters in forward and again in backward, then "
        "reduce-scatters gradients: 3(N-1)/N, 1.5x DDP at equal element sizes.",
        "Working set (estimate): DDP, and PyTorch's ZeRO-1 built on it, copies gradients into "
        "flat buckets for the all-reduce, a second copy of the gradients unless "
        "gradient_as_bucket_view=True; under bf16-mixed, autocast keeps a bf16 copy of every weight "
        "from forward until backward has used it. FSDP instead holds a few unsharded units at a time.",
        "ZeRO-1 follows the paper here (reduce-scatter + all-gather). PyTorch's "
        "ZeroRedundancyOptimizer keeps DDP's all-reduce and then broadcasts each rank's updated "
        "parameters: 3(N-1)/N of the model per step.",
    ]
    if group_size:
        replicas = gpus // group_size
        notes.append(
            f"HSDP with G = {group_size}: parameters are all-gathered and gradients reduce-scattered "
            f"inside each group of {group_size}, and only a 1/{group_size} shard of the gradients is "
            f"all-reduced across the {replicas} group(s); with G = GPUs per node, that all-reduce is "
            "the only traffic on the slower links between nodes."
        )
    return notes


ACCOUNTINGS: tuple[str, ...] = ("ddpfsdp", "deepspeed")
"""Whose convention counts the bytes: this project's (`model_state`, `working_set`) or DeepSpeed's
estimator (`deepspeed_accounting`), which covers ZeRO-2 and ZeRO-3 with mixed-precision Adam."""

DEEPSPEED_STRATEGIES: tuple[str, ...] = ("zero2", "zero3")
DEEPSPEED_PRECISION = "bf16-master"
DEEPSPEED_OPTIMIZERS: tuple[str, ...] = ("adam", "adamw")


def check_accounting(accounting: str) -> str:
    key = str(accounting).strip().lower()
    if key not in ACCOUNTINGS:
        raise ValueError(f"unknown accounting {accounting!r}; choose one of {', '.join(ACCOUNTINGS)}")
    return key


def accounting_refusal(strategy: str, accounting: str) -> str | None:
    """Why `accounting` has no figure for `strategy`, and what to use instead; None when it has."""
    strategy, accounting = canonical_strategy(strategy), check_accounting(accounting)
    if accounting == "ddpfsdp" or strategy in DEEPSPEED_STRATEGIES:
        return None
    return (
        f"DeepSpeed's estimator covers only ZeRO-2 and ZeRO-3 (estimate_zero2/zero3_model_states_mem_needs), "
        f"not {STRATEGY_TITLES[strategy]}; use zero2 or zero3 with the deepspeed accounting, or "
        "the ddpfsdp accounting for every strategy"
    )


def gpt_largest_layer_params(model: Any) -> int:
    """The largest count of parameters one module of a GPT shape holds itself (not its children):
    how DeepSpeed's `model_to_params` finds the largest layer (embeddings, the qkv projection, the
    MLP's Linears, the LM head)."""
    shape = _gpt_shape(model)
    d = shape.d_model
    return max(shape.vocab * d, shape.seq_len * d, 3 * d * d + 3 * d, 4 * d * d + 4 * d, 4 * d * d + d)


def _deepspeed_row(
    strategy: str, offload: str, count: int, largest_layer: int, per_node: int, nodes: int, zero_init: bool
) -> dict[str, Any]:
    """One strategy under DeepSpeed's accounting: its per-GPU and per-node figures, its parts."""
    from ddpfsdp.demos.theory import deepspeed_accounting as ds

    if offload not in ds.OFFLOAD_OPTIONS[strategy]:
        raise ValueError(offload_refusal(strategy, offload) or f"DeepSpeed {strategy} has no offload {offload!r}")
    if strategy == "zero2":
        host, per_gpu = ds.zero2_mem_needs(count, per_node, nodes, cpu_offload=offload == "optimizer")
        working = 0
    else:
        host, per_gpu, working = ds.zero3_mem_needs(
            count, largest_layer, per_node, nodes,
            cpu_offload=offload != "none", cpu_offload_params=offload == "all", zero_init=zero_init,
        )
    parts = ds.per_gpu_parts(strategy, offload, count, per_node * nodes)
    assert parts["model_state_bytes"] + working == per_gpu, (strategy, offload)
    return {
        **parts,
        "working_set_bytes": working,
        "working_set": {"largest_layer_params_and_grads": working} if strategy == "zero3" else {},
        "deepspeed_gpu_bytes": per_gpu,
        "deepspeed_options": ds.OFFLOAD_OPTIONS[strategy][offload] + (
            f", zero_init={int(zero_init)}" if strategy == "zero3" else ""),
        "host_bytes": host,
        "host_bytes_per_gpu": host // per_node,
    }


def estimate(
    *,
    params: int | str | None = None,
    model: str | None = None,
    gpus: int | str = 8,
    group_size: int | str | None = None,
    precision: str | None = None,
    optimizer: str = "adamw",
    batch_size: int | str = 1,
    seq_len: int | str | None = None,
    checkpoint_activations: bool = False,
    gpu_mem: int | str | None = None,
    units: int | str | None = None,
    offload: str = "none",
    accounting: str = "ddpfsdp",
    gpus_per_node: int | str = DEFAULT_GPUS_PER_NODE,
    largest_layer: int | str | None = None,
    strategies: Iterable[str] | None = None,
    zero_init: bool = True,
) -> dict[str, Any]:
    """Every strategy side by side for one configuration: the `ddpfsdp.calc/1` document (bytes).

    Give `params` (a count, "7B") or `model` (a GPT preset, whose shape also gives FSDP units and
    activations). With `params` alone, activations are not estimated (None) and FSDP units are
    `units` equal parts (default `DEFAULT_UNITS`). `total_bytes` = model state + working set +
    activations (where known); `fits` compares it with `gpu_mem` (None when no size is given).
    `precision` defaults to bf16-mixed, and to bf16-master (the only one it counts) under the
    deepspeed accounting.

    `offload` (none, optimizer, all) moves model state to host RAM: each row's per-GPU figures
    shrink, `host_bytes` is the host RAM per node (`gpus_per_node` processes) and
    `pcie_bytes_per_step` what one GPU copies to and from the host per step. `strategies` limits the
    table (default: every strategy the offload and the accounting admit); a strategy that admits
    neither is refused with what to use instead. `accounting="deepspeed"` gives DeepSpeed 0.19's
    estimator figures for ZeRO-2 and ZeRO-3 instead (`deepspeed_accounting`); `largest_layer`
    (parameters) is its working term, by default the largest module of the preset's shape, or one
    of the `units` equal units for a bare count; `zero_init` is its ZeRO-3 host-RAM switch.
    """
    if (params is None) == (model is None):
        raise ValueError("give either params (e.g. 7B) or model (a GPT preset), not both or neither")
    accounting = check_accounting(accounting)
    offload = check_offload(offload)
    deepspeed = accounting == "deepspeed"
    if precision is None:
        precision = DEEPSPEED_PRECISION if deepspeed else "bf16-mixed"
    spec = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    if deepspeed and (spec.name != DEEPSPEED_PRECISION or optimizer not in DEEPSPEED_OPTIMIZERS):
        raise ValueError(
            "DeepSpeed's estimator counts only mixed-precision Adam (16-bit params and grads, fp32 master "
            f"weights and moments): use precision {DEEPSPEED_PRECISION} with adam or adamw, not "
            f"{spec.name} with {optimizer}, or the ddpfsdp accounting"
        )
    if largest_layer is not None and not deepspeed:
        raise ValueError(
            "the largest layer is DeepSpeed's ZeRO-3 working term; use it with the deepspeed accounting "
            "(the ddpfsdp accounting sizes FSDP units from the model preset or the unit count)"
        )
    gpus = _count(gpus, "gpus")
    per_node_limit = _count(gpus_per_node, "gpus per node")
    host_counted = deepspeed or offload != "none"
    if host_counted:
        per_node, nodes = node_layout(gpus, per_node_limit)
    else:  # nothing is counted per node, so a partly filled last node does not matter
        per_node, nodes = min(gpus, per_node_limit), math.ceil(gpus / per_node_limit)
    micro_batch = _count(batch_size, "batch size")
    seq = _count(seq_len, "seq len") if seq_len is not None else None
    group = resolve_group_size("hsdp", gpus, group_size)
    memory_limit = parse_bytes(gpu_mem) if gpu_mem is not None else None
    checkpoint = _bool(checkpoint_activations)
    activations: dict[str, int] | None = None
    if model is not None:
        shape = _gpt_shape(model, seq)
        count = shape.params
        seq = shape.seq_len
        unit_params = gpt_unit_params(shape)
        activations = gpt_activation_bytes(shape, micro_batch, checkpoint_activations=checkpoint, precision=spec.name)
    else:
        count = _count(params, "params")
        parts = _count(units, "units") if units is not None else DEFAULT_UNITS
        unit_params = [math.ceil(count / parts)] * parts + [0]
    largest_layer_params: int | None = None
    if deepspeed:
        if largest_layer is not None:
            largest_layer_params = _count(largest_layer, "largest layer")
        elif model is not None:
            largest_layer_params = gpt_largest_layer_params(shape)
        else:
            largest_layer_params = max(unit_params)

    if strategies is None:
        chosen = [name for name in offload_strategies(offload) if not (deepspeed and accounting_refusal(name, accounting))]
    else:
        chosen = []
        for name in strategies:
            key = canonical_strategy(name)
            refusal = accounting_refusal(key, accounting) or offload_refusal(key, offload)
            if refusal:
                raise ValueError(refusal)
            if key not in chosen:
                chosen.append(key)
        chosen.sort(key=STRATEGIES.index)
    if not chosen:
        raise ValueError(f"no strategy admits offload {offload!r} with the {accounting} accounting")

    table: dict[str, dict[str, Any]] = {}
    for strategy in chosen:
        size = group if strategy == "hsdp" else None
        comm = step_comm(strategy, count, gpus, spec.name, size, unit_params)
        activation = activations["activation_bytes"] if activations else None
        state = offloaded_state(count, gpus, strategy, spec.name, optimizer, offload, size, unit_params)
        if deepspeed:
            row = _deepspeed_row(strategy, offload, count, largest_layer_params, per_node, nodes, _bool(zero_init))
        else:
            work = working_set(strategy, count, spec.name, unit_params)
            row = {
                **{key: state[key] for key in ("params_bytes", "grads_bytes", "optimizer_bytes", "model_state_bytes")},
                "working_set_bytes": work["working_set_bytes"],
                "working_set": work["parts"],
                "host_bytes": state["host_bytes_per_gpu"] * per_node,
                "host_bytes_per_gpu": state["host_bytes_per_gpu"],
            }
        total = row["model_state_bytes"] + row["working_set_bytes"] + (activation or 0)
        table[strategy] = {
            "title": STRATEGY_TITLES[strategy],
            "shards": STRATEGY_SHARDS[strategy],
            **row,
            "activation_bytes": activation,
            "total_bytes": total,
            "fits": None if memory_limit is None else total <= memory_limit,
            "offload": offload,
            "offloaded_by": OFFLOAD_SUPPORT[strategy].get(offload) if offload != "none" else None,
            "pcie": state["pcie"],
            "pcie_bytes_per_step": state["pcie_bytes_per_step"],
            "comm": comm,
            "wire_bytes_per_rank": total_wire_bytes(comm),
        }

    notes = teaching_notes(spec.name, optimizer, gpus, group)
    largest = max(unit_params)
    if model is not None:
        notes.append(
            f"Working set (estimate): FSDP wraps {model}'s embeddings, each of its {shape.layers} blocks "
            f"and its head as units; the largest holds {largest:,} parameters, and "
            f"{PREFETCH_UNITS} units are unsharded at once with prefetching (params, and grads in backward)."
        )
        notes.append(
            f"Activations (estimate) for micro-batch {micro_batch} x seq {seq}, width {shape.d_model}, "
            f"{shape.layers} layers: each block saves about b*s*d*(2r + 14c) bytes (r: residual-stream "
            "bytes, c: compute bytes; fused attention, no seq x seq scores)"
            + ("; with checkpointing only each block's input is kept and one block is recomputed at a time"
               if checkpoint else "")
            + ", plus the head's log-softmax and its gradient. Every strategy holds the same activations."
        )
    else:
        notes.append(
            f"Working set (estimate) assumes {len(unit_params) - 1} equal FSDP units "
            f"({largest:,} parameters each; set the unit count, or give a model preset for real shapes), "
            f"{PREFETCH_UNITS} of them unsharded at once."
        )
        notes.append("Activations are not included: they need the model's shape (give a model preset).")
    notes.extend(_offload_notes(offload, chosen, per_node, deepspeed))
    if deepspeed:
        notes.extend(_deepspeed_notes(count, gpus, chosen, offload, largest_layer_params, unit_params, spec.name, optimizer))
    return {
        "schema": SCHEMA,
        "theory": True,
        "inputs": {
            "params": count,
            "model": model,
            "gpus": gpus,
            "group_size": group,
            "precision": spec.name,
            "optimizer": optimizer,
            "batch_size": micro_batch,
            "seq_len": seq,
            "checkpoint_activations": checkpoint,
            "gpu_mem_bytes": memory_limit,
            "units": sum(1 for count in unit_params if count > 0),
            "offload": offload,
            "accounting": accounting,
            "gpus_per_node": per_node,
            "nodes": nodes,
            "largest_layer_params": largest_layer_params,
            "zero_init": _bool(zero_init) if deepspeed else None,
        },
        "bytes_per_param": bytes_per_param_breakdown(spec.name, optimizer),
        "strategies": table,
        "notes": notes,
    }


def _offload_notes(offload: str, chosen: list[str], per_node: int, deepspeed: bool) -> list[str]:
    if offload == "none":
        return []
    left_out = [STRATEGY_TITLES[name] for name in STRATEGIES if name not in chosen and offload_refusal(name, offload)]
    notes = [
        f"Offload {offload}: " + "; ".join(f"{STRATEGY_TITLES[name]} by {OFFLOAD_SUPPORT[name][offload]}" for name in chosen) + "."
        + (f" Not shown: {', '.join(left_out)} (no implementation offloads {'the optimizer alone' if offload == 'optimizer' else 'parameters'} there)."
           if left_out else ""),
    ]
    if not deepspeed:
        if offload == "optimizer":
            notes.append(
                "Offload optimizer (DeepSpeed ZeRO-Offload): the optimizer state lives in host RAM and the step "
                "runs on the CPU; each step copies the gradient shard device-to-host and the updated "
                "parameter shard back (PCIe per step). ZeRO-1 still holds the full gradients on the GPU."
            )
        else:
            notes.append(
                "Offload all (FSDP2 CPUOffloadPolicy): sharded parameters, gradients and optimizer state live in "
                "pinned host RAM and the optimizer steps on the CPU. Each parameter shard is copied "
                "host-to-device before each all-gather (forward, and backward after resharding) and each "
                "gradient shard device-to-host after its reduce-scatter; the gathered units still use the GPU."
            )
        notes.append(
            f"Host RAM per node: {per_node} process(es) x each one's offloaded share, with no margin; the "
            "deepspeed accounting adds DeepSpeed's 1.5x buffer factor."
        )
    return notes


def _deepspeed_notes(
    count: int, gpus: int, chosen: list[str], offload: str, largest_layer: int, unit_params: list[int], precision: str, optimizer: str
) -> list[str]:
    notes = [
        "Accounting deepspeed: DeepSpeed 0.19's estimate_zero2_model_states_mem_needs and "
        "estimate_zero3_model_states_mem_needs, per GPU and per node (host RAM x 1.5, its "
        f"additional_buffer_factor). Largest layer: {largest_layer:,} parameters (DeepSpeed's ZeRO-3 "
        "working term is 4 bytes x the largest layer: its 16-bit parameters and 16-bit gradients).",
        "Why the two accountings differ, and why both are defensible: DeepSpeed counts 18 bytes per sharded "
        "parameter (fp32 gradient copy 4 + fp32 master 4 + Adam 8 + 16-bit grads or params 2) where ours "
        "counts 14 (ZeRO-2) or 16 (ZeRO-3), because its optimizer converts a whole parameter group's "
        "gradients to fp32 before the update, while FSDP keeps one gradient shard in its held dtype. "
        "DeepSpeed's working term is one layer (one module's own parameters); ours is two FSDP units "
        "(a transformer block each, the one computing and the one prefetched), parameters and gradients.",
    ]
    if offload == "none":
        ours = {
            name: model_state(count, gpus, name, precision, optimizer)["model_state_bytes"]
            + working_set(name, count, precision, unit_params)["working_set_bytes"]
            for name in chosen
        }
        notes.append(
            "The ddpfsdp accounting for the same model and GPUs (model state + working set): "
            + "; ".join(f"{STRATEGY_TITLES[name]} {format_bytes(ours[name])}" for name in chosen) + "."
        )
    return notes


# ----------------------------------------------------------------------------- a demo's own run

FSDP_SHARDING_ALIASES: dict[str, str] = {
    "full": "full",
    "full_shard": "full",
    "grad-op": "grad-op",
    "shard_grad_op": "grad-op",
    "hybrid": "hybrid",
    "hybrid_shard": "hybrid",
    "no-shard": "no-shard",
    "no_shard": "no-shard",
}


def _fsdp_sharding(name: str | None) -> str:
    key = (name or "full").strip().lower()
    if key not in FSDP_SHARDING_ALIASES:
        raise ValueError(
            f"unknown sharding {name!r}; choose one of full, grad-op, hybrid "
            "(or FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD)"
        )
    return FSDP_SHARDING_ALIASES[key]


def theory_for_run(
    *,
    strategy: str,
    sharding: str | None = None,
    params: int,
    world_size: int,
    precision: str,
    optimizer: str,
    replicas: int | None = None,
    unit_params: list[int] | None = None,
    bucket_bytes: int | None = None,
    gradient_as_bucket_view: bool = False,
    buffer_bytes: int = 0,
) -> dict[str, Any]:
    """The model's per-rank figures for a demo's own configuration, as PyTorch runs it.

    strategy: ddp (DistributedDataParallel), zero1 (DDP + ZeroRedundancyOptimizer: all-reduce of
    gradients, then each rank broadcasts the parameters it updated), fsdp (FSDP2 fully_shard)
    with sharding full (-> zero3), grad-op (reshard_after_forward=False) or hybrid (-> hsdp over
    world_size/replicas GPUs per group). FSDP grad-op holds params, grads and optimizer state
    sharded between steps, as ZeRO-3 does, and keeps every unit's parameters unsharded from its
    forward all-gather until backward ends, as ZeRO-2 does throughout: its resting figures are
    ZeRO-3's and its working set is the full parameters (plus the unit gradients awaiting their
    reduce-scatter). `unit_params`: parameters per FSDP unit, root last. `bucket_bytes` (DDP's
    bucket cap) is reported, not used: bucket counts depend on parameter order and sizes.
    `buffer_bytes`: module buffers (BatchNorm statistics), which DDP broadcasts from rank 0 at
    every forward (forward_sync_buffers=True, the default). DDP also broadcasts its rebuilt bucket
    order once, in the second iteration: measure after at least two steps.
    """
    spec = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    params = int(params)
    world = int(world_size)
    units = list(unit_params) if unit_params else None
    notes = [
        "Theory: the analytic model's figures for this run's configuration, shown beside the "
        "measurement, never instead of it.",
        f"{spec.name}: {spec.summary}.",
    ]
    buffers = _op(None, buffer_bytes, wire_factor("broadcast", world)) if buffer_bytes else None
    if strategy == "ddp":
        name, state_of, work_of = "ddp", "ddp", "ddp"
        comm = step_comm("ddp", params, world, spec.name)
        if buffers:
            comm["broadcast"] = buffers
        if bucket_bytes:
            notes.append(
                f"DDP all-reduces gradients in buckets of up to {format_bytes(bucket_bytes, 'MiB')}; "
                "the number of calls depends on how parameters fill them."
            )
    elif strategy == "zero1":
        name, state_of, work_of = "zero1", "zero1", "zero1"
        comm = {
            **step_comm("ddp", params, world, spec.name),
            "broadcast": _op(None, params * spec.param_bytes + buffer_bytes, wire_factor("broadcast", world)),
        }
        notes.append(
            "PyTorch's ZeroRedundancyOptimizer: DDP all-reduces the full gradients, each rank steps "
            "the optimizer for its shard, then broadcasts the parameters it updated (3(N-1)/N of the "
            "model per step, against the paper's 2(N-1)/N with reduce-scatter)."
        )
    elif strategy == "fsdp":
        sharding = _fsdp_sharding(sharding)
        if sharding == "full":
            name, state_of, work_of = "zero3", "zero3", "zero3"
            comm = step_comm("zero3", params, world, spec.name, unit_params=units)
        elif sharding == "grad-op":
            name, state_of, work_of = "zero2", "zero3", "zero2"
            per_unit = units or [params]
            nonempty = sum(1 for count in per_unit if count > 0)
            comm = {
                "all_gather": _op(nonempty if units else None, params * spec.gather_bytes, wire_factor("all_gather", world)),
                "reduce_scatter": _op(nonempty if units else None, params * spec.reduce_bytes, wire_factor("reduce_scatter", world)),
            }
            notes.append(
                "FSDP grad-op (reshard_after_forward=False): shards rest like ZeRO-3, but each unit stays "
                "unsharded from forward until backward ends, so there is one all-gather per unit per step "
                "instead of two, and the full parameters are part of the working set."
            )
        elif sharding == "hybrid":
            groups = int(replicas or 2)
            if groups < 1 or world % groups:
                raise ValueError(f"replicas {groups} must divide the world size {world}")
            name, state_of, work_of = "hsdp", "hsdp", "hsdp"
            group = world // groups
            comm = step_comm("hsdp", params, world, spec.name, group_size=group, unit_params=units)
            notes.append(
                f"HSDP: shards within groups of {group}, replicated across {groups} groups; "
                "reduce-scatter and all-gather run in the group, an all-reduce of the shard across groups."
            )
        else:
            name, state_of, work_of = "ddp", "ddp", "ddp"
            comm = step_comm("ddp", params, world, spec.name)
    else:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of ddp, zero1, fsdp")

    group_size = world // int(replicas or 2) if name == "hsdp" else None
    state = model_state(params, world, state_of, spec.name, optimizer, group_size)
    if work_of == "zero2":
        largest = max(units) if units else params
        grads = min(PREFETCH_UNITS, len(units or [1])) * largest * spec.reduce_bytes
        working = params * spec.gather_bytes + grads
    else:
        working = working_set(
            work_of, params, spec.name, units, gradient_as_bucket_view=gradient_as_bucket_view
        )["working_set_bytes"]
    return {
        "strategy": name,
        **state,
        "working_set_bytes": working,
        "comm": comm,
        "wire_bytes_per_rank": total_wire_bytes(comm),
        "notes": notes,
    }


# ----------------------------------------------------------------------------- quiz answers
# Every numeric question in the bank computes its answer with one of these. Keywords only;
# counts and sizes may be strings ("7.5B", "80GB"); results are in base units (bytes, counts,
# ratios).


def _state_args(params: Any, gpus: Any, strategy: str, group_size: Any) -> tuple[int, int, str, int | None]:
    strategy = canonical_strategy(strategy)
    count = _count(params, "params")
    world = _count(gpus, "gpus")
    return count, world, strategy, resolve_group_size(strategy, world, group_size)


def q_param_count(*, model: str) -> int:
    return _gpt_shape(model).params


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
    *, model: str, batch_size: Any, seq_len: Any = None, checkpoint_activations: Any = False, precision: str = "fp32"
) -> int:
    seq = _count(seq_len, "seq len") if seq_len is not None else None
    return gpt_activation_bytes(
        model, _count(batch_size, "batch size"), seq, _bool(checkpoint_activations), precision
    )["activation_bytes"]


def q_wire_bytes_per_rank(*, op: str, bytes: Any, ranks: Any) -> int:  # noqa: A002 - the bank's keyword
    return round(parse_bytes(bytes) * wire_factor(op, _count(ranks, "ranks")))


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
    count = _count(params, "params")
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


ZERO_STAGES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")
"""Stage 0 (plain DDP) to stage 3, in the order each shards one more kind of model state."""


def q_min_zero_stage(*, params: Any, gpus: Any, gpu_mem: Any, precision: str, optimizer: str) -> int:
    """The lowest ZeRO stage (0 = DDP) whose per-GPU model state fits in `gpu_mem`."""
    count, world = _count(params, "params"), _count(gpus, "gpus")
    limit = parse_bytes(gpu_mem)
    for stage, strategy in enumerate(ZERO_STAGES):
        if model_state(count, world, strategy, precision, optimizer)["model_state_bytes"] <= limit:
            return stage
    raise ValueError(f"even ZeRO-3 cannot fit {count:,} parameters in {format_bytes(limit)} on {world} GPUs")


def q_ddp_buckets(
    *, layers: Any, d_model: Any, vocab: Any, seq_len: Any, grad_bytes: Any, bucket_cap_mb: Any = None
) -> int:
    """Gradient buckets per step of DDP on a GPT decoder, gradients ready in reverse registration order."""
    numels = gpt_param_numels(_count(layers, "layers"), _count(d_model, "d_model"), _count(vocab, "vocab"), _count(seq_len, "seq len"))
    size = _count(grad_bytes, "grad bytes")
    cap = None if bucket_cap_mb is None else float(bucket_cap_mb)
    return len(ddp_bucket_bytes([n * size for n in reversed(numels)], cap))


def q_sampler_index(*, dataset_len: Any, num_replicas: Any, rank: Any, position: Any, drop_last: Any = False) -> int:
    """The `position`-th (1-based) index that `rank` draws from DistributedSampler(shuffle=False)."""
    indices = sampler_indices(_count(dataset_len, "dataset length"), _count(num_replicas, "replicas"), int(rank), _bool(drop_last))
    place = _count(position, "position")
    if place > len(indices):
        raise ValueError(f"rank {rank} draws only {len(indices)} indices; position {place} is past the end")
    return indices[place - 1]


def q_sampler_count(*, dataset_len: Any, num_replicas: Any, drop_last: Any = False) -> int:
    """How many indices each rank draws from DistributedSampler in one epoch."""
    return len(sampler_indices(_count(dataset_len, "dataset length"), _count(num_replicas, "replicas"), 0, _bool(drop_last)))


def q_transformer_activation_bytes(
    *, layers: Any, d_model: Any, vocab: Any, seq_len: Any, batch_size: Any, precision: str, checkpoint_activations: Any = False
) -> int:
    """Peak activation bytes of a GPT-style decoder of this shape (see `transformer_activation_bytes`)."""
    seq = _count(seq_len, "seq len")
    return transformer_activation_bytes(
        layers=_count(layers, "layers"), d_model=_count(d_model, "d_model"), tokens=seq,
        batch_size=_count(batch_size, "batch size"), head_outputs=_count(vocab, "vocab"), head_tokens=seq,
        precision=precision, checkpoint_activations=_bool(checkpoint_activations),
    )["activation_bytes"]


def q_host_bytes(
    *, params: Any, gpus: Any, strategy: str, precision: str, optimizer: str, offload: str,
    gpus_per_node: Any = DEFAULT_GPUS_PER_NODE, group_size: Any = None,
) -> int:
    """Host RAM per node that `offload` fills with model state (ddpfsdp accounting, no margin)."""
    count, world, name, group = _state_args(params, gpus, strategy, group_size)
    per_node, _ = node_layout(world, _count(gpus_per_node, "gpus per node"))
    return offloaded_state(count, world, name, precision, optimizer, offload, group)["host_bytes_per_gpu"] * per_node


def q_pcie_bytes_per_step(
    *, params: Any, gpus: Any, strategy: str, precision: str, offload: str, units: Any = None, group_size: Any = None,
) -> int:
    """Bytes one GPU copies to and from the host per step under `offload` (`units`: equal FSDP units;
    the root holds none). The optimizer's choice does not change what crosses PCIe."""
    count, world, name, group = _state_args(params, gpus, strategy, group_size)
    unit_params = None
    if units is not None:
        parts = _count(units, "units")
        unit_params = [math.ceil(count / parts)] * parts + [0]
    return offloaded_state(count, world, name, precision, "adam", offload, group, unit_params)["pcie_bytes_per_step"]


def _deepspeed_figures(params: Any, gpus: Any, strategy: str, offload: str, largest_layer: Any, gpus_per_node: Any,
                       zero_init: Any) -> tuple[int, int]:
    from ddpfsdp.demos.theory import deepspeed_accounting as ds

    count, world, name = _count(params, "params"), _count(gpus, "gpus"), canonical_strategy(strategy)
    offload = check_offload(offload)
    refusal = accounting_refusal(name, "deepspeed") or offload_refusal(name, offload)
    if refusal:
        raise ValueError(refusal)
    per_node, nodes = node_layout(world, _count(gpus_per_node, "gpus per node"))
    if name == "zero2":
        return ds.zero2_mem_needs(count, per_node, nodes, cpu_offload=offload == "optimizer")
    if largest_layer is None:
        raise ValueError("DeepSpeed's ZeRO-3 estimate needs largest_layer (parameters of the largest layer)")
    host, per_gpu, _ = ds.zero3_mem_needs(
        count, _count(largest_layer, "largest layer"), per_node, nodes,
        cpu_offload=offload != "none", cpu_offload_params=offload == "all", zero_init=_bool(zero_init),
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
    "host_bytes": q_host_bytes,
    "pcie_bytes_per_step": q_pcie_bytes_per_step,
    "deepspeed_gpu_bytes": q_deepspeed_gpu_bytes,
    "deepspeed_host_bytes": q_deepspeed_host_bytes,
}
