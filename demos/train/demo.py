"""The `ddp`, `fsdp` and `compare` demos: real training, measured, beside the analytic model.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ddpfsdp.demos.worker fsdp --model tiny
    ddpfsdp demo compare --procs 2 --model tiny

Each demo is called with its run's RunSpec (`train.spec`), read once by the CLI or the worker and
checked by `train.options`. torch is imported inside the functions, never at module level.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddpfsdp.demos.result.schema import STATE_KINDS, Config, DemoResult, JsonObject, as_result
from ddpfsdp.demos.measure.trace import write_logged
from ddpfsdp.demos.train.spec import COMPARE_RUNS, OVERRIDE_NAMES, RunSpec

# A trained run's result as the loop or the simulation hands it over, typed or in its JSON form.
Trained = DemoResult | Mapping[str, Any]


def _shape(config: Config, arch: str = "gpt") -> Any:
    """The model's shape as the run built it: its preset with the overrides it ran with."""
    from ddpfsdp.demos.base.shapes import GPT_SIZES, shape_for

    # The overrides are the spec's own names, read from the config's JSON form by those names.
    given = {k: v for k, v in config.to_json().items() if v is not None}
    if str(config.model).upper() in GPT_SIZES:  # a simulated named size: its whole shape is in the config
        return shape_for("gpt", "base", **{k: given[k] for k in (*OVERRIDE_NAMES, "vocab") if k in given})
    # The config's seq_len is the one the model ran with (a ViT's tokens, which it cannot set).
    names = OVERRIDE_NAMES if arch == "gpt" else tuple(n for n in OVERRIDE_NAMES if n != "seq_len")
    return shape_for(arch, config.model, **{k: given[k] for k in names if k in given})


def theory_of(result: Trained) -> JsonObject:
    """The analytic model's figures for a measured run's own configuration."""
    from ddpfsdp.demos.theory.run import theory_for_run

    result = as_result(result)
    config = result.config
    if config.tp:
        from ddpfsdp.demos.theory.tensor_parallel import two_d_run_theory

        return two_d_run_theory(shape=_shape(config), world_size=config.world_size, tp=config.tp,
                                precision=config.precision, optimizer=config.optimizer,
                                batch_size=config.batch_size,
                                sequence_parallel=bool(config.sequence_parallel))
    return theory_for_run(
        strategy=config.strategy,
        sharding=config.sharding,
        params=config.params,
        world_size=config.world_size,
        precision=config.precision,
        optimizer=config.optimizer,
        replicas=config.replicas if config.sharding == "hybrid" else None,
        unit_params=config.unit_params or None,
        bucket_bytes=int(config.bucket_mb * 1024**2) if config.strategy != "fsdp" else None,
        # DDP broadcasts module buffers (BatchNorm statistics) from rank 0 before every forward
        buffer_bytes=_memory(result).buffers if config.strategy != "fsdp" else 0,
    )


def _memory(result: DemoResult) -> Any:
    if result.memory is None:
        raise ValueError(f"the {result.demo or 'training'} result carries no memory block: it is not a training run")
    return result.memory


def allowance(result: Trained) -> dict[str, int]:
    """How far a rank's bytes may honestly sit from theory beyond 1%, from the model's own shapes.

    FSDP: one dim-0 row of every parameter (shard padding, or an uneven split); zro: the largest
    parameter (it partitions whole tensors); every optimizer: a scalar step counter per tensor.
    """
    from ddpfsdp.demos.theory.precision import precision_for

    result = as_result(result)
    memory, config = _memory(result), result.config
    # Optimizer bytes per parameter byte of one whole tensor (zro's theory shares are 1/N, the
    # tensor a rank may hold beyond its share is not).
    spec = precision_for(config.precision)
    state_per_param_byte = spec.optimizer_bytes_per_param(config.optimizer) / spec.param_bytes
    counters = 8 * memory.param_tensors
    if config.strategy == "fsdp":
        rows = memory.shard_row_bytes
        return {"params": rows, "grads": rows, "optimizer": int(rows * state_per_param_byte) + counters}
    if config.strategy == "zro":
        largest = memory.largest_param_bytes
        return {"params": 0, "grads": 0, "optimizer": int(largest * state_per_param_byte) + counters}
    return {"params": 0, "grads": 0, "optimizer": counters}


