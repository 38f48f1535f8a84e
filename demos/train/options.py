"""The training demos' command line, made from the run's spec, and the checks of what it is given.

    ddpfsdp demo fsdp --procs 2 --model tiny --sharding grad-op

DDP_OPTIONS, FSDP_OPTIONS and COMPARE_OPTIONS are click parameters made from RunSpec's fields
(`train.spec`): flag, type, default, choices, bounds and help come from there, so the CLI, the
worker and the launch guard parse a demo's options the same way, with one default each. Click
refuses a value of the wrong type, outside an option's choices or below its bound while it parses.
`validate_*` then relate the options of a run's spec (`RunSpec.for_demo`) to each other: given no
world size (the CLI calls them so before it places the run, which imports torch), everything the
world size does not decide; given one, that too. They read the spec they are given and build none.
Only click is imported here, never torch.
"""

from __future__ import annotations

import os
from dataclasses import Field
from typing import Any, Mapping

import click

from ddpfsdp.demos.base import shapes
from ddpfsdp.demos.base.bounds import FiniteFloat
from ddpfsdp.demos.train.spec import (
    MAX_SIMULATED_WORLD,
    MEASURED_STEPS,
    MIN_TIMED_STEPS,
    RunSpec,
    flag_name,
    min_steps,
    option_fields,
    value_type,
)

# ----------------------------------------------------------------------------- the options


def _click_type(item: Field) -> click.ParamType:
    flag, kind = item.metadata["flag"], value_type(item)
    if flag.path:
        return click.Path(dir_okay=False, writable=True)
    if flag.folder:  # whether it may be written is the demo's own check, with what to do instead
        return click.Path(file_okay=False)
    if flag.offered:
        return click.Choice(flag.offered, case_sensitive=False)
    if flag.choices and kind is int:
        low, high = min(flag.choices), max(flag.choices)
        assert set(flag.choices) == set(range(low, high + 1)), f"{item.name}: choices must be a range of integers"
        return click.IntRange(low, high)
    if flag.choices:
        return click.Choice(flag.choices)
    if kind is float:  # nan and infinity pass click's own float ranges
        return FiniteFloat(min=flag.minimum, max=flag.maximum, min_open=flag.above_minimum)
    if kind is int and (flag.minimum is not None or flag.maximum is not None):
        return click.IntRange(min=flag.minimum, max=flag.maximum, min_open=flag.above_minimum)
    return {int: click.INT, str: click.STRING}[kind]


def click_option(item: Field, demo: str) -> click.Option:
    """The command-line option of one RunSpec field, on `demo`'s command line."""
    flag = item.metadata["flag"]
    default = flag.default_for(demo, item.default)
    name = f"--{flag_name(item.name)}"
    help_text = f"With --simulate: {flag.help[0].lower()}{flag.help[1:]}" if flag.simulate_only else flag.help
    if value_type(item) is bool:
        declaration = f"{name}/--no-{flag_name(item.name)}" if flag.negatable else name
        return click.Option([declaration], is_flag=True, default=default, show_default=flag.negatable,
                            help=help_text)
    return click.Option([name], type=_click_type(item), default=default, show_default=default is not None,
                        metavar=flag.metavar, help=help_text)


def options_for(demo: str) -> list[click.Option]:
    """The click options of a training demo, in RunSpec's order."""
    return [click_option(item, demo) for item in option_fields(demo)]


DDP_OPTIONS = options_for("ddp")  # ddp and zro
FSDP_OPTIONS = options_for("fsdp")
COMPARE_OPTIONS = options_for("compare")
PIPELINE_OPTIONS = options_for("pipeline")
CP_OPTIONS = options_for("cp")


# ----------------------------------------------------------------------------- the checks


def _usage(message: str) -> click.UsageError:
    return click.UsageError(message)


def spec_of(demo: str, spec: RunSpec | Mapping[str, Any]) -> RunSpec:
    """The demo's spec: the one given, or the one its options make (a bad value is a usage error)."""
    if isinstance(spec, RunSpec):
        return spec
    try:
        return RunSpec.for_demo(demo, spec)
    except ValueError as exc:
        raise _usage(str(exc)) from None


