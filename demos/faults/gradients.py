"""Gradient faults under DDP: a parameter with no gradient, and accumulation done the slow or the wrong way.

DDP's reducer all-reduces a bucket once every parameter in it has its gradient, in every backward
that followed a synchronising forward. A parameter that never gets a gradient leaves its bucket
unreduced, and the next forward raises. Accumulating K micro-batches runs K backwards: without
`no_sync` each one all-reduces; and the gradients add up over the K backwards, so a loss not divided
by K gives K times the gradient of the mean.
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults import verdicts
from ddpfsdp.demos.faults.collectives import DDP_IMPORTS
from ddpfsdp.demos.faults.fault import Fault, FaultBlock, FaultContext, PhaseBlock, RankRecord, measured, phase_ranks
from ddpfsdp.demos.faults.steps import ACCUMULATION_STEPS, count_ops, train_step

UNUSED_STEPS = 3
DDP_UNUSED_ERROR = "Expected to have finished reduction in the prior iteration"  # torch/csrc/distributed/c10d/reducer.cpp
GRAD_RTOL = 1e-5
RATIO_TOL = 1e-4


def _ddp(module: Any, group: Any, **kwargs: Any) -> Any:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(module, process_group=group, **kwargs)


# --- unused-parameters ------------------------------------------------------------------------------


def _two_heads() -> Any:
    import torch
    from torch import nn

    class TwoHeads(nn.Module):
        """A shared body with two heads; this task's forward uses only `head`."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 1)
            self.aux_head = nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.head(torch.relu(self.body(x)))

    torch.manual_seed(0)
    return TwoHeads()


def run_unused(ctx: FaultContext) -> None:
    import torch
    from ddpfsdp.demos.faults.flight_recorder import group_entries

    model = _ddp(_two_heads(), ctx.group, find_unused_parameters=not ctx.broken)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ctx.measured["parameter_tensors"] = len(list(model.parameters()))
    data = torch.Generator().manual_seed(ctx.rank)
    try:
        for step in range(UNUSED_STEPS):
            train_step(model, optimizer, torch.randn(4, 4, generator=data))
            ctx.measured["steps_done"] = step + 1
    finally:
        entries = group_entries(ctx.group, frames=False)
        ctx.measured["all_reduces"] = [[e["input_sizes"], e["input_dtypes"]] for e in entries if e["op"] == "gloo:all_reduce"]


def _all_reduce_kinds(record: RankRecord) -> dict[str, int]:
    """`[[35]] Float` -> how many times it was all-reduced."""
    kinds: dict[str, int] = {}
    for sizes, dtypes in (record.get("measured") or {}).get("all_reduces") or []:
        key = f"{sizes} {','.join(dtypes or [])}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def _describe_unused(phase: PhaseBlock) -> list[str]:
    lines = ["steps finished per rank: " + ", ".join(f"rank {r} {n or 0}" for r, n in enumerate(measured(phase, "steps_done")))]
    record = (phase_ranks(phase) or [{}])[0]
    kinds = _all_reduce_kinds(record)
    shown = ", ".join(f"{count} x {kind}" for kind, count in kinds.items()) or "none"
    lines.append(f"rank 0's all-reduces in the group: {shown}")
    return lines


def _judge_unused(block: FaultBlock) -> list[Check]:
    fixed_ranks = phase_ranks(block.get("fixed") or {})
    broken_ranks = phase_ranks(block.get("broken") or {})
    per_rank = []
    for record in fixed_ranks:
        steps = (record.get("measured") or {}).get("steps_done") or 0
        tensors = (record.get("measured") or {}).get("parameter_tensors")
        maps = sum(n for kind, n in _all_reduce_kinds(record).items() if kind == f"[[{tensors}]] Int")
        per_rank.append((steps, maps))
    broken_grads = [sum(n for kind, n in _all_reduce_kinds(r).items() if kind.endswith("Float")) for r in broken_ranks]
    passed = (len(per_rank) >= 2 and all(steps == UNUSED_STEPS and maps == steps for steps, maps in per_rank)
              and len(broken_grads) >= 2 and not any(broken_grads))
    return [
        verdicts.every_rank_raised("unused_parameters_error_raised", block, DDP_UNUSED_ERROR,
                                   f"DDP's error ('{DDP_UNUSED_ERROR} ...')"),
        Check(
            "unused_parameters_fix_costs_an_all_reduce_per_step",
            passed,
            f"fixed: per rank (steps, all-reduces of the used-parameter map) {per_rank}; "
            f"broken: gradient all-reduces before the error per rank {broken_grads}",
            {"fixed_steps_and_map_all_reduces": per_rank, "broken_gradient_all_reduces": broken_grads},
        ),
    ]