def activation_estimate(result: Trained) -> int | None:
    """The analytic model's activation bytes for the run's model and micro-batch; None for a ResNet,
    whose activations the analytic model does not estimate."""
    from ddpfsdp.demos.theory.activations import model_activation_bytes

    config = as_result(result).config
    arch = config.arch or "gpt"
    if arch not in ("gpt", "vit"):
        return None
    return model_activation_bytes(arch, _shape(config, arch), config.batch_size,
                                  bool(config.checkpoint_activations), config.precision)


def run_checks(result: Trained, theory: Mapping[str, Any]) -> list[Any]:
    """The named checks of the `ddp` or `fsdp` demo for one run."""
    from ddpfsdp.demos.claims import training as tc

    result = as_result(result)
    ranks = _memory(result).ranks
    padding = allowance(result)
    return [
        tc.loss_decreases(result.loss or []),
        *theory_checks(result, theory, padding),
        tc.peak_within_bounds(ranks, working_set_bytes=theory["working_set_bytes"],
                              activation_bytes=activation_estimate(result), device=result.config.device),
        *strategy_checks(result, padding),
        *_compile_checks(result),
        *_timeline_checks(result),
    ]


def theory_checks(result: DemoResult, theory: Mapping[str, Any], padding: Mapping[str, int]) -> list[Any]:
    """Every rank's model state and the step's traffic against the analytic model (real and simulated runs)."""
    from ddpfsdp.demos.claims import training as tc

    return [tc.model_state_matches_theory(_memory(result).ranks, theory, padding),
            tc.comm_matches_theory(result.comm.per_step, theory["comm"])]


def strategy_checks(result: DemoResult, padding: Mapping[str, int]) -> list[Any]:
    """What the strategy claims, for a real and a simulated run alike: DDP replicates the model state and
    all-reduces; FSDP shards it, reduce-scatters the gradients and all-gathers each unit."""
    from ddpfsdp.demos.claims import training as tc
    from ddpfsdp.demos.theory.precision import precision_for
    from ddpfsdp.demos.theory.run import theory_for_run

    config, ranks, per_op = result.config, _memory(result).ranks, result.comm.per_step
    checks = []
    spec = precision_for(config.precision)
    if config.strategy == "ddp":
        held_param_bytes = config.params * spec.param_bytes
        checks.append(tc.ddp_replicates_model_state(ranks, held_param_bytes))
        checks.append(tc.ddp_uses_all_reduce(per_op))
    elif config.strategy == "fsdp":
        sharding = config.sharding
        world = config.world_size
        shard_size = world // config.replicas if sharding == "hybrid" else world
        # What one unsharded replica holds (the analytic model's DDP figures for this model): each
        # rank should measure 1/shard_size of it.
        replica = theory_for_run(strategy="ddp", params=config.params, world_size=world,
                                 precision=config.precision, optimizer=config.optimizer)
        full = {kind: replica[f"{kind}_bytes"] for kind in STATE_KINDS}
        checks.append(tc.fsdp_shards_model_state(ranks, full, shard_size, padding))
        checks.append(tc.fsdp_reduce_scatters_grads(per_op, config.params * spec.reduce_bytes,
                                                    hybrid=sharding == "hybrid"))
        checks.append(tc.fsdp_all_gathers_params(per_op, config.unit_params or [config.params],
                                                 sharding, spec.gather_bytes))
    return checks


def _compile_checks(result: DemoResult) -> list[Any]:
    """A --compile run's claims, from what torch recorded: compiled before the timed steps; DDP's graph
    cut into pieces at its buckets; FSDP2's blocks compiled without a graph break."""
    compiled = result.extra.get("compile")
    if not compiled:
        return []
    from ddpfsdp.demos.parallel import compiled as cc

    config = result.config
    checks = [cc.compiled_before_timed_steps({config.strategy: compiled})]
    if compiled.get("ddp_buckets") is not None:
        checks.append(cc.ddp_compiled_graph_split_at_buckets(compiled["graph_params"], compiled["ddp_buckets"],
                                                             compiled["param_bytes"]))
    if config.strategy == "fsdp":
        shape = _shape(config, config.arch or "gpt")
        blocks = shape.layers if hasattr(shape, "layers") else len(shape.block_shapes())  # a ResNet's blocks
        checks.append(cc.fsdp_blocks_compiled_without_graph_breaks(compiled, blocks))
    return checks


