"""`demo moe`: a mixture of experts in every GPT block, its experts spread over expert-parallel ranks.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ddpfsdp.demos.worker moe
    ddpfsdp demo moe --procs 4 --ep 2 --experts 4 --top-k 2 --capacity-factor 1.0

Every rank builds the same seeded MoE GPT (`train.moe_layer`) and the one `parallelize` makes it parallel:
each rank keeps E/ep whole experts of every layer and dispatches over its ep group by all-to-all
(`parallel.expert_parallel`); FSDP shards the rest over every rank. Each step every rank reads its own
slice of the step's global batch (`train.pipeline.global_batches`) and routes its own tokens.
  the first step   its output (logits) and every gradient, before the optimizer steps, gathered to rank 0
  then             plain steps
  the last step    recorded: its timeline (spans, every collective, the all-to-alls among them), every
                   layer's routing on every rank (loads, kept slots, the splits sent and received, the rows
                   its experts computed, the mean router probabilities, the aux loss), when each rank's
                   experts finished and its combine returned, every all-to-all's bytes, and after it the
                   bytes each rank holds
Every step's expert choices are kept. Rank 0 then runs the reference: the same MoE on one process, every
expert local, the global batch in one capacity group per rank, the same choices replayed and the same
optimizer; and judges the run (`claims.expert_parallel`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.result.expert_record import ExpertRank, ExpertReference, GradientDiff, LayerRouting
from ddpfsdp.demos.measure.trace import write_logged
from ddpfsdp.demos.train.spec import RunSpec

if TYPE_CHECKING:
    import torch

    from ddpfsdp.demos.measure.comm import PerOp
    from ddpfsdp.demos.result.schema import DemoResult
    from ddpfsdp.demos.result.step_record import RankStep

COUNT_BYTES = 8  # the counts all-to-all carries int64 counts

# Tensors by parameter name (CPU copies): a step's gradients.
Grads = dict[str, "torch.Tensor"]


class RankMoE(TypedDict):
    """What one rank hands rank 0 (by gather_object)."""

    losses: list[float]
    logits: torch.Tensor  # the first step's output on this rank's batch (on the CPU)
    expert_grads: Grads  # the first step's gradient of each expert parameter it holds
    choices: list[list[torch.Tensor]]  # per layer, per step: the [T, k] experts its router chose (on the CPU)
    expert: ExpertRank
    stamps: list[tuple[int, int]]  # per layer of the recorded step: (experts done, combine done), ns
    comm: PerOp
    group_sizes: dict[str, list[int]]
    timeline: RankStep | None
    state: dict[str, int]  # params, grads, optimizer: bytes held after the recorded step's update


@dataclass
class DenseFacts:
    """What rank 0 keeps of the dense part for itself: the first step's gradients as FSDP gathered them,
    and the part's size, read from its (sharded) parameters."""

    grads: Grads
    params: int
    row_bytes: int  # one dim-0 row of each dense parameter: how far a rank's FSDP shard may sit from 1/N


@dataclass
class FirstStep:
    """A step's output and gradients before its update, as the comparison with one process reads them."""

    logits: torch.Tensor
    grads: Grads


@dataclass
class _Rank:
    """The run on this rank: the parallel model, its optimizer and its batches."""

    ctx: Any
    spec: RunSpec
    prepared: Any
    model: Any
    batches: list[tuple[Any, Any]]

    def step(self, batch: tuple[Any, Any], recorder: Any = None, keep: list[FirstStep] | None = None,
             after_update: Any = None) -> float:
        """One training step; with `keep`, its output and gradients before the update are appended to it;
        `after_update` runs between the optimizer's step and the gradients' release."""
        import torch.nn.functional as F

        tokens, targets = (t.to(self.ctx.device) for t in batch)
        if recorder is not None:
            recorder.begin("forward", "forward")
        logits = self.prepared.model(tokens)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
        if recorder is not None:
            recorder.end("forward", "forward")
            recorder.before_backward(loss)
        loss.backward()
        self.prepared.experts.finish_backward()
        if keep is not None:
            keep.append(FirstStep(logits.detach().cpu(), _gradients(self.prepared.model)))
        self.prepared.optimizer.step()
        if after_update is not None:
            after_update()
        self.prepared.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def _gradients(model: Any) -> Grads:
    """Every parameter's gradient on the CPU: an FSDP shard gathered whole (a collective every rank joins,
    in the same order), an expert's as this rank holds it."""
    grads = {}
    for name, param in model.named_parameters():
        grad = param.grad
        grads[name] = (grad.full_tensor() if hasattr(grad, "full_tensor") else grad).detach().cpu()
    return grads


