"""`ddpfsdp demo pipeline`'s options, and their checks before launch (torch-free).

    ddpfsdp demo pipeline --procs 4 --schedule 1f1b --microbatches 8
    ddpfsdp demo pipeline --procs 2 --compare

Every schedule, micro-batch count and stage split is checked here, with the world size the launcher
placed, by the analytic model's `check_pipeline` (which checks what torch 2.13's schedules check), so
a bad combination is refused with what to change before any rank starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypedDict

import click

from ddpfsdp.demos.base.shapes import GPT_PRESETS
from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.theory.pipeline import LOOPED, SCHEDULES, check_pipeline

COMPARED = ("gpipe", "1f1b", "interleaved")  # what --compare runs, in this order, on the same ranks
DEFAULT_MICROBATCHES = 4
# The batch when --batch-size is not given: this many samples per micro-batch. Enough that one stage's
# compute of a micro-batch takes several times a gloo send's latency on a loaded CPU, so the bubble shows
# the schedule rather than the wire (the interleaved schedule makes V times as many hops).
SAMPLES_PER_MICROBATCH = 16
DEFAULT_STEPS = 3


class Asked(TypedDict, total=False):
    """What a run of the demo is asked: OPTIONS as click parses them (None: not given)."""

    model: str | None
    schedule: str
    microbatches: int
    stages_per_rank: int | None
    batch_size: int | None
    steps: int
    seed: int
    dp: int
    compare: bool
    simulate: bool
    trace: str | None


def _model_option() -> click.Option:
    return click.Option(["--model"], type=click.Choice(tuple(GPT_PRESETS)), default=None,
                        help="GPT preset split into stages (default: tiny on CPU, small on GPU).")


OPTIONS = [
    _model_option(),
    click.Option(["--schedule"], type=click.Choice(SCHEDULES), default="1f1b", show_default=True,
                 help="torch's ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B or ScheduleInterleavedZeroBubble."),
    click.Option(["--microbatches"], type=int, default=DEFAULT_MICROBATCHES, show_default=True,
                 help="Micro-batches M each step's batch is split into."),
    click.Option(["--stages-per-rank"], type=int, default=None,
                 help="Stages V each rank holds (interleaved only).  [default: 2 for interleaved, else 1]"),
    click.Option(["--batch-size"], type=int, default=None,
                 help=f"Samples per step (per replica with --dp), split into the micro-batches.  "
                      f"[default: {SAMPLES_PER_MICROBATCH} x M]"),
    click.Option(["--steps"], type=int, default=DEFAULT_STEPS, show_default=True,
                 help="Training steps; the last is recorded, the first warms up."),
    click.Option(["--seed"], type=int, default=0, show_default=True, help="Model and data seed."),
    click.Option(["--dp"], type=int, default=1, show_default=True,
                 help="Data-parallel replicas of the pipeline: ranks = dp x pp, each stage fully_shard'ed over dp."),
    click.Option(["--compare"], is_flag=True,
                 help="Run GPipe, 1F1B and interleaved in one launch on the same ranks, model and seed."),
    click.Option(["--simulate"], is_flag=True,
                 help="Refused: torch's pipelining cannot run over a fake process group; use ddpfsdp calc --pp."),
    click.Option(["--trace"], type=str, default=None,
                 help="Write the recorded step as Chrome trace-event JSON (ui.perfetto.dev)."),
]


def batch_size(asked: Mapping[str, Any]) -> int:
    given = asked.get("batch_size")
    return int(given) if given is not None else SAMPLES_PER_MICROBATCH * int(asked["microbatches"])


def global_batch(asked: Mapping[str, Any]) -> int:
    """Samples per step over all replicas: each of the dp pipelines runs its own batch."""
    return batch_size(asked) * int(asked.get("dp") or 1)


def schedules(asked: Mapping[str, Any]) -> tuple[str, ...]:
    return COMPARED if asked.get("compare") else (asked["schedule"],)


def stages_per_rank(asked: Mapping[str, Any], schedule: str) -> int | None:
    """What V a schedule runs with: the asked one for a looped schedule, else one (under --compare too)."""
    if schedule in LOOPED:
        return asked.get("stages_per_rank")
    return None if asked.get("compare") else asked.get("stages_per_rank")


def preset(asked: Mapping[str, Any], device: str | None) -> str | None:
    if asked.get("model"):
        return asked["model"]
    return None if device is None else ("tiny" if device == "cpu" else "small")


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


def validate(asked: Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    """Refuse, before launch, what torch's pipelining would refuse on a rank (or what the demo cannot show)."""
    if asked.get("simulate"):
        model, pp = asked.get("model") or "tiny", world_size or 2
        micro = batch_size(asked) // max(1, asked["microbatches"])
        theory = simulate_theory(model, pp, asked["microbatches"], asked["schedule"],
                                 stages_per_rank(asked, asked["schedule"]), micro)
        raise click.UsageError(SIMULATE_REFUSAL.format(model=model, pp=pp, m=asked["microbatches"],
                                                       schedule=asked["schedule"], micro=micro, theory=theory))
    _check_counts(asked)
    _check_trace(asked.get("trace"))
    model = preset(asked, device)
    layers = GPT_PRESETS[model].layers if model else None
    pp = _pp(asked, world_size)
    for schedule in schedules(asked):
        try:
            pipeline = check_pipeline(pp, asked["microbatches"], schedule, stages_per_rank(asked, schedule), layers)
        except ValueError as exc:
            raise click.UsageError(_advice(str(exc), schedule, asked, pp, model)) from None
        if batch_size(asked) % pipeline.microbatches:
            raise click.UsageError(
                f"--batch-size {batch_size(asked)} does not split into {pipeline.microbatches} equal micro-batches; "
                f"give a multiple of {pipeline.microbatches}, such as {SAMPLES_PER_MICROBATCH * pipeline.microbatches}")