def _compare_compile_checks(results: Mapping[str, DemoResult]) -> list[Any]:
    """A compiled compare's claims at the top: every run compiled in its warm-up, DDP's pieces at its
    buckets, FSDP's blocks compiled one by one without a graph break."""
    if not all(result.extra.get("compile") for result in results.values()):
        return []
    from ddpfsdp.demos.parallel import compiled as cc

    lifted = {check.name: check for name in ("ddp", "fsdp-full") for check in results[name].checks
              if check.name in ("ddp_compiled_graph_split_at_buckets", "fsdp_blocks_compiled_without_graph_breaks")}
    overall = cc.compiled_before_timed_steps({name: result.extra["compile"] for name, result in results.items()})
    return [overall, *lifted.values()]


def _timeline_checks(result: DemoResult) -> list[Any]:
    """The claims only the recorded step can show; none with --no-timeline, which records no step."""
    from ddpfsdp.demos.claims import timeline as tl

    config, timeline = result.config, result.timeline
    if timeline is None or not timeline.ranks:
        return []
    checks = []
    if config.strategy == "ddp":
        checks.append(tl.ddp_overlaps_allreduce_with_backward(timeline, config.bucket_mb))
    elif config.strategy == "fsdp":
        sharding, units, unit_params = config.sharding, config.units, config.unit_params
        checks.append(tl.fsdp_reshards_after_forward(timeline, sharding, units, unit_params))
        checks.append(tl.fsdp_prefetches_next_unit(timeline, sharding=sharding, prefetch=config.prefetch,
                                                   fsdp_api=config.fsdp_api, units=units, unit_params=unit_params))
    return [*checks, tl.timeline_records_every_collective(timeline, result.comm.per_step)]


def two_d_run_checks(result: Trained, theory: Mapping[str, Any], reference: list[float]) -> list[Any]:
    """The named checks of a 2-D run (`demo fsdp --tp N`): model state, TP and DP traffic per group,
    TP per block in the timeline and on its critical path, a block's activations, the loss."""
    from ddpfsdp.demos.claims import training as tc
    from ddpfsdp.demos.claims import timeline as tl
    from ddpfsdp.demos.claims import two_d as td

    result = as_result(result)
    comm, ranks, timeline = result.comm, _memory(result).ranks, result.timeline
    per_group = comm.per_group or {}
    rtol = tc.LOSS_RTOL_FP32 if result.config.precision == "fp32" else tc.LOSS_RTOL_LOW_PRECISION
    loss = result.loss or []
    checks = [
        tc.loss_decreases(loss),
        td.loss_matches_reference(loss, reference, rtol),
        td.two_d_shards_model_state(ranks, theory),
        td.tp_comm_matches_theory(per_group.get("tp", {}), theory),
        td.dp_comm_matches_theory(per_group.get("dp", {}), theory),
        td.tp_activations_match_theory(ranks[0].block_saved, theory),
    ]
    if timeline is not None and timeline.ranks:  # with --no-timeline, the claims only a timeline can show are not judged
        tp_groups = [groups["tp"] for groups in comm.groups or []]
        checks += [td.tp_collectives_per_block(timeline.ranks, tp_groups, theory),
                   td.tp_collectives_on_critical_path(timeline.ranks, tp_groups, theory),
                   tl.timeline_records_every_collective(timeline, comm.per_step)]
    return checks


def _run_one(ctx: Any, demo: str, spec: RunSpec) -> DemoResult | None:
    from ddpfsdp.demos.train.loop import train

    ctx.log(f"{demo}: {spec.arch} {spec.model}, {ctx.world_size} ranks on {ctx.device.type} ({ctx.backend})")
    measured = train(ctx, spec)
    if measured is None:
        return None
    judged = _judged(measured)
    if spec.tp:
        from ddpfsdp.demos.train.loop import SAMPLES_PER_RANK_STEPS
        from ddpfsdp.demos.train.reference import reference_losses

        ctx.log("fsdp: the 1-process reference on the same global batches")
        reference = reference_losses(spec, ctx.world_size // spec.tp, len(judged.loss or []), SAMPLES_PER_RANK_STEPS,
                                     ctx.device)
        judged.checks = two_d_run_checks(judged, judged.theory, reference)
    result = ctx.result(demo, judged.config, judged.checks, **measured_fields(judged))
    write_logged(ctx.log, result, spec.trace)
    return result


