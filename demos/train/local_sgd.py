"""Local SGD on real ranks, against plain DDP on the same model, seed and data, in one launch.

    ddpfsdp demo local-sgd --procs 2
    ddpfsdp demo local-sgd --procs 4 --period 8 --local-sgd-warmup 4

Every rank trains the same DDP model twice from the same seed on the same batches, each built by the one
`parallelize()`: first plain DDP (gradients all-reduced every step), then post-local SGD with torch's own
tools (`parallel.local_sgd`: DDP's post-local-SGD hook, `PeriodicModelAverager` inside
`PostLocalSGDOptimizer`): W synchronous steps, then each rank steps on its own gradients and the
parameters are averaged over every rank every H steps. Each step of both runs is measured on every rank:
the collectives issued inside it (`measure.comm.CommCounter`: forward, backward, the optimizer step and any
averaging), and, outside the count, how far the rank's parameters are from rank 0's (rank 0's broadcast,
element by element). The losses are the ranks' mean. The checks (`claims.local_sgd`) hold the all-reduces
to torch's schedule, the bytes to (W + A) / S of DDP's, the replicas to equal after the warm-up steps and
each averaging and apart between, and the first W + 1 losses to DDP's; the loss gap after that is
reported as measured, for this run only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from ddpfsdp.demos.result.schema import DemoResult, LocalSgd, LocalSgdRun, LocalSgdStep
from ddpfsdp.demos.train.spec import RunSpec

RUNS = ("ddp", "local-sgd")  # trained in this order, the same model, seed and data


@dataclass
class _StepFigures:
    all_reduces: int
    all_reduce_bytes: int
    other_collectives: int
    other_bytes: int
    replica_diff: float


@dataclass
class _RankFigures:
    """What one rank measured, gathered to rank 0: per run, per step."""

    rank: int
    runs: dict[str, list[_StepFigures]]


def _replica_diff(model: Any) -> float:
    """The largest |p - p on rank 0| over every element of this rank's parameters (0 on rank 0)."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1).float() for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    return float((flat - reference).abs().max()) if flat.numel() else 0.0


def _train(ctx: Any, spec: RunSpec, label: str, offset: int, total: int) -> tuple[list[_StepFigures], list[float],
                                                                                 tuple[str, int, int]]:
    """One training of `spec.steps` steps, each under the collective counter and then compared across ranks."""
    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.train.loop import Progress, Trainer

    trainer = Trainer(ctx, spec, Progress(label, offset, total))
    figures = []
    for _ in range(spec.steps or 0):
        counter = CommCounter()
        with counter:
            loss = trainer.step()
        per_op = counter.per_op()
        reduced = per_op.get("all_reduce", {})
        others = [entry for op, entry in per_op.items() if op != "all_reduce"]
        figures.append(_StepFigures(int(reduced.get("count", 0)), int(reduced.get("bytes", 0)),
                                    int(sum(e["count"] for e in others)), int(sum(e["bytes"] for e in others)),
                                    _replica_diff(trainer.train_model)))
        trainer.record(label, loss, loss if trainer.on_cpu else None)
    losses = trainer.mean_losses()
    param_bytes = sum(p.numel() * p.element_size() for p in trainer.train_model.parameters() if p.requires_grad)
    model = (trainer.prepared.describe(), trainer.params, param_bytes)
    del trainer
    return figures, losses, model


def run_local_sgd(ctx: Any, spec: RunSpec) -> DemoResult | None:
    assert spec.period is not None and spec.steps is not None, "a local-SGD run's spec, resolved"
    ctx.log(f"local-sgd: DDP, then local SGD averaging every {spec.period} steps after {spec.local_sgd_warmup} "
            f"synchronous ones, {spec.steps} steps each on {ctx.world_size} ranks")
    started = time.perf_counter()
    plain = replace(spec, period=None, local_sgd_warmup=None)
    figures: dict[str, list[_StepFigures]] = {}
    losses: dict[str, list[float]] = {}
    model: tuple[str, int, int] = ("", 0, 0)
    for index, (label, run) in enumerate(zip(RUNS, (plain, spec))):
        figures[label], losses[label], model = _train(ctx, run, label, index * spec.steps, 2 * spec.steps)
    gathered: list[_RankFigures] | None = ctx.gather(_RankFigures(ctx.rank, figures))
    if not ctx.is_main:
        return None
    return _result(ctx, spec, gathered, losses, model, time.perf_counter() - started)


def _result(ctx: Any, spec: RunSpec, gathered: list[_RankFigures], losses: dict[str, list[float]],
            model: tuple[str, int, int], wall_s: float) -> DemoResult:
    from ddpfsdp.demos.claims import local_sgd as claims

    assert spec.period is not None and spec.local_sgd_warmup is not None and spec.steps is not None
    description, params, param_bytes = model
    runs = []
    for label in RUNS:
        steps = []
        for step in range(spec.steps):
            per_rank = [g.runs[label][step] for g in gathered]
            steps.append(LocalSgdStep(step=step, loss=losses[label][step],
                                      all_reduces=[f.all_reduces for f in per_rank],
                                      all_reduce_bytes=[f.all_reduce_bytes for f in per_rank],
                                      other_collectives=[f.other_collectives for f in per_rank],
                                      other_bytes=[f.other_bytes for f in per_rank],
                                      replica_diff=[f.replica_diff for f in per_rank]))
        runs.append(LocalSgdRun(name=label, steps=steps))
    averaged = claims.averaging_steps(spec.period, spec.local_sgd_warmup, spec.steps)
    block = LocalSgd(period=spec.period, warmup=spec.local_sgd_warmup, steps=spec.steps, averaged_steps=averaged,
                     param_bytes=param_bytes, runs=runs)
    ratio = claims.bytes_ratio(spec.period, spec.local_sgd_warmup, spec.steps)
    # The analytic model of the same run: an averaging all-reduces the parameters, a DDP step the gradients,
    # the same bytes in fp32; what local SGD leaves out is every step but the warm-up and the averagings.
    theory = {"theory": True, "averagings": len(averaged), "bytes_ratio": ratio, "bytes_saved": 1 - ratio,
              "long_run_ratio": 1 / spec.period, "param_bytes": param_bytes, "gradient_bytes_per_step": param_bytes}
    checks = claims.local_sgd_checks(block)
    config = {**spec.reported(), "params": params, "description": description}
    return ctx.result("local-sgd", config, checks, local_sgd=block, loss=losses["local-sgd"], theory=theory,
                      wall_s=wall_s)
