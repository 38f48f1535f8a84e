"""The training loop of the `ddp`, `fsdp` and `compare` demos, and what it measures.

One run, on every rank:
  warm-up steps     lazy initialisation, DDP's bucket rebuild after its first iteration, allocator
                    warm-up: none of it belongs in a steady-state figure
  timed steps       a plain loop with nothing but a step clock around it (no dispatch mode, no
                    profiler, no host sync on GPU), so the demo's throughput is what training gets
  one comm step     the same step under CommCounter: every collective, per op; and recorded in
                    time (TimelineRecorder): unit spans, collectives issued and completed, memory
  one memory step   the same step under PeakMemory; model-state bytes after its optimizer step,
                    parameter bytes held between its forward and backward; torch's memory tracker
                    on the same step says what the peak is made of, in which phase and module
Every step's loss is kept on the device and all-reduced once after the loop, for reporting only.
Per-rank figures are gathered to rank 0, which returns the run; other ranks return None.
"""

from __future__ import annotations

import contextlib
import gc
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from ddpfsdp.demos.measure.breakdown import PeakBreakdown
from ddpfsdp.demos.measure.comm import CommCounter, PerOp
from ddpfsdp.demos.measure.memory import (
    PeakMemory,
    StepTimer,
    ddp_reducer_bytes,
    model_state_bytes,
    param_bytes_held,
    peak_flops_per_s,
    resting_params,
)
from ddpfsdp.demos.measure.timeline import TimelineRecorder
from ddpfsdp.demos.result.schema import (GLOO_CAVEAT, Comm, Config, DemoResult, Diverged, Memory, RankMemory,
                                         Throughput, Timeline)
from ddpfsdp.demos.result.step_record import RankStep
from ddpfsdp.demos.train.spec import RunSpec

if TYPE_CHECKING:
    from ddpfsdp.demos.parallel.compiled import CompileReport
    from ddpfsdp.demos.parallel.context_parallel import RingFigures

SAMPLES_PER_RANK_STEPS = 8  # the dataset holds this many steps of batches; epochs repeat it reshuffled

@dataclass
class CommStep:
    """The communication step: its counter (kept to the end of the run, as are the buffers it saw),
    its recorded timeline (None when recording is off) and the units the timeline followed."""

    counter: CommCounter
    timeline: RankStep | None
    units: list[str]


@dataclass
class RankFigures:
    """What one rank measured, gathered to rank 0."""

    rank: int
    hostname: str
    memory: RankMemory
    wall_s: float  # the timed steps, wall clock
    step_time_s: dict[str, float]  # median, min, max
    comm: PerOp
    comm_group_sizes: dict[str, list[int]]
    timeline: RankStep | None
    groups: dict[str, str] | None = None  # a 2-D or cp run: this rank's group names by what they are for
    per_group: dict[str, PerOp] | None = None  # a 2-D or cp run: this rank's collectives by group
    ring: RingFigures | None = None  # a cp run: what this rank's ring attention sent and computed


@dataclass
class RunFacts:
    """What rank 0 knows of the run as a whole: the model as built and wrapped, the losses, the phases."""

    shape: Any
    params: int
    model_facts: dict[str, int]
    description: str
    units: list[str]
    unit_params: list[int]
    followed: list[str]
    losses: list[float]
    phases_s: dict[str, float]
    optimizer_impl: str | None
    compile: Any  # compiled.CompiledRun.report's block, None for an eager run



