"""The one place a plain model becomes a parallel one, for a real run and a simulated one alike.

    parallelized = parallelize(model, run, World(ctx.world_size), ctx.device)

torchtitan's `parallelize_llama` is the model: one function, a fixed order, a reason for each step.
  1. precision         a bf16 run's model is cast whole, before anything splits it
  0. the degrees       the run's parallel degrees (`degrees.ParallelDims`) and, where FSDP or tensor
                       parallelism needs one, the world's mesh of them, built once
  2. tensor parallel   (--tp) the Megatron plan inside each GPT block over the mesh's "tp" dimension
                       (`tensor_parallel.TwoD`); FSDP then shards each TP shard over "dp_shard"
  2b. expert parallel (--ep, demo moe) each MoE layer keeps its ep rank's experts, whole, and dispatches
                       over its ep group by all-to-all (`expert_parallel.ExpertParallel`); FSDP then shards
                       the dense part and leaves the experts alone
  2c. context parallel (--cp) every block's attention swapped for ring attention over the mesh's "cp"
                       dimension and the embeddings for this rank's positions (`context_parallel.
                       ContextParallel`); after TP and before checkpointing and FSDP, as torchtitan's
                       `parallelize_llama` applies CP; FSDP then shards over dp_shard x cp
  3. checkpointing     each block's body recomputed in backward; set on the blocks themselves, before
                       any wrapper, so an FSDP unit around a block sees an ordinary module
  4. the model's facts read from the tensors FSDP is about to shard (`models.model_facts`)
  4b. compile (FSDP)   (--compile) each block replaced by its compiled wrapper, after checkpointing and
                       before FSDP (torchtitan's order): FSDP's hooks and collectives stay outside it
  5. FSDP              each unit, then the root (`strategies.shard`), where there are data-parallel ranks
                       to shard over (a pipeline of one replica has none)
  6. materialize       the world gives the model its tensors: a real model has them already; a
                       simulated world makes its meta tensors fake here, after FSDP has sharded them
                       on meta (fifty times cheaper than sharding fake ones) and before DDP, whose
                       reducer must see the tensors it will train
  7. DDP / zro         the materialized model wrapped (`strategies.wrap_ddp`)
  7b. compile (DDP)    (--compile) the DDP module compiled after wrapping, so DDPOptimizer sees DDP's
                       bucket cap and splits the graph at the buckets (`parallel.compiled`)
  8. the optimizer     over the parameters as wrapped (`strategies.build_optimizer`), fused where torch
                       has the kernel unless --optimizer-impl says otherwise
  8b. local SGD        (demo local-sgd) DDP's post-local-SGD hook registered and the optimizer wrapped in
                       PostLocalSGDOptimizer (`local_sgd.post_local_sgd`), before any step, since the hook
                       and the averager count the steps from the first
What differs between a real run and a simulated one is only the `World`: its size, how the model
gets its tensors, and whether DDP may talk to the other ranks at wrap time.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict

import torch
from torch import nn

from ddpfsdp.demos.train.spec import RunSpec
from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.parallel.strategies import Prepared, build_optimizer, optimizer_impl, shard, wrap_ddp


class Wrapping(TypedDict, total=False):
    """What `Prepared` reports of the data-parallel wrap: FSDP's fields, or DDP's bucket size."""

    sharding: str
    wrap: str
    fsdp_api: int
    mesh: Any  # the DeviceMesh FSDP shards over
    units: list[str]
    unit_params: list[int]
    bucket_mb: float


@dataclass(frozen=True)
class World:
    """The ranks a run trains on, as this process sees them: a real process group of `size` ranks."""

    size: int
    # DDP checks parameter shapes across the ranks and broadcasts rank 0's weights when it wraps.
    init_sync: ClassVar[bool] = True

    def materialized(self, model: nn.Module) -> contextlib.AbstractContextManager:
        """The block in which the model holds its tensors and is wrapped: a real model holds them already."""
        return contextlib.nullcontext()


def parallelize(model: nn.Module, run: RunSpec, world: World, device: torch.device | str, *,
                dims: ParallelDims | None = None, mesh: Any = None) -> Prepared:
    """`model` parallelized as `run` says over `world`, with its optimizer. Call on every rank after the
    default process group is initialised, with the model on the CPU (as `build_model` returns it) or,
    for a simulated world, on meta; it is moved to `device` as it is wrapped.

    Of `run`, the options of the parallelism and the optimizer are read: precision, tp,
    sequence_parallel, cp, cp_split, checkpoint_activations, strategy, bucket_mb (DDP and zro), sharding, wrap,
    fsdp_api, replicas and prefetch (FSDP), optimizer, optimizer_impl, lr, compile, compile_backend, and
    period and local_sgd_warmup (local SGD, DDP only). A
    choice the model or the world cannot take raises ValueError saying what would do.

    A pipeline's stage (`parallel.pipeline`) comes with the run's degrees and mesh, made once for all its
    stages; a whole model's are made here.
    """
    from ddpfsdp.demos.train.models import model_facts

    device = torch.device(device)
    dims = dims or ParallelDims.of(run, world.size)
    if run.precision == "bf16" and any(p.dtype != torch.bfloat16 for p in model.parameters()):
        model = model.to(torch.bfloat16)  # a model built in bf16 (a simulated one) needs no cast
    # FSDP, tensor, pipeline and context parallelism work on the run's mesh of its degrees; DDP on the default group.
    sharded = run.strategy == "fsdp" and dims.dp * dims.cp > 1
    if mesh is None and (sharded or dims.tp > 1 or dims.pp > 1 or dims.cp > 1):
        mesh = dims.build_mesh(device.type)
    two_d = None
    if run.tp:
        from ddpfsdp.demos.parallel.tensor_parallel import TwoD

        two_d = TwoD.apply(model, run, dims, mesh)
    experts = None
    if run.is_moe:
        from ddpfsdp.demos.parallel.expert_parallel import ExpertParallel

        experts = ExpertParallel.apply(model, dims, device)
    context = None
    if dims.cp > 1:
        from ddpfsdp.demos.parallel.context_parallel import ContextParallel

        context = ContextParallel.apply(model, run, dims, mesh)
    if run.checkpoint_activations:
        model.checkpoint_activations = True
    facts = model_facts(model, dims.fsdp_size if run.strategy == "fsdp" else 1)
    compiled = None
    if run.compile:
        from ddpfsdp.demos.parallel.compiled import Compiled

        if run.strategy == "fsdp" and run.fsdp_api != 2:
            raise ValueError("compile runs with FSDP2 (fsdp_api 2): each block compiled, then fully_shard")

        compiled = Compiled(run.compile_backend, device.type)
        if run.strategy == "fsdp":
            compiled.compile_blocks(model)
    wrapping: Wrapping = {}
    wrapped = model
    if sharded:
        wrapped, fsdp_mesh, units, unit_params = shard(model, run, device, dims, mesh,
                                                       experts.params() if experts is not None else None)
        wrapping = dict(sharding=run.sharding, wrap=run.wrap, fsdp_api=run.fsdp_api, mesh=fsdp_mesh, units=units,
                        unit_params=unit_params)
    with world.materialized(model):
        if run.strategy == "fsdp" and not sharded:
            wrapped = model.to(device)  # nothing to shard over: the model (a pipeline's stage) only moves
        if run.strategy in ("ddp", "zro"):
            wrapped = wrap_ddp(model, device, _ddp_bucket_cap_mb(run, compiled is not None), world.init_sync)
            wrapping = dict(bucket_mb=run.bucket_mb)
            if compiled is not None:
                compiled.compile_ddp(wrapped)
        impl = optimizer_impl(run, device)
        optimizer = build_optimizer(run, wrapped, impl)
        if run.is_local_sgd:
            if run.strategy != "ddp":
                raise ValueError("local SGD averages DDP replicas: train it with the ddp strategy")
            from ddpfsdp.demos.parallel.local_sgd import post_local_sgd

            optimizer = post_local_sgd(wrapped, optimizer, run.period, run.local_sgd_warmup or 0)
    return Prepared(wrapped, optimizer, strategy=run.strategy, device=device, world_size=world.size,
                    precision=run.precision, optimizer_name=run.optimizer, lr=run.lr, dims=dims, two_d=two_d,
                    context=context, facts=facts, optimizer_impl=impl, compiled=compiled, experts=experts,
                    **wrapping)


def _ddp_bucket_cap_mb(run: RunSpec, compiled: bool) -> float | None:
    """DDP's bucket_cap_mb. Compiled at the default cap, torch's own default (None): DDPOptimizer cuts its
    first piece at 1 MiB (torch/_dynamo/convert_frame.py builds it without DDP's first-bucket cap), and
    DDP's first bucket is 1 MiB only when bucket_cap_mb is left to torch, the whole cap when it is given
    (torch/nn/parallel/distributed.py); the same 25 MiB given would cut the graph where no bucket ends."""
    from ddpfsdp.demos.theory.buckets import DDP_BUCKET_CAP_MB

    return None if compiled and run.bucket_mb == DDP_BUCKET_CAP_MB else run.bucket_mb