def measured_fields(judged: DemoResult) -> dict[str, object]:
    """A judged run's own blocks, typed, in the order the run reported them, and the analytic model's
    figures: what the result carries beside its envelope."""
    skip = {"config", "label", "theory", "checks", "schema", "demo", "env"}
    return {**{key: judged.value(key) for key in judged.keys() if key not in skip}, "theory": judged.theory}


def _judged(measured: Mapping[str, Any]) -> DemoResult:
    """A trained run's result with the analytic model's figures, its exposed communication and its own checks
    (a 2-D run's checks need the reference losses: its caller judges it)."""
    from ddpfsdp.demos.claims import timeline as tl

    result = as_result(measured)
    result.theory = theory_of(result)
    if result.timeline is not None and result.timeline.ranks:
        result.timeline.exposed = tl.exposed_comm(result.timeline)
    if not result.config.tp:
        result.checks = run_checks(result, result.theory)
    return result



def run_ddp(ctx: Any, spec: RunSpec) -> DemoResult | None:
    return _run_one(ctx, "ddp", spec)


def run_zro(ctx: Any, spec: RunSpec) -> DemoResult | None:
    return _run_one(ctx, "zro", spec)


def run_fsdp(ctx: Any, spec: RunSpec) -> DemoResult | None:
    return _run_one(ctx, "fsdp", spec)


def compare_checks(results: Mapping[str, DemoResult], world: int) -> list[Any]:
    """What compare shows across its runs, real or simulated: FSDP full shards everything DDP holds,
    grad-op holds more parameters at its peak, and (where it holds) FSDP sends 1.5x DDP's bytes."""
    from ddpfsdp.demos.claims import training as tc

    ddp, grad_op, full = results["ddp"], results["fsdp-grad-op"], results["fsdp-full"]
    ddp_rank0 = _memory(ddp).ranks[0]
    checks = [
        tc.fsdp_shards_model_state(_memory(full).ranks, {k: ddp_rank0.state(k) for k in STATE_KINDS},
                                   world, allowance(full), name="fsdp_full_shards_everything"),
        tc.grad_op_holds_more_params_at_peak(_memory(grad_op).ranks, _memory(full).ranks),
    ]
    if tc.wire_ratio_holds(ddp.config.precision):
        checks.append(tc.fsdp_wire_1_5x_ddp(full.comm.per_step, ddp.comm.per_step))
    return checks


def compare_config(ddp: DemoResult, per_run: tuple[str, ...]) -> Config:
    """compare's config: its DDP run's, less what differs between its runs, naming the runs."""
    shared = {k: v for k, v in ddp.config.to_json().items() if k not in per_run}
    return Config.from_json({**shared, "strategies": [name for name, _, _ in COMPARE_RUNS]})


def run_compare(ctx: Any, spec: RunSpec) -> DemoResult | None:
    from ddpfsdp.demos.train.loop import train

    results: dict[str, DemoResult] = {}
    steps = spec.steps
    total = steps * len(COMPARE_RUNS)
    for index, ((name, _, _), one) in enumerate(zip(COMPARE_RUNS, spec.runs("compare"))):
        ctx.log(f"compare: {name} ({index + 1} of {len(COMPARE_RUNS)})")
        measured = train(ctx, one, label=name, step_offset=index * steps, total_steps=total)
        if measured is not None:
            results[name] = _judged(measured)
    if not ctx.is_main:
        return None
    from ddpfsdp.demos.claims import training as tc

    ddp, zro = results["ddp"], results["zro"]
    precision = ddp.config.precision
    rtol = tc.LOSS_RTOL_FP32 if precision == "fp32" else tc.LOSS_RTOL_LOW_PRECISION
    checks = [
        tc.losses_agree({name: result.loss or [] for name, result in results.items()}, rtol),
        tc.zro_shards_optimizer(_memory(zro).ranks, _memory(ddp).ranks, allowance(zro)["optimizer"]),
        *compare_checks(results, ctx.world_size),
    ]
    if tc.activations_comparable(precision):
        checks.append(tc.fsdp_leaves_activations_whole(_memory(ddp).ranks, _memory(results["fsdp-full"]).ranks))
    config = compare_config(ddp, ("strategy", "sharding", "description", "units", "unit_params"))
    result = ctx.result("compare", config, [*checks, *_compare_compile_checks(results)], runs=results,
                        wall_s=sum(result.wall_s or 0 for result in results.values()))
    write_logged(ctx.log, result, spec.trace)
    return result
