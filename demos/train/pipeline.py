"""Pipeline parallelism on real ranks: the project's GPT cut into stages, one torch schedule per run.

    ddpfsdp demo pipeline --procs 4 --schedule 1f1b --microbatches 8
    ddpfsdp demo pipeline --procs 2 --compare

A pipeline run is a RunSpec like every training run (`spec`: its schedule, micro-batches, stages per rank,
pp and dp among its fields), its degrees are the run's `ParallelDims` (pp x dp_shard), and its model goes
through the one `parallelize` stage by stage (`parallel.pipeline`). Every rank builds the same seeded GPT
and keeps only its own stages, each wrapped in a `PipelineStage` of torch.distributed.pipelining and
driven by one of its schedules. Each step's batch is split into M micro-batches; the schedule averages
their gradients (scale_grads), so a step equals one process's step on the whole batch
(`reference.one_process_losses`). The first step warms up (torch infers the shapes between stages
there); the last is recorded (`measure.pipeline_timeline`), and the figures and checks come from it
(`claims.pipeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.measure.pipeline_timeline import PlacedStep, RankPlace, RawStep, record
from ddpfsdp.demos.measure.trace import write_logged
from ddpfsdp.demos.train.spec import RunSpec

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape
    from ddpfsdp.demos.claims.pipeline import ScheduleRun, StageTimeline
    from ddpfsdp.demos.measure.comm import PerOp
    from ddpfsdp.demos.measure.pipeline_timeline import StepRecorder
    from ddpfsdp.demos.parallel.pipeline import PipelinePlace
    from ddpfsdp.demos.result.checks import CheckDocument
    from ddpfsdp.demos.result.schema import DemoResult
    from ddpfsdp.demos.theory.pipeline import Pipeline


def wire_device(ctx: Any) -> Any:
    """Where the stages' sends and receives live: the rank's device, but host memory for gloo, whose
    point-to-point ops on CUDA tensors read device pointers as host ones."""
    import torch

    return torch.device("cpu") if ctx.backend == "gloo" else ctx.device


def _lm_loss(logits: Any, targets: Any) -> Any:
    import torch.nn.functional as F

    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def global_batches(shape: Any, *, batch_size: int, steps: int, seed: int) -> list[tuple[Any, Any]]:
    """`steps` whole batches of token ids and targets: what every rank and the reference read."""
    from torch.utils.data import default_collate

    from ddpfsdp.demos.train.data import make_dataset

    dataset = make_dataset("gpt", shape, seed=seed, num_samples=batch_size * steps)
    return [default_collate([dataset[i] for i in range(k * batch_size, (k + 1) * batch_size)]) for k in range(steps)]


class _Run:
    """One schedule on this rank: its stages (each parallelized, with its optimizer) and the schedule,
    stepped and recorded."""

    def __init__(self, ctx: Any, spec: RunSpec, schedule: str, microbatches: int, v: int) -> None:
        from torch.distributed import pipelining
        from torch.distributed.pipelining.schedules import PipelineScheduleSingle

        from ddpfsdp.demos.parallel.degrees import ParallelDims
        from ddpfsdp.demos.parallel.pipeline import PipelinePlace, pipeline_stages
        from ddpfsdp.demos.theory.pipeline import TORCH_SCHEDULES
        from ddpfsdp.demos.train.models import build_model

        self.ctx, self.schedule_name, self.v = ctx, schedule, v
        self.dims = ParallelDims.of(spec, ctx.world_size)
        self.mesh = self.dims.build_mesh(ctx.device.type)
        self.place: PipelinePlace = PipelinePlace.of(self.dims, self.mesh, ctx.rank)
        self.pp, self.stages_total = self.dims.pp, self.dims.pp * v
        net = build_model("gpt", spec.model, seed=spec.seed)
        self.shape = net.shape
        self.wire = wire_device(ctx)
        parts = pipeline_stages(net, spec, self.dims, self.mesh, self.place, ctx.device, self.wire, v)
        self.indices = [index for index, _ in parts]
        self.prepared = [prepared for _, prepared in parts]
        # the stage's device is where its receive buffers are made; its module stays on the rank's
        self.stages = [pipelining.PipelineStage(prepared.model, index, self.stages_total, self.wire,
                                                group=self.place.group) for index, prepared in parts]
        self.recorder = None
        cls = getattr(pipelining, TORCH_SCHEDULES[schedule])
        held = self.stages[0] if issubclass(cls, PipelineScheduleSingle) else self.stages
        self.schedule = cls(held, microbatches, loss_fn=self._loss)

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
        """One step; with a recorder, the schedule's part of it is recorded (not the optimizers')."""
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
        for prepared in self.prepared:
            prepared.optimizer.step()
            prepared.optimizer.zero_grad(set_to_none=True)
        return float(sum(float(x) for x in losses) / len(losses)) if losses else None

    def recorded_step(self, batch: tuple[Any, Any]) -> tuple[float | None, Any]:
        import torch.distributed as dist

        from ddpfsdp.demos.measure.pipeline_timeline import StepRecorder

        recorder = StepRecorder(self.stages, self.ctx.device)
        dist.barrier()  # every rank starts the recorded step together: the fill is part of it
        return self.step(batch, recorder), recorder

    def groups(self) -> dict[str, str]:
        """This rank's pipeline group and, with --dp, its stages' data-parallel group, by name."""
        import torch.distributed as dist

        names = {"pp": str((self.place.group or dist.group.WORLD).group_name)}
        if self.dims.dp_shard > 1:
            names["dp"] = str(self.mesh.get_group("dp_shard").group_name)
        return names


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


def _train(ctx: Any, spec: RunSpec, schedule: str) -> Trained:
    """Train `--steps` steps with one schedule; the last is recorded, the one before it has its
    collectives counted per process group (a dispatch mode, kept off the recorded step's clock).
    This rank's losses, record and counts."""
    import torch

    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.theory.pipeline import check_pipeline

    pp = ParallelDims.of(spec, ctx.world_size).pp
    pipeline = check_pipeline(pp, spec.microbatches, schedule, spec.stages_for(schedule))
    torch.manual_seed(spec.seed)
    run = _Run(ctx, spec, schedule, pipeline.microbatches, pipeline.stages_per_rank)
    place = run.place
    mine = slice(place.dp_rank * spec.batch_size, (place.dp_rank + 1) * spec.batch_size)  # this replica's share
    batches = [(tokens[mine], targets[mine]) for tokens, targets in
               global_batches(run.shape, batch_size=spec.global_batch, steps=spec.steps, seed=spec.seed)]
    losses: list[float | None] = [run.step(batch) for batch in batches[:-2]]
    with CommCounter() as counter:
        losses.append(run.step(batches[-2]))
    loss, recorder = run.recorded_step(batches[-1])
    comm = {dim: counter.per_group().get(name, {}) for dim, name in run.groups().items()}
    return Trained(losses=[*losses, loss], recorder=recorder, pipeline=pipeline, shape=run.shape,
                   place=RankPlace(pp_rank=place.pp_rank, dp_rank=place.dp_rank, dp=place.dp), comm=comm)


def reference_losses(spec: RunSpec, device: Any) -> list[float]:
    """One process, the whole model, the same batches and optimizer: the loss of each step."""
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.train.reference import one_process_losses

    shape = shape_for("gpt", spec.model)
    return one_process_losses(spec, global_batches(shape, batch_size=spec.global_batch, steps=spec.steps,
                                                   seed=spec.seed), device)


def _one_schedule(ctx: Any, spec: RunSpec, schedule: str, index: int, total: int) -> ScheduleMeasured | None:
    """Train and record one schedule; on rank 0 its measured figures (`claims.pipeline.measure`)."""
    import time

    from ddpfsdp.demos.claims import pipeline as claims

    ctx.step(index, total, phase=schedule)
    started = time.perf_counter()
    trained = _train(ctx, spec, schedule)
    mine = Gathered(losses=trained.losses, raw=trained.recorder.raw(), place=trained.place, comm=trained.comm)
    gathered: list[Gathered] = ctx.gather(mine)
    if not ctx.is_main:
        return None
    origin = min(g["raw"]["start"] for g in gathered)
    ranks = [PlacedStep(**record(g["raw"], rank, origin), **g["place"], comm=g["comm"])
             for rank, g in enumerate(gathered)]
    run = claims.measure(trained.pipeline, trained.shape, ranks, _replica_mean([g["losses"] for g in gathered]),
                         batch_size=spec.batch_size, wall_s=time.perf_counter() - started)
    return ScheduleMeasured(run=run, timeline=claims.StageTimeline(ranks=ranks))


def _replica_mean(by_rank: list[list[float | None]]) -> list[float | None]:
    """The loss of each step: the mean over the replicas' last stages (one without --dp)."""
    held = [losses for losses in by_rank if losses and all(x is not None for x in losses)]
    return [sum(step) / len(step) for step in zip(*held)] if held else [None] * len(by_rank[0])


def run(ctx: Any, spec: RunSpec) -> DemoResult | None:
    """The demo on this rank: each schedule asked in turn; rank 0 assembles the result."""
    names = spec.schedules()
    measured = {name: _one_schedule(ctx, spec, name, i, len(names) + 1) for i, name in enumerate(names)}
    if not ctx.is_main:
        return None
    held = {name: m for name, m in measured.items() if m is not None}  # all of them, on rank 0
    ctx.step(len(names), len(names) + 1, phase="one-process reference")
    reference = reference_losses(spec, ctx.device)
    result = _assemble(ctx, spec, held, reference)
    write_logged(ctx.log, result, spec.trace)
    return result


def _assemble(ctx: Any, spec: RunSpec, measured: dict[str, ScheduleMeasured], reference: list[float]) -> DemoResult:
    """The result: per schedule its run (figures per rank beside theory, its timeline); the checks."""
    from ddpfsdp.demos.base.shapes import GPT_PRESETS, model_params
    from ddpfsdp.demos.claims import pipeline as claims

    per_run = {name: claims.run_checks(m.run, reference) for name, m in measured.items()}
    checks = claims.combined(per_run) if len(measured) > 1 else per_run[next(iter(measured))]
    if spec.compare:
        checks += claims.compare_checks({name: m.run for name, m in measured.items()})
    runs = {name: ScheduleResult(config=ScheduleConfig(schedule=name), timeline=m.timeline, loss=m.run["losses"],
                                 pipeline=m.run, checks=[c.to_dict() for c in per_run[name]])
            for name, m in measured.items()}
    config = {**{key: value for key, value in spec.reported().items() if key != "strategy"},
              "params": model_params("gpt", spec.model), "layers": GPT_PRESETS[spec.model].layers,
              "precision": spec.precision, "schedules": list(measured)}
    return ctx.result("pipeline", config, checks, runs=runs, reference_loss=reference, notes=[_note(ctx)])


def _note(ctx: Any) -> str:
    if ctx.device.type == "cuda":
        return ("Measured on GPUs: each compute span synchronises the device at its edges, so it is the "
                "kernels' time, and nothing of one action overlaps the next.")
    from ddpfsdp.demos.result.schema import GLOO_CAVEAT

    return GLOO_CAVEAT

