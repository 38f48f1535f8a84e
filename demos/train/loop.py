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

import gc
import socket
import time
from dataclasses import asdict
from typing import Any, Iterator

import torch
import torch.distributed as dist

from ddpfsdp.demos.measure.breakdown import PeakBreakdown
from ddpfsdp.demos.measure.comm import CommCounter
from ddpfsdp.demos.measure.timeline import TimelineRecorder
from ddpfsdp.demos.measure.memory import (
    PeakMemory,
    StepTimer,
    ddp_reducer_bytes,
    model_state_bytes,
    peak_flops_per_s,
    unique_storage_bytes,
)
from ddpfsdp.demos.train.spec import RunSpec

SAMPLES_PER_RANK_STEPS = 8  # the dataset holds this many steps of batches; epochs repeat it reshuffled

CPU_THROUGHPUT_NOTE = (
    "Measured on CPU processes over gloo: these figures show the mechanics, not speed. "
    "gloo on CPU does not represent NCCL on GPUs."
)


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


def _sharded_row_bytes(model: torch.nn.Module) -> int:
    """One dim-0 row of every parameter: how far a rank's shard can sit from 1/N of a tensor.

    FSDP2 shards each parameter on dim 0 in ceil(rows/N) chunks: a rank holds up to one padded row
    more than rows/N (padding) or up to one row less (the last ranks of an uneven split).
    """
    total = 0
    for p in model.parameters():
        rows = p.shape[0] if p.dim() else 1
        total += (p.numel() // max(rows, 1)) * p.element_size()
    return total


def _largest_param_bytes(model: torch.nn.Module) -> int:
    return max((p.numel() * p.element_size() for p in model.parameters()), default=0)


def train(ctx: Any, spec: RunSpec, *, label: str | None = None, step_offset: int = 0,
          total_steps: int | None = None) -> dict[str, Any] | None:
    """Train one run; rank 0 gets {"config", "memory", "throughput", "comm", "loss", ...}."""
    from ddpfsdp.demos.train.data import compute_loss, make_loader, tokens_per_sample
    from ddpfsdp.demos.train.models import build_model, count_params
    from ddpfsdp.demos.train.presets import shape_for
    from ddpfsdp.demos.train.strategies import prepare, timeline_units

    started = time.perf_counter()
    device = ctx.device
    before_run = PeakMemory.before_run(device)
    total_steps = total_steps or spec.steps
    shape = shape_for(spec.arch, spec.model, **spec.overrides)
    torch.manual_seed(spec.seed)
    model = build_model(spec.arch, spec.model, seed=spec.seed, **spec.overrides)
    params = count_params(model)
    unsharded_bytes = unique_storage_bytes(model.parameters())
    row_bytes = _sharded_row_bytes(model)
    largest_bytes = _largest_param_bytes(model)
    param_tensors = len(list(model.parameters()))
    buffer_bytes = unique_storage_bytes(model.buffers())
    if spec.checkpoint_activations:
        model.checkpoint_activations = True
    prepared = prepare(
        model,
        strategy=spec.strategy,
        device=device,
        world_size=ctx.world_size,
        sharding=spec.sharding,
        wrap=spec.wrap,
        fsdp_api=spec.fsdp_api,
        precision=spec.precision,
        optimizer=spec.optimizer,
        lr=spec.lr,
        bucket_mb=spec.bucket_mb,
        replicas=spec.replicas,
        prefetch=spec.prefetch,
    )
    train_model, optimizer = prepared.model, prepared.optimizer
    loader, sampler = make_loader(
        spec.arch,
        shape,
        batch_size=spec.batch_size,
        rank=ctx.rank,
        world_size=ctx.world_size,
        seed=spec.seed,
        num_samples=spec.batch_size * ctx.world_size * min(spec.steps, SAMPLES_PER_RANK_STEPS),
    )
    batches = _batches(loader, sampler)
    losses: list[torch.Tensor] = []
    on_cpu = device.type == "cpu"

    def step(after_forward=None, after_update=None, recorder=None) -> torch.Tensor:
        batch = next(batches)
        if recorder is not None:
            recorder.begin("forward", "forward")
        with prepared.autocast():
            loss = compute_loss(spec.arch, train_model, batch)
        if recorder is not None:
            recorder.end("forward", "forward")
            recorder.before_backward(loss)
        if after_forward is not None:
            after_forward()
        loss.backward()
        if recorder is not None:
            recorder.sample_params("step after backward")
        optimizer.step()
        if after_update is not None:
            after_update()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def report(index: int, phase: str, loss: torch.Tensor | None) -> None:
        metrics: dict[str, Any] = {"phase": phase}
        if label:
            metrics["run"] = label
        if loss is not None:
            metrics["loss"] = float(loss)
        ctx.step(step_offset + index, total_steps, **metrics)

    phases_s: dict[str, float] = {}
    mark = time.perf_counter()
    index = 0
    for _ in range(spec.warmup):
        loss = step()
        losses.append(loss)
        report(index, "warm-up", loss)
        index += 1

    phases_s["warm-up"] = time.perf_counter() - mark
    timer = StepTimer(device)
    timer.start()
    for _ in range(spec.timed_steps):
        with timer.step():
            loss = step()
        losses.append(loss)
        # Reading a CUDA loss would make the host wait for the GPU every step; on CPU it is free.
        report(index, "timed", loss if on_cpu else None)
        index += 1
    timer.stop()
    phases_s["timed"] = timer.wall_s

    mark = time.perf_counter()
    if spec.timeline:
        followed = timeline_units(model, prepared)
        hidden_bytes = ddp_reducer_bytes(train_model) if on_cpu else 0
        comm = TimelineRecorder(device, train_model, followed, optimizer, hidden_bytes=hidden_bytes)
    else:
        followed = []
        comm = CommCounter()
    with comm:
        loss = step(recorder=comm if spec.timeline else None)
    timeline = comm.to_dict(ctx.rank) if spec.timeline else None
    if spec.timeline:
        comm.release()  # the model must be free to go when the run deletes it
    losses.append(loss)
    report(index, "comm", loss)
    index += 1
    phases_s["comm"] = time.perf_counter() - mark
    mark = time.perf_counter()

    held: dict[str, int] = {}
    after_forward_bytes: dict[str, int] = {}
    breakdown = PeakBreakdown(train_model, optimizer, strategy=spec.strategy, device=device,
                              held=comm.live_buffers())
    with PeakMemory(device, since=before_run) as peak, breakdown:
        loss = step(
            after_forward=lambda: after_forward_bytes.update(params=unique_storage_bytes(train_model.parameters())),
            after_update=lambda: held.update(model_state_bytes(train_model, optimizer)),
        )
    losses.append(loss)
    bucket_bytes = ddp_reducer_bytes(train_model)
    report(index, "memory", loss)
    phases_s["memory"] = time.perf_counter() - mark

    mean_losses = torch.stack(losses).float()
    dist.all_reduce(mean_losses)
    mean_losses = (mean_losses / ctx.world_size).tolist()

    rank_figures = {
        "rank": ctx.rank,
        "hostname": socket.gethostname(),
        "memory": {
            **held,
            "peak": peak.peak_bytes,
            "peak_kind": peak.peak_kind,
            "reserved": peak.reserved_bytes,
            "untracked_free": peak.untracked_free_bytes,
            "params_after_forward": after_forward_bytes.get("params"),
            "ddp_buckets": bucket_bytes,
            **breakdown.to_dict(peak_bytes=peak.peak_bytes, held=held, ddp_bucket_bytes=bucket_bytes),
        },
        "wall_s": timer.wall_s,
        "step_time_s": timer.summary(),
        "comm": comm.per_op(),
        "comm_group_sizes": comm.group_sizes(),
        "timeline": timeline,
    }
    units = list(getattr(prepared, "units", []) or [])
    unit_params = list(getattr(prepared, "unit_params", []) or [])
    description = prepared.describe()
    peak_flops = peak_flops_per_s(device, spec.precision)

    del prepared, train_model, optimizer, model, batches, loader, comm, breakdown, before_run
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()

    gathered = ctx.gather(rank_figures)
    if not ctx.is_main:
        return None

    timed_samples = spec.batch_size * ctx.world_size * spec.timed_steps
    slowest_wall_s = max(r["wall_s"] for r in gathered)
    samples_per_s = timed_samples / slowest_wall_s
    tokens = tokens_per_sample(spec.arch, shape)
    flops = flops_per_sample(spec.arch, shape, params)
    if peak_flops is not None and flops is not None:
        mfu: float | str = flops * samples_per_s / (peak_flops * ctx.world_size)
    else:
        mfu = "n/a"
    rank0 = gathered[0]
    throughput = {
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * tokens if tokens else None,
        "step_time_s": rank0["step_time_s"],
        "timed_steps": spec.timed_steps,
        "wall_s": slowest_wall_s,
        "mfu": mfu,
        "peak_flops_per_s": peak_flops,
        "note": CPU_THROUGHPUT_NOTE if on_cpu else None,
    }
    return {
        "label": label,
        "config": {
            **{k: v for k, v in asdict(spec).items() if k != "overrides"},
            **spec.overrides,
            "params": params,
            "seq_len": getattr(shape, "seq_len", getattr(shape, "tokens", None)),
            "world_size": ctx.world_size,
            "device": device.type,
            "backend": ctx.backend,
            "description": description,
            "units": units,
            "unit_params": unit_params,
        },
        "memory": {
            "ranks": [r["memory"] for r in gathered],
            "unsharded_params": unsharded_bytes,
            "shard_row_bytes": row_bytes,
            "largest_param_bytes": largest_bytes,
            "param_tensors": param_tensors,
            "buffers": buffer_bytes,
        },
        "throughput": throughput,
        "comm": {
            "per_step": rank0["comm"],
            "group_sizes": rank0["comm_group_sizes"],
            "ranks_agree": all(r["comm"] == rank0["comm"] for r in gathered),
            "step": spec.warmup + spec.timed_steps,
        },
        # the communication step, recorded in time on every rank (None when recording was off)
        "timeline": {"step": spec.warmup + spec.timed_steps, "units": [name for name, _, _ in followed],
                     "ranks": [r["timeline"] for r in gathered]} if spec.timeline else None,
        "loss": mean_losses,
        "hosts": sorted({r["hostname"] for r in gathered}),
        "phases_s": phases_s,  # rank 0's wall time per phase: what the measured steps cost
        "wall_s": time.perf_counter() - started,
    }