UNUSED_PARAMETERS = Fault(
    name="unused-parameters",
    summary="DDP with a parameter that gets no gradient: torch's error at the next forward",
    broken="DDP wraps a body with two heads whose forward uses only one; the default find_unused_parameters=False",
    fixed="the same model with find_unused_parameters=True",
    cause="DDP's reducer all-reduces a bucket only when every parameter in it has a gradient; the unused head "
          "never gets one, so its bucket is never reduced and the next forward finds the previous reduction unfinished.",
    fix="Pass find_unused_parameters=True (each step then also all-reduces a map of which parameters were used, "
        "and DDP walks the autograd graph after forward), or take the unused head out of the module DDP wraps.",
    program=run_unused,
    claims={
        "unused_parameters_error_raised": "broken: every rank raises DDP's 'Expected to have finished reduction in the prior iteration' error; fixed: none",
        "unused_parameters_fix_costs_an_all_reduce_per_step": "fixed: every step all-reduces the used-parameter map (one int per parameter tensor) besides the gradients; broken: no gradient all-reduce completes",
    },
    judge=_judge_unused,
    describe=_describe_unused,
    raises=True,
    imports=DDP_IMPORTS,
)


# --- accumulation-sync and unscaled-accumulation ------------------------------------------------------


def _accumulate(ctx: FaultContext, *, skip_sync: bool, divide_loss: bool) -> None:
    """One optimizer step's worth of K micro-batches; measures its all-reduces and its gradient."""
    import contextlib

    from ddpfsdp.demos.faults.flight_recorder import group_entries
    from ddpfsdp.demos.faults.steps import (
        linear_model,
        micro_batches,
        reference_grad,
        versus_reference,
    )

    model = _ddp(linear_model(), ctx.group)
    before = count_ops(group_entries(ctx.group, frames=False), "gloo:all_reduce")
    for k, batch in enumerate(micro_batches(ctx.rank)):
        last = k == ACCUMULATION_STEPS - 1
        with (model.no_sync() if skip_sync and not last else contextlib.nullcontext()):
            loss = model(batch).pow(2).mean()
            (loss / ACCUMULATION_STEPS if divide_loss else loss).backward()
    ctx.measured["all_reduces"] = count_ops(group_entries(ctx.group, frames=False), "gloo:all_reduce") - before
    ctx.measured.update(versus_reference(model.module.weight.grad, reference_grad(ctx.world_size)))


def run_accumulation_sync(ctx: FaultContext) -> None:
    _accumulate(ctx, skip_sync=not ctx.broken, divide_loss=True)


def run_unscaled(ctx: FaultContext) -> None:
    _accumulate(ctx, skip_sync=True, divide_loss=not ctx.broken)


def _describe_accumulation(phase: PhaseBlock) -> list[str]:
    counts = measured(phase, "all_reduces")
    ratios, diffs = measured(phase, "norm_ratio"), measured(phase, "relative_difference")
    return [
        f"all_reduce calls in one optimizer step of {ACCUMULATION_STEPS} micro-batches: "
        + ", ".join(f"rank {r} {n}" for r, n in enumerate(counts)),
        "gradient against one process on the global batch, |g| / |ref|: "
        + ", ".join(f"rank {r} {x:.3f}" for r, x in enumerate(ratios) if x is not None)
        + "; relative difference: " + ", ".join(f"rank {r} {x:.3f}" for r, x in enumerate(diffs) if x is not None),
    ]


