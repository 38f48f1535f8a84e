"""Pipeline faults: a batch that the micro-batch count does not divide, under torch.distributed.pipelining.

A schedule splits each batch with torch.tensor_split (pipelining/microbatch.py `_split_tensor`), which
accepts a count that does not divide the batch: 10 rows in 4 micro-batches are 3, 3, 2 and 2 rows. A
PipelineStage built without example inputs infers its shapes from the first micro-batch only, and
every later stage allocates one receive buffer per micro-batch of that shape (stage.py
`_setup_forward_recv_info` in torch 2.13, `_prepare_forward_infra` in 2.11). The first smaller
micro-batch then breaks one stage, and its neighbour waits for a send or a receive that never comes.
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults import verdicts
from ddpfsdp.demos.faults.fault import Fault, FaultBlock, FaultContext, PhaseBlock, measured, phase_ranks

BATCH = 10  # rows per step, on the first stage
BROKEN_MICROBATCHES = 4  # 10 = 3 + 3 + 2 + 2
FIXED_MICROBATCHES = 5  # 10 = 5 x 2
FEATURES, HIDDEN, OUTPUTS = 8, 16, 4
PIPELINE_STEPS = 3
LEARNING_RATE = 0.1
LOSS_RTOL = 1e-5
PIPELINE_IMPORTS = ("torch.distributed.pipelining",)
# A size mismatch as torch words it: the broadcast in the last stage's loss (torch 2.13), or the first
# stage's input check (pipelining/_utils.py validate_tensor_metadata: torch 2.11, or 2.13 under DETAIL).
SHAPE_ERRORS = ("must match the size of tensor", "shape mismatch")


def _stage_module(stage: int, stages: int) -> Any:
    """Stage `stage` of the model: Linear + ReLU, the last stage a Linear head; seeded by its index."""
    import torch
    from torch import nn

    torch.manual_seed(stage)
    width_in = FEATURES if stage == 0 else HIDDEN
    if stage == stages - 1:
        return nn.Sequential(nn.Linear(width_in, OUTPUTS))
    return nn.Sequential(nn.Linear(width_in, HIDDEN), nn.ReLU())


def _batch() -> tuple[Any, Any]:
    import torch

    data = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, FEATURES, generator=data), torch.randn(BATCH, OUTPUTS, generator=data)


def reference_losses(stages: int) -> list[float]:
    """One process, the whole model on the whole batch, PIPELINE_STEPS steps of SGD: the loss before each."""
    import torch
    from torch import nn

    model = nn.Sequential(*(_stage_module(s, stages) for s in range(stages)))
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    inputs, targets = _batch()
    losses = []
    for _ in range(PIPELINE_STEPS):
        loss = nn.functional.mse_loss(model(inputs), targets)
        losses.append(float(loss))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return losses


def run_microbatch_split(ctx: FaultContext) -> None:
    import torch
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks

    count = BROKEN_MICROBATCHES if ctx.broken else FIXED_MICROBATCHES
    stages = ctx.world_size
    module = _stage_module(ctx.rank, stages)
    inputs, targets = _batch()
    # The rows of each micro-batch, as the schedule's own split makes them.
    chunks, _ = split_args_kwargs_into_chunks((inputs,), None, count)
    ctx.measured["micro_batch_rows"] = [int(chunk[0].shape[0]) for chunk in chunks]
    # No example inputs: the stage infers its shapes from the first micro-batch.
    stage = PipelineStage(module, ctx.rank, stages, torch.device("cpu"), group=ctx.group)
    schedule = ScheduleGPipe(stage, n_microbatches=count, loss_fn=nn.MSELoss())
    optimizer = torch.optim.SGD(module.parameters(), lr=LEARNING_RATE)
    losses: list[float] = []
    try:
        for step in range(PIPELINE_STEPS):
            if stage.is_first:
                schedule.step(inputs)
            elif stage.is_last:
                step_losses: list[Any] = []
                schedule.step(target=targets, losses=step_losses)
                losses.append(float(torch.stack([loss.detach() for loss in step_losses]).mean()))
            else:
                schedule.step()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            ctx.measured["steps_done"] = step + 1
    finally:
        # What each micro-batch's receive buffer holds: the shapes inferred from micro-batch 0.
        ctx.measured["receive_buffer_rows"] = [int(infos[0].buffer.shape[0]) for _, infos in sorted(stage.args_recv_info.items())
                                               if not stage.is_first and infos and getattr(infos[0], "buffer", None) is not None]
        if stage.is_last:
            ctx.measured["losses"] = [round(loss, 7) for loss in losses]
            ctx.measured["reference_losses"] = [round(loss, 7) for loss in reference_losses(stages)]


def _last(phase: PhaseBlock, key: str) -> Any:
    values = measured(phase, key)
    return values[-1] if values else None


def _describe_split(phase: PhaseBlock) -> list[str]:
    rows, buffers = _last(phase, "micro_batch_rows"), _last(phase, "receive_buffer_rows")
    losses, reference = _last(phase, "losses"), _last(phase, "reference_losses")
    last = len(phase_ranks(phase)) - 1
    lines = [
        f"micro-batch rows, as the schedule split the batch of {BATCH}: {rows}",
        f"rank {last}'s receive buffer rows per micro-batch: {buffers}",
        "steps finished per rank: " + ", ".join(f"rank {r} {n or 0}" for r, n in enumerate(measured(phase, "steps_done"))),
    ]
    if losses:
        lines.append(f"loss per step on rank {last}: {losses}; one process on the whole batch: {reference}")
    return lines


def _shape_error_ranks(phase: PhaseBlock, timeout_s: Any) -> list[int]:
    """Ranks that raised a size mismatch (SHAPE_ERRORS) before the group's timeout."""
    return [r.get("rank") for r in phase_ranks(phase)
            if any(phrase in verdicts.error_text(r) for phrase in SHAPE_ERRORS)
            and isinstance(r.get("wall_s"), (int, float)) and isinstance(timeout_s, (int, float)) and r["wall_s"] < timeout_s]


