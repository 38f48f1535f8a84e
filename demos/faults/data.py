"""Data faults: a sampler that deals the same order every epoch, BatchNorm statistics that follow each rank's data.

Both are silent: nothing raises, and the symptom is a measured quantity.
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults.collectives import DDP_IMPORTS
from ddpfsdp.demos.faults.fault import Fault, FaultBlock, FaultContext, PhaseBlock, measured
from ddpfsdp.demos.faults.steps import train_step

SAMPLER_SIZE = 16
SAMPLER_EPOCHS = 3
BN_FEATURES = 4
BN_SHIFT = 3.0  # rank r's features are centred on r * BN_SHIFT: each rank sees its own part of the data
BN_STEPS = 3
BN_DIFFER_ABOVE = 0.01
BN_EQUAL_BELOW = 1e-5


# --- sampler-set-epoch ------------------------------------------------------------------------------


def run_sampler(ctx: FaultContext) -> None:
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(range(SAMPLER_SIZE), num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True, seed=0)
    orders = []
    for epoch in range(SAMPLER_EPOCHS):
        if not ctx.broken:
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
    ctx.measured["orders"] = orders


def repeated_positions(orders: list[list[int]]) -> list[int]:
    """For each epoch after the first: at how many positions it deals the same index as epoch 0."""
    return [sum(a == b for a, b in zip(order, orders[0])) for order in orders[1:]]


def _describe_sampler(phase: PhaseBlock) -> list[str]:
    lines = []
    for rank, orders in enumerate(measured(phase, "orders")):
        for epoch, order in enumerate(orders or []):
            lines.append(f"rank {rank} epoch {epoch}: {order}")
        if orders:
            same = repeated_positions(orders)
            lines.append(f"rank {rank}: positions equal to epoch 0's order: "
                         + ", ".join(f"epoch {e + 1} {n} of {len(orders[0])}" for e, n in enumerate(same)))
    return lines


def _judge_sampler(block: FaultBlock) -> list[Check]:
    broken, fixed = measured(block.get("broken") or {}, "orders"), measured(block.get("fixed") or {}, "orders")

    def repeats(orders: Any) -> bool:
        return bool(orders) and len(orders) > 1 and all(order == orders[0] for order in orders[1:])

    def changes(orders: Any) -> bool:
        return bool(orders) and len(orders) > 1 and all(order != orders[0] for order in orders[1:])

    return [Check(
        "sampler_repeats_order_without_set_epoch",
        len(broken) >= 2 and all(map(repeats, broken)) and len(fixed) >= 2 and all(map(changes, fixed)),
        f"positions per later epoch equal to epoch 0's, per rank: broken {[repeated_positions(o) for o in broken if o]}, "
        f"fixed {[repeated_positions(o) for o in fixed if o]} (of {SAMPLER_SIZE // max(1, len(broken))})",
        {"broken_repeated": [repeated_positions(o) for o in broken if o], "fixed_repeated": [repeated_positions(o) for o in fixed if o]},
    )]


SAMPLER_SET_EPOCH = Fault(
    name="sampler-set-epoch",
    summary="DistributedSampler without set_epoch: every epoch deals the same order",
    broken=f"DistributedSampler(shuffle=True, seed=0) over {SAMPLER_SIZE} samples, iterated for {SAMPLER_EPOCHS} epochs",
    fixed="the same sampler with sampler.set_epoch(epoch) before each epoch",
    cause="DistributedSampler shuffles with a generator seeded with seed + epoch, and epoch stays 0 until "
          "set_epoch changes it, so every epoch draws the same permutation and deals each rank the same order.",
    fix="Call sampler.set_epoch(epoch) at the start of every epoch, on every rank, with the same epoch number.",
    program=run_sampler,
    claims={"sampler_repeats_order_without_set_epoch": "broken: every later epoch deals each rank exactly epoch 0's order; fixed: every later epoch's order differs"},
    judge=_judge_sampler,
    describe=_describe_sampler,
)


# --- batchnorm-sync -----------------------------------------------------------------------------------


def global_batch_norm(group: Any) -> Any:
    """A BatchNorm1d normalising with the statistics of every rank's batch, as SyncBatchNorm does.

    torch 2.13's SyncBatchNorm raises for CPU tensors (torch/nn/modules/batchnorm.py: "SyncBatchNorm
    expected input tensor to be on GPU ..."), so on gloo the fixed program computes the same thing:
    per-feature sum, sum of squares and count, all-reduced with a differentiable all-reduce.
    """
    import torch
    from torch import nn
    from torch.distributed.nn.functional import all_reduce

    class GlobalBatchNorm1d(nn.BatchNorm1d):
        def forward(self, x: Any) -> Any:
            if not self.training:
                return super().forward(x)
            c = x.shape[1]
            total = all_reduce(torch.cat([x.sum(0), (x * x).sum(0), x.new_tensor([x.shape[0]])]), group=group)
            count = total[-1]
            mean = total[:c] / count
            var = total[c : 2 * c] / count - mean * mean
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * count / (count - 1))
                self.num_batches_tracked += 1
            return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias

    return GlobalBatchNorm1d(BN_FEATURES)


def _sync_batchnorm_on_cpu() -> str | None:
    """What torch's own SyncBatchNorm does with CPU tensors: its error, as raised."""
    import torch
    from torch import nn

    probe = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(BN_FEATURES)))
    try:
        probe(torch.randn(2, BN_FEATURES))
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def run_batchnorm(ctx: FaultContext) -> None:
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not ctx.broken:
        ctx.measured["sync_batchnorm_on_cpu"] = _sync_batchnorm_on_cpu()
    torch.manual_seed(0)
    norm = nn.BatchNorm1d(BN_FEATURES) if ctx.broken else global_batch_norm(ctx.group)
    model = DDP(nn.Sequential(norm, nn.Linear(BN_FEATURES, 1)), process_group=ctx.group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(ctx.rank)
    for _ in range(BN_STEPS):
        train_step(model, optimizer, torch.randn(8, BN_FEATURES, generator=data) + BN_SHIFT * ctx.rank)
    ctx.measured["running_mean"] = [round(v, 4) for v in model.module[0].running_mean.tolist()]
    ctx.measured["running_var"] = [round(v, 4) for v in model.module[0].running_var.tolist()]


def largest_difference(vectors: list[Any]) -> float | None:
    """The largest difference of any element between any two ranks' vectors."""
    if len(vectors) < 2 or not all(isinstance(v, list) and v for v in vectors):
        return None
    return max(max(column) - min(column) for column in zip(*vectors))


def _describe_batchnorm(phase: PhaseBlock) -> list[str]:
    means = measured(phase, "running_mean")
    lines = [f"rank {rank} running_mean after {BN_STEPS} steps: {mean}" for rank, mean in enumerate(means)]
    spread = largest_difference(means)
    if spread is not None:
        lines.append(f"largest running_mean difference between ranks: {spread:.4f}")
    note = next((n for n in measured(phase, "sync_batchnorm_on_cpu") if n), None)
    if note:
        lines.append(f"torch's SyncBatchNorm on CPU tensors: {note}")
    return lines


def _judge_batchnorm(block: FaultBlock) -> list[Check]:
    broken = largest_difference(measured(block.get("broken") or {}, "running_mean"))
    fixed = largest_difference(measured(block.get("fixed") or {}, "running_mean"))
    return [Check(
        "batchnorm_stats_differ_across_ranks",
        broken is not None and broken > BN_DIFFER_ABOVE and fixed is not None and fixed < BN_EQUAL_BELOW,
        f"largest running_mean difference between ranks: broken {broken}, fixed {fixed} "
        f"(differ above {BN_DIFFER_ABOVE:g}, equal below {BN_EQUAL_BELOW:g})",
        {"broken_difference": broken, "fixed_difference": fixed},
    )]


BATCHNORM_SYNC = Fault(
    name="batchnorm-sync",
    summary="BatchNorm without SyncBatchNorm on different per-rank data: running statistics differ across ranks",
    broken=f"DDP trains a BatchNorm1d model; rank r's features are centred on {BN_SHIFT:g} x r",
    fixed="the BatchNorm normalises with the statistics of every rank's batch (what SyncBatchNorm computes)",
    cause="BatchNorm normalises with its local batch's statistics and updates its running mean and variance "
          "from them; DDP all-reduces gradients only, and broadcasts rank 0's buffers before each forward, so "
          "each rank's statistics follow its own data.",
    fix="Convert the model with nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping it in DDP "
        "(torch's SyncBatchNorm needs GPU tensors; on CPU this demo all-reduces the statistics itself).",
    program=run_batchnorm,
    claims={"batchnorm_stats_differ_across_ranks": "broken: the ranks' BatchNorm running means differ (by more than 0.01); fixed: equal (within 1e-5)"},
    judge=_judge_batchnorm,
    describe=_describe_batchnorm,
    imports=DDP_IMPORTS,
)

FAULTS = (SAMPLER_SET_EPOCH, BATCHNORM_SYNC)