def _build(ctx: Any, spec: RunSpec) -> _Rank:
    import torch

    from ddpfsdp.demos.parallel.parallelize import World, parallelize
    from ddpfsdp.demos.train.moe_layer import build_moe_gpt
    from ddpfsdp.demos.train.pipeline import global_batches

    torch.manual_seed(spec.seed)
    model = build_moe_gpt(spec.model, seed=spec.seed, experts=spec.experts, top_k=spec.top_k,
                          capacity_factor=spec.capacity_factor)
    prepared = parallelize(model, spec, World(ctx.world_size), ctx.device)
    mine = slice(ctx.rank * spec.batch_size, (ctx.rank + 1) * spec.batch_size)
    batches = [(tokens[mine], targets[mine]) for tokens, targets in
               global_batches(model.shape, batch_size=spec.batch_size * ctx.world_size, steps=spec.steps,
                              seed=spec.seed)]
    return _Rank(ctx, spec, prepared, model, batches)


def _train(ctx: Any, spec: RunSpec) -> tuple[RankMoE, DenseFacts | None]:
    """Train `--steps` steps on this rank; what rank 0 needs of it (and rank 0's own facts of the dense part)."""
    from ddpfsdp.demos.measure.memory import model_state_bytes
    from ddpfsdp.demos.measure.timeline import TimelineRecorder
    from ddpfsdp.demos.parallel.strategies import timeline_units
    from ddpfsdp.demos.train.models import shard_row_bytes
    from ddpfsdp.demos.train.moe_layer import moe_layers

    run = _build(ctx, spec)
    layers = moe_layers(run.model)
    for layer in layers:
        layer.choices_log = []
    total = spec.steps
    kept: list[FirstStep] = []
    losses = [run.step(run.batches[0], keep=kept)]
    first = kept[0]
    ctx.step(0, total, phase="compared", loss=losses[0])
    for index in range(1, total - 1):
        losses.append(run.step(run.batches[index]))
        ctx.step(index, total, phase="train", loss=losses[-1])
    run.prepared.experts.record(True)
    recorder = TimelineRecorder(ctx.device, run.prepared.model, timeline_units(run.model, run.prepared),
                                run.prepared.optimizer)
    state: dict[str, int] = {}
    with recorder:
        losses.append(run.step(run.batches[-1], recorder=recorder, after_update=lambda: state.update(
            model_state_bytes(run.prepared.model, run.prepared.optimizer))))
    ctx.step(total - 1, total, phase="recorded", loss=losses[-1])
    timeline = recorder.to_dict(ctx.rank)
    traces = [layer.trace[-1] for layer in layers]
    all_to_alls = [c.bytes for c in recorder.collectives if c.op == "all_to_all"]
    comm, group_sizes = recorder.per_op(), recorder.group_sizes()
    recorder.release()
    run.prepared.experts.record(False)
    experts = run.prepared.experts
    expert_params = experts.params()
    dense_bytes = sum(_local_bytes(p) for p in run.prepared.model.parameters() if p not in expert_params)
    expert_bytes = sum(_local_bytes(p) for p in expert_params)
    held = experts.ep_rank * experts.experts_per_rank
    stamp_keys = ("experts_done_ns", "combine_done_ns")  # when, not what was routed
    routing = [LayerRouting(**{k: v for k, v in trace.items() if k not in stamp_keys}) for trace in traces]
    expert_names = {name for name, p in run.prepared.model.named_parameters() if p in expert_params}
    dense = [p for p in run.prepared.model.parameters() if p not in expert_params]
    facts = DenseFacts(grads={name: grad for name, grad in first.grads.items() if name not in expert_names},
                       params=sum(p.numel() for p in dense), row_bytes=shard_row_bytes(dense))
    return RankMoE(
        losses=losses, logits=first.logits,
        expert_grads={name: grad for name, grad in first.grads.items() if name in expert_names},
        choices=[layer.choices_log for layer in layers],
        expert=ExpertRank(rank=ctx.rank, ep_group=experts.ep_group, ep_rank=experts.ep_rank,
                          experts=list(range(held, held + experts.experts_per_rank)),
                          expert_param_bytes=expert_bytes, dense_param_bytes=dense_bytes,
                          all_to_all_bytes=all_to_alls, layers=routing),
        stamps=[(trace["experts_done_ns"], trace["combine_done_ns"]) for trace in traces],
        comm=comm, group_sizes=group_sizes, timeline=timeline, state=state,
    ), (facts if ctx.is_main else None)


