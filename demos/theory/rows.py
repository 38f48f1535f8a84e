"""One strategy's column of the table: its per-GPU memory under either accounting, its host RAM and
PCIe traffic under offload, its collectives, and whether it fits."""

from __future__ import annotations

from typing import NotRequired

from ddpfsdp.demos.theory.activations import gpt_activation_bytes
from ddpfsdp.demos.theory.comm import OpFigures, step_comm, total_wire_bytes
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.inputs import CalcInputs
from ddpfsdp.demos.theory.offload import OFFLOAD_SUPPORT, OffloadedState, Pcie, offload_refusal, offloaded_state
from ddpfsdp.demos.theory.precision import BytesPerParam
from ddpfsdp.demos.theory.sharding import STRATEGY_SHARDS, STRATEGY_TITLES
from ddpfsdp.demos.theory.state import ModelState, bytes_per_param
from ddpfsdp.demos.theory.tensor_parallel import TwoDColumn
from ddpfsdp.demos.theory.working_set import working_set

_STATE_KEYS = ("params_bytes", "grads_bytes", "optimizer_bytes", "model_state_bytes")


class ColumnMemory(ModelState):
    """A column's per-GPU memory under either accounting, and its host RAM (bytes)."""

    working_set_bytes: int
    working_set: dict[str, int]  # bytes by part, as the accounting names them
    host_bytes: int  # per node
    host_bytes_per_gpu: int


class DdpfsdpMemory(ColumnMemory):
    """Memory as this project counts it."""

    bytes_per_param: BytesPerParam


class DeepSpeedMemory(ColumnMemory):
    """Memory as DeepSpeed 0.19's estimator counts it."""

    deepspeed_gpu_bytes: int
    deepspeed_options: str


class StrategyRow(ColumnMemory):
    """One column of the `strategies` table of the `ddpfsdp.calc/1` document (bytes)."""

    title: str
    shards: str
    implementation: str
    bytes_per_param: NotRequired[BytesPerParam]  # the ddpfsdp accounting's columns and the 2-D one
    deepspeed_gpu_bytes: NotRequired[int]  # the deepspeed accounting's columns
    deepspeed_options: NotRequired[str]
    activation_bytes: int | None
    total_bytes: int
    fits: bool | None
    offload: str
    offloaded_by: str | None
    pcie: Pcie
    pcie_bytes_per_step: int
    comm: dict[str, OpFigures]
    wire_bytes_per_rank: int


class TwoDRow(StrategyRow, TwoDColumn):
    """The 2-D column: FSDP over dp (`comm`) of each TP shard, TP over tp (`tp_comm`)."""


def strategy_row(inputs: CalcInputs, strategy: str) -> StrategyRow:
    """`strategy`'s figures for the configuration, in bytes; see `estimate` for what each means."""
    size = inputs.group_size if strategy == "hsdp" else None
    comm = step_comm(strategy, inputs.params, inputs.gpus, inputs.precision.name, size, inputs.unit_params,
                     inputs.offload)
    activation = _activation_bytes(inputs, strategy)
    state = offloaded_state(inputs.params, inputs.gpus, strategy, inputs.precision.name, inputs.optimizer,
                            inputs.offload, size, inputs.unit_params)
    row = deepspeed_row(inputs, strategy) if inputs.deepspeed else _ddpfsdp_row(inputs, strategy, state)
    total = row["model_state_bytes"] + row["working_set_bytes"] + (activation or 0)
    limit = inputs.gpu_mem_bytes
    return {
        "title": STRATEGY_TITLES[strategy],
        "shards": STRATEGY_SHARDS[strategy],
        "implementation": _implementation_name(inputs, strategy),
        **row,
        "activation_bytes": activation,
        "total_bytes": total,
        "fits": None if limit is None else total <= limit,
        "offload": inputs.offload,
        "offloaded_by": OFFLOAD_SUPPORT[strategy].get(inputs.offload) if inputs.offload != "none" else None,
        "pcie": state["pcie"],
        "pcie_bytes_per_step": state["pcie_bytes_per_step"],
        "comm": comm,
        "wire_bytes_per_rank": total_wire_bytes(comm),
    }


def _activation_bytes(inputs: CalcInputs, strategy: str) -> int | None:
    """Activations as `strategy` holds them: the same tensors for every strategy, in the dtype its way of
    applying the precision gives them (under bf16-mixed: DDP's autocast keeps an fp32 residual stream,
    FSDP2's param_dtype a bf16 one)."""
    if not inputs.activations or inputs.shape is None:
        return None
    cast = implementation(strategy, inputs.precision.name, inputs.offload).cast
    return gpt_activation_bytes(inputs.shape, inputs.batch_size, checkpoint_activations=inputs.checkpoint_activations,
                                precision=inputs.precision.name, cast=cast)["activation_bytes"]


def _implementation_name(inputs: CalcInputs, strategy: str) -> str:
    if inputs.deepspeed:
        stage = {"zero2": 2, "zero3": 3}[strategy]
        return f"DeepSpeed ZeRO stage {stage}, bf16 enabled, as DeepSpeed 0.19's estimator counts it"
    return implementation(strategy, inputs.precision.name, inputs.offload).name


