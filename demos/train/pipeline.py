"""Pipeline parallelism on real ranks: the project's GPT cut into stages, one torch schedule per run.

    ddpfsdp demo pipeline --procs 4 --schedule 1f1b --microbatches 8
    ddpfsdp demo pipeline --procs 2 --compare

Every rank builds the same seeded GPT and keeps only its own stages' layers (the analytic model's
`stage_layers`: rank r holds stages r, r + pp, ...; the embeddings go with stage 0, the final
LayerNorm, the LM head and the loss with the last stage), each wrapped in a `PipelineStage` of
torch.distributed.pipelining and driven by one of its schedules. Each step's batch is split into M
micro-batches; the schedule averages their gradients (scale_grads), so a step equals one process's
step on the whole batch. The first step warms up (torch infers the shapes between stages there);
the last is recorded (`measure.pipeline_timeline`), and the figures and checks come from it
(`claims.pipeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.measure.pipeline_timeline import PlacedStep, RankPlace, RawStep, record
from ddpfsdp.demos.train import pipeline_options as options
from ddpfsdp.demos.train.pipeline_options import Asked

if TYPE_CHECKING:
    from ddpfsdp.demos.result.checks import CheckDocument
    from ddpfsdp.demos.measure.comm import PerOp
    from ddpfsdp.demos.measure.pipeline_timeline import StepRecorder
    from ddpfsdp.demos.result.schema import DemoResult
    from ddpfsdp.demos.base.shapes import GPTShape
    from ddpfsdp.demos.theory.pipeline import Pipeline
    from ddpfsdp.demos.claims.pipeline import ScheduleRun, StageTimeline


def _stage_module(net: Any, blocks: list[int], first: bool, last: bool, compute: Any, wire: Any) -> Any:
    """The stage's module. It computes on `compute` and hands what it sends to `wire`: the same device
    but for ranks sharing a GPU over gloo, whose sends and receives take host memory only, so the
    activations and gradients between stages cross through the CPU there (autograd carries the
    gradients back across the copy)."""
    import torch.nn as nn

    class Stage(nn.Module):
        """A run of consecutive blocks, with the embeddings in front on the first stage and the
        head after them on the last."""

        def __init__(self) -> None:
            super().__init__()
            self.embeddings = net.embeddings if first else None
            self.blocks = nn.ModuleList(net.blocks[i] for i in blocks)
            self.head = net.head if last else None

        def forward(self, x: Any) -> Any:
            x = x.to(compute)
            if self.embeddings is not None:
                x = self.embeddings(x)
            for block in self.blocks:
                x = block(x)
            return self.head(x) if self.head is not None else x.to(wire)

    return Stage()


def wire_device(ctx: Any) -> Any:
    """Where the stages' sends and receives live: the rank's device, but host memory for gloo, whose
    point-to-point ops on CUDA tensors read device pointers as host ones."""
    import torch

    return torch.device("cpu") if ctx.backend == "gloo" else ctx.device


def _lm_loss(logits: Any, targets: Any) -> Any:
    import torch.nn.functional as F

    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def stage_blocks(layers: int, pp: int, v: int) -> dict[int, list[int]]:
    """The block indices of each stage index, from the analytic model's split (larger stages first)."""
    from ddpfsdp.demos.theory.pipeline import stage_layers

    sizes = stage_layers(layers, pp, v)
    by_stage = {rank + k * pp: sizes[rank][k] for rank in range(pp) for k in range(v)}
    out, start = {}, 0
    for index in range(pp * v):
        out[index] = list(range(start, start + by_stage[index]))
        start += by_stage[index]
    return out


def global_batches(shape: Any, *, batch_size: int, steps: int, seed: int) -> list[tuple[Any, Any]]:
    """`steps` whole batches of token ids and targets: what every rank and the reference read."""
    from torch.utils.data import default_collate

    from ddpfsdp.demos.train.data import make_dataset

    dataset = make_dataset("gpt", shape, seed=seed, num_samples=batch_size * steps)
    return [default_collate([dataset[i] for i in range(k * batch_size, (k + 1) * batch_size)]) for k in range(steps)]


