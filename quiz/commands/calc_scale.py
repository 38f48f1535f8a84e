"""`ddpfsdp calc` at cluster scale: stragglers, checkpoints, topology, scaling, a 3-D plan, 8-bit Adam, LoRA.

Each group of options adds one section to the `ddpfsdp.calc/1` document (`stragglers`, `checkpoint`,
`topology`, `scaling`, `plan`, `adam_8bit`, `lora`), computed by its module of the analytic model.
`calc` takes the options with `take_scale_options`, adds the sections with `scale_sections` after the
table's estimate, and prints them with `calc_scale_view.render_scale`. Stragglers and scaling need no
model: with only those, `calc` prints them without the table (`model_free`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import click

from ddpfsdp.demos.base.bounds import FiniteFloat

from ddpfsdp.demos.theory.presets import CLUSTERS

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.checkpointing import CheckpointSection
    from ddpfsdp.demos.theory.estimate import CalcDocument
    from ddpfsdp.demos.theory.inputs import InputsDocument
    from ddpfsdp.demos.theory.lora import LoraSection
    from ddpfsdp.demos.theory.optimizer_8bit import Adam8bitSection
    from ddpfsdp.demos.theory.plan3d import PlanSection
    from ddpfsdp.demos.theory.presets import Cluster
    from ddpfsdp.demos.theory.stragglers import StragglerSection
    from ddpfsdp.demos.theory.topology import ScalingSection, Topology, TopologySection
    from ddpfsdp.demos.base.shapes import GPTShape

PLAN_DP_MODES = ("zero1", "ddp", "fsdp")
LORA_BASES = ("bf16", "int8", "nf4")
LORA_TARGETS = ("attention", "all")
DEFAULT_CLUSTER = "DGX H100"
# Beyond these a figure is no job's (a GPU failing once in 100,000 years; a link shared a thousandfold, a
# step a thousand times faster), and the arithmetic on them overflows a float before it says so.
MAX_MTBF_HOURS = 1e9
MAX_RATIO = 1000.0

SCALE_OPTIONS = (
    click.option("--stragglers", "straggler_p", type=FiniteFloat(), metavar="P",
                 help="Add stragglers: each rank's chance of a slow step (0.001 = 0.1%); P(slow step) = 1 - (1-P)^N."),
    click.option("--straggler-delay", metavar="TIME", help="With --stragglers: a slow step's extra time (0.3s, 300ms)."),
    click.option("--step-time", metavar="TIME", help="With --stragglers: a step's time without stragglers (1s)."),
    click.option("--checkpoint-bw", metavar="RATE", help="Add checkpoints: each rank's write bandwidth (2GB/s); size, "
                 "write time, the job's MTBF, Young's and Daly's interval, goodput lost."),
    click.option("--storage-bw", metavar="RATE", help="With checkpoints: the file system's aggregate bandwidth (500GB/s)."),
    click.option("--gpu-mtbf-hours", type=FiniteFloat(max=MAX_MTBF_HOURS), metavar="H", help="With checkpoints: one GPU's mean time between "
                 "failures. [default: 50,677, from Llama 3's 419 interruptions in 54 days on 16,384 GPUs]"),
    click.option("--checkpoint-every", metavar="TIME", help="With checkpoints: the interval you run (1h), to price it."),
    click.option("--restart-time", metavar="TIME", help="With checkpoints: the time a restart takes (10min). [default: 0]"),
    click.option("--topology", "topology", is_flag=True, help="Add topology: flat and hierarchical all-reduce of the "
                 "gradients by link, HSDP by link (links of --cluster, or --intra-bw/--inter-bw)."),
    click.option("--cluster", metavar="NAME", help=f"Links and GPU for --topology and --plan: {', '.join(CLUSTERS)}. "
                 f"[default: {DEFAULT_CLUSTER}]"),
    click.option("--intra-bw", metavar="RATE", help="Bandwidth per GPU each way inside a node (450GB/s)."),
    click.option("--inter-bw", metavar="RATE", help="Bandwidth per GPU each way between nodes (400Gbps)."),
    click.option("--oversubscription", type=FiniteFloat(max=MAX_RATIO), metavar="X", help="The fabric above a rack carries 1/X (2 = 2:1). "
                 "[default: 1]"),
    click.option("--rack-nodes", type=click.IntRange(min=1), metavar="N", help="Nodes under one leaf switch, at full speed. [default: 1]"),
    click.option("--scaled-to", type=click.IntRange(min=1), metavar="GPUS", help="Add scaling: --gpus grew to GPUS; with --throughput-gain."),
    click.option("--throughput-gain", type=FiniteFloat(max=MAX_RATIO), metavar="X", help="With --scaled-to: throughput after / before (1.1)."),
    click.option("--plan", "plan", is_flag=True, help="Add a 3-D plan: tp x pp x dp ranked for --params (a named size "
                 "or 175B) or --model on --gpus of --cluster, and why the others lose."),
    click.option("--global-batch", type=click.IntRange(min=1), metavar="SEQS", help="With --plan: sequences per step. [default: 1536]"),
    click.option("--mfu", type=FiniteFloat(), help="With --plan: the kernels' share of peak FLOP/s. [default: 0.5]"),
    click.option("--plan-dp", type=click.Choice(PLAN_DP_MODES, case_sensitive=False),
                 help="With --plan: data parallelism as ZeRO-1, DDP or FSDP. [default: zero1]"),
    click.option("--adam-8bit", "adam_8bit", is_flag=True, help="Add bitsandbytes' 8-bit Adam: state per GPU for "
                 "each strategy, against 32-bit Adam."),
    click.option("--lora-rank", type=click.IntRange(min=1), metavar="R", help="Add LoRA: adapters of rank R on a frozen base, per GPU "
                 "under DDP and FSDP (needs a shape: --model or a named size)."),
    click.option("--lora-base", type=click.Choice(LORA_BASES, case_sensitive=False),
                 help="With --lora-rank: the frozen base's weights; nf4 is QLoRA. [default: nf4]"),
    click.option("--lora-targets", type=click.Choice(LORA_TARGETS, case_sensitive=False),
                 help="With --lora-rank: adapters on attention only, or on every Linear. [default: all]"),
)


def _field_names() -> tuple[str, ...]:
    """The keyword each option lands in, as click names it."""
    def probe() -> None: ...

    for option in SCALE_OPTIONS:
        option(probe)
    return tuple(param.name for param in probe.__click_params__)  # type: ignore[attr-defined]


SCALE_FIELDS = _field_names()


@dataclass(frozen=True)
class ScaleOptions:
    """The at-scale options as given (None: not given), one field per option of `SCALE_OPTIONS`."""

    straggler_p: float | None
    straggler_delay: str | None
    step_time: str | None
    checkpoint_bw: str | None
    storage_bw: str | None
    gpu_mtbf_hours: float | None
    checkpoint_every: str | None
    restart_time: str | None
    topology: bool | None
    cluster: str | None
    intra_bw: str | None
    inter_bw: str | None
    oversubscription: float | None
    rack_nodes: int | None
    scaled_to: int | None
    throughput_gain: float | None
    plan: bool | None
    global_batch: int | None
    mfu: float | None
    plan_dp: str | None
    adam_8bit: bool | None
    lora_rank: int | None
    lora_base: str | None
    lora_targets: str | None


class ScaleSections(TypedDict, total=False):
    """The sections of the `ddpfsdp.calc/1` document these options add, each where asked for."""

    stragglers: StragglerSection
    checkpoint: CheckpointSection
    topology: TopologySection
    scaling: ScalingSection
    plan: PlanSection
    adam_8bit: Adam8bitSection
    lora: LoraSection


class ModelFreeInputs(TypedDict):
    gpus: int


class ModelFreeDocument(TypedDict):
    """The `ddpfsdp.calc/1` document of stragglers and scaling alone, given no model."""

    schema: str
    theory: bool
    inputs: ModelFreeInputs
    stragglers: NotRequired[StragglerSection]
    scaling: NotRequired[ScalingSection]

MODEL_FREE = {"stragglers", "scaling"}
"""Sections computed without a model: calc prints them alone when no --params or --model is given."""


def scale_options(command: Any) -> Any:
    """Add the at-scale options to a click command (after its own, in --help)."""
    for option in reversed(SCALE_OPTIONS):
        command = option(command)
    return command


def take_scale_options(values: dict[str, Any]) -> ScaleOptions:
    """Remove the at-scale options from `values` (the command's keyword arguments) and return them,
    refusing a partner option given without the option that starts its section."""
    taken = {name: values.pop(name, None) for name in SCALE_FIELDS}
    starts = {
        "--stragglers P": ("straggler_p", ("straggler_delay", "step_time")),
        "--scaled-to GPUS": ("scaled_to", ("throughput_gain",)),
        "--lora-rank R": ("lora_rank", ("lora_base", "lora_targets")),
        "--plan": ("plan", ("global_batch", "mfu", "plan_dp")),
    }
    for start_text, (start, partners) in starts.items():
        for partner in partners:
            if taken[partner] is not None and not taken[start]:
                raise click.UsageError(f"--{partner.replace('_', '-')} describes what {start_text.split()[0]} adds: "
                                       f"add {start_text}")
    checkpoint_only = ("storage_bw", "gpu_mtbf_hours", "checkpoint_every", "restart_time")
    if any(taken[name] is not None for name in checkpoint_only) and taken["checkpoint_bw"] is None \
            and taken["storage_bw"] is None:
        raise click.UsageError("checkpoint options need a write bandwidth: add --checkpoint-bw (per rank, e.g. 2GB/s) "
                               "or --storage-bw (aggregate, e.g. 500GB/s)")
    if taken["scaled_to"] is not None and taken["throughput_gain"] is None:
        raise click.UsageError("--scaled-to needs --throughput-gain (throughput after / before, e.g. 1.1 for +10%)")
    return ScaleOptions(**taken)


def wanted(scale: ScaleOptions) -> set[str]:
    """The sections these options ask for."""
    links = (scale.intra_bw, scale.inter_bw, scale.oversubscription, scale.rack_nodes)
    asked = {
        "stragglers": scale.straggler_p is not None,
        "checkpoint": scale.checkpoint_bw is not None or scale.storage_bw is not None,
        "topology": bool(scale.topology) or any(link is not None for link in links),
        "scaling": scale.scaled_to is not None,
        "plan": bool(scale.plan),
        "adam_8bit": bool(scale.adam_8bit),
        "lora": scale.lora_rank is not None,
    }
    return {name for name, on in asked.items() if on}


def model_free(scale: ScaleOptions) -> bool:
    """Only sections that need no model were asked for (and at least one was)."""
    sections = wanted(scale)
    return bool(sections) and sections <= MODEL_FREE


def _read(reader: Any, text: Any, option: str) -> Any:
    try:
        return reader(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint=option) from None


def model_free_document(scale: ScaleOptions, gpus: int) -> ModelFreeDocument:
    """The `ddpfsdp.calc/1` document of stragglers and scaling alone: no model, no table."""
    from ddpfsdp.demos.theory.estimate import SCHEMA

    return {"schema": SCHEMA, "theory": True, "inputs": {"gpus": gpus}, **_model_free_sections(scale, gpus)}


def _model_free_sections(scale: ScaleOptions, gpus: int) -> ScaleSections:
    from ddpfsdp.demos.theory.bandwidth import parse_duration_s

    sections: ScaleSections = {}
    if scale.straggler_p is not None:
        from ddpfsdp.demos.theory.stragglers import straggler_figures

        delay = None if scale.straggler_delay is None else _read(parse_duration_s, scale.straggler_delay,
                                                                  "--straggler-delay")
        step = None if scale.step_time is None else _read(parse_duration_s, scale.step_time, "--step-time")
        sections["stragglers"] = _read(lambda p: straggler_figures(ranks=gpus, p=p, delay_s=delay, step_s=step),
                                       scale.straggler_p, "--stragglers")
    if scale.scaled_to is not None:
        from ddpfsdp.demos.theory.topology import scaling

        sections["scaling"] = _read(lambda after: scaling(gpus, after, scale.throughput_gain), scale.scaled_to,
                                    "--scaled-to / --throughput-gain")
    return sections


def scale_sections(scale: ScaleOptions, result: CalcDocument, params_text: str | None) -> ScaleSections:
    """The sections asked for, beside the table's estimate `result` (its inputs give the model and GPUs);
    `params_text` is --params as typed, whose name (70B, 175B) gives the plan and LoRA a shape."""
    inputs = result["inputs"]
    sections = _model_free_sections(scale, inputs["gpus"])
    asked = wanted(scale)
    if "checkpoint" in asked:
        sections["checkpoint"] = _checkpoint(scale, inputs)
    if "topology" in asked or "plan" in asked:
        topo = _topology(scale, inputs)
        if "topology" in asked:
            from ddpfsdp.demos.theory.topology import topology_section

            sections["topology"] = topology_section(topo, inputs["params"], inputs["precision"], inputs["units"])
        if "plan" in asked:
            sections["plan"] = _plan(scale, inputs, topo, _shape(inputs, params_text, "--plan"))
    if "adam_8bit" in asked:
        from ddpfsdp.demos.theory.optimizer_8bit import adam_8bit_section

        sections["adam_8bit"] = adam_8bit_section(inputs["params"], inputs["gpus"], result["strategies"],
                                                  inputs["precision"], inputs["group_size"])
    if "lora" in asked:
        from ddpfsdp.demos.theory.lora import lora_memory

        shape = _shape(inputs, params_text, "--lora-rank")
        sections["lora"] = _read(lambda rank: lora_memory(shape, rank=rank, gpus=inputs["gpus"],
                                                          base=(scale.lora_base or "nf4").lower(),
                                                          targets=(scale.lora_targets or "all").lower()),
                                 scale.lora_rank, "--lora-rank")
    return sections


def _checkpoint(scale: ScaleOptions, inputs: InputsDocument) -> CheckpointSection:
    from ddpfsdp.demos.theory.bandwidth import parse_duration_s, parse_rate
    from ddpfsdp.demos.theory.checkpointing import GPU_MTBF_HOURS, checkpoint_figures

    rate = lambda text, option: None if text is None else _read(parse_rate, text, option)  # noqa: E731
    interval = None if scale.checkpoint_every is None else _read(parse_duration_s, scale.checkpoint_every,
                                                                 "--checkpoint-every")
    restart = 0.0 if scale.restart_time is None else _read(parse_duration_s, scale.restart_time, "--restart-time")
    mtbf = GPU_MTBF_HOURS if scale.gpu_mtbf_hours is None else scale.gpu_mtbf_hours
    return _read(lambda hours: checkpoint_figures(
        params=inputs["params"], gpus=inputs["gpus"], precision=inputs["precision"], optimizer=inputs["optimizer"],
        rank_bytes_per_s=rate(scale.checkpoint_bw, "--checkpoint-bw"),
        storage_bytes_per_s=rate(scale.storage_bw, "--storage-bw"), gpu_mtbf_hours=hours,
        interval_s=interval, restart_s=restart), mtbf, "--gpu-mtbf-hours")


def _topology(scale: ScaleOptions, inputs: InputsDocument) -> Topology:
    from ddpfsdp.demos.theory.bandwidth import parse_rate
    from ddpfsdp.demos.theory.topology import check_topology

    cluster = _cluster(scale)
    intra = cluster.intra.bytes_per_s if scale.intra_bw is None else _read(parse_rate, scale.intra_bw, "--intra-bw")
    inter = cluster.inter.bytes_per_s if scale.inter_bw is None else _read(parse_rate, scale.inter_bw, "--inter-bw")
    try:
        return check_topology(gpus=inputs["gpus"], gpus_per_node=inputs["gpus_per_node"], intra_bytes_per_s=intra,
                              inter_bytes_per_s=inter, oversubscription=scale.oversubscription or 1,
                              rack_nodes=scale.rack_nodes or 1, intra_latency_s=cluster.intra.latency_s,
                              inter_latency_s=cluster.inter.latency_s)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--gpus / --gpus-per-node / the links") from None


def _cluster(scale: ScaleOptions) -> Cluster:
    from ddpfsdp.demos.theory.presets import find

    name = (scale.cluster or DEFAULT_CLUSTER).replace("-", " ")
    return _read(lambda text: find(CLUSTERS, text, "cluster"), name, "--cluster")


def _shape(inputs: InputsDocument, params_text: str | None, option: str) -> GPTShape:
    from ddpfsdp.demos.theory.plan3d import plan_shape

    return _read(plan_shape, inputs["model"] or params_text, option)


def _plan(scale: ScaleOptions, inputs: InputsDocument, topo: Topology, shape: GPTShape) -> PlanSection:
    from dataclasses import replace

    from ddpfsdp.demos.theory import plan3d

    if inputs["seq_len"] and inputs["model"] is None:
        shape = replace(shape, seq_len=inputs["seq_len"])
    cluster = _cluster(scale)
    try:
        job = plan3d.check_job(
            shape=shape, topo=topo, gpu_mem_bytes=inputs["gpu_mem_bytes"] or cluster.gpu.memory_bytes,
            peak_flops_per_s=cluster.gpu.bf16_flops_per_s, mfu=scale.mfu or plan3d.DEFAULT_MFU,
            precision=inputs["precision"], optimizer=inputs["optimizer"],
            global_batch=scale.global_batch or plan3d.DEFAULT_GLOBAL_BATCH, micro_batch=inputs["batch_size"],
            dp_mode=(scale.plan_dp or "zero1").lower())
        section = plan3d.plan(job)
    except ValueError as error:
        raise click.UsageError(f"--plan: {error}") from None
    section["cluster"] = cluster.name
    return section
