"""`ddpfsdp demo cp`: context parallelism on real ranks, ring attention over the "cp" dimension beside FSDP.

    ddpfsdp demo cp                                   # 4 CPU ranks: dp 2 x cp 2, the tiny GPT
    ddpfsdp demo cp --procs 2                         # cp 2 alone (FSDP over the same two ranks)
    ddpfsdp demo cp --procs 4 --cp 4 --cp-split contiguous

A cp run is a RunSpec like every training run's (`spec`: its cp and cp_split among the fields), its
degrees the run's `ParallelDims` (dp_shard x cp), its model made parallel by the one `parallelize()`
(every block's attention swapped for the ring of `parallel.context_parallel`, then FSDP over dp x cp),
and it trains in the loop every training demo trains in (`train.loop`), which feeds each rank its
tokens of its data-parallel group's sequences. What is its own:

  1. probe      on every rank, before training: one step's gradients of the parallel model against one
                process's on the same global batch (are the cp ranks' partial gradients reduced?);
                then the ring alone on a fixed fp32 input, with the head-tail and the contiguous split,
                against one process's attention, counting the query-key pairs each rank's kernels score
  2. training   the loop: the first block's saved activations measured in the warm-up, the collectives
                and the ring's sends counted and recorded in time in the communication step
  3. rank 0     one process's losses on the same global batches, the first block's saved activations
                for the whole sequence on one process, the analytic model's figures
                (`theory.context_parallel`), and the checks (`claims.context_parallel`)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.measure.trace import write_logged
from ddpfsdp.demos.train.spec import RunSpec

if TYPE_CHECKING:
    from ddpfsdp.demos.claims.context_parallel import RankSends, SplitProbe
    from ddpfsdp.demos.parallel.context_parallel import CallRecord, RingFigures
    from ddpfsdp.demos.result.schema import DemoResult, JsonObject


class Probe(TypedDict):
    """What one rank's probe measured, gathered to rank 0."""

    grad_error: float  # largest relative difference of one step's gradients from one process's
    splits: dict[str, SplitProbe]  # per split: the fixed input's errors and the pairs scored


class ContextRun(TypedDict):
    """The result's `context_parallel` block: the run's cp figures per rank, and theory's beside them."""

    cp: int
    dp: int
    split: str
    layers: int
    chunk_tokens: dict[str, int]  # per split: the tokens of one chunk
    chunks: list[list[int]]  # per rank: the chunks it held in training
    sends: list[RankSends]  # per rank, per layer and step
    wire_sent: list[float]  # per rank: the ring's send bytes the counter saw in the recorded step
    pairs: dict[str, list[int]]  # per split, per rank: query-key pairs scored in one forward
    attention_errors: dict[str, list[float]]  # per split, per rank: the fixed input's largest error
    grad_errors: list[float]  # per rank
    block_saved: list[int | None]  # per rank: the first block's saved activations
    block_saved_whole: int  # the same block on one process, the whole sequence


def _precision_rtol(precision: str) -> float:
    from ddpfsdp.demos.claims.training import LOSS_RTOL_FP32, LOSS_RTOL_LOW_PRECISION

    return LOSS_RTOL_FP32 if precision == "fp32" else LOSS_RTOL_LOW_PRECISION


# ----------------------------------------------------------------------------- 1. the probe


def _global_batch(spec: RunSpec, dp: int) -> tuple[Any, Any]:
    """The first step's global batch: what every data-parallel group reads, side by side."""
    from ddpfsdp.demos.train.loop import SAMPLES_PER_RANK_STEPS
    from ddpfsdp.demos.train.reference import loader_batches

    return next(iter(loader_batches(spec, dp, 1, SAMPLES_PER_RANK_STEPS)))