def flops_per_sample(arch: str, shape: Any, params: int) -> float | None:
    """Model FLOPs of one sample's forward and backward (6 per matmul weight per token, plus attention).

    The PaLM appendix's count: 6 FLOPs per token for every weight a matmul multiplies by, and
    12 * layers * d_model * tokens per token for attention scores and values. Only weights that a
    matmul uses count: the GPT's token and position embeddings are table lookups (its LM head is
    untied, so the head counts on its own), and the ViT's class token and position embedding are
    additions. The ViT's patch convolution runs on the patches only and its classifier on the class
    token only. None for the ResNet, whose FLOPs depend on the convolutions' spatial sizes and are
    not modelled here.
    """
    attention_per_token = 12 * shape.layers * shape.d_model if arch in ("gpt", "vit") else 0
    if arch == "gpt":
        tokens = shape.seq_len
        return tokens * (6 * (params - shape.embedding_params) + attention_per_token * tokens)
    if arch == "vit":
        tokens = shape.tokens
        d = shape.d_model
        patch_conv = shape.channels * shape.patch * shape.patch * d + d
        lookups = d + tokens * d  # class token and position embedding
        per_token = params - lookups - patch_conv - shape.head_params
        matmul = 6 * (per_token * tokens + patch_conv * shape.patches + shape.head_params)
        return matmul + attention_per_token * tokens * tokens
    return None


def _batches(loader: Any, sampler: Any) -> Iterator[Any]:
    epoch = 0
    while True:
        sampler.set_epoch(epoch)  # without it every epoch repeats the same order on every rank
        yield from loader
        epoch += 1


@dataclass
class Progress:
    """Where this run's steps stand in the progress bar (compare runs four in one bar)."""

    label: str | None
    step_offset: int
    total_steps: int


