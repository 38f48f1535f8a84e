"""`ddpfsdp demo pipeline`'s checks before launch (torch-free): what torch's pipelining would refuse on a rank.

    ddpfsdp demo pipeline --procs 4 --schedule 1f1b --microbatches 8
    ddpfsdp demo pipeline --procs 2 --compare

The pipeline's options are RunSpec fields like every training demo's (`spec`: schedule, microbatches,
stages_per_rank, pp, dp, compare), its command line made from them (`options.PIPELINE_OPTIONS`). Every
schedule, micro-batch count and stage split is checked here, with the world size the launcher placed, by
the analytic model's `check_pipeline` (which checks what torch 2.13's schedules check), so a bad
combination is refused with what to change before any rank starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click

from ddpfsdp.demos.base.shapes import GPT_PRESETS
from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.theory.pipeline import LOOPED, check_pipeline
from ddpfsdp.demos.train.spec import PIPELINE_COMPARED, SAMPLES_PER_MICROBATCH, RunSpec

# Tried on torch 2.13: a PipelineStage over the "fake" backend (train/simulate.py's world) fails in the
# first step, which sends each stage's tensor shapes to the next (stage.py, _send_meta/_recv_meta): a fake
# recv fills nothing, and the stage then asked for a buffer of 140 TB.
SIMULATE_REFUSAL = (
    "--simulate: torch's pipelining cannot run on a fake process group: its first step sends each stage's "
    "tensor shapes to the next rank, and a fake recv returns none, so no stage can be built.{theory} For the "
    "analytic model's whole table (theory, not a run) use: ddpfsdp calc --model {model} --gpus {pp} --pp {pp} --microbatches {m} "
    "--schedule {schedule} --batch-size {micro} --precision fp32; or run the demo on real ranks without --simulate")


def simulate_theory(model: str, pp: int, microbatches: int, schedule: str, v: int | None, micro: int) -> str:
    """What the analytic model (calc's pipeline section) says of the run asked, labelled as theory; empty
    where the model refuses it."""
    from ddpfsdp.demos.base.shapes import gpt_shape
    from ddpfsdp.demos.theory.pipeline import pipeline_figures

    try:
        pipeline = check_pipeline(pp, microbatches, schedule, v)
    except ValueError:
        return ""
    figures = pipeline_figures(gpt_shape(model), pipeline, gpus=pp, batch_size=micro, precision="fp32")
    flights = ", ".join(f"{row['in_flight_chunks']:g}" for row in figures["ranks"])
    sent = ", ".join(format_iec(row["p2p"]["bytes"]) for row in figures["ranks"])
    return (f" Theory for this run instead (demos/theory/pipeline.py, not a measurement): a bubble of "
            f"{figures['bubble_fraction']:.3f} of the step; micro-batches in flight per rank at its peak {flights}; "
            f"sent per rank per step {sent}.")


def _spec(spec: RunSpec | Mapping[str, Any]) -> RunSpec:
    if isinstance(spec, RunSpec):
        return spec
    try:
        return RunSpec.for_demo("pipeline", spec)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def validate_pipeline(spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
                      device: str | None = None) -> None:
    """Refuse, before launch, what torch's pipelining would refuse on a rank (or what the demo cannot show)."""
    spec = _spec(spec)
    micro_batch = (spec.batch_size or spec.batch_size_default()) // max(1, spec.microbatches)
    if spec.simulate:
        model, pp = spec.model or "tiny", spec.pp or world_size or 2
        theory = simulate_theory(model, pp, spec.microbatches, spec.schedule, spec.stages_for(spec.schedule),
                                 micro_batch)
        raise click.UsageError(SIMULATE_REFUSAL.format(model=model, pp=pp, m=spec.microbatches,
                                                       schedule=spec.schedule, micro=micro_batch, theory=theory))
    _check_counts(spec)
    _check_trace(spec.trace)
    model = spec.model_for(device) if device else spec.model
    if model is not None and model not in GPT_PRESETS:
        raise click.UsageError(f"--model {model}: a pipeline cuts a GPT into stages; choose one of "
                               f"{', '.join(GPT_PRESETS)}")
    layers = GPT_PRESETS[model].layers if model else None
    pp = _pp(spec, world_size)
    batch = spec.batch_size or spec.batch_size_default()
    for schedule in spec.schedules():
        try:
            pipeline = check_pipeline(pp, spec.microbatches, schedule, spec.stages_for(schedule), layers)
        except ValueError as exc:
            raise click.UsageError(_advice(str(exc), schedule, spec, pp, model)) from None
        if batch % pipeline.microbatches:
            raise click.UsageError(
                f"--batch-size {batch} does not split into {pipeline.microbatches} equal micro-batches; "
                f"give a multiple of {pipeline.microbatches}, such as {SAMPLES_PER_MICROBATCH * pipeline.microbatches}")


def _pp(spec: RunSpec, world_size: int | None) -> int:
    """Pipeline ranks: the run's degrees on the placed world (before placement, what holds on the fewest ranks)."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims

    if world_size is None:
        return spec.pp or 2
    try:
        return ParallelDims.of(spec, world_size).pp
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _check_counts(spec: RunSpec) -> None:
    if spec.dp > 1 and spec.compare:
        raise click.UsageError("--compare runs one pipeline per schedule; drop --dp, or run one --schedule with --dp")
    if spec.steps is not None and spec.steps < 2:
        raise click.UsageError(f"--steps must be at least 2 (the first step warms up, the last is recorded), "
                               f"got {spec.steps}")
    if spec.compare and spec.schedule not in (None, "1f1b"):
        raise click.UsageError(f"--compare runs {', '.join(PIPELINE_COMPARED)} itself; drop --schedule")


def _check_trace(path: str | None) -> None:
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        raise click.UsageError(f"--trace {path}: the folder {folder} does not exist; create it or write elsewhere")
    if not os.access(folder, os.W_OK):
        raise click.UsageError(f"--trace {path}: the folder {folder} is not writable; choose a path you can write to")


def _advice(message: str, schedule: str, spec: RunSpec, pp: int, model: str | None) -> str:
    """The analytic model's message in the demo's own words: which option to change."""
    where = f"--schedule {schedule}" + (" (run by --compare)" if spec.compare else "")
    text = f"{where}: {message}"
    text = text.replace("give at most", "give --procs at most").replace("pp 1 is no pipeline", "1 rank is no pipeline")
    if "blocks" in message and model is not None:
        v = spec.stages_for(schedule) or (2 if schedule in LOOPED else 1)
        stages = pp * v
        bigger = [name for name, shape in GPT_PRESETS.items() if shape.layers >= stages]
        if bigger:
            text += f"; or a deeper --model ({', '.join(bigger)})"
    return text