def _gradient_error(ctx: Any, spec: RunSpec) -> tuple[float, Any]:
    """One forward and backward of the parallel model on this rank's tokens, against one process's on the
    whole global batch: the largest relative difference of any tensor's gradient (|g - g1| / |g1|, whole
    tensors). Also the ring group."""
    import gc

    from ddpfsdp.demos.parallel.parallelize import World, parallelize
    from ddpfsdp.demos.train.data import compute_loss
    from ddpfsdp.demos.train.models import build_model

    model = build_model("gpt", spec.model, seed=spec.seed, **spec.overrides)
    whole = build_model("gpt", spec.model, seed=spec.seed, **spec.overrides).to(ctx.device)
    prepared = parallelize(model, spec, World(ctx.world_size), ctx.device)
    plan = prepared.context
    tokens, targets = _global_batch(spec, plan.dp)
    mine = slice(plan.dp_rank * spec.batch_size, (plan.dp_rank + 1) * spec.batch_size)
    compute_loss("gpt", prepared.model, plan.local_batch((tokens[mine], targets[mine]))).backward()
    compute_loss("gpt", whole, (tokens, targets)).backward()
    wanted = dict(whole.named_parameters())
    worst = 0.0
    for name, param in prepared.model.named_parameters():
        grad = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad
        expected = wanted[name].grad
        worst = max(worst, float((grad.float() - expected).norm() / expected.norm().clamp_min(1e-30)))
    group = plan.ring.group
    del prepared, model, whole, plan
    gc.collect()
    return worst, group


def _split_probe(ctx: Any, spec: RunSpec, shape: Any, group: Any) -> dict[str, SplitProbe]:
    """The ring on a fixed fp32 input (batch, heads, S, head_dim) with each split, against one process's
    causal attention on the whole input: its largest errors, and the pairs its kernels scored."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from ddpfsdp.demos.claims.context_parallel import AttentionErrors, SplitProbe
    from ddpfsdp.demos.parallel.context_parallel import SPLITS, Ring, SequenceLayout, ring_attention

    generator = torch.Generator().manual_seed(spec.seed + 1)
    size = (spec.batch_size, shape.heads, shape.seq_len, shape.d_model // shape.heads)
    q, k, v, dout = (torch.randn(size, generator=generator).to(ctx.device) for _ in range(4))
    whole = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*whole, is_causal=True)
    expected.backward(dout)
    cp, cp_rank = dist.get_world_size(group), dist.get_rank(group)
    probes: dict[str, SplitProbe] = {}
    for split in SPLITS:
        layout = SequenceLayout(cp, cp_rank, shape.seq_len, balanced=split == "head-tail")
        ring = Ring(group, layout)
        mine = [layout.take(t, 2).requires_grad_() for t in (q, k, v)]
        out = ring_attention(*mine, ring)
        out.backward(layout.take(dout, 2))

        def error(got: Any, want: Any, layout: SequenceLayout = layout) -> float:
            return float((got - layout.take(want, 2)).abs().max())

        errors = AttentionErrors(out=error(out.detach(), expected.detach()),
                                 dq=error(mine[0].grad, whole[0].grad), dk=error(mine[1].grad, whole[1].grad),
                                 dv=error(mine[2].grad, whole[2].grad))
        probes[split] = SplitProbe(errors=errors, forward_pairs=ring.ledger[0]["pairs"],
                                   backward_pairs=ring.ledger[1]["pairs"])
    return probes


def _probe(ctx: Any, spec: RunSpec) -> Probe:
    from ddpfsdp.demos.base.shapes import shape_for

    ctx.log("cp: probing one step's gradients and the ring on a fixed input against one process")
    grad_error, group = _gradient_error(ctx, spec)
    return Probe(grad_error=grad_error, splits=_split_probe(ctx, spec, shape_for("gpt", spec.model, **spec.overrides),
                                                             group))


# ----------------------------------------------------------------------------- 3. rank 0


def whole_sequence_block_saved(spec: RunSpec, shape: Any, device: Any) -> int:
    """What one GPT block saves for backward on one process for the run's batch of whole sequences, in the
    dtype the run computes in and checkpointed as the run's blocks are (`measure.saved`)."""
    import torch

    from ddpfsdp.demos.measure.saved import SavedActivations
    from ddpfsdp.demos.train.models import TransformerBlock

    dtype = torch.float32 if spec.precision == "fp32" else torch.bfloat16
    block = TransformerBlock(shape.d_model, shape.heads, causal=True, device=device).to(dtype)
    block.checkpoint_activations = spec.checkpoint_activations  # as the run's blocks: only the input kept
    x = torch.randn(spec.batch_size, shape.seq_len, shape.d_model, device=device, dtype=dtype, requires_grad=True)
    with SavedActivations(block) as saved:
        block(x)
    return saved.bytes