def _judge_accumulation_sync(block: FaultBlock) -> list[Check]:
    broken, fixed = measured(block.get("broken") or {}, "all_reduces"), measured(block.get("fixed") or {}, "all_reduces")
    diffs = [*measured(block.get("broken") or {}, "relative_difference"), *measured(block.get("fixed") or {}, "relative_difference")]
    same = len(diffs) >= 4 and all(isinstance(d, float) and d <= GRAD_RTOL for d in diffs)
    return [
        Check(
            "accumulation_syncs_every_micro_batch",
            len(broken) >= 2 and all(n == ACCUMULATION_STEPS for n in broken) and len(fixed) >= 2 and all(n == 1 for n in fixed),
            f"all-reduces in one step of {ACCUMULATION_STEPS} micro-batches per rank: broken {broken}, fixed {fixed}",
            {"broken_all_reduces": broken, "fixed_all_reduces": fixed, "micro_batches": ACCUMULATION_STEPS},
        ),
        Check(
            "accumulation_same_gradients",
            same,
            f"relative difference from one process on the global batch (broken ranks, then fixed): "
            f"{[round(d, 9) if isinstance(d, float) else d for d in diffs]} (limit {GRAD_RTOL:g})",
            {"relative_differences": diffs, "rtol": GRAD_RTOL},
        ),
    ]


def _judge_unscaled(block: FaultBlock) -> list[Check]:
    ratios = measured(block.get("broken") or {}, "norm_ratio")
    diffs = measured(block.get("fixed") or {}, "relative_difference")
    passed = (len(ratios) >= 2 and all(isinstance(r, float) and abs(r - ACCUMULATION_STEPS) <= RATIO_TOL * ACCUMULATION_STEPS for r in ratios)
              and len(diffs) >= 2 and all(isinstance(d, float) and d <= GRAD_RTOL for d in diffs))
    return [Check(
        "unscaled_loss_multiplies_gradients",
        passed,
        f"broken: |g| / |one-process g| per rank {[round(r, 6) if isinstance(r, float) else r for r in ratios]} "
        f"(K = {ACCUMULATION_STEPS}); fixed: relative difference per rank {[round(d, 9) if isinstance(d, float) else d for d in diffs]}",
        {"broken_norm_ratios": ratios, "fixed_relative_differences": diffs, "micro_batches": ACCUMULATION_STEPS},
    )]


ACCUMULATION_SYNC = Fault(
    name="accumulation-sync",
    summary=f"gradient accumulation without no_sync: {ACCUMULATION_STEPS} all-reduces per optimizer step instead of 1",
    broken=f"DDP accumulates {ACCUMULATION_STEPS} micro-batches per optimizer step, every forward and backward synchronising",
    fixed=f"the first {ACCUMULATION_STEPS - 1} micro-batches' forward and backward inside model.no_sync()",
    cause="DDP all-reduces the gradients in every backward that follows a synchronising forward; without no_sync "
          "each micro-batch's backward syncs the partial sum, though only the last sync is needed.",
    fix="Run the forward and backward of every micro-batch but the last inside `model.no_sync()` (FSDP2: "
        "set_requires_gradient_sync(False)); the last backward all-reduces the accumulated gradients once.",
    program=run_accumulation_sync,
    claims={
        "accumulation_syncs_every_micro_batch": f"broken: {ACCUMULATION_STEPS} all-reduces per optimizer step (one per micro-batch); fixed: 1",
        "accumulation_same_gradients": "both give the gradient of one process on the global batch (relative difference at most 1e-5)",
    },
    judge=_judge_accumulation_sync,
    describe=_describe_accumulation,
    imports=DDP_IMPORTS,
)

UNSCALED_ACCUMULATION = Fault(
    name="unscaled-accumulation",
    summary=f"the loss not divided by the accumulation steps: gradients {ACCUMULATION_STEPS} times the single-process reference",
    broken=f"DDP accumulates {ACCUMULATION_STEPS} micro-batches with no_sync, calling backward on each micro-batch's mean loss",
    fixed=f"each micro-batch's loss divided by {ACCUMULATION_STEPS} before backward",
    cause="Backward adds into .grad: K micro-batches each backpropagating its mean loss leave the sum of K "
          "gradients, K times the gradient of the mean; DDP averages across ranks, never across micro-batches.",
    fix="Divide each micro-batch's loss by the number of accumulation steps before backward (or sum the losses "
        "and divide by the samples in the whole step).",
    program=run_unscaled,
    claims={
        "unscaled_loss_multiplies_gradients": f"broken: the gradient is {ACCUMULATION_STEPS} times one process's on the global batch (|g| / |ref| within 1e-4 of K); fixed: equal (relative difference at most 1e-5)",
    },
    judge=_judge_unscaled,
    describe=_describe_accumulation,
    imports=DDP_IMPORTS,
)

FAULTS = (UNUSED_PARAMETERS, ACCUMULATION_SYNC, UNSCALED_ACCUMULATION)