@dataclass(frozen=True)
class Placement:
    """Where this rank sits: its pipeline rank and group, and with dp > 1 its replica and the dp sub-mesh
    FSDP shards each stage over."""

    pp: int
    pp_rank: int
    dp: int
    dp_rank: int
    group: Any = None  # the pipeline's process group; None: the whole world
    dp_mesh: Any = None  # the (dp, pp) mesh's dp sub-mesh (a DeviceMesh); None without --dp

    def where(self) -> RankPlace:
        return RankPlace(pp_rank=self.pp_rank, dp_rank=self.dp_rank, dp=self.dp)


def _placement(ctx: Any, dp: int) -> Placement:
    """This rank's place; with dp > 1 on the 2-D mesh (dp, pp)."""
    if dp == 1:
        return Placement(pp=ctx.world_size, pp_rank=ctx.rank, dp=1, dp_rank=0)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(ctx.device.type, (dp, ctx.world_size // dp), mesh_dim_names=("dp", "pp"))
    return Placement(pp=mesh["pp"].size(), pp_rank=mesh["pp"].get_local_rank(), dp=dp,
                     dp_rank=mesh["dp"].get_local_rank(), group=mesh["pp"].get_group(), dp_mesh=mesh["dp"])


class _Run:
    """One schedule on this rank: its stages, schedule and optimizer, stepped and recorded."""

    def __init__(self, ctx: Any, model: str, schedule: str, microbatches: int, v: int, seed: int,
                 place: Placement) -> None:
        import torch
        from torch.distributed import pipelining
        from torch.distributed.pipelining.schedules import PipelineScheduleSingle

        from ddpfsdp.demos.theory.pipeline import TORCH_SCHEDULES
        from ddpfsdp.demos.train.models import build_model

        self.ctx, self.schedule_name, self.v, self.place = ctx, schedule, v, place
        self.pp, self.stages_total = place.pp, place.pp * v
        net = build_model("gpt", model, seed=seed)
        self.shape = net.shape
        blocks = stage_blocks(len(net.blocks), self.pp, v)
        self.indices = [place.pp_rank + k * self.pp for k in range(v)]
        self.stages = []
        self.wire = wire_device(ctx)
        for index in self.indices:
            module = _stage_module(net, blocks[index], index == 0, index == self.stages_total - 1, ctx.device,
                                   self.wire).to(ctx.device)
            if place.dp_mesh is not None:
                from torch.distributed.fsdp import fully_shard

                # torchtitan's choice under PP: keep the stage gathered after forward, or every micro-batch
                # would all-gather it again
                fully_shard(module, mesh=place.dp_mesh, reshard_after_forward=False)
            # the stage's device is where its receive buffers are made; its module stays on the rank's
            self.stages.append(pipelining.PipelineStage(module, index, self.stages_total, self.wire,
                                                        group=place.group))
        self.recorder = None
        cls = getattr(pipelining, TORCH_SCHEDULES[schedule])
        held = self.stages[0] if issubclass(cls, PipelineScheduleSingle) else self.stages
        self.schedule = cls(held, microbatches, loss_fn=self._loss)
        params = [p for stage in self.stages for p in stage.submod.parameters()]
        self.optimizer = torch.optim.AdamW(params, lr=LR)

    @property
    def holds_first(self) -> bool:
        return 0 in self.indices

    @property
    def holds_last(self) -> bool:
        return self.stages_total - 1 in self.indices

    def _loss(self, logits: Any, targets: Any) -> Any:
        if self.recorder is None:
            return _lm_loss(logits, targets)
        return self.recorder.loss(self.stages_total - 1, lambda: _lm_loss(logits, targets))

    def step(self, batch: tuple[Any, Any], recorder: Any = None) -> float | None:
        """One step; with a recorder, the schedule's part of it is recorded (not the optimizer's)."""
        import contextlib

        tokens, targets = (t.to(self.ctx.device) for t in batch)
        losses: list[Any] = []
        args = (tokens,) if self.holds_first else ()
        self.recorder = recorder
        try:
            with recorder if recorder is not None else contextlib.nullcontext():
                self.schedule.step(*args, target=targets if self.holds_last else None, losses=losses)
        finally:
            self.recorder = None
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(sum(float(x) for x in losses) / len(losses)) if losses else None

    def recorded_step(self, batch: tuple[Any, Any]) -> tuple[float | None, Any]:
        import torch.distributed as dist

        from ddpfsdp.demos.measure.pipeline_timeline import StepRecorder

        recorder = StepRecorder(self.stages, self.ctx.device)
        dist.barrier()  # every rank starts the recorded step together: the fill is part of it
        return self.step(batch, recorder), recorder


@dataclass
class Trained:
    """One schedule trained on this rank: its losses (the last stage's; None elsewhere), the recorded step,
    the pipeline and model it ran, its place and its collectives of the step before the recorded one."""

    losses: list[float | None]
    recorder: StepRecorder
    pipeline: Pipeline
    shape: GPTShape
    place: RankPlace
    comm: dict[str, PerOp]  # per group: "pp", and "dp" with --dp


class Gathered(TypedDict):
    """What each rank hands rank 0 of one schedule (by gather_object)."""

    losses: list[float | None]
    raw: RawStep
    place: RankPlace
    comm: dict[str, PerOp]


@dataclass
class ScheduleMeasured:
    """One schedule's run as rank 0 assembles it: the figures beside theory, and the recorded step."""

    run: ScheduleRun
    timeline: StageTimeline


class ScheduleConfig(TypedDict):
    schedule: str


class ScheduleResult(TypedDict):
    """One schedule in the result (`runs[name]`)."""

    config: ScheduleConfig
    timeline: StageTimeline
    loss: list[float | None]
    pipeline: ScheduleRun
    checks: list[CheckDocument]


class PipelineConfig(TypedDict):
    """The result's config, beside where the run happened (world size, device, backend)."""

    model: str
    params: int
    layers: int
    precision: str
    schedules: list[str]
    microbatches: int
    batch_size: int
    steps: int
    seed: int
    compare: bool


def _train(ctx: Any, model: str, schedule: str, asked: Asked) -> Trained:
    """Train `--steps` steps with one schedule; the last is recorded, the one before it has its
    collectives counted per process group (a dispatch mode, kept off the recorded step's clock).
    This rank's losses, record and counts."""
    import torch

    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.theory.pipeline import check_pipeline

    place = _placement(ctx, int(asked.get("dp") or 1))
    pipeline = check_pipeline(place.pp, asked["microbatches"], schedule, options.stages_per_rank(asked, schedule))
    torch.manual_seed(asked["seed"])
    run = _Run(ctx, model, schedule, pipeline.microbatches, pipeline.stages_per_rank, asked["seed"], place)
    size = options.batch_size(asked)
    mine = slice(place.dp_rank * size, (place.dp_rank + 1) * size)  # this replica's share
    batches = [(tokens[mine], targets[mine]) for tokens, targets in
               global_batches(run.shape, batch_size=options.global_batch(asked), steps=asked["steps"],
                              seed=asked["seed"])]
    losses: list[float | None] = [run.step(batch) for batch in batches[:-2]]
    with CommCounter() as counter:
        losses.append(run.step(batches[-2]))
    loss, recorder = run.recorded_step(batches[-1])
    groups = {"pp": _group_name(place.group),
              "dp": _group_name(place.dp_mesh.get_group()) if place.dp_mesh is not None else None}
    comm = {dim: counter.per_group().get(name, {}) for dim, name in groups.items() if name}
    return Trained(losses=[*losses, loss], recorder=recorder, pipeline=pipeline, shape=run.shape,
                   place=place.where(), comm=comm)


def _group_name(group: Any) -> str:
    import torch.distributed as dist

    return str((group or dist.group.WORLD).group_name)


LR = 1e-3


def reference_losses(model: str, asked: Asked, device: Any) -> list[float]:
    """One process, the whole model, the same batches and optimizer: the loss of each step."""
    import torch

    from ddpfsdp.demos.train.models import build_model

    torch.manual_seed(asked["seed"])
    net = build_model("gpt", model, seed=asked["seed"]).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=LR)
    out = []
    for tokens, targets in global_batches(net.shape, batch_size=options.global_batch(asked), steps=asked["steps"],
                                          seed=asked["seed"]):
        loss = _lm_loss(net(tokens.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        out.append(float(loss))
    return out


def _one_schedule(ctx: Any, model: str, schedule: str, asked: Asked, index: int,
                  total: int) -> ScheduleMeasured | None:
    """Train and record one schedule; on rank 0 its measured figures (`claims.pipeline.measure`)."""
    import time

    from ddpfsdp.demos.claims import pipeline as claims

    ctx.step(index, total, phase=schedule)
    started = time.perf_counter()
    trained = _train(ctx, model, schedule, asked)
    mine = Gathered(losses=trained.losses, raw=trained.recorder.raw(), place=trained.place, comm=trained.comm)
    gathered: list[Gathered] = ctx.gather(mine)
    if not ctx.is_main:
        return None
    origin = min(g["raw"]["start"] for g in gathered)
    ranks = [PlacedStep(**record(g["raw"], rank, origin), **g["place"], comm=g["comm"])
             for rank, g in enumerate(gathered)]
    run = claims.measure(trained.pipeline, trained.shape, ranks, _replica_mean([g["losses"] for g in gathered]),
                         batch_size=options.batch_size(asked), wall_s=time.perf_counter() - started)
    return ScheduleMeasured(run=run, timeline=claims.StageTimeline(ranks=ranks))


def _replica_mean(by_rank: list[list[float | None]]) -> list[float | None]:
    """The loss of each step: the mean over the replicas' last stages (one without --dp)."""
    held = [losses for losses in by_rank if losses and all(x is not None for x in losses)]
    return [sum(step) / len(step) for step in zip(*held)] if held else [None] * len(by_rank[0])


def run(ctx: Any, **given: Any) -> DemoResult | None:
    """The demo on this rank: each schedule asked in turn; rank 0 assembles the result."""
    asked = Asked(**given)  # OPTIONS, as click parsed them

    model = options.preset(asked, ctx.device.type)
    names = options.schedules(asked)
    measured = {name: _one_schedule(ctx, model, name, asked, i, len(names) + 1) for i, name in enumerate(names)}
    if not ctx.is_main:
        return None
    held = {name: m for name, m in measured.items() if m is not None}  # all of them, on rank 0
    ctx.step(len(names), len(names) + 1, phase="one-process reference")
    reference = reference_losses(model, asked, ctx.device)
    result = _assemble(ctx, model, asked, held, reference)
    _write_trace(ctx, result, asked.get("trace"))
    return result


def _assemble(ctx: Any, model: str, asked: Asked, measured: dict[str, ScheduleMeasured],
              reference: list[float]) -> DemoResult:
    """The result: per schedule its run (figures per rank beside theory, its timeline); the checks."""
    from ddpfsdp.demos.base.shapes import GPT_PRESETS, model_params
    from ddpfsdp.demos.claims import pipeline as claims

    per_run = {name: claims.run_checks(m.run, reference) for name, m in measured.items()}
    checks = claims.combined(per_run) if len(measured) > 1 else per_run[next(iter(measured))]
    if asked.get("compare"):
        checks += claims.compare_checks({name: m.run for name, m in measured.items()})
    runs = {name: ScheduleResult(config=ScheduleConfig(schedule=name), timeline=m.timeline, loss=m.run["losses"],
                                 pipeline=m.run, checks=[c.to_dict() for c in per_run[name]])
            for name, m in measured.items()}
    config = PipelineConfig(model=model, params=model_params("gpt", model), layers=GPT_PRESETS[model].layers,
                            precision="fp32", schedules=list(measured), microbatches=asked["microbatches"],
                            batch_size=options.batch_size(asked), steps=asked["steps"], seed=asked["seed"],
                            compare=bool(asked.get("compare")))
    return ctx.result("pipeline", config, checks, runs=runs, reference_loss=reference, notes=[_note(ctx)])


def _note(ctx: Any) -> str:
    if ctx.device.type == "cuda":
        return ("Measured on GPUs: each compute span synchronises the device at its edges, so it is the "
                "kernels' time, and nothing of one action overlaps the next.")
    from ddpfsdp.demos.result.schema import GLOO_CAVEAT

    return GLOO_CAVEAT


def _write_trace(ctx: Any, result: DemoResult, path: str | None) -> None:
    if not path:
        return
    from ddpfsdp.demos.measure import trace

    try:
        written = trace.write(result, path)
        ctx.log(f"trace: {written} (open it in ui.perfetto.dev or chrome://tracing)")
    except (OSError, ValueError) as exc:
        ctx.log(f"trace not written: {exc}")