def per_layer_sends(calls: list[CallRecord], layers: int) -> RankSends:
    """One rank's sends per attention layer and training step, from every call its ring made: each step
    is `layers` backward calls (and `layers` forward calls, twice that with the forward recomputed)."""
    from ddpfsdp.demos.claims.context_parallel import RankSends

    forward = [c for c in calls if c["phase"] == "forward"]
    backward = [c for c in calls if c["phase"] == "backward"]
    per = max(1, len(backward))  # one backward call per layer per step

    def mean(records: list[CallRecord], key: str) -> float:
        return sum(c[key] for c in records) / per

    sends = RankSends(forward_kv_blocks=mean(forward, "kv_sends"), backward_kv_blocks=mean(backward, "kv_sends"),
                      backward_dkv_blocks=mean(backward, "dkv_sends"), forward_bytes=mean(forward, "kv_bytes"),
                      backward_bytes=mean(backward, "kv_bytes") + mean(backward, "dkv_bytes"), bytes=0.0)
    sends["bytes"] = sends["forward_bytes"] + sends["backward_bytes"]
    return sends


def ring_theory(spec: RunSpec, shape: Any, world_size: int) -> JsonObject:
    """The analytic model's context-parallel figures for the run (all theory)."""
    from ddpfsdp.demos.theory.context_parallel import context_parallel_figures

    return context_parallel_figures(shape, spec.cp, gpus=world_size, batch_size=spec.batch_size,
                                    precision=spec.precision, checkpoint_activations=spec.checkpoint_activations)


def run_theory(result: DemoResult, spec: RunSpec, shape: Any, context: ContextRun) -> JsonObject:
    """The analytic model's figures for the run: FSDP's over dp x cp (`train.demo.theory_of`), with the ring's
    sends and recvs per step beside its collectives, and the context-parallel section."""
    from ddpfsdp.demos.theory.comm import total_wire_bytes
    from ddpfsdp.demos.theory.context_parallel import ring_step_comm
    from ddpfsdp.demos.train.demo import theory_of

    theory = theory_of(result)
    ring = ring_theory(spec, shape, result.config.world_size or spec.cp)
    theory["comm"] = {**theory["comm"], **ring_step_comm(context["layers"], ring["ring_per_layer"])}
    theory["wire_bytes_per_rank"] = total_wire_bytes(theory["comm"])
    theory["context_parallel"] = ring
    return theory


def judge(result: DemoResult, spec: RunSpec, context: ContextRun, reference: list[float],
          probes: list[Probe]) -> list[Any]:
    """The cp run's checks: the data-parallel wrap's own (FSDP over dp x cp), then the ring's."""
    from ddpfsdp.demos.claims import context_parallel as cc
    from ddpfsdp.demos.claims import timeline as tl
    from ddpfsdp.demos.claims import training as tc
    from ddpfsdp.demos.result.schema import STATE_KINDS
    from ddpfsdp.demos.theory.run import theory_for_run
    from ddpfsdp.demos.train.demo import allowance

    config, theory = result.config, result.theory or {}
    ranks = result.memory.ranks if result.memory else []
    per_step = result.comm.per_step if result.comm else {}
    padding = allowance(result)
    whole = theory_for_run(strategy="ddp", params=config.params, world_size=config.world_size,
                           precision=config.precision, optimizer=config.optimizer)
    full = {kind: whole[f"{kind}_bytes"] for kind in STATE_KINDS}
    ring = theory["context_parallel"]
    rtol = _precision_rtol(spec.precision)
    loss = result.loss or []
    checks = [
        tc.loss_decreases(loss),
        tc.model_state_matches_theory(ranks, theory, padding),
        tc.fsdp_shards_model_state(ranks, full, config.world_size, padding),
        tc.comm_matches_theory(per_step, theory.get("comm", {})),
        cc.ring_matches_full_attention({split: [p["splits"][split] for p in probes] for split in context["pairs"]},
                                       loss, reference, rtol),
        cc.ring_kv_sends_match_theory(context["sends"], {**ring["ring_per_layer"], "layers": context["layers"],
                                                         "cp": context["cp"]}, context["wire_sent"]),
        cc.cp_activations_fall_as_1_over_cp(context["block_saved"], context["block_saved_whole"], context["cp"]),
        cc.contiguous_split_busiest_rank_matches_theory(context["pairs"]["contiguous"], context["cp"],
                                                        context["chunk_tokens"]["contiguous"]),
        cc.head_tail_split_evens_compute(context["pairs"]["head-tail"], context["cp"],
                                         context["chunk_tokens"]["head-tail"]),
        cc.cp_gradients_reduced_across_cp(context["grad_errors"], (result.comm.extra.get("group_sizes") or {}).get(
            "reduce_scatter", []) if result.comm else [], context["dp"], context["cp"], cc.grad_rtol(spec.precision)),
    ]
    timeline = result.timeline
    if timeline is not None and timeline.ranks:
        checks.append(tl.timeline_records_every_collective(timeline, per_step))
    return checks