def _local_bytes(param: Any) -> int:
    local = param.to_local() if hasattr(param, "to_local") else param
    return local.numel() * local.element_size()


# ----------------------------------------------------------------------------- the reference


def _reference(spec: RunSpec, world: int, gathered: list[RankMoE], dense: DenseFacts,
               device: Any) -> ExpertReference:
    """The same MoE on one process: every expert here, one capacity group per rank's batch, the run's expert
    choices replayed, the same optimizer; its losses, and the first step's output and gradients against the
    run's."""
    import torch
    import torch.nn.functional as F

    from ddpfsdp.demos.parallel.strategies import build_optimizer, optimizer_impl
    from ddpfsdp.demos.train.moe_layer import build_moe_gpt, moe_layers
    from ddpfsdp.demos.train.pipeline import global_batches

    torch.manual_seed(spec.seed)
    model = build_moe_gpt(spec.model, seed=spec.seed, experts=spec.experts, top_k=spec.top_k,
                          capacity_factor=spec.capacity_factor, groups=world).to(device)
    optimizer = build_optimizer(spec, model, optimizer_impl(spec, device))
    layers = moe_layers(model)
    for index, layer in enumerate(layers):
        for step in range(spec.steps):
            layer.forced.append(torch.cat([g["choices"][index][step] for g in gathered]))
    batches = global_batches(model.shape, batch_size=spec.batch_size * world, steps=spec.steps, seed=spec.seed)
    losses: list[float] = []
    agree = slots = 0
    first: FirstStep | None = None
    for step, (tokens, targets) in enumerate(batches):
        for layer in layers:
            layer.choices_log = []
        logits = model(tokens.to(device))
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.to(device).reshape(-1))
        loss.backward()
        if step == 0:
            first = FirstStep(logits.detach().cpu(), {name: p.grad.detach().cpu() for name, p in model.named_parameters()})
            agree, slots = _own_choices(model, tokens.to(device), layers)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    assert first is not None, "the run trains at least two steps"
    run_logits = torch.cat([g["logits"] for g in gathered])
    return ExpertReference(
        losses=losses, logits_max_diff=float((run_logits - first.logits).abs().max()),
        logits_max_abs=float(first.logits.abs().max()),
        grads=_gradient_diffs(gathered, dense.grads, first.grads),
        own_choices_agree=agree, slots=slots)


def _own_choices(model: Any, tokens: Any, layers: list[Any]) -> tuple[int, int]:
    """Of the first step's routed slots, how many the reference's own router (no replay) chooses as the run
    did: it runs the same forward again unforced, on the weights before the update."""
    import torch

    forced = [layer.forced for layer in layers]
    replayed = [layer.choices_log[-1] for layer in layers]
    for layer in layers:
        layer.forced = type(layer.forced)()
        layer.choices_log = []
    with torch.no_grad():
        model(tokens)
    own = [layer.choices_log[-1] for layer in layers]
    for layer, queue in zip(layers, forced):
        layer.forced = queue
    agree = sum(int((a.sort(1).values == b.sort(1).values).sum()) for a, b in zip(own, replayed))
    return agree, sum(a.numel() for a in replayed)


def _gradient_diffs(gathered: list[RankMoE], dense: Grads, reference: Grads) -> list[GradientDiff]:
    """Each parameter's first-step gradient, the run's against the reference's: the dense ones as FSDP
    gathered them, the experts' put together from the ranks of the first ep group (every group holds them)."""
    import torch

    out = []
    for name, ref in reference.items():
        if name in gathered[0]["expert_grads"]:
            held = sorted((g["expert"]["experts"][0], g["expert_grads"][name]) for g in gathered
                          if g["expert"]["ep_group"] == 0)
            grad = torch.cat([part for _, part in held])
        else:
            grad = dense[name]
        out.append(GradientDiff(name=name, max_diff=float((grad - ref).abs().max()), max_abs=float(ref.abs().max())))
    return out


# ----------------------------------------------------------------------------- the result