class Trainer:
    """One run on this rank, in the order it runs: set-up (here), warm-up, timed steps, the
    communication step, the memory step; each step's loss kept on the device. The at-scale demos
    (`train.straggler`, `train.local_sgd`) drive its `step` and `record` in orders of their own."""

    def __init__(self, ctx: Any, spec: RunSpec, progress: Progress) -> None:
        from ddpfsdp.demos.train.data import make_loader
        from ddpfsdp.demos.base.shapes import shape_for
        from ddpfsdp.demos.train.models import build_model, count_params
        from ddpfsdp.demos.parallel.parallelize import World, parallelize

        self.ctx, self.spec, self.progress = ctx, spec, progress
        self.device = ctx.device
        self.on_cpu = self.device.type == "cpu"
        self.shape = shape_for(spec.arch, spec.model, **spec.overrides)
        torch.manual_seed(spec.seed)
        self.model = build_model(spec.arch, spec.model, seed=spec.seed, **spec.overrides)
        self.params = count_params(self.model)
        self.prepared = parallelize(self.model, spec, World(ctx.world_size), self.device)
        self.two_d, self.context = self.prepared.two_d, self.prepared.context
        self.plan = self.two_d or self.context  # a mesh of dp and another dimension that shares a batch
        self.train_model, self.optimizer = self.prepared.model, self.prepared.optimizer
        # Every rank of a TP or CP group reads its data-parallel group's batch: the sampler sees dp ranks only.
        batch_rank, batch_ranks = (self.plan.dp_rank, self.plan.dp) if self.plan else (ctx.rank, ctx.world_size)
        loader, sampler = make_loader(
            spec.arch,
            self.shape,
            batch_size=spec.batch_size,
            rank=batch_rank,
            world_size=batch_ranks,
            seed=spec.seed,
            num_samples=spec.batch_size * batch_ranks * min(spec.steps, SAMPLES_PER_RANK_STEPS),
            device=self.device,
        )
        self.batches = _batches(loader, sampler)
        self.losses: list[torch.Tensor] = []
        self.block_saved_bytes: int | None = None
        self.index = 0
        self.phases_s: dict[str, float] = {}
        self.warmup_steps_s: list[float] = []  # each warm-up step's wall time, of a compiled run

    def step(self, after_forward=None, after_update=None, recorder=None) -> torch.Tensor:
        from ddpfsdp.demos.train.data import compute_loss

        batch = next(self.batches)
        if self.context is not None:
            batch = self.context.local_batch(batch)  # this rank's tokens of every sequence
        if recorder is not None:
            recorder.begin("forward", "forward")
        # 2-D: the logits are split by vocabulary, and the loss and its backward run under loss_parallel.
        with self.prepared.loss_context():
            with self.prepared.autocast():
                loss = compute_loss(self.spec.arch, self.train_model, batch)
            if recorder is not None:
                recorder.end("forward", "forward")
                recorder.before_backward(loss)
            if after_forward is not None:
                after_forward()
            loss.backward()
        if recorder is not None:
            recorder.sample_params("step after backward")
        self.optimizer.step()
        if after_update is not None:
            after_update()
        self.optimizer.zero_grad(set_to_none=True)
        return self.two_d.local_value(loss.detach()) if self.two_d else loss.detach()

    def record(self, phase: str, loss: torch.Tensor, shown: torch.Tensor | None) -> None:
        """Keep the step's loss and tell the progress bar (with the loss, where reading it is free)."""
        self.losses.append(loss)
        metrics: dict[str, str | float] = {"phase": phase}
        if self.progress.label:
            metrics["run"] = self.progress.label
        if shown is not None:
            metrics["loss"] = float(shown)
        self.ctx.step(self.progress.step_offset + self.index, self.progress.total_steps, **metrics)
        self.index += 1

    def warm_up(self) -> None:
        from ddpfsdp.demos.measure.saved import SavedActivations

        mark = time.perf_counter()
        for index in range(self.spec.warmup):
            last = index == self.spec.warmup - 1
            # 2-D and cp: what the first block saves for backward, in the last warm-up step (nothing else measured there)
            saved = SavedActivations(self.model.blocks[0]) if self.plan and last else contextlib.nullcontext()
            started = time.perf_counter()
            with saved:
                loss = self.step()
            if self.prepared.compiled is not None:
                float(loss)  # the step's own time, compilation included: wait for it to finish
                self.warmup_steps_s.append(time.perf_counter() - started)
            if self.plan and last:
                self.block_saved_bytes = saved.bytes
            self.record("warm-up", loss, loss)
        self.phases_s["warm-up"] = time.perf_counter() - mark
        self._mark("warm-up")

    def _mark(self, phase: str) -> None:
        if self.prepared.compiled is not None:
            self.prepared.compiled.mark(phase)

    def compile_report(self) -> CompileReport | None:
        """What torch recorded of the compile, and DDP's buckets to set beside the compiled pieces."""
        compiled = self.prepared.compiled
        if compiled is None:
            return None
        from ddpfsdp.demos.parallel.compiled import ddp_buckets

        self._mark("end")
        buckets, param_bytes = (ddp_buckets(self.train_model) if self.spec.strategy in ("ddp", "zro")
                                else (None, None))
        return compiled.report(self.warmup_steps_s, buckets, param_bytes)

    def timed_steps(self) -> StepTimer:
        timer = StepTimer(self.device)
        timer.start()
        for _ in range(self.spec.timed_steps):
            with timer.step():
                loss = self.step()
            # Reading a CUDA loss would make the host wait for the GPU every step; on CPU it is free.
            self.record("timed", loss, loss if self.on_cpu else None)
        timer.stop()
        self.phases_s["timed"] = timer.wall_s
        self._mark("timed")
        return timer

    def comm_step(self) -> CommStep:
        """One step under the collective counter, recorded in time unless the timeline is off."""
        from ddpfsdp.demos.parallel.strategies import timeline_units

        mark = time.perf_counter()
        if self.spec.timeline:
            followed = timeline_units(self.model, self.prepared)
            hidden_bytes = ddp_reducer_bytes(self.train_model) if self.on_cpu else 0
            comm = TimelineRecorder(self.device, self.train_model, followed, self.optimizer, hidden_bytes=hidden_bytes)
        else:
            followed = []
            comm = CommCounter()
        with comm:
            loss = self.step(recorder=comm if self.spec.timeline else None)
        timeline = comm.to_dict(self.ctx.rank) if self.spec.timeline else None
        if self.spec.timeline:
            comm.release()  # the model must be free to go when the run deletes it
        self.record("comm", loss, loss)
        self.phases_s["comm"] = time.perf_counter() - mark
        return CommStep(comm, timeline, [name for name, _, _ in followed])

    def memory_step(self, live_buffers: list[torch.Tensor], before_run: Any) -> RankMemory:
        """One step under the peak tracker and torch's memory tracker: this rank's memory figures."""
        mark = time.perf_counter()
        held: dict[str, int] = {}
        after_forward: dict[str, int] = {}
        breakdown = PeakBreakdown(self.train_model, self.optimizer, strategy=self.spec.strategy, device=self.device,
                                  held=live_buffers)
        resting = resting_params(self.train_model)
        with PeakMemory(self.device, since=before_run) as peak, breakdown:
            loss = self.step(
                after_forward=lambda: after_forward.update(params=param_bytes_held(resting, self.train_model)),
                after_update=lambda: held.update(model_state_bytes(self.train_model, self.optimizer)),
            )
        bucket_bytes = ddp_reducer_bytes(self.train_model)
        self.record("memory", loss, loss)
        self.phases_s["memory"] = time.perf_counter() - mark
        return RankMemory.from_json({
            **held,
            "peak": peak.peak_bytes,
            "peak_kind": peak.peak_kind,
            "reserved": peak.reserved_bytes,
            "untracked_free": peak.untracked_free_bytes,
            "blas_workspaces": peak.blas_workspace_bytes,
            "params_after_forward": after_forward.get("params"),
            "ddp_buckets": bucket_bytes,
            **breakdown.to_dict(peak_bytes=peak.peak_bytes, held=held, ddp_bucket_bytes=bucket_bytes),
        })

    def mean_losses(self) -> list[float]:
        """Every step's loss, averaged over the ranks: one all-reduce for the whole run."""
        losses = torch.stack(self.losses).float()
        dist.all_reduce(losses)
        return (losses / self.ctx.world_size).tolist()