def context_block(result: DemoResult, spec: RunSpec, shape: Any, probes: list[Probe], whole_saved: int) -> ContextRun:
    """The run's cp figures per rank, from the loop's ring records and the probes, beside theory's."""
    from ddpfsdp.demos.parallel.context_parallel import SPLITS, SequenceLayout

    rings: list[RingFigures] = result.extra.get("ring") or []
    world = result.config.world_size or len(rings)
    ranks = result.memory.ranks if result.memory else []
    return ContextRun(
        cp=spec.cp, dp=world // spec.cp, split=spec.cp_split, layers=shape.layers,
        chunk_tokens={split: SequenceLayout(spec.cp, 0, shape.seq_len, split == "head-tail").chunk_tokens
                      for split in SPLITS},
        chunks=[ring["chunks"] for ring in rings],
        sends=[per_layer_sends(ring["calls"], shape.layers) for ring in rings],
        wire_sent=[float((ring["counted"].get("send") or {}).get("bytes", 0)) for ring in rings],
        # one cp group's ranks are enough: every group splits the same way
        pairs={split: [p["splits"][split]["forward_pairs"] for p in probes[:spec.cp]] for split in SPLITS},
        attention_errors={split: [max(p["splits"][split]["errors"].values()) for p in probes] for split in SPLITS},
        grad_errors=[p["grad_error"] for p in probes],
        block_saved=[r.block_saved for r in ranks],
        block_saved_whole=whole_saved,
    )


# ----------------------------------------------------------------------------- a simulated run