def run(ctx: Any, spec: RunSpec) -> DemoResult | None:
    """The demo on this rank: train and record; rank 0 runs the reference and assembles the result."""
    started = time.perf_counter()
    ctx.log(f"moe: {spec.model}, {spec.experts} experts top-{spec.top_k} over {ctx.world_size} ranks "
            f"({ctx.device.type}, {ctx.backend})")
    mine, dense = _train(ctx, spec)
    gathered: list[RankMoE] | None = ctx.gather(mine)
    if not ctx.is_main:
        return None
    ctx.log("moe: the one-process reference on the same batches and expert choices")
    reference = _reference(spec, ctx.world_size, gathered, dense, ctx.device)
    result = _assemble(ctx, spec, gathered, dense, reference, time.perf_counter() - started)
    write_logged(ctx.log, result, spec.trace)
    return result


def _ranks_with_times(gathered: list[RankMoE]) -> list[ExpertRank]:
    """Each rank's record, its stamps as seconds from the earliest stamp of any rank (one host clock)."""
    origin = min(ns for g in gathered for pair in g["stamps"] for ns in pair)
    ranks = []
    for g in gathered:
        layers = [LayerRouting(**routing, experts_done_s=(done - origin) / 1e9, combine_done_s=(back - origin) / 1e9)
                  for routing, (done, back) in zip(g["expert"]["layers"], g["stamps"])]
        ranks.append(ExpertRank(**{**g["expert"], "layers": layers}))
    return ranks


def _assemble(ctx: Any, spec: RunSpec, gathered: list[RankMoE], dense: DenseFacts, reference: ExpertReference,
              wall_s: float) -> DemoResult:
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.claims import expert_parallel as claims
    from ddpfsdp.demos.claims import timeline as tl
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.result.schema import GLOO_CAVEAT, Comm, ExpertRun, Memory, RankMemory, Timeline
    from ddpfsdp.demos.theory.expert_parallel import expert_parallel_figures, expert_params
    from ddpfsdp.demos.theory.precision import precision_for

    shape = shape_for("gpt", spec.model)
    ep = ParallelDims.of(spec, ctx.world_size).ep
    per_expert = expert_params(shape.d_model)
    moe = ExpertRun(experts=spec.experts, top_k=spec.top_k, capacity_factor=spec.capacity_factor, ep=ep,
                    layers=shape.layers, d_model=shape.d_model,
                    element_bytes=precision_for(spec.precision).compute_bytes, count_bytes=COUNT_BYTES,
                    expert_params=per_expert, dense_params=dense.params, shard_row_bytes=dense.row_bytes,
                    ranks=_ranks_with_times(gathered), reference=reference)
    losses = [sum(step) / len(step) for step in zip(*(g["losses"] for g in gathered))]
    timeline = Timeline(step=spec.steps - 1, units=None, ranks=[g["timeline"] for g in gathered])
    comm = Comm.from_json({"per_step": gathered[0]["comm"], "group_sizes": gathered[0]["group_sizes"]})
    checks = [*claims.run_checks(moe, losses), tl.timeline_records_every_collective(timeline, comm.per_step)]
    config = {"strategy": "fsdp", "arch": "gpt", "model": spec.model,
              "params": dense.params + shape.layers * spec.experts * per_expert, "precision": spec.precision,
              "optimizer": spec.optimizer, "batch_size": spec.batch_size, "seq_len": shape.seq_len,
              "steps": spec.steps, "sharding": "full", "wrap": "block", "ep": ep, "experts": spec.experts,
              "top_k": spec.top_k, "capacity_factor": spec.capacity_factor, "seed": spec.seed,
              "description": _description(ctx.world_size, ep)}
    theory = expert_parallel_figures(shape, ep, spec.experts, spec.top_k, spec.capacity_factor,
                                     gpus=ctx.world_size, batch_size=spec.batch_size, precision=spec.precision,
                                     optimizer=spec.optimizer)
    memory = Memory(ranks=[RankMemory.from_json(g["state"]) for g in gathered])
    notes = [GLOO_CAVEAT] if ctx.device.type == "cpu" else []
    return ctx.result("moe", config, checks, moe=moe, memory=memory, comm=comm, timeline=timeline, loss=losses,
                      theory=theory, wall_s=wall_s, notes=notes)


def _description(world: int, ep: int) -> str:
    replicas = f", each set of experts on {world // ep} ep groups" if world > ep else ""
    return (f"MoE GPT: experts over ep {ep}{replicas}, whole on their ranks; the dense part FSDP2 full over "
            f"{world} ranks")

