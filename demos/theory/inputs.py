"""One configuration of the whole table (`estimate`): the options as given, and as the model reads them.

`CalcOptions` holds what a caller asks for, each default once; `read_options` checks it in the
order a person would fix it (conventions, then sizes, then strategies) and completes it into
`CalcInputs`: counts as integers, names canonical, the FSDP units, the activations, and the
strategies the table shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, NotRequired, TypedDict

from ddpfsdp.demos.theory.accounting import (
    DEEPSPEED_OPTIMIZERS,
    DEEPSPEED_PRECISION,
    accounting_refusal,
    check_accounting,
)
from ddpfsdp.demos.theory.activations import ActivationBytes, gpt_activation_bytes
from ddpfsdp.demos.theory.arguments import read_count, read_flag
from ddpfsdp.demos.theory.gpt_layout import gpt_largest_layer_params, gpt_shape_of, gpt_unit_params
from ddpfsdp.demos.theory.offload import (
    DEFAULT_GPUS_PER_NODE,
    check_offload,
    node_layout,
    offload_refusal,
    offload_strategies,
)
from ddpfsdp.demos.theory.precision import Precision, check_optimizer, precision_for
from ddpfsdp.demos.theory.sharding import STRATEGIES, canonical_strategy, resolve_group_size
from ddpfsdp.demos.theory.working_set import DEFAULT_UNITS
from ddpfsdp.demos.base.units import parse_bytes

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape


@dataclass(frozen=True)
class CalcOptions:
    """A configuration as given: counts and sizes may be strings ("7B", "80GB"). See `estimate`."""

    params: int | str | None = None
    model: str | None = None
    gpus: int | str = 8
    group_size: int | str | None = None
    precision: str | None = None  # bf16-mixed, or bf16-master under the deepspeed accounting
    optimizer: str = "adamw"
    batch_size: int | str = 1
    seq_len: int | str | None = None
    checkpoint_activations: bool = False
    gpu_mem: int | str | None = None
    units: int | str | None = None
    offload: str = "none"
    accounting: str = "ddpfsdp"
    gpus_per_node: int | str = DEFAULT_GPUS_PER_NODE
    largest_layer: int | str | None = None
    strategies: Iterable[str] | None = None
    zero_init: bool = True
    tp: int | str | None = None  # adds the 2-D (dp x tp) configuration
    sequence_parallel: bool = False


class InputsDocument(TypedDict):
    """The `inputs` of the `ddpfsdp.calc/1` document: the configuration as the model read it."""

    params: int
    model: str | None
    gpus: int
    group_size: int
    precision: str
    optimizer: str
    batch_size: int
    seq_len: int | None
    checkpoint_activations: bool
    gpu_mem_bytes: int | None
    units: int
    offload: str
    accounting: str
    gpus_per_node: int
    nodes: int
    largest_layer_params: int | None
    zero_init: bool | None
    tp: NotRequired[int]  # with the 2-D configuration
    dp: NotRequired[int]
    sequence_parallel: NotRequired[bool]


class _TwoD(TypedDict, total=False):
    """The 2-D configuration's fields of `CalcInputs`, all or none."""

    tp: int
    sequence_parallel: bool
    tp_shape: GPTShape | None


