"""The `ddp`, `fsdp` and `compare` demos: real training, measured, beside the analytic model.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ddpfsdp.demos.worker fsdp --model tiny
    ddpfsdp demo compare --procs 2 --model tiny

Options are click parameters (DDP_OPTIONS, FSDP_OPTIONS, COMPARE_OPTIONS) so the CLI, the worker
and the launch guard parse them the same way; `validate_*` rejects bad combinations before any
process starts. Only click is imported at module level: the CLI builds its commands from here
without paying for torch.
"""

from __future__ import annotations

from typing import Any

import click

from ddpfsdp.demos.train.spec import MEASURED_STEPS

ARCHS = ("gpt", "vit", "resnet")
SHARDINGS = ("full", "grad-op", "hybrid", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
PRECISIONS = ("fp32", "bf16-mixed", "bf16")
OPTIMIZERS = ("adamw", "sgd")
COMPARE_RUNS = (("ddp", "ddp", None), ("zero1", "zero1", None), ("fsdp-grad-op", "fsdp", "grad-op"),
                ("fsdp-full", "fsdp", "full"))
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
]

_BUCKET = click.Option(["--bucket-mb"], type=float, default=25.0, show_default=True,
                       help="DDP's bucket_cap_mb: gradients all-reduced per bucket.")
_WRAP = click.Option(["--wrap"], type=click.Choice(["block", "model", "layer"]), default="block", show_default=True,
                     help="FSDP units: each block then the root, the root only, or each attention/MLP layer.")

DDP_OPTIONS = [*_COMMON, _BUCKET]
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
]
COMPARE_OPTIONS = [*_COMMON, _BUCKET, _WRAP]


# ----------------------------------------------------------------------------- validation


def _usage(message: str) -> click.UsageError:
    return click.UsageError(message)


def _validate_common(options: dict[str, Any], world_size: int) -> None:
    from ddpfsdp.demos.train import presets

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
    _validate_common(options, world_size)


def validate_fsdp(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size)
    try:
        sharding = canonical_sharding(options.get("sharding") or "full")
    except ValueError as exc:
        raise _usage(str(exc)) from None
    if sharding == "hybrid":
        replicas = options.get("replicas", 2)
        if replicas is None or replicas < 2 or world_size % replicas or world_size <= replicas:
            raise _usage(
                f"--sharding hybrid with --replicas {replicas} cannot split {world_size} ranks: replicas must be "
                f"at least 2, divide the world size and be smaller than it (e.g. --procs 4 --replicas 2)"
            )


def validate_compare(options: dict[str, Any], world_size: int) -> None:
    _validate_common(options, world_size)


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
    )


def theory_of(run: dict[str, Any]) -> dict[str, Any]:
    """The analytic model's figures for a measured run's own configuration."""
    from ddpfsdp.demos.theory.calc import theory_for_run

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
    memory, config = run["memory"], run["config"]
    state_per_param_byte = theory["optimizer_bytes"] / max(theory["params_bytes"], 1)
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
    from ddpfsdp.demos.theory.calc import gpt_activation_bytes, transformer_activation_bytes
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
    from ddpfsdp.demos.theory.calc import precision_for, theory_for_run

    config, memory, per_op = run["config"], run["memory"], run["comm"]["per_step"]
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
    checks = [c.to_dict() for c in run_checks(run, theory)]
    fields = {k: v for k, v in run.items() if k not in ("config", "label")}
    return _envelope(ctx, demo, run["config"], **fields, theory=theory, checks=checks)


def run_ddp(ctx: Any, **options: Any) -> dict[str, Any] | None:
    return _run_one(ctx, "ddp", "ddp", None, options)


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
    return _envelope(ctx, "compare", config, runs=runs, checks=[c.to_dict() for c in checks],
                     wall_s=sum(run["wall_s"] for run in runs.values()))