def validate_simulated(demo: str, spec: RunSpec | Mapping[str, Any]) -> None:
    """Refuse, with what to try, what the fake run cannot handle (no torch: the CLI checks first)."""
    spec = spec_of(demo, spec)
    world = spec.world
    if world is None:
        raise _usage("--simulate needs --world N, the ranks to simulate, at least 2 (e.g. --world 64)")
    if world < 2:
        raise _usage(f"--simulate needs --world N, the ranks to simulate, at least 2 (e.g. --world 64); got {world}")
    if world > MAX_SIMULATED_WORLD:
        raise _usage(f"--world {world}: a simulated world has at most {MAX_SIMULATED_WORLD} ranks, the largest "
                     "whose run at 70B is held to finish within a minute on 2 CPU cores; per-rank figures at "
                     "that scale follow from `ddpfsdp calc --gpus N`")
    if spec.trace:
        raise _usage("--trace records a real step in time; a simulated run computes nothing and takes no time. "
                     "Record one on real ranks instead: ddpfsdp demo fsdp --procs 2 --trace PATH")
    if spec.prefetch != "default":
        raise _usage(f"--prefetch {spec.prefetch} changes when all-gathers are issued, which only a real "
                     "step's timeline shows; leave it out with --simulate")
    if spec.fsdp_api != 2:
        raise _usage("--fsdp-api 1 cannot be simulated: FSDP1 flattens parameters into one storage, which fake "
                     "tensors do not have; simulate FSDP2 (--fsdp-api 2, the default)")
    if spec.params and (spec.model or spec.arch != "gpt"):
        raise _usage("--params picks a GPT shape of that size; leave out --model and --arch, or give --model instead")
    if spec.params and spec.params.strip().upper() not in shapes.GPT_SIZES:
        raise _usage(f"--params {spec.params}: the simulated sizes are {', '.join(shapes.GPT_SIZES)}; for "
                     "another size give --model with --layers, --d-model and --heads")
    try:
        params = spec.simulated_model()[3].params
    except ValueError as exc:
        raise _usage(f"{exc} (check --params or --model, and the overrides)") from None
    if spec.gpu_mem:
        _check_replica_fits(demo, spec, params)


def _check_replica_fits(demo: str, spec: RunSpec, params: int) -> None:
    """DDP and zro keep a whole replica of parameters and gradients: refuse one above --gpu-mem."""
    from ddpfsdp.demos.theory.state import model_state
    from ddpfsdp.demos.base.units import format_bytes, parse_bytes

    try:
        limit = parse_bytes(spec.gpu_mem)
    except ValueError as exc:
        raise _usage(f"--gpu-mem: {exc}") from None
    if demo not in ("ddp", "zro"):
        return
    state = model_state(params, spec.world, demo, spec.precision, spec.optimizer)["model_state_bytes"]
    if state > limit:
        more = f" --params {spec.params}" if spec.params else ""
        raise _usage(
            f"{demo} keeps a full replica of the parameters and gradients on every rank: "
            f"{format_bytes(state, 'GB')} of model state per rank for {params:,} parameters (theory), "
            f"above --gpu-mem {format_bytes(limit, 'GB')} before any activation. Shard it instead: "
            f"ddpfsdp demo fsdp --simulate --world {spec.world}{more}"
        )


def validate(demo: str, spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
             device: str | None = None) -> None:
    """Refuse a bad combination of a training demo's options with a message that says what to change.

    `world_size` and `device` ("cpu" or "cuda"): where the run is placed; None checks everything the
    placement does not decide (a simulated run's world is its own --world, known before placement;
    without --model the model is the device's default).
    """
    spec = spec_of(demo, spec)
    if spec.simulate:
        validate_simulated(demo, spec)
    else:
        given = [f"--{flag_name(item.name)}" for item in option_fields()
                 if item.metadata["flag"].simulate_only and getattr(spec, item.name) is not None]
        if given:
            raise _usage(f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} to a simulated run: "
                         "add --simulate")
    world = spec.world if spec.simulate else world_size
    if world is not None and world < 2:
        raise _usage(f"data parallelism needs at least 2 ranks, got {world}; run with --procs 2 or --gpus 2")
    _check_steps(spec)
    _check_shape(spec)
    _check_trace(spec)
    if spec.is_context_parallel:
        _check_cp(spec, world, device)
    for each in spec.runs(demo):
        _check_fsdp(each, world)
        _check_compile(each)
    _check_tp(spec, world, device)


