"""Hangs: ranks that stop issuing the same collectives, and wait for each other until the timeout.

Collectives in a process group are matched by the order in which each rank issues them (the flight
recorder's `collective_seq_id`), never by name or call site. A rank that issues one more, or another,
leaves its peers waiting in a collective nobody else joins; with gloo both sides give up after the
group's timeout with "Timed out waiting <timeout>ms for recv (or send) operation to complete".
Every program here names the step it is in by a small function, so the flight recorder's frame says
which line issued each collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults import verdicts
from ddpfsdp.demos.faults.fault import Fault, FaultBlock, FaultContext, PhaseBlock, measured
from ddpfsdp.demos.faults.steps import mesh_for, straggle, train_step

if TYPE_CHECKING:
    import torch

DESYNC_STEPS = 3
LOG_EVERY = 2  # the loss is logged at steps 1, 3, ...
UNEVEN_BATCHES = 2  # every rank's batches; the last rank has one more in the broken program
DDP_IMPORTS = ("torch._dynamo", "torch.nn.parallel")
FSDP_IMPORTS = ("torch._dynamo", "torch.distributed.fsdp", "torch.distributed.tensor")


def _hang_claims(name: str) -> dict[str, str]:
    return {
        f"{name}_times_out": "broken: a rank raises gloo's timeout after waiting the group's whole timeout, and every rank fails; fixed: no rank raises",
        f"{name}_ranks_part_in_flight_recorder": "broken: the ranks' flight-recorder entries differ at one sequence id; fixed: every rank issues the same collectives",
        f"{name}_torch_analyzer_flags_it": "torch's flight-recorder analyzer (pg_config filled in) reports a mismatch in the broken run's group and none in the fixed run's",
    }


def _judge_hang(name: str):
    def judge(block: FaultBlock) -> list[Check]:
        return [
            verdicts.hung_until_timeout(f"{name}_times_out", block),
            verdicts.ranks_part_in_flight_recorder(f"{name}_ranks_part_in_flight_recorder", block),
            verdicts.analyzer_flags_broken_only(f"{name}_torch_analyzer_flags_it", block),
        ]

    return judge


# --- desync: an extra collective on one rank ----------------------------------------------------------


def _sync_gradients(grads: Any, group: Any) -> None:
    import torch.distributed as dist

    dist.all_reduce(grads, group=group)


def _log_mean_loss(step: int, group: Any) -> None:
    import torch
    import torch.distributed as dist

    loss = torch.tensor([float(step)])
    dist.all_reduce(loss, group=group)


def _share_stop_flag(stop: Any, group: Any) -> None:
    import torch.distributed as dist

    dist.broadcast(stop, src=dist.get_global_rank(group, 0), group=group)


def run_desync(ctx: FaultContext) -> None:
    import torch

    grads, stop = torch.ones(8), torch.zeros(1)
    for step in range(DESYNC_STEPS):
        _sync_gradients(grads, ctx.group)
        if step % LOG_EVERY == 1:
            straggle(ctx, 0)
            # Broken: only rank 0, which prints the log line, all-reduces the loss for it.
            if ctx.rank == 0 or not ctx.broken:
                _log_mean_loss(step, ctx.group)
        _share_stop_flag(stop, ctx.group)
        ctx.measured["steps_done"] = step + 1


def _describe_steps(phase: PhaseBlock) -> list[str]:
    done = measured(phase, "steps_done")
    return ["steps finished per rank: " + ", ".join(f"rank {r} {n or 0}" for r, n in enumerate(done))]


DESYNC = Fault(
    name="desync",
    summary="one rank issues a collective the others do not: every rank waits until the timeout",
    broken=f"every step all-reduces gradients, then broadcasts rank 0's stop flag; every {LOG_EVERY} steps rank 0 "
           "alone also all-reduces the loss for the log line it prints",
    fixed="every rank all-reduces the loss for the log line; only rank 0 prints it",
    cause="Collectives are paired by the order in which each rank issues them in the group (the flight recorder's "
          "sequence id), not by name or line: rank 0's extra all_reduce meets rank 1's broadcast at the same "
          "sequence id, and neither can finish.",
    fix="Issue the same collectives in the same order on every rank: compute the logged value on every rank "
        "and keep only the printing under `if rank == 0`.",
    program=run_desync,
    claims=_hang_claims("desync"),
    judge=_judge_hang("desync"),
    describe=_describe_steps,
    hangs=True,
)


# --- rank0-gather: a sharded state dict gathered on rank 0 only -----------------------------------------


def _full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """What get_model_state_dict(full_state_dict=True) does for FSDP2: all-gather every DTensor shard."""
    state = {}
    for name, tensor in model.state_dict().items():
        state[name] = tensor.full_tensor()
    return state


def _wait_for_checkpoint(group: Any) -> None:
    import torch.distributed as dist

    dist.barrier(group=group)


def run_rank0_gather(ctx: FaultContext) -> None:
    import io

    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    fully_shard(model, mesh=mesh_for(ctx.group))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 4, generator=torch.Generator().manual_seed(ctx.rank))).pow(2).mean().backward()
    optimizer.step()
    straggle(ctx, 0)
    # Broken: the gather sits inside the rank-0 branch that saves the checkpoint.
    if ctx.rank == 0 or not ctx.broken:
        state = _full_state_dict(model)
        if ctx.rank == 0:
            buffer = io.BytesIO()
            torch.save(state, buffer)
            ctx.measured["checkpoint_bytes"] = buffer.tell()
    _wait_for_checkpoint(ctx.group)
    ctx.measured["passed_barrier"] = True


def _describe_checkpoint(phase: PhaseBlock) -> list[str]:
    saved = measured(phase, "checkpoint_bytes")[:1]
    passed = measured(phase, "passed_barrier")
    return [
        f"rank 0 serialised a full checkpoint of {saved[0]} bytes" if saved and saved[0] else "rank 0 saved no checkpoint",
        "ranks past the barrier: " + (", ".join(str(r) for r, ok in enumerate(passed) if ok) or "none"),
    ]


RANK0_GATHER = Fault(
    name="rank0-gather",
    summary="a collective called on one rank only: FSDP2's sharded state dict gathered under `if rank == 0:`",
    broken="after a step of FSDP2 training, rank 0 alone gathers the full state dict (DTensor.full_tensor) to save "
           "it, while every rank then waits at a barrier for the checkpoint",
    fixed="every rank gathers the full state dict; only rank 0 saves it",
    cause="Gathering a sharded state dict is a collective (DTensor.full_tensor all-gathers the shards, as "
          "get_model_state_dict(full_state_dict=True) does); called by rank 0 alone, its all_gather meets the "
          "other ranks' barrier at the same sequence id.",
    fix="Call the gather on every rank and keep only the save under `if rank == 0` "
        "(StateDictOptions(full_state_dict=True, cpu_offload=True) then keeps the result on rank 0 only).",
    program=run_rank0_gather,
    claims=_hang_claims("rank0_gather"),
    judge=_judge_hang("rank0_gather"),
    describe=_describe_checkpoint,
    hangs=True,
    imports=FSDP_IMPORTS,
)


# --- uneven-inputs: one rank has one more batch -------------------------------------------------------


def _barrier_before_eval(group: Any) -> None:
    import torch.distributed as dist

    dist.barrier(group=group)


def run_uneven(ctx: FaultContext) -> None:
    import contextlib

    import torch
    from torch import nn
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1), process_group=ctx.group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    count = UNEVEN_BATCHES + (1 if ctx.rank == ctx.world_size - 1 else 0)
    ctx.measured["batches"] = count
    data = torch.Generator().manual_seed(ctx.rank)
    # Fixed: Join lets a rank that has run out of batches shadow the others' all-reduces.
    with (contextlib.nullcontext() if ctx.broken else Join([model])):
        for done in range(count):
            if done == UNEVEN_BATCHES:
                straggle(ctx, ctx.world_size - 1)
            train_step(model, optimizer, torch.randn(3, 4, generator=data))
            ctx.measured["batches_done"] = done + 1
    _barrier_before_eval(ctx.group)
    ctx.measured["passed_barrier"] = True


def _describe_batches(phase: PhaseBlock) -> list[str]:
    counts, done = measured(phase, "batches"), measured(phase, "batches_done")
    return [
        "batches per rank: " + ", ".join(f"rank {r} {n}" for r, n in enumerate(counts)),
        "batches trained per rank: " + ", ".join(f"rank {r} {n or 0}" for r, n in enumerate(done)),
    ]


UNEVEN_INPUTS = Fault(
    name="uneven-inputs",
    summary="one rank has one more batch: its last backward all-reduces with ranks that have left the loop",
    broken=f"DDP trains {UNEVEN_BATCHES} batches on every rank but the last, which has {UNEVEN_BATCHES + 1}; "
           "after the loop every rank waits at a barrier before evaluating",
    fixed="the same uneven batches, with the loop inside `Join([model])`",
    cause="DDP all-reduces the gradients in every backward; the rank with one more batch issues an all_reduce "
          "the others never join: they have left the loop and wait at the barrier, at the same sequence id.",
    fix="Wrap the loop in `torch.distributed.algorithms.join.Join([model])`: a rank out of batches shadows the "
        "others' all-reduces with zero gradients until all are done; or give every rank the same number of batches.",
    program=run_uneven,
    claims=_hang_claims("uneven_inputs"),
    judge=_judge_hang("uneven_inputs"),
    describe=_describe_batches,
    hangs=True,
    imports=DDP_IMPORTS,
)

FAULTS = (DESYNC, RANK0_GATHER, UNEVEN_INPUTS)
