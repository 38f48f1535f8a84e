"""`ddpfsdp calc --pp P --microbatches M`: the pipeline's per-stage figures beside the other strategies.

The options, the `pipeline` section of the `ddpfsdp.calc/1` document (`demos.theory.pipeline`) and its
table. `calc` takes the options with `pipeline_options`, hands them to `pipeline_section` after the
table's estimate, and prints the section with `render_pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import click

from ddpfsdp.demos.theory.pipeline import SCHEDULES

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape
    from ddpfsdp.demos.theory.estimate import CalcDocument
    from ddpfsdp.demos.theory.inputs import InputsDocument
    from ddpfsdp.demos.theory.pipeline import PipelineSection

    Size = Callable[[float | None], str]

PIPELINE_FIELDS = ("pp", "microbatches", "schedule", "stages_per_rank")

PIPELINE_OPTIONS = (
    click.option("--pp", type=int, help="Add pipeline parallelism over PP stages (ranks): per-stage memory, bubble, "
                 "activations in flight and point-to-point bytes; dp = --gpus / (PP x --tp). Needs --model or a "
                 "named size (--params 1B, 7B, 13B, 70B)."),
    click.option("--microbatches", type=int, help="With --pp: micro-batches per step (M), each of --batch-size "
                 "sequences. [default: 4 x PP]"),
    click.option("--schedule", help=f"With --pp: {', '.join(SCHEDULES)} (torch's ScheduleGPipe, Schedule1F1B, "
                 "ScheduleInterleaved1F1B; zero-bubble states the ZB-H1 paper's claim). [default: 1f1b]"),
    click.option("--stages-per-rank", type=int, help="With --pp --schedule interleaved: stages per rank (V). "
                 "[default: 2]"),
)


@dataclass(frozen=True)
class PipelineOptions:
    """The pipeline's options as given (None: not given), and --params as typed."""

    pp: int | None
    microbatches: int | None
    schedule: str | None
    stages_per_rank: int | None
    params_text: str | None  # a named size ("70B") has a block shape; a bare count has none


def pipeline_options(command: Any) -> Any:
    """Add the pipeline's options to a click command (after its own, in --help)."""
    for option in reversed(PIPELINE_OPTIONS):
        command = option(command)
    return command


def take_pipeline_options(values: dict[str, Any]) -> PipelineOptions:
    """Remove the pipeline's options from `values` (the command's keyword arguments) and return them."""
    taken = {name: values.pop(name, None) for name in PIPELINE_FIELDS}
    if taken["pp"] is None and any(taken[name] is not None for name in PIPELINE_FIELDS[1:]):
        given = next(name for name in PIPELINE_FIELDS[1:] if taken[name] is not None)
        raise click.UsageError(f"--{given.replace('_', '-')} describes a pipeline: add --pp P (its stages), "
                               "e.g. --pp 4 --microbatches 16")
    return PipelineOptions(**taken, params_text=values.get("params"))


def pipeline_section(pipeline: PipelineOptions, result: CalcDocument) -> PipelineSection | None:
    """The document's `pipeline` section for the options `take_pipeline_options` took, or None without --pp.

    A bad value (micro-batches, stages, schedule, degrees) is a UsageError saying what to change."""
    pp = pipeline.pp
    if pp is None:
        return None
    from ddpfsdp.demos.theory.pipeline import check_pipeline, pipeline_figures

    inputs = result["inputs"]
    from ddpfsdp.demos.theory.pipeline import check_schedule

    try:
        check_schedule(pipeline.schedule or "1f1b")
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--schedule") from None
    if inputs["accounting"] != "ddpfsdp" or inputs["offload"] != "none":
        raise click.UsageError("--pp is counted with the ddpfsdp accounting and no offload: drop --accounting "
                               "deepspeed and --offload to add a pipeline")
    try:
        shape = _block_shape(inputs, pipeline.params_text)
        microbatches = pipeline.microbatches if pipeline.microbatches is not None else 4 * max(pp, 1)
        checked = check_pipeline(pp, microbatches, pipeline.schedule or "1f1b", pipeline.stages_per_rank,
                                 layers=shape.layers)
        return pipeline_figures(
            shape, checked, gpus=inputs["gpus"], tp=inputs.get("tp") or 1, batch_size=inputs["batch_size"],
            precision=inputs["precision"], optimizer=inputs["optimizer"],
            checkpoint_activations=inputs["checkpoint_activations"], gpu_mem_bytes=inputs["gpu_mem_bytes"],
        )
    except ValueError as error:
        raise click.UsageError(f"--pp: {error}") from None


def _block_shape(inputs: InputsDocument, params_text: str | None) -> GPTShape:
    """The GPT shape the stages split: the preset's, or a named size's (7B, 70B), at --seq-len if given."""
    from dataclasses import replace

    from ddpfsdp.demos.theory.gpt_layout import gpt_shape_of
    from ddpfsdp.demos.base.shapes import GPT_SIZES

    if inputs["model"] is not None:
        return gpt_shape_of(inputs["model"], inputs["seq_len"])
    size = GPT_SIZES.get(str(params_text).strip().upper())
    if size is None:
        raise ValueError("a pipeline splits the model's blocks into stages, so it needs their shape: give --model "
                         f"(a GPT preset) or a named size, --params {', '.join(GPT_SIZES)}")
    return replace(size, seq_len=inputs["seq_len"]) if inputs["seq_len"] else size