def _check_steps(spec: RunSpec) -> None:
    needed = min_steps(spec.warmup)
    if spec.steps is not None and spec.steps < needed:
        raise _usage(
            f"--steps must be at least {needed} with --warmup {spec.warmup} ({spec.warmup} warm-up + "
            f"{MIN_TIMED_STEPS} timed + {MEASURED_STEPS} measured: one for communication, one for memory), "
            f"got {spec.steps}"
        )


def _check_shape(spec: RunSpec) -> None:
    """The model with its overrides exists: the one named, or the default of either device."""
    try:
        for device_type in ("cpu", "cuda"):
            shapes.shape_for(spec.arch, spec.model_for(device_type), **spec.overrides)
    except ValueError as exc:
        raise _usage(f"{exc} (check --arch, --model and the overrides)") from None


def _check_trace(spec: RunSpec) -> None:
    path = spec.trace
    if not path:
        return
    if not spec.timeline:
        raise _usage("--trace writes the recorded step, which --no-timeline turns off; drop one of the two")
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        raise _usage(f"--trace {path}: the folder {folder} does not exist; create it or write the trace elsewhere")
    if not os.access(folder, os.W_OK):
        raise _usage(f"--trace {path}: the folder {folder} is not writable; choose a path you can write to")


def _check_fsdp(spec: RunSpec, world: int | None) -> None:
    if spec.strategy != "fsdp":
        return
    if spec.prefetch == "off" and spec.fsdp_api == 2:
        raise _usage("--prefetch off needs --fsdp-api 1: FSDP2 always prefetches the next unit in backward "
                     "(torch has no switch for it); try --prefetch forward, or --fsdp-api 1 --prefetch off")
    if world is not None:
        _check_degrees(spec, world)