def _pp(asked: Mapping[str, Any], world_size: int | None) -> int:
    """Pipeline ranks: the world over --dp (before placement, what holds on the fewest ranks)."""
    dp = int(asked.get("dp") or 1)
    if world_size is None:
        return 2
    if world_size % dp or world_size // dp < 2:
        raise click.UsageError(f"--dp {dp} on {world_size} ranks: the ranks are dp x pp with pp at least 2; "
                               f"give --procs {2 * dp} (or another multiple of {dp} of at least {2 * dp})")
    return world_size // dp


def _check_counts(asked: Mapping[str, Any]) -> None:
    if int(asked.get("dp") or 1) > 1 and asked.get("compare"):
        raise click.UsageError("--compare runs one pipeline per schedule; drop --dp, or run one --schedule with --dp")
    for name, least in (("microbatches", 1), ("steps", 2), ("batch_size", 1), ("stages_per_rank", 1), ("dp", 1)):
        value = asked.get(name)
        if value is not None and value < least:
            flag = "--" + name.replace("_", "-")
            why = " (the first step warms up, the last is recorded)" if name == "steps" else ""
            raise click.UsageError(f"{flag} must be at least {least}{why}, got {value}")
    if asked.get("compare") and asked.get("schedule") not in (None, "1f1b"):
        raise click.UsageError("--compare runs gpipe, 1f1b and interleaved itself; drop --schedule")


def _check_trace(path: str | None) -> None:
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        raise click.UsageError(f"--trace {path}: the folder {folder} does not exist; create it or write elsewhere")
    if not os.access(folder, os.W_OK):
        raise click.UsageError(f"--trace {path}: the folder {folder} is not writable; choose a path you can write to")


def _advice(message: str, schedule: str, asked: Mapping[str, Any], pp: int, model: str | None) -> str:
    """The analytic model's message in the demo's own words: which option to change."""
    where = f"--schedule {schedule}" + (" (run by --compare)" if asked.get("compare") else "")
    text = f"{where}: {message}"
    text = text.replace("give at most", "give --procs at most").replace("pp 1 is no pipeline", "1 rank is no pipeline")
    if "blocks" in message and model is not None:
        v = stages_per_rank(asked, schedule) or (2 if schedule in LOOPED else 1)
        stages = pp * v
        bigger = [name for name, shape in GPT_PRESETS.items() if shape.layers >= stages]
        if bigger:
            text += f"; or a deeper --model ({', '.join(bigger)})"
    return text