def _judge_split(block: FaultBlock) -> list[Check]:
    broken, fixed = block.get("broken") or {}, block.get("fixed") or {}
    timeout_s = block.get("timeout_s")
    split, buffers = _last(broken, "micro_batch_rows"), _last(broken, "receive_buffer_rows")
    fixed_split, fixed_buffers = _last(fixed, "micro_batch_rows"), _last(fixed, "receive_buffer_rows")
    raised = _shape_error_ranks(broken, timeout_s)
    uneven = (isinstance(split, list) and len(split) == BROKEN_MICROBATCHES and len(set(split)) > 1
              and buffers == [split[0]] * len(split) and len(raised) == 1)
    even = (isinstance(fixed_split, list) and len(fixed_split) == FIXED_MICROBATCHES and len(set(fixed_split)) == 1
            and fixed_buffers == fixed_split)
    losses, reference = _last(fixed, "losses"), _last(fixed, "reference_losses")
    same = (isinstance(losses, list) and isinstance(reference, list) and len(losses) == len(reference) == PIPELINE_STEPS
            and all(abs(a - b) <= LOSS_RTOL * abs(b) for a, b in zip(losses, reference)) and losses[-1] < losses[0])
    broken_steps = [n or 0 for n in measured(broken, "steps_done")]
    stuck = len(broken_steps) >= 2 and not any(broken_steps)
    return [
        verdicts.hung_until_timeout("pipeline_split_times_out", block),
        Check(
            "pipeline_split_buffers_keep_micro_batch_0_shape",
            uneven and even,
            f"broken: micro-batch rows {split}, last stage's receive buffers {buffers}, ranks raising a shape error "
            f"before the timeout {raised}; fixed: micro-batch rows {fixed_split}, buffers {fixed_buffers}",
            {"broken_rows": split, "broken_buffers": buffers, "shape_error_ranks": raised,
             "fixed_rows": fixed_split, "fixed_buffers": fixed_buffers},
        ),
        Check(
            "pipeline_split_fixed_trains_like_one_process",
            same and stuck,
            f"fixed: loss per step {losses}, one process on the whole batch {reference} (relative limit {LOSS_RTOL:g}); "
            f"broken: steps finished per rank {broken_steps}",
            {"fixed_losses": losses, "reference_losses": reference, "rtol": LOSS_RTOL, "broken_steps": broken_steps},
        ),
    ]


MICROBATCH_SPLIT = Fault(
    name="pipeline-microbatch-split",
    summary=f"a pipeline batch of {BATCH} in {BROKEN_MICROBATCHES} micro-batches: stages sized from the first "
            "micro-batch, one raises a shape error, its neighbour times out",
    broken=f"ScheduleGPipe over one PipelineStage per rank (no example inputs) steps a batch of {BATCH} rows in "
           f"{BROKEN_MICROBATCHES} micro-batches",
    fixed=f"the same batch of {BATCH} in {FIXED_MICROBATCHES} micro-batches of {BATCH // FIXED_MICROBATCHES} rows",
    cause=f"The schedule cuts the batch with torch.tensor_split, which takes a count that does not divide it: "
          f"{BATCH} rows in {BROKEN_MICROBATCHES} are 3, 3, 2 and 2. A PipelineStage built without example inputs "
          "infers its shapes from micro-batch 0, so each of the last stage's receive buffers has 3 rows; at "
          "micro-batch 2 it computes on a 3-row buffer that got 2 rows, and its loss meets a 2-row target. Its "
          "neighbour's send of micro-batch 3 is never received, and every stage before it waits out the group's "
          "timeout. (torch 2.11 checks the first stage's input against micro-batch 0 and raises there; the stages "
          "after it wait.)",
    fix="Choose a micro-batch count that divides the batch, and make every batch a multiple of it "
        "(drop_last=True, or pad the last batch). To find it: TORCH_DISTRIBUTED_DEBUG=DETAIL makes torch 2.13 check "
        "each micro-batch against the shapes of micro-batch 0, and the first stage then raises a "
        "PipeliningMetadataError naming both shapes.",
    program=run_microbatch_split,
    claims={
        "pipeline_split_times_out": "broken: a rank raises gloo's timeout after waiting the group's whole timeout, and every rank fails; fixed: no rank raises",
        "pipeline_split_buffers_keep_micro_batch_0_shape": f"broken: the split is uneven ({BROKEN_MICROBATCHES} micro-batches of {BATCH} rows), the last stage's receive buffers all have micro-batch 0's rows, and one rank raises a shape error before the timeout; fixed: equal micro-batches and buffers",
        "pipeline_split_fixed_trains_like_one_process": f"fixed: the loss of each of {PIPELINE_STEPS} steps equals one process on the whole batch (relative 1e-5) and falls; broken: no rank finishes a step",
    },
    judge=_judge_split,
    describe=_describe_split,
    hangs=True,
    collectives=False,
    imports=PIPELINE_IMPORTS,
)

FAULTS = (MICROBATCH_SPLIT,)