def _check_degrees(spec: RunSpec, world: int) -> None:
    """The run's parallel degrees split the world it is placed on (`ParallelDims.of` says what would)."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims

    try:
        ParallelDims.of(spec, world)
    except ValueError as exc:
        raise _usage(str(exc)) from None


def _check_compile(run: RunSpec) -> None:
    """--compile as torch allows it here: real ranks, FSDP2 per block, DDP's buckets no smaller than
    the first piece DDPOptimizer cuts; and a fused optimizer only where torch has one for the shards."""
    from ddpfsdp.demos.parallel.compiled import DDP_OPTIMIZER_FIRST_BUCKET_MB

    if run.optimizer_impl == "fused" and run.optimizer == "sgd" and run.strategy == "fsdp" and run.fsdp_api == 2:
        raise _usage("--optimizer-impl fused with --optimizer sgd under FSDP2: DTensor, which holds FSDP2's shards, "
                     "has no sharding strategy for fused SGD (it has one for AdamW); use --optimizer-impl foreach "
                     "or auto, or --optimizer adamw")
    if not run.compile:
        if run.compile_backend != "auto":
            raise _usage(f"--compile-backend {run.compile_backend} chooses the backend of --compile; add --compile")
        return
    if run.simulate:
        raise _usage("--compile compiles kernels that a simulated run never runs (fake tensors take no time); "
                     "drop --compile, or run on real ranks: ddpfsdp demo ddp --procs 2 --compile")
    if run.tp:
        raise _usage("--compile is not combined with --tp here; drop one of the two")
    if run.strategy == "fsdp" and run.fsdp_api == 1:
        raise _usage("--compile compiles each block before fully_shard (FSDP2); torch traces FSDP1 only as a whole "
                     "wrapped model with use_orig_params=True, which this demo does not show: use --fsdp-api 2")
    if run.strategy in ("ddp", "zro") and run.bucket_mb < DDP_OPTIMIZER_FIRST_BUCKET_MB:
        raise _usage(f"--compile with --bucket-mb {run.bucket_mb:g}: DDPOptimizer cuts its first piece at "
                     f"{DDP_OPTIMIZER_FIRST_BUCKET_MB:g} MiB whatever the cap and refuses a smaller cap "
                     "(torch/_dynamo/backends/distributed.py); give --bucket-mb 1 or more")


def _check_tp(spec: RunSpec, world: int | None, device: str | None) -> None:
    """--tp runs one configuration: FSDP2 full over dp, one unit per block, on a GPT whose heads and
    vocabulary tp divides (and its sequence, with --sequence-parallel), in a world of at least 2 x tp."""
    from ddpfsdp.demos.parallel.tensor_parallel import check_tp_shape

    if spec.sequence_parallel and not spec.tp:
        raise _usage("--sequence-parallel splits what tensor parallelism leaves whole; it needs --tp N "
                     "(e.g. --procs 4 --tp 2 --sequence-parallel)")
    if not spec.tp:
        return
    refused = [(spec.sharding != "full", f"--sharding {spec.sharding}", "FSDP full over dp"),
               (spec.fsdp_api != 2, "--fsdp-api 1", "FSDP2 (fully_shard shards the TP DTensors)"),
               (spec.wrap != "block", f"--wrap {spec.wrap}", "one FSDP unit per block (--wrap block)"),
               (spec.checkpoint_activations, "--checkpoint-activations", "every block's activations kept"),
               (spec.arch != "gpt", f"--arch {spec.arch}", "the GPT decoder (its plan splits heads)")]
    for bad, given, needed in refused:
        if bad:
            raise _usage(f"--tp runs {needed}; drop {given}, or drop --tp")
    if world is not None:
        _check_degrees(spec, world)
    if spec.simulate:
        shape = spec.simulated_model()[3]
    elif spec.model or device:
        shape = shapes.shape_for(spec.arch, spec.model_for(device or "cpu"), **spec.overrides)
    else:
        shape = None  # the device's default model, checked once the run is placed
    try:
        check_tp_shape(shape, spec.tp, world if world is not None else 2 * spec.tp, spec.sequence_parallel)
    except ValueError as exc:
        raise _usage(str(exc)) from None


def _check_cp(spec: RunSpec, world: int | None, device: str | None) -> None:
    """--cp runs a causal GPT whose sequence splits into the ring's chunks (2·cp of them head-tail, cp
    contiguous), FSDP2 over dp x cp, eager, in a world cp divides."""
    from ddpfsdp.demos.theory.context_parallel import check_cp

    if spec.arch != "gpt":
        why = {"vit": "a ViT's attention is not causal (every patch sees every other) and its head reads the class "
                      "token alone", "resnet": "a ResNet has no sequence to split"}[spec.arch]
        raise _usage(f"--arch {spec.arch}: this demo's ring splits a causal decoder's sequence, and {why}; "
                     "drop --arch (the GPT)")
    if spec.compile:
        raise _usage("--compile is not combined with --cp here: the ring's autograd function issues point-to-point "
                     "sends and waits on them eagerly, block by block; drop --compile")
    if world is not None:
        _check_degrees(spec, world)
    balanced = spec.cp_split != "contiguous"
    for model, shape in _gpt_shapes(spec, device):
        seq_len = shape.seq_len
        try:
            check_cp(spec.cp, seq_len, balanced=balanced)
        except ValueError as exc:
            other = ("; or --cp-split contiguous, which needs only a multiple of cp"
                     if balanced and seq_len % spec.cp == 0 else "")
            raise _usage(f"--cp {spec.cp} on {model}'s sequence of {seq_len} tokens: {exc}{other}") from None


def _gpt_shapes(spec: RunSpec, device: str | None) -> list[tuple[str, Any]]:
    """The GPT a run trains, by name, with the shape overrides: the simulated one, the one named, or the
    placed device's default; none before placement without --model. A shape that does not exist is
    `_check_shape`'s to refuse."""
    if spec.simulate:
        _, name, _, shape = spec.simulated_model()
        return [(name, shape)]
    if not (spec.model or device):
        return []  # the device's default model, checked once the run is placed
    name = spec.model_for(device or "cpu")
    return [(name, shapes.shape_for("gpt", name, **spec.overrides))]


def validate_ddp(spec: RunSpec | Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    validate("ddp", spec, world_size, device)


def validate_zro(spec: RunSpec | Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    validate("zro", spec, world_size, device)


def validate_fsdp(spec: RunSpec | Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    validate("fsdp", spec, world_size, device)


def validate_cp(spec: RunSpec | Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    validate("cp", spec, world_size, device)


def validate_compare(spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
                     device: str | None = None) -> None:
    validate("compare", spec, world_size, device)
