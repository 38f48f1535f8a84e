"""The `ddp`, `fsdp` and `compare` demos: real training, measured, beside the analytic model.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ddpfsdp.demos.worker fsdp --model tiny
    ddpfsdp demo compare --procs 2 --model tiny

Options are click parameters (DDP_OPTIONS, FSDP_OPTIONS, COMPARE_OPTIONS) so the CLI, the worker
and the launch guard parse them the same way; `validate_*` rejects bad combinations before any
process starts. Only click is imported at module level: the CLI builds its commands from here
without paying for torch.
"""

from __future__ import annotations

import os
from typing import Any

import click

from ddpfsdp.demos.train.spec import MEASURED_STEPS

ARCHS = ("gpt", "vit", "resnet")
SHARDINGS = ("full", "grad-op", "hybrid", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
PRECISIONS = ("fp32", "bf16-mixed", "bf16")
OPTIMIZERS = ("adamw", "sgd")
COMPARE_RUNS = (("ddp", "ddp", None), ("zero1", "zero1", None), ("fsdp-grad-op", "fsdp", "grad-op"),
                ("fsdp-full", "fsdp", "full"))
PREFETCHES = ("default", "forward", "off")
OVERRIDE_NAMES = ("layers", "d_model", "heads", "seq_len")
DEFAULT_STEPS = {"cpu": 8, "cuda": 20}  # when --steps is left unset; at least min_steps(warmup)
DEFAULT_WARMUP = 2
MIN_TIMED_STEPS = 1
MIN_WARMUP_STEPS = 1  # DDP issues extra broadcasts on its second iteration; the comm step must come later


def min_steps(warmup: int) -> int:
    return max(warmup, MIN_WARMUP_STEPS) + MIN_TIMED_STEPS + MEASURED_STEPS


def steps_for(options: dict[str, Any], device_type: str) -> int:
    """--steps, or the device's default (never fewer than the warm-up and measured steps need)."""
    if options.get("steps") is not None:
        return options["steps"]
    warmup = options.get("warmup", DEFAULT_WARMUP)
    return max(DEFAULT_STEPS["cpu" if device_type == "cpu" else "cuda"], min_steps(warmup or MIN_WARMUP_STEPS))


_COMMON = [
    click.Option(["--arch"], type=click.Choice(ARCHS), default="gpt", show_default=True,
                 help="Model family: a GPT decoder, a ViT classifier or a BasicBlock ResNet."),
    click.Option(["--model"], default=None,
                 help="Preset: tiny, small, base, large, xl (gpt); tiny..large (vit); tiny, small, 18, 34 "
                      "(resnet). Default: small on CPU, base on GPU."),
    click.Option(["--layers"], type=int, default=None, help="Override the preset's number of blocks."),
    click.Option(["--d-model"], type=int, default=None, help="Override the preset's hidden size."),
    click.Option(["--heads"], type=int, default=None, help="Override the preset's attention heads."),
    click.Option(["--seq-len"], type=int, default=None, help="Override the preset's sequence length (gpt)."),
    click.Option(["--batch-size"], type=int, default=4, show_default=True, help="Samples per rank per step."),
    click.Option(["--steps"], type=int, default=None,
                 help="Training steps in all: warm-up, timed, then one communication and one memory step. "
                      "Default: 8 on CPU, 20 on GPU."),
    click.Option(["--warmup"], type=int, default=DEFAULT_WARMUP, show_default=True,
                 help="Steps before timing starts (DDP rebuilds its buckets after the first)."),
    click.Option(["--precision"], type=click.Choice(PRECISIONS), default="fp32", show_default=True,
                 help="fp32; bf16-mixed (autocast for DDP, MixedPrecisionPolicy for FSDP); bf16 throughout."),
    click.Option(["--optimizer"], type=click.Choice(OPTIMIZERS), default="adamw", show_default=True,
                 help="AdamW (two fp32 states per parameter) or SGD."),
    click.Option(["--lr"], type=float, default=1e-3, show_default=True, help="Learning rate."),
    click.Option(["--seed"], type=int, default=0, show_default=True, help="Seed of the weights and the data."),
    click.Option(["--checkpoint-activations"], is_flag=True, default=False,
                 help="Recompute each block's activations in backward instead of keeping them."),
    click.Option(["--timeline/--no-timeline"], default=True, show_default=True,
                 help="Record the communication step in time on every rank (the timed steps never are)."),
    click.Option(["--trace"], type=click.Path(dir_okay=False, writable=True), default=None,
                 help="Write the recorded step as Chrome trace-event JSON (open it in ui.perfetto.dev)."),
]

_BUCKET = click.Option(["--bucket-mb"], type=float, default=25.0, show_default=True,
                       help="DDP's bucket_cap_mb: gradients all-reduced per bucket.")
_WRAP = click.Option(["--wrap"], type=click.Choice(["block", "model", "layer"]), default="block", show_default=True,
                     help="FSDP units: each block then the root, the root only, or each attention/MLP layer.")

# One process plays rank 0 of a world of --world ranks on fake tensors (ddpfsdp.demos.train.simulate).
SIMULATE_OPTIONS = [
    click.Option(["--simulate"], is_flag=True, default=False,
                 help="Simulate instead of running: the same strategy code on fake tensors over a fake process "
                      "group, in one process, no GPU. Measures sharding, collectives and allocations, not time."),
    click.Option(["--world"], type=int, default=None,
                 help="With --simulate: the number of ranks to simulate (e.g. 64)."),
    click.Option(["--params"], default=None,
                 help="With --simulate: a named GPT size instead of --model: 1B, 7B, 13B or 70B."),
    click.Option(["--gpu-mem"], default=None,
                 help="With --simulate: memory of one GPU (80GB, 80GiB); ddp and zero1 refuse a replica that "
                      "cannot fit in it."),
]
SIMULATE_ONLY = ("world", "params", "gpu_mem")
MAX_SIMULATED_WORLD = 65536

DDP_OPTIONS = [*_COMMON, _BUCKET, *SIMULATE_OPTIONS]
FSDP_OPTIONS = [
    *_COMMON,
    click.Option(["--sharding"], type=click.Choice(SHARDINGS, case_sensitive=False), default="full", show_default=True,
                 help="full (reshard after forward), grad-op (keep unsharded params until backward ends), "
                      "hybrid (shard within groups, replicate across them). FSDP1 names are accepted."),
    _WRAP,
    click.Option(["--fsdp-api"], type=click.IntRange(1, 2), default=2, show_default=True,
                 help="2: fully_shard (per-parameter DTensor shards); 1: FullyShardedDataParallel (flat parameters)."),
    click.Option(["--replicas"], type=int, default=2, show_default=True,
                 help="hybrid: how many replicas of the sharded model (the world size must divide by it)."),
    click.Option(["--prefetch"], type=click.Choice(PREFETCHES), default="default", show_default=True,
                 help="default: FSDP's own prefetching; forward: also prefetch the next unit in forward; "
                      "off: no backward prefetch (FSDP1 only: FSDP2 has no switch for it)."),
    *SIMULATE_OPTIONS,
]
COMPARE_OPTIONS = [*_COMMON, _BUCKET, _WRAP, *SIMULATE_OPTIONS]


# ----------------------------------------------------------------------------- validation


def _usage(message: str) -> click.UsageError:
    return click.UsageError(message)


def world_of(options: dict[str, Any], world_size: int) -> int:
    """The ranks a run has: --world when simulated, else the processes or GPUs it launches."""
    return (options.get("world") or 0) if options.get("simulate") else world_size


def validate_simulated(demo: str, options: dict[str, Any]) -> None:
    """Refuse, with what to try, what the fake run cannot handle (no torch: the CLI checks first)."""
    from ddpfsdp.demos.theory.state import model_state
    from ddpfsdp.demos.train import presets
    from ddpfsdp.demos.units import format_bytes, parse_bytes

    world = options.get("world")
    if world is None or world < 2:
        raise _usage(f"--simulate needs --world N, the ranks to simulate, at least 2 (e.g. --world 64); got {world}")
    if world > MAX_SIMULATED_WORLD:
        raise _usage(f"--world {world} is beyond what one process simulates (at most {MAX_SIMULATED_WORLD}); "
                     "per-rank figures at that scale follow from `ddpfsdp calc --gpus N`")
    if options.get("trace"):
        raise _usage("--trace records a real step in time; a simulated run computes nothing and takes no time. "
                     "Record one on real ranks instead: ddpfsdp demo fsdp --procs 2 --trace PATH")
    if (options.get("prefetch") or "default") != "default":
        raise _usage(f"--prefetch {options['prefetch']} changes when all-gathers are issued, which only a real "
                     "step's timeline shows; leave it out with --simulate")
    if (options.get("fsdp_api") or 2) != 2:
        raise _usage("--fsdp-api 1 cannot be simulated: FSDP1 flattens parameters into one storage, which fake "
                     "tensors do not have; simulate FSDP2 (--fsdp-api 2, the default)")
    size = options.get("params")
    if size:
        if options.get("model") or (options.get("arch") or "gpt") != "gpt":
            raise _usage("--params picks a GPT shape of that size; leave out --model and --arch, or give --model instead")
        try:
            shape = presets.sized_gpt_shape(size)
        except ValueError:
            raise _usage(f"--params {size}: the simulated sizes are {', '.join(presets.GPT_SIZES)}; for another size "
                         "give --model with --layers, --d-model and --heads") from None
        params = presets.gpt_shape("base", **{**vars(shape), **_overrides(options)}).params
    else:
        params = presets.model_params(options.get("arch") or "gpt", options.get("model") or "tiny",
                                      **_overrides(options))
    if options.get("gpu_mem"):
        try:
            limit = parse_bytes(options["gpu_mem"])
        except ValueError as exc:
            raise _usage(f"--gpu-mem: {exc}") from None
        if demo in ("ddp", "zero1"):
            state = model_state(params, world, demo, options.get("precision") or "fp32",
                                options.get("optimizer") or "adamw")["model_state_bytes"]
            if state > limit:
                more = f" --params {size}" if size else ""
                raise _usage(
                    f"{demo} keeps a full replica of the parameters and gradients on every rank: "
                    f"{format_bytes(state, 'GB')} of model state per rank for {params:,} parameters (theory), "
                    f"above --gpu-mem {format_bytes(limit, 'GB')} before any activation. Shard it instead: "
                    f"ddpfsdp demo fsdp --simulate --world {world}{more}"
                )


def _validate_common(options: dict[str, Any], world_size: int, demo: str = "") -> None:
    from ddpfsdp.demos.train import presets

    if options.get("simulate"):
        validate_simulated(demo, options)
        world_size = options["world"]
    else:
        given = [f"--{name.replace('_', '-')}" for name in SIMULATE_ONLY if options.get(name) is not None]
        if given:
            raise _usage(f"{', '.join(given)} only apply to a simulated run: add --simulate")
    if world_size < 2:
        raise _usage(f"data parallelism needs at least 2 ranks, got {world_size}; run with --procs 2 or --gpus 2")
    batch = options.get("batch_size", 4)
    if batch is None or batch < 1:
        raise _usage(f"--batch-size must be at least 1, got {batch}")
    warmup = options.get("warmup", DEFAULT_WARMUP)
    if warmup is None or warmup < MIN_WARMUP_STEPS:
        raise _usage(f"--warmup must be at least {MIN_WARMUP_STEPS}, got {warmup}: the first steps initialise lazily")
    steps = steps_for(options, "cpu")
    needed = min_steps(warmup)
    if steps is None or steps < needed:
        raise _usage(
            f"--steps must be at least {needed} with --warmup {warmup} ({warmup} warm-up + {MIN_TIMED_STEPS} timed + "
            f"{MEASURED_STEPS} measured: one for communication, one for memory), got {steps}"
        )
    lr = options.get("lr", 1e-3)
    if lr is None or not lr > 0:
        raise _usage(f"--lr must be positive, got {lr}")
    arch = options.get("arch", "gpt")
    overrides = _overrides(options)
    for name, value in overrides.items():
        if value < 1:
            raise _usage(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    model = options.get("model") or presets.default_preset(arch, "cpu")
    try:
        presets.shape_for(arch, model, **overrides)
        if not options.get("model"):
            presets.shape_for(arch, presets.default_preset(arch, "cuda"), **overrides)
    except ValueError as exc:
        raise _usage(f"{exc} (check --arch, --model and the overrides)") from None
    bucket = options.get("bucket_mb")
    if bucket is not None and not bucket > 0:
        raise _usage(f"--bucket-mb must be positive, got {bucket}")
    _validate_trace(options.get("trace"))
    if options.get("trace") and options.get("timeline") is False:
        raise _usage("--trace writes the recorded step, which --no-timeline turns off; drop one of the two")


def _validate_trace(path: str | None) -> None:
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        raise _usage(f"--trace {path}: the folder {folder} does not exist; create it or write the trace elsewhere")
    if not os.access(folder, os.W_OK):
        raise _usage(f"--trace {path}: the folder {folder} is not writable; choose a path you can write to")


def _overrides(options: dict[str, Any]) -> dict[str, int]:
    return {name: options[name] for name in OVERRIDE_NAMES if options.get(name) is not None}


def canonical_sharding(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    aliases = {"full-shard": "full", "shard-grad-op": "grad-op", "hybrid-shard": "hybrid"}
    key = aliases.get(key, key)
    if key not in ("full", "grad-op", "hybrid"):
        raise ValueError(f"unknown sharding {name!r}; choose one of {', '.join(SHARDINGS)}")
    return key


def validate_ddp(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size, "ddp")


def validate_zero1(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size, "zero1")


def validate_fsdp(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size, "fsdp")
    world_size = world_of(options, world_size)
    try:
        sharding = canonical_sharding(options.get("sharding") or "full")
    except ValueError as exc:
        raise _usage(str(exc)) from None
    if options.get("prefetch") == "off" and (options.get("fsdp_api") or 2) == 2:
        raise _usage("--prefetch off needs --fsdp-api 1: FSDP2 always prefetches the next unit in backward "
                     "(torch has no switch for it); try --prefetch forward, or --fsdp-api 1 --prefetch off")
    if sharding == "hybrid":
        replicas = options.get("replicas", 2)
        if replicas is None or replicas < 2 or world_size % replicas or world_size <= replicas:
            raise _usage(
                f"--sharding hybrid with --replicas {replicas} cannot split {world_size} ranks: replicas must be "
                f"at least 2, divide the world size and be smaller than it (e.g. --procs 4 --replicas 2)"
            )


def validate_compare(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size, "compare")


# ----------------------------------------------------------------------------- running


def _spec(ctx: Any, options: dict[str, Any], strategy: str, sharding: str | None = None):
    from ddpfsdp.demos.train.presets import default_preset
    from ddpfsdp.demos.train.spec import RunSpec

    arch = options.get("arch", "gpt")
    return RunSpec(
        strategy=strategy,
        arch=arch,
        model=options.get("model") or default_preset(arch, ctx.device.type),
        overrides=_overrides(options),
        batch_size=options.get("batch_size", 4),
        steps=steps_for(options, ctx.device.type),
        warmup=options.get("warmup", DEFAULT_WARMUP),
        precision=options.get("precision", "fp32"),
        optimizer=options.get("optimizer", "adamw"),
        lr=options.get("lr", 1e-3),
        seed=options.get("seed", 0),
        checkpoint_activations=bool(options.get("checkpoint_activations", False)),
        sharding=sharding,
        wrap=options.get("wrap") or "block",
        fsdp_api=options.get("fsdp_api") or 2,
        replicas=options.get("replicas") or 2,
        bucket_mb=options.get("bucket_mb") or 25.0,
        prefetch=options.get("prefetch") or "default",
        timeline=options.get("timeline", True) is not False,
    )


def theory_of(run: dict[str, Any]) -> dict[str, Any]:
    """The analytic model's figures for a measured run's own configuration."""
    from ddpfsdp.demos.theory.run import theory_for_run

    config = run["config"]
    return theory_for_run(
        strategy=config["strategy"],
        sharding=config["sharding"],
        params=config["params"],
        world_size=config["world_size"],
        precision=config["precision"],
        optimizer=config["optimizer"],
        replicas=config["replicas"] if config["sharding"] == "hybrid" else None,
        unit_params=config["unit_params"] or None,
        bucket_bytes=int(config["bucket_mb"] * 1024**2) if config["strategy"] != "fsdp" else None,
        # DDP broadcasts module buffers (BatchNorm statistics) from rank 0 before every forward
        buffer_bytes=run["memory"]["buffers"] if config["strategy"] != "fsdp" else 0,
    )


def _allowance(run: dict[str, Any], theory: dict[str, Any]) -> dict[str, int]:
    """How far a rank's bytes may honestly sit from theory beyond 1%, from the model's own shapes.

    FSDP: one dim-0 row of every parameter (shard padding, or an uneven split); ZeRO-1: the largest
    parameter (it partitions whole tensors); every optimizer: a scalar step counter per tensor.
    """
    from ddpfsdp.demos.theory.precision import precision_for

    memory, config = run["memory"], run["config"]
    # Optimizer bytes per parameter byte of one whole tensor (ZeRO-1's theory shares are 1/N, the
    # tensor a rank may hold beyond its share is not).
    spec = precision_for(config["precision"])
    state_per_param_byte = spec.optimizer_bytes_per_param(config["optimizer"]) / spec.param_bytes
    counters = 8 * memory["param_tensors"]
    if config["strategy"] == "fsdp":
        rows = memory["shard_row_bytes"]
        return {"params": rows, "grads": rows, "optimizer": int(rows * state_per_param_byte) + counters}
    if config["strategy"] == "zero1":
        largest = memory["largest_param_bytes"]
        return {"params": 0, "grads": 0, "optimizer": int(largest * state_per_param_byte) + counters}
    return {"params": 0, "grads": 0, "optimizer": counters}


def activation_estimate(run: dict[str, Any]) -> int | None:
    """The analytic model's activation bytes for the run's model and micro-batch; None for a ResNet,
    whose activations the analytic model does not estimate."""
    from ddpfsdp.demos.theory.activations import gpt_activation_bytes, transformer_activation_bytes
    from ddpfsdp.demos.train.presets import shape_for

    config = run["config"]
    arch = config.get("arch", "gpt")
    checkpoint = bool(config.get("checkpoint_activations"))
    if arch == "gpt":
        overrides = {k: config[k] for k in OVERRIDE_NAMES if config.get(k) is not None and k != "seq_len"}
        shape = shape_for("gpt", config["model"], **overrides)
        return gpt_activation_bytes(shape, config["batch_size"], config.get("seq_len"), checkpoint,
                                    config["precision"])["activation_bytes"]
    if arch == "vit":
        overrides = {k: config[k] for k in ("layers", "d_model", "heads") if config.get(k) is not None}
        shape = shape_for("vit", config["model"], **overrides)
        # The classifier reads the class token only: one token of `classes` logits per sample.
        return transformer_activation_bytes(
            layers=shape.layers, d_model=shape.d_model, tokens=shape.tokens, batch_size=config["batch_size"],
            head_outputs=shape.classes, head_tokens=1, precision=config["precision"],
            checkpoint_activations=checkpoint,
        )["activation_bytes"]
    return None


def run_checks(run: dict[str, Any], theory: dict[str, Any]) -> list[Any]:
    """The named checks of the `ddp` or `fsdp` demo for one run."""
    from ddpfsdp.demos.train import claims as tc
    from ddpfsdp.demos.train import timeline_claims as tl
    from ddpfsdp.demos.theory.precision import precision_for
    from ddpfsdp.demos.theory.run import theory_for_run

    config, memory, per_op = run["config"], run["memory"], run["comm"]["per_step"]
    timeline = run.get("timeline")
    ranks = memory["ranks"]
    allowance = _allowance(run, theory)
    checks = [
        tc.loss_decreases(run["loss"]),
        tc.model_state_matches_theory(ranks, theory, allowance),
        tc.comm_matches_theory(per_op, theory["comm"]),
        tc.peak_within_bounds(ranks, working_set_bytes=theory["working_set_bytes"],
                              activation_bytes=activation_estimate(run), device=config["device"]),
    ]
    spec = precision_for(config["precision"])
    if config["strategy"] == "ddp":
        held_param_bytes = config["params"] * spec.param_bytes
        checks.append(tc.ddp_replicates_model_state(ranks, held_param_bytes))
        checks.append(tc.ddp_uses_all_reduce(per_op))
        checks.append(tl.ddp_overlaps_allreduce_with_backward(timeline, config["bucket_mb"]))
    elif config["strategy"] == "fsdp":
        sharding = config["sharding"]
        world = config["world_size"]
        shard_size = world // config["replicas"] if sharding == "hybrid" else world
        # What one unsharded replica holds (the analytic model's DDP figures for this model): each
        # rank should measure 1/shard_size of it.
        replica = theory_for_run(strategy="ddp", params=config["params"], world_size=world,
                                 precision=config["precision"], optimizer=config["optimizer"])
        full = {kind: replica[f"{kind}_bytes"] for kind in ("params", "grads", "optimizer")}
        checks.append(tc.fsdp_shards_model_state(ranks, full, shard_size, allowance))
        checks.append(tc.fsdp_reduce_scatters_grads(per_op, config["params"] * spec.reduce_bytes,
                                                    hybrid=sharding == "hybrid"))
        checks.append(tc.fsdp_all_gathers_params(per_op, config["unit_params"] or [config["params"]],
                                                 sharding, spec.gather_bytes))
        checks.append(tl.fsdp_reshards_after_forward(timeline, sharding, config["units"], config["unit_params"]))
        checks.append(tl.fsdp_prefetches_next_unit(timeline, sharding=sharding, prefetch=config["prefetch"],
                                                   fsdp_api=config["fsdp_api"], units=config["units"],
                                                   unit_params=config["unit_params"]))
    checks.append(tl.timeline_records_every_collective(timeline, per_op))
    return checks


def _envelope(ctx: Any, demo: str, config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    from ddpfsdp.demos.measure.memory import environment

    return {"schema": "ddpfsdp.demo/1", "demo": demo, "config": config, "env": environment(ctx), **fields}


def _run_one(ctx: Any, demo: str, strategy: str, sharding: str | None, options: dict[str, Any]) -> dict[str, Any] | None:
    from ddpfsdp.demos.train.loop import train

    spec = _spec(ctx, options, strategy, sharding)
    ctx.log(f"{demo}: {spec.arch} {spec.model}, {ctx.world_size} ranks on {ctx.device.type} ({ctx.backend})")
    run = train(ctx, spec)
    if run is None:
        return None
    theory = theory_of(run)
    _add_exposed(run)
    checks = [c.to_dict() for c in run_checks(run, theory)]
    fields = {k: v for k, v in run.items() if k not in ("config", "label")}
    result = _envelope(ctx, demo, run["config"], **fields, theory=theory, checks=checks)
    _write_trace(ctx, result, options.get("trace"))
    return result


def _add_exposed(run: dict[str, Any]) -> None:
    from ddpfsdp.demos.train import timeline_claims as tl

    if run.get("timeline"):
        run["timeline"]["exposed"] = tl.exposed_comm(run["timeline"])


def _write_trace(ctx: Any, result: dict[str, Any], path: str | None) -> None:
    """Rank 0 writes the trace; a path it cannot write is reported, and the result still returned."""
    if not path:
        return
    from ddpfsdp.demos.measure import trace

    try:
        written = trace.write(result, path)
        ctx.log(f"trace: {written} (open it in ui.perfetto.dev or chrome://tracing)")
    except (OSError, ValueError) as exc:
        ctx.log(f"trace not written: {exc}")


def run_ddp(ctx: Any, **options: Any) -> dict[str, Any] | None:
    return _run_one(ctx, "ddp", "ddp", None, options)


def run_zero1(ctx: Any, **options: Any) -> dict[str, Any] | None:
    return _run_one(ctx, "zero1", "zero1", None, options)


def run_fsdp(ctx: Any, **options: Any) -> dict[str, Any] | None:
    return _run_one(ctx, "fsdp", "fsdp", canonical_sharding(options.get("sharding") or "full"), options)


def run_compare(ctx: Any, **options: Any) -> dict[str, Any] | None:
    from ddpfsdp.demos.train import claims as tc
    from ddpfsdp.demos.train.loop import train

    runs: dict[str, dict[str, Any]] = {}
    steps = steps_for(options, ctx.device.type)
    total = steps * len(COMPARE_RUNS)
    for index, (name, strategy, sharding) in enumerate(COMPARE_RUNS):
        spec = _spec(ctx, options, strategy, sharding)
        ctx.log(f"compare: {name} ({index + 1} of {len(COMPARE_RUNS)})")
        run = train(ctx, spec, label=name, step_offset=index * steps, total_steps=total)
        if run is not None:
            theory = theory_of(run)
            _add_exposed(run)
            run["theory"] = theory
            run["checks"] = [c.to_dict() for c in run_checks(run, theory)]
            runs[name] = run
    if not ctx.is_main:
        return None

    ddp, zero1 = runs["ddp"], runs["zero1"]
    grad_op, full = runs["fsdp-grad-op"], runs["fsdp-full"]
    precision = ddp["config"]["precision"]
    rtol = tc.LOSS_RTOL_FP32 if precision == "fp32" else tc.LOSS_RTOL_LOW_PRECISION
    ddp_rank0 = ddp["memory"]["ranks"][0]
    checks = [
        tc.losses_agree({name: run["loss"] for name, run in runs.items()}, rtol),
        tc.zero1_shards_optimizer(zero1["memory"]["ranks"], ddp["memory"]["ranks"],
                                  _allowance(zero1, zero1["theory"])["optimizer"]),
        tc.fsdp_shards_model_state(full["memory"]["ranks"], {k: ddp_rank0[k] for k in tc.STATE_KINDS},
                                   ctx.world_size, _allowance(full, full["theory"]),
                                   name="fsdp_full_shards_everything"),
        tc.grad_op_holds_more_params_at_peak(grad_op["memory"]["ranks"], full["memory"]["ranks"]),
        tc.fsdp_wire_1_5x_ddp(full["comm"]["per_step"], ddp["comm"]["per_step"]),
    ]
    config = {k: v for k, v in ddp["config"].items()
              if k not in ("strategy", "sharding", "description", "units", "unit_params")}
    config["strategies"] = [name for name, _, _ in COMPARE_RUNS]
    result = _envelope(ctx, "compare", config, runs=runs, checks=[c.to_dict() for c in checks],
                       wall_s=sum(run["wall_s"] for run in runs.values()))
    _write_trace(ctx, result, options.get("trace"))
    return result