def simulated_block_saved(spec: RunSpec, shape: Any, world_size: int) -> tuple[int, int]:
    """On fake tensors over the fake process group (`train.simulate`): what one block saves for backward
    on rank 0 at S/cp tokens, its attention the ring over rank 0's cp group, and what it saves for the
    whole sequence on one process. A fake block's forward saves what a real one saves, and nothing is
    allocated."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ddpfsdp.demos.parallel.context_parallel import Ring, SequenceLayout
    from ddpfsdp.demos.parallel.degrees import ParallelDims

    dims = ParallelDims.of(spec, world_size)
    mesh = dims.build_mesh("cpu")
    layout = SequenceLayout(dims.cp, mesh.get_local_rank("cp"), shape.seq_len, spec.cp_split != "contiguous")
    dtype = torch.float32 if spec.precision == "fp32" else torch.bfloat16
    saved_bytes = []
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # the block made in its dtype: a fake module cannot be cast after
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            for tokens, ring in ((layout.tokens, Ring(mesh.get_group("cp"), layout)), (shape.seq_len, None)):
                saved_bytes.append(_fake_block_saved(spec, shape, tokens, ring, dtype))
    finally:
        torch.set_default_dtype(before)
    return saved_bytes[0], saved_bytes[1]


def _fake_block_saved(spec: RunSpec, shape: Any, tokens: int, ring: Any, dtype: Any) -> int:
    import torch

    from ddpfsdp.demos.measure.saved import SavedActivations
    from ddpfsdp.demos.parallel.context_parallel import RingSelfAttention, swap_class
    from ddpfsdp.demos.train.models import TransformerBlock

    block = TransformerBlock(shape.d_model, shape.heads, causal=True, device="cpu")
    block.checkpoint_activations = spec.checkpoint_activations
    if ring is not None:
        swap_class(block.attn, RingSelfAttention, ring=ring)
    x = torch.empty(spec.batch_size, tokens, shape.d_model, dtype=dtype, requires_grad=True)
    with SavedActivations(block) as saved:
        block(x)
    return saved.bytes


def judge_simulated(run: DemoResult, spec: RunSpec, log: Any = None) -> DemoResult:
    """A simulated cp run (rank 0 of the fake world) against the analytic model: its model state and wire
    bytes (the ring's sends among them), FSDP's shards over dp x cp, what its ring sent per layer, and
    what one block saves at S/cp tokens against the whole sequence, all on fake tensors."""
    from ddpfsdp.demos.claims import context_parallel as cc
    from ddpfsdp.demos.claims import simulated as sc
    from ddpfsdp.demos.claims import training as tc
    from ddpfsdp.demos.result.schema import STATE_KINDS
    from ddpfsdp.demos.theory.run import theory_for_run
    from ddpfsdp.demos.train.demo import allowance

    config = run.config
    world = config.world_size or spec.cp
    shape = spec.simulated_model()[3]
    if log is not None:
        log(f"cp: one block on fake tensors at {shape.seq_len // spec.cp} and at {shape.seq_len} tokens")
    block_saved, whole_saved = simulated_block_saved(spec, shape, world)
    rings: list[RingFigures] = run.extra.pop("ring", None) or []
    context = ContextRun(
        cp=spec.cp, dp=world // spec.cp, split=spec.cp_split, layers=shape.layers,
        chunk_tokens={}, chunks=[ring["chunks"] for ring in rings],
        sends=[per_layer_sends(ring["calls"], shape.layers) for ring in rings],
        wire_sent=[float((ring["counted"].get("send") or {}).get("bytes", 0)) for ring in rings],
        pairs={}, attention_errors={}, grad_errors=[], block_saved=[block_saved], block_saved_whole=whole_saved)
    theory = run.theory = run_theory(run, spec, shape, context)
    memory, per_op = run.memory, run.comm.per_step
    rank0 = memory.ranks[0]
    run.versus_theory = sc.versus_theory(rank0, per_op, theory)
    padding = allowance(run)
    whole = theory_for_run(strategy="ddp", params=config.params, world_size=world, precision=config.precision,
                           optimizer=config.optimizer)
    run.checks = [
        sc.simulated_model_state_matches_calc(rank0, theory, padding),
        sc.simulated_wire_matches_calc(per_op, theory["comm"], _padding_wire_bytes(run, theory)),
        tc.fsdp_shards_model_state([rank0], {kind: whole[f"{kind}_bytes"] for kind in STATE_KINDS}, world, padding),
        cc.ring_kv_sends_match_theory(context["sends"], {**theory["context_parallel"]["ring_per_layer"],
                                                         "layers": shape.layers, "cp": spec.cp}, context["wire_sent"]),
        cc.cp_activations_fall_as_1_over_cp(context["block_saved"], whole_saved, spec.cp),
    ]
    run.extra["context_parallel"] = context
    return run


def _padding_wire_bytes(run: DemoResult, theory: JsonObject) -> int:
    """What FSDP sends for padding each parameter's dim 0 to its shard group, which the analytic model
    leaves out: its gathered and reduce-scattered bytes grow by the padded share of the model."""
    padded = run.memory.fsdp_padding_elements if run.memory else 0
    if not padded:
        return 0
    sharded = sum(theory["comm"][op]["wire_bytes_per_rank"] for op in ("all_gather", "reduce_scatter")
                  if op in theory["comm"])
    return round(sharded * padded / run.config.params)


# ----------------------------------------------------------------------------- the demo


def run(ctx: Any, spec: RunSpec) -> DemoResult | None:
    """The demo on this rank: the probe, then training through the loop; rank 0 assembles the result."""
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.train.demo import measured_fields
    from ddpfsdp.demos.train.loop import SAMPLES_PER_RANK_STEPS, train
    from ddpfsdp.demos.train.reference import reference_losses

    ctx.log(f"cp: gpt {spec.model}, {ctx.world_size} ranks on {ctx.device.type} ({ctx.backend}), cp {spec.cp}, "
            f"{spec.cp_split} split")
    probe = _probe(ctx, spec)
    measured = train(ctx, spec)
    probes: list[Probe] | None = ctx.gather(probe)
    if not ctx.is_main or measured is None or probes is None:
        return None
    from ddpfsdp.demos.result.schema import as_result

    result = as_result(measured)
    if result.timeline is not None and result.timeline.ranks:
        from ddpfsdp.demos.claims import timeline as tl

        result.timeline.exposed = tl.exposed_comm(result.timeline)
    shape = shape_for("gpt", spec.model, **spec.overrides)
    dp = ctx.world_size // spec.cp
    ctx.log("cp: the one-process reference on the same global batches")
    reference = reference_losses(spec, dp, len(result.loss or []), SAMPLES_PER_RANK_STEPS, ctx.device)
    whole_saved = whole_sequence_block_saved(spec, shape, ctx.device)
    context = context_block(result, spec, shape, probes, whole_saved)
    result.theory = run_theory(result, spec, shape, context)
    result.extra.pop("ring", None)  # every call of every rank: summed into `context_parallel`
    checks = judge(result, spec, context, reference, probes)
    out = ctx.result("cp", result.config, checks, **measured_fields(result), context_parallel=context,
                     reference_loss=reference)
    write_logged(ctx.log, out, spec.trace)
    return out