def train(ctx: Any, spec: RunSpec, *, label: str | None = None, step_offset: int = 0,
          total_steps: int | None = None) -> DemoResult | None:
    """Train one run; rank 0 gets its result (config, memory, throughput, comm, loss, ...), without the
    envelope's schema, demo and env, the analytic model's figures and the checks."""
    started = time.perf_counter()
    if spec.model is None or spec.steps is None:
        raise ValueError("train() takes a spec resolved for its device (the launcher resolves it once)")
    before_run = PeakMemory.before_run(ctx.device)
    trainer = Trainer(ctx, spec, Progress(label, step_offset, total_steps or spec.steps))
    trainer.warm_up()
    timer = trainer.timed_steps()
    comm = trainer.comm_step()
    counter = comm.counter
    memory = trainer.memory_step(counter.live_buffers(), before_run)
    figures = RankFigures(rank=ctx.rank, hostname=socket.gethostname(), memory=memory, wall_s=timer.wall_s,
                          step_time_s=timer.summary(), comm=counter.per_op(), comm_group_sizes=counter.group_sizes(),
                          timeline=comm.timeline)
    if trainer.plan:
        figures.memory.block_saved = trainer.block_saved_bytes
        figures.groups = trainer.plan.group_names()
        figures.per_group = trainer.plan.traffic(counter)
    if trainer.context:
        figures.ring = trainer.context.figures(figures.per_group)
    facts = RunFacts(
        shape=trainer.shape, params=trainer.params, model_facts=trainer.prepared.facts,
        description=trainer.prepared.describe(), units=list(trainer.prepared.units),
        unit_params=list(trainer.prepared.unit_params), followed=comm.units,
        losses=trainer.mean_losses(), phases_s=trainer.phases_s,
        optimizer_impl=trainer.prepared.optimizer_impl, compile=trainer.compile_report(),
    )
    del trainer, comm, counter, before_run
    _release(ctx.device)

    gathered: list[RankFigures] = ctx.gather(figures)
    if not ctx.is_main:
        return None
    return _result(ctx, spec, facts, gathered, label, started)