def render_pipeline(section: PipelineSection, result: CalcDocument, unit: str) -> None:
    """The pipeline's per-stage table, its bubble and what it sends, and the other strategies' per-GPU state."""
    from ddpfsdp.quiz.plain_console import trimmed_console
    from rich.table import Table

    from ddpfsdp.demos.base.units import format_bytes

    size = lambda n: "n/a" if n is None else format_bytes(n, unit)  # noqa: E731
    mesh, m, v = section["mesh"], section["microbatches"], section["stages_per_rank"]
    looped = f", V = {v} stages per rank" if v > 1 else ""
    table = Table(title=f"Pipeline per stage, {unit} (theory): pp {mesh['pp']} x tp {mesh['tp']} x dp {mesh['dp']}, "
                  f"{section['schedule']} ({section['torch_schedule']}), m = {m}{looped}", title_justify="left")
    # Short headers, so the eight columns fit 80 characters: state = model state, act. = activations in flight.
    for column in ("rank", "blocks", "state", "in flight", "act.", "total", "fits", "p2p sent"):
        table.add_column(column, justify="left" if column == "rank" else "right")
    verdict = lambda fits: "n/a" if fits is None else ("[green]yes[/]" if fits else "[red]no[/]")  # noqa: E731
    for row in section["ranks"]:
        table.add_row(str(row["rank"]), "+".join(map(str, row["chunk_layers"])), size(row["model_state_bytes"]),
                      f"{row['in_flight_microbatches']:g}", size(row["activation_bytes"]), size(row["total_bytes"]),
                      verdict(row["fits"]), size(row["p2p"]["bytes"]))
    console = trimmed_console()
    console.print(table)
    for line in pipeline_lines(section, result, size):
        console.print(f"• {line}", highlight=False)


def pipeline_lines(section: PipelineSection, result: CalcDocument, size: Size) -> list[str]:
    """The pipeline's prose: the bubble, the step, activations, point to point, and the other strategies beside it."""
    pp, m, v = section["mesh"]["pp"], section["microbatches"], section["stages_per_rank"]
    fill = _fill_expression(section["schedule"], pp, v)
    lines = [
        f"Bubble: {fill} = {section['bubble_t']:g} slot(s) of fill and drain against {m} of work per rank: "
        f"{section['bubble_fraction']:.1%} of the step idle, the step {section['step_over_bubble_free']:.3f}x the "
        f"bubble-free one (idle over work {section['bubble_ratio']:.3f})."
        + (" Zero bubble: the ZB-H1 paper's claim (a third of 1F1B's bubble when forward, input-gradient and "
           f"weight-gradient passes take equal time); ZB-H2 claims none at up to {2 * pp - 1} micro-batches in "
           "flight on the first stage." if section["schedule"] == "zero-bubble" else ""),
        f"Activations in flight at a stage's peak: {_in_flight_rule(section['schedule'], pp, m, v)}. Each "
        "micro-batch's saved activations (no transient of one backward) times that.",
        f"Point to point: {size(section['boundary_bytes'])} per micro-batch per boundary (b·s·d), forward and again "
        f"backward; {size(section['p2p_bytes_per_step'])} per step over {section['stages'] - 1} boundary(ies). "
        f"Global batch: dp {section['mesh']['dp']} x {m} micro-batches x {section['microbatch_size']} sequence(s).",
    ]
    beside = [f"{name} {size(row['model_state_bytes'])}" for name, row in result["strategies"].items()
              if name in ("ddp", "zero3", "2d")]
    worst = max(row["model_state_bytes"] for row in section["ranks"])
    lines.append(f"Beside the other strategies on all {result['inputs']['gpus']} GPUs, model state per GPU: "
                 + "; ".join(beside) + f"; pipeline's largest stage {size(worst)}.")
    return lines


def _fill_expression(schedule: str, pp: int, v: int) -> str:
    """The fill and drain in slots of t, as the sum that gives `bubble_t`: (pp-1) over V chunks per rank, and
    over 3 more for zero bubble (ZB-H1's claimed third of 1F1B's)."""
    from ddpfsdp.demos.theory.pipeline import ZB_H1_BUBBLE_SHARE

    divisor = v * (round(1 / ZB_H1_BUBBLE_SHARE) if schedule == "zero-bubble" else 1)
    return f"({pp}-1)/{divisor}" if divisor > 1 else f"{pp}-1"


def _in_flight_rule(schedule: str, pp: int, m: int, v: int) -> str:
    if schedule == "gpipe":
        return f"GPipe holds all {m} micro-batches on every stage"
    if schedule == "1f1b":
        return f"1F1B holds min(m, pp - rank): {min(m, pp)} on rank 0 down to 1 on the last"
    if schedule == "zero-bubble":
        return f"ZB-H1 holds no more than 1F1B's peak, {min(m, pp)} (the paper's claim)"
    return (f"interleaved holds (V-1)·R + 2(pp-1-rank) + 1 chunk micro-batches of 1/V of the stage (torch's warm-up), "
            f"pp + (pp-1)/V = {pp + (pp - 1) / v:g} on rank 0 when R = pp")