def _ddpfsdp_row(inputs: CalcInputs, strategy: str, state: OffloadedState) -> DdpfsdpMemory:
    """Memory as this project counts it: model state (offload applied), working set, host RAM."""
    work = working_set(strategy, inputs.params, inputs.precision.name, inputs.unit_params)
    return {
        "bytes_per_param": bytes_per_param(strategy, inputs.precision.name, inputs.optimizer, inputs.offload),
        **{key: state[key] for key in _STATE_KEYS},
        "working_set_bytes": work["working_set_bytes"],
        "working_set": work["parts"],
        "host_bytes": state["host_bytes_per_gpu"] * inputs.gpus_per_node,
        "host_bytes_per_gpu": state["host_bytes_per_gpu"],
    }


def deepspeed_row(inputs: CalcInputs, strategy: str) -> DeepSpeedMemory:
    """Memory as DeepSpeed 0.19's estimator counts it: its per-GPU and per-node figures, its parts."""
    from ddpfsdp.demos.theory import deepspeed_accounting as ds

    offload, count, per_node = inputs.offload, inputs.params, inputs.gpus_per_node
    if offload not in ds.OFFLOAD_OPTIONS[strategy]:
        raise ValueError(offload_refusal(strategy, offload) or f"DeepSpeed {strategy} has no offload {offload!r}")
    if strategy == "zero2":
        host, per_gpu = ds.zero2_mem_needs(count, per_node, inputs.nodes, cpu_offload=offload == "optimizer")
        working = 0
    else:
        host, per_gpu, working = ds.zero3_mem_needs(
            count, inputs.largest_layer_params, per_node, inputs.nodes,
            cpu_offload=offload != "none", cpu_offload_params=offload == "all", zero_init=inputs.zero_init,
        )
    parts = ds.per_gpu_parts(strategy, offload, count, per_node * inputs.nodes)
    assert parts["model_state_bytes"] + working == per_gpu, (strategy, offload)
    return {
        **parts,
        "working_set_bytes": working,
        "working_set": {"largest_layer_params_and_grads": working} if strategy == "zero3" else {},
        "deepspeed_gpu_bytes": per_gpu,
        "deepspeed_options": ds.OFFLOAD_OPTIONS[strategy][offload] + (
            f", zero_init={int(inputs.zero_init)}" if strategy == "zero3" else ""),
        "host_bytes": host,
        "host_bytes_per_gpu": host // per_node,
    }


def two_d_row(inputs: CalcInputs) -> TwoDRow:
    """The 2-D configuration's column (`tensor_parallel`): FSDP over dp of each rank's TP shard.

    `comm` is FSDP's traffic over dp, `tp_comm` TP's over tp; `wire_bytes_per_rank` adds both.
    """
    from ddpfsdp.demos.theory import tensor_parallel as tp

    shape = inputs.tp_shape
    figures = tp.two_d_figures(
        params=inputs.params, gpus=inputs.gpus, tp=inputs.tp, precision=inputs.precision.name,
        optimizer=inputs.optimizer, unit_params=inputs.unit_params, shape=shape, batch_size=inputs.batch_size,
        sequence_parallel=inputs.sequence_parallel, checkpoint_activations=inputs.checkpoint_activations,
        exact_layout=inputs.shape is not None,
    )
    activation = figures.pop("activations")
    shape_activation_bytes = activation["activation_bytes"] if activation else None
    # The other columns count activations only for a preset (`inputs.activations`); a named size's
    # shape gives TP its traffic, but its activations are kept apart so every column is judged alike.
    activation_bytes = shape_activation_bytes if inputs.shape is not None else None
    tp_comm = figures.pop("tp_comm")
    dp_comm = figures.pop("dp_comm")
    total = figures["model_state_bytes"] + figures["working_set_bytes"] + (activation_bytes or 0)
    limit = inputs.gpu_mem_bytes
    tp_wire = total_wire_bytes(tp_comm["ops"]) if tp_comm else None
    return {
        "title": tp.TITLE,
        "shards": tp.SHARDS,
        "implementation": tp.implementation_name(inputs.precision.name, inputs.sequence_parallel),
        "bytes_per_param": bytes_per_param("zero3", inputs.precision.name, inputs.optimizer),
        **figures,
        "activation_bytes": activation_bytes,
        "shape_activation_bytes": shape_activation_bytes,
        "total_bytes": total,
        "fits": None if limit is None else total <= limit,
        "offload": inputs.offload,
        "offloaded_by": None,
        "host_bytes": 0,
        "host_bytes_per_gpu": 0,
        "pcie": {"host_to_device_bytes": 0, "device_to_host_bytes": 0},
        "pcie_bytes_per_step": 0,
        "comm": dp_comm,
        "tp_comm": tp_comm["ops"] if tp_comm else None,
        "tp_terms": tp_comm["terms"] if tp_comm else None,
        "dp_wire_bytes_per_rank": total_wire_bytes(dp_comm),
        "tp_wire_bytes_per_rank": tp_wire,
        "wire_bytes_per_rank": total_wire_bytes(dp_comm) + (tp_wire or 0),
    }