def _release(device: torch.device) -> None:
    """Let the run's model, optimizer and buffers go before the next run (compare trains four)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _throughput(ctx: Any, spec: RunSpec, facts: RunFacts, gathered: list[RankFigures]) -> Throughput:
    """Samples and tokens per second over every rank's timed steps, bounded by the slowest rank."""
    from ddpfsdp.demos.train.data import tokens_per_sample

    # Only the data-parallel groups read distinct samples: a TP group's ranks share one batch.
    timed_samples = spec.batch_size * (ctx.world_size // spec.ranks_per_batch) * spec.timed_steps
    slowest_wall_s = max(r.wall_s for r in gathered)
    samples_per_s = timed_samples / slowest_wall_s
    tokens = tokens_per_sample(spec.arch, facts.shape)
    flops = flops_per_sample(spec.arch, facts.shape, facts.params)
    peak_flops = peak_flops_per_s(ctx.device, spec.precision)
    if peak_flops is not None and flops is not None:
        mfu: float | str = flops * samples_per_s / (peak_flops * ctx.world_size)
    else:
        mfu = "n/a"
    return Throughput.from_json({
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * tokens if tokens else None,
        "step_time_s": gathered[0].step_time_s,
        "timed_steps": spec.timed_steps,
        "wall_s": slowest_wall_s,
        "mfu": mfu,
        "peak_flops_per_s": peak_flops,
        "note": GLOO_CAVEAT if ctx.device.type == "cpu" else None,
    })


def _per_group(gathered: list[RankFigures]) -> dict[str, object]:
    """A 2-D or cp run's collectives by group on rank 0 (`per_group`), and each rank's group names."""
    rank0 = gathered[0]
    if rank0.groups is None:
        return {}
    return {"per_group": rank0.per_group, "groups": [r.groups for r in gathered]}


def _result(ctx: Any, spec: RunSpec, facts: RunFacts, gathered: list[RankFigures], label: str | None,
            started: float) -> DemoResult:
    """Rank 0's result of the run, from its own figures and every rank's."""
    rank0 = gathered[0]
    shape = facts.shape
    comm_step = spec.warmup + spec.timed_steps
    timeline = Timeline(step=comm_step, units=facts.followed, ranks=[r.timeline for r in gathered]) \
        if spec.timeline else None
    result = DemoResult(
        config=Config.from_json({
            **spec.reported(),
            "params": facts.params,
            "seq_len": getattr(shape, "seq_len", getattr(shape, "tokens", None)),
            "world_size": ctx.world_size,
            "device": ctx.device.type,
            "backend": ctx.backend,
            "description": facts.description,
            "units": facts.units,
            "unit_params": facts.unit_params,
            "optimizer_impl": facts.optimizer_impl,  # as resolved for the device (auto: fused where torch has it)
        }),
        memory=Memory.from_json({"ranks": [r.memory for r in gathered], **facts.model_facts}),
        throughput=_throughput(ctx, spec, facts, gathered),
        comm=Comm.from_json({
            "per_step": rank0.comm,
            "group_sizes": rank0.comm_group_sizes,
            "ranks_agree": all(r.comm == rank0.comm for r in gathered),
            "step": comm_step,
            **_per_group(gathered),
        }),
        timeline=timeline,  # the communication step, recorded in time on every rank (None when recording is off)
        loss=facts.losses,
        diverged=Diverged.of(facts.losses),  # written only when the loss stopped being a number
        wall_s=time.perf_counter() - started,
        extra={
            "label": label,
            # a --compile run: the backend, compile time, graphs, graph breaks (rank 0's, as torch recorded them)
            **({"compile": facts.compile} if facts.compile is not None else {}),
            # a cp run: each rank's ring attention calls, what they sent and scored (`train.context` judges them)
            **({"ring": [r.ring for r in gathered]} if rank0.ring is not None else {}),
            "hosts": sorted({r.hostname for r in gathered}),
            "phases_s": facts.phases_s,  # rank 0's wall time per phase: what the measured steps cost
        },
        order=("label", "config", "compile", "memory", "throughput", "comm", "timeline", "loss", "hosts", "phases_s",
               "ring", "wall_s"),
    )
    return result