@dataclass(frozen=True)
class CalcInputs:
    """A configuration read and checked: what every row and note of the table is computed from."""

    params: int
    model: str | None  # the preset's name as given, or None for a bare count
    shape: GPTShape | None
    gpus: int
    group_size: int  # HSDP's shard group G
    precision: Precision
    optimizer: str
    batch_size: int
    seq_len: int | None
    checkpoint_activations: bool
    gpu_mem_bytes: int | None
    unit_params: list[int]  # parameters per FSDP unit, root last
    activations: ActivationBytes | None  # known only for a preset's shape
    offload: str
    accounting: str
    gpus_per_node: int
    nodes: int
    largest_layer_params: int | None  # DeepSpeed's ZeRO-3 working term
    zero_init: bool | None  # DeepSpeed's ZeRO-3 host-RAM switch
    strategies: tuple[str, ...]  # the table's columns, in table order
    tp: int | None = None  # the 2-D configuration's TP degree (None: no 2-D column)
    sequence_parallel: bool = False
    tp_shape: GPTShape | None = None  # the block shape TP's traffic needs: the preset's, or a named size's

    @property
    def deepspeed(self) -> bool:
        return self.accounting == "deepspeed"

    def document(self) -> InputsDocument:
        """The `inputs` of the `ddpfsdp.calc/1` document."""
        return {
            "params": self.params,
            "model": self.model,
            "gpus": self.gpus,
            "group_size": self.group_size,
            "precision": self.precision.name,
            "optimizer": self.optimizer,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "checkpoint_activations": self.checkpoint_activations,
            "gpu_mem_bytes": self.gpu_mem_bytes,
            "units": sum(1 for count in self.unit_params if count > 0),
            "offload": self.offload,
            "accounting": self.accounting,
            "gpus_per_node": self.gpus_per_node,
            "nodes": self.nodes,
            "largest_layer_params": self.largest_layer_params,
            "zero_init": self.zero_init,
            **({"tp": self.tp, "dp": self.gpus // self.tp, "sequence_parallel": self.sequence_parallel}
               if self.tp else {}),
        }


def read_options(options: CalcOptions) -> CalcInputs:
    """Check `options` and complete them; a ValueError says which option to change and how."""
    if (options.params is None) == (options.model is None):
        raise ValueError("give either params (e.g. 7B) or model (a GPT preset), not both or neither")
    accounting, offload, spec, optimizer = _conventions(options)
    gpus = read_count(options.gpus, "gpus")
    per_node, nodes = _nodes(gpus, read_count(options.gpus_per_node, "gpus per node"),
                             host_counted=accounting == "deepspeed" or offload != "none")
    micro_batch = read_count(options.batch_size, "batch size")
    seq = read_count(options.seq_len, "seq len") if options.seq_len is not None else None
    group = resolve_group_size("hsdp", gpus, options.group_size)
    memory_limit = parse_bytes(options.gpu_mem) if options.gpu_mem is not None else None
    checkpoint = read_flag(options.checkpoint_activations)
    if options.model is not None:
        shape = gpt_shape_of(options.model, seq)
        count, seq, unit_params = shape.params, shape.seq_len, gpt_unit_params(shape)
        activations = gpt_activation_bytes(shape, micro_batch, checkpoint_activations=checkpoint, precision=spec.name)
    else:
        shape, activations = None, None
        count = read_count(options.params, "params")
        parts = read_count(options.units, "units") if options.units is not None else DEFAULT_UNITS
        unit_params = [math.ceil(count / parts)] * parts + [0]
    deepspeed = accounting == "deepspeed"
    return CalcInputs(
        params=count, model=options.model, shape=shape, gpus=gpus, group_size=group, precision=spec,
        optimizer=optimizer, batch_size=micro_batch, seq_len=seq, checkpoint_activations=checkpoint,
        gpu_mem_bytes=memory_limit, unit_params=unit_params, activations=activations, offload=offload,
        accounting=accounting, gpus_per_node=per_node, nodes=nodes,
        largest_layer_params=_largest_layer(options.largest_layer, shape, unit_params) if deepspeed else None,
        strategies=choose_strategies(options.strategies, offload, accounting),
        zero_init=read_flag(options.zero_init) if deepspeed else None,
        **_two_d(options, gpus, shape, accounting, offload),
    )


def _two_d(options: CalcOptions, gpus: int, shape: GPTShape | None, accounting: str, offload: str) -> _TwoD:
    """The 2-D configuration's TP degree and the block shape its traffic needs (`tensor_parallel`)."""
    sequence_parallel = read_flag(options.sequence_parallel)
    if options.tp is None:
        if sequence_parallel:
            raise ValueError("sequence parallelism shards within a TP group: add --tp N (a TP degree)")
        return {}
    if accounting != "ddpfsdp" or offload != "none":
        raise ValueError("the 2-D configuration is counted with the ddpfsdp accounting and no offload; "
                         "drop the accounting or the offload to add tp")
    from ddpfsdp.demos.theory.tensor_parallel import check_tp
    from ddpfsdp.demos.base.shapes import GPT_SIZES

    tp_shape = shape if shape is not None else GPT_SIZES.get(str(options.params).strip().upper())
    if tp_shape is not None and options.seq_len is not None and shape is None:
        from dataclasses import replace

        tp_shape = replace(tp_shape, seq_len=read_count(options.seq_len, "seq len"))
    tp = check_tp(options.tp, gpus, tp_shape.heads if tp_shape is not None else None)
    return {"tp": tp, "sequence_parallel": sequence_parallel, "tp_shape": tp_shape}


def _conventions(options: CalcOptions) -> tuple[str, str, Precision, str]:
    """The accounting, offload, precision and optimizer, checked against one another."""
    accounting = check_accounting(options.accounting)
    offload = check_offload(options.offload)
    deepspeed = accounting == "deepspeed"
    precision = options.precision
    if precision is None:
        precision = DEEPSPEED_PRECISION if deepspeed else "bf16-mixed"
    spec = precision_for(precision)
    optimizer = check_optimizer(options.optimizer)
    if deepspeed and (spec.name != DEEPSPEED_PRECISION or optimizer not in DEEPSPEED_OPTIMIZERS):
        raise ValueError(
            "DeepSpeed's estimator counts only mixed-precision Adam (16-bit params and grads, fp32 master "
            f"weights and moments): use precision {DEEPSPEED_PRECISION} with adam or adamw, not "
            f"{spec.name} with {optimizer}, or the ddpfsdp accounting"
        )
    if options.largest_layer is not None and not deepspeed:
        raise ValueError(
            "the largest layer is DeepSpeed's ZeRO-3 working term; use it with the deepspeed accounting "
            "(the ddpfsdp accounting sizes FSDP units from the model preset or the unit count)"
        )
    return accounting, offload, spec, optimizer


def _nodes(gpus: int, per_node_limit: int, *, host_counted: bool) -> tuple[int, int]:
    """(GPUs per node, nodes); only where host RAM is counted must the GPUs fill whole nodes."""
    if host_counted:
        return node_layout(gpus, per_node_limit)
    return min(gpus, per_node_limit), math.ceil(gpus / per_node_limit)


def _largest_layer(given: Any, shape: GPTShape | None, unit_params: list[int]) -> int:
    """DeepSpeed's largest layer: as given, else the preset's largest module, else one equal unit."""
    if given is not None:
        return read_count(given, "largest layer")
    if shape is not None:
        return gpt_largest_layer_params(shape)
    return max(unit_params)


def choose_strategies(strategies: Iterable[str] | None, offload: str, accounting: str) -> tuple[str, ...]:
    """The table's strategies: those asked for, each refused if the offload or accounting has no
    implementation of it, or by default every strategy both admit."""
    if strategies is None:
        chosen = [name for name in offload_strategies(offload)
                  if not (accounting == "deepspeed" and accounting_refusal(name, accounting))]
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
    return tuple(chosen)
