"""Every strategy side by side for one configuration: the `ddpfsdp.calc/1` document that
`ddpfsdp calc` prints, built in named steps (read the options, one row per strategy, the notes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from ddpfsdp.demos.theory.inputs import CalcOptions, InputsDocument, read_options
from ddpfsdp.demos.theory.notes import estimate_notes
from ddpfsdp.demos.theory.precision import BytesPerParam, bytes_per_param_breakdown
from ddpfsdp.demos.theory.rows import StrategyRow, strategy_row, two_d_row

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.checkpointing import CheckpointSection
    from ddpfsdp.demos.theory.context_parallel import ContextParallelSection
    from ddpfsdp.demos.theory.expert_parallel import ExpertParallelSection
    from ddpfsdp.demos.theory.lora import LoraSection
    from ddpfsdp.demos.theory.optimizer_8bit import Adam8bitSection
    from ddpfsdp.demos.theory.pipeline import PipelineSection
    from ddpfsdp.demos.theory.plan3d import PlanSection
    from ddpfsdp.demos.theory.stragglers import StragglerSection
    from ddpfsdp.demos.theory.topology import ScalingSection, TopologySection

SCHEMA = "ddpfsdp.calc/1"


class CalcDocument(TypedDict):
    """The `ddpfsdp.calc/1` document: the table's estimate, and the section each option group adds."""

    schema: str
    theory: bool
    inputs: InputsDocument
    bytes_per_param: BytesPerParam
    strategies: dict[str, StrategyRow]  # by strategy, in table order; "2d" a `rows.TwoDRow`
    notes: list[str]
    pipeline: NotRequired[PipelineSection]
    context_parallel: NotRequired[ContextParallelSection]
    expert_parallel: NotRequired[ExpertParallelSection]
    stragglers: NotRequired[StragglerSection]
    checkpoint: NotRequired[CheckpointSection]
    topology: NotRequired[TopologySection]
    scaling: NotRequired[ScalingSection]
    plan: NotRequired[PlanSection]
    adam_8bit: NotRequired[Adam8bitSection]
    lora: NotRequired[LoraSection]


def estimate(**options: Any) -> CalcDocument:
    """Every strategy side by side for one configuration: the `ddpfsdp.calc/1` document (bytes).

    `options` are the fields of `CalcOptions`, each with its default there.
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
    `tp` adds the 2-D configuration ("2d": FSDP over dp = gpus / tp, tensor parallelism over tp,
    `sequence_parallel` optional; `tensor_parallel`); its TP traffic and activations need a block
    shape, a preset's or a named size's (`--params 70B`).
    """
    return estimate_for(CalcOptions(**options))


def estimate_for(options: CalcOptions) -> CalcDocument:
    """`estimate` of a configuration already gathered in a `CalcOptions`."""
    inputs = read_options(options)
    table = {strategy: strategy_row(inputs, strategy) for strategy in inputs.strategies}
    notes = estimate_notes(inputs)
    if inputs.tp:
        from ddpfsdp.demos.theory.tensor_parallel import two_d_notes

        two_d = table["2d"] = two_d_row(inputs)
        notes.extend(two_d_notes(two_d, inputs.gpus_per_node, inputs.tp_shape, inputs.batch_size))
    return {
        "schema": SCHEMA,
        "theory": True,
        "inputs": inputs.document(),
        "bytes_per_param": bytes_per_param_breakdown(inputs.precision.name, inputs.optimizer),
        "strategies": table,
        "notes": notes,
    }
