"""The analytic model's figures for a demo's own run, as PyTorch runs it: DDP, DDP with
ZeroRedundancyOptimizer (`zro`), and FSDP2 with each sharding (`grad-op`, `zero3`, `hsdp`); shown beside
the run's measurements."""

from __future__ import annotations

from typing import NamedTuple

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.comm import OpFigures, op_figures, step_comm, total_wire_bytes
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import Precision, check_optimizer, precision_for
from ddpfsdp.demos.theory.sharding import canonical_sharding
from ddpfsdp.demos.theory.state import ModelState, model_state
from ddpfsdp.demos.theory.working_set import working_set
from ddpfsdp.demos.base.units import format_bytes


class _Plan(NamedTuple):
    """How a run maps onto the model: the strategy it is, and its collectives per step."""

    name: str
    comm: dict[str, OpFigures]


class RunTheory(ModelState):
    """The analytic model's per-rank figures for a demo's own configuration (bytes), shown beside its
    measurements."""

    strategy: str
    implementation: str
    working_set_bytes: int
    comm: dict[str, OpFigures]
    wire_bytes_per_rank: int
    notes: list[str]


def theory_for_run(
    *,
    strategy: str,
    sharding: str | None = None,
    params: int,
    world_size: int,
    precision: str,
    optimizer: str,
    replicas: int | None = None,
    unit_params: list[int] | None = None,
    bucket_bytes: int | None = None,
    gradient_as_bucket_view: bool = False,
    buffer_bytes: int = 0,
) -> RunTheory:
    """The model's per-rank figures for a demo's own configuration, as PyTorch runs it.

    strategy: ddp (DistributedDataParallel), zro (the `zro` demo: DDP + PyTorch's
    ZeroRedundancyOptimizer, as calc's zro: all-reduce of gradients, then each rank broadcasts the parameters
    it updated), fsdp (FSDP2 fully_shard) with sharding full (-> zero3), grad-op
    (reshard_after_forward=False, -> grad-op) or hybrid (-> hsdp over world_size/replicas GPUs per
    group). FSDP grad-op holds params, grads and optimizer state sharded between steps, as ZeRO-3
    does, and keeps every unit's parameters unsharded from its forward all-gather until backward
    ends: its working set is the full parameters (plus the unit gradients awaiting their
    reduce-scatter). `unit_params`: parameters per FSDP unit, root last. `bucket_bytes` (DDP's
    bucket cap) is reported, not used: bucket counts depend on parameter order and sizes.
    `buffer_bytes`: module buffers (BatchNorm statistics), which DDP broadcasts from rank 0 at
    every forward (forward_sync_buffers=True, the default). DDP also broadcasts its rebuilt bucket
    order once, in the second iteration: measure after at least two steps.
    """
    recipe = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    params = int(params)
    world = int(world_size)
    units = list(unit_params) if unit_params else None
    notes = [
        "Theory: the analytic model's figures for this run's configuration, shown beside the "
        "measurement, never instead of it.",
        f"{recipe.name}: {recipe.summary}.",
    ]
    if strategy == "ddp":
        plan = _ddp(params, world, recipe, buffer_bytes, bucket_bytes, notes)
    elif strategy == "zro":
        plan = _zro(params, world, recipe, buffer_bytes, notes)
    elif strategy == "fsdp":
        plan = _fsdp(canonical_sharding(sharding or "full"), params, world, recipe, replicas, units, notes)
    else:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of ddp, zro, fsdp")
    group_size = world // int(replicas or 2) if plan.name == "hsdp" else None
    state = model_state(params, world, plan.name, recipe.name, optimizer, group_size)
    work = working_set(plan.name, params, recipe.name, units, gradient_as_bucket_view=gradient_as_bucket_view)
    return {
        "strategy": plan.name,
        "implementation": implementation(plan.name, recipe.name).name,
        **state,
        "working_set_bytes": work["working_set_bytes"],
        "comm": plan.comm,
        "wire_bytes_per_rank": total_wire_bytes(plan.comm),
        "notes": notes,
    }


def _ddp(params: int, world: int, recipe: Precision, buffer_bytes: int, bucket_bytes: int | None,
         notes: list[str]) -> _Plan:
    comm = step_comm("ddp", params, world, recipe.name)
    if buffer_bytes:
        comm["broadcast"] = op_figures(None, buffer_bytes, wire_factor("broadcast", world))
    if bucket_bytes:
        notes.append(
            f"DDP all-reduces gradients in buckets of up to {format_bytes(bucket_bytes, 'MiB')}; "
            "the number of calls depends on how parameters fill them."
        )
    return _Plan("ddp", comm)


def _zro(params: int, world: int, recipe: Precision, buffer_bytes: int, notes: list[str]) -> _Plan:
    comm = step_comm("zro", params, world, recipe.name)
    comm["broadcast"] = op_figures(None, comm["broadcast"]["bytes"] + buffer_bytes, wire_factor("broadcast", world))
    notes.append(
        "PyTorch's ZeroRedundancyOptimizer (calc's zro, not DeepSpeed's ZeRO-1): DDP all-reduces the full "
        "gradients, each rank steps the optimizer for the whole parameters it owns, then broadcasts them "
        "as held (3(N-1)/N of the model per step, against the paper's 2(N-1)/N with reduce-scatter)."
    )
    return _Plan("zro", comm)


def _fsdp(sharding: str, params: int, world: int, recipe: Precision, replicas: int | None,
          units: list[int] | None, notes: list[str]) -> _Plan:
    if sharding == "full":
        return _Plan("zero3", step_comm("zero3", params, world, recipe.name, unit_params=units))
    if sharding == "grad-op":
        notes.append(
            "FSDP grad-op (reshard_after_forward=False, FSDP1's SHARD_GRAD_OP): shards rest like ZeRO-3, "
            "but each unit stays unsharded from forward until backward ends, so there is one all-gather "
            "per unit per step instead of two, and the full parameters are part of the working set."
        )
        return _Plan("grad-op", step_comm("grad-op", params, world, recipe.name, unit_params=units))
    if sharding == "hybrid":
        groups = int(replicas or 2)
        if groups < 1 or world % groups:
            raise ValueError(f"replicas {groups} must divide the world size {world}")
        group = world // groups
        notes.append(
            f"HSDP: shards within groups of {group}, replicated across {groups} groups; "
            "reduce-scatter and all-gather run in the group, an all-reduce of the shard across groups."
        )
        return _Plan("hsdp", step_comm("hsdp", params, world, recipe.name, group_size=group, unit_params=units))
    return _Plan("ddp", step_comm("ddp", params, world, recipe.name))
