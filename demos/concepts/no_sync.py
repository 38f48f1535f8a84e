"""Gradient accumulation over k micro-batches, with and without skipping the gradient sync.

Accumulating k micro-batches before an optimizer step only needs the gradients synchronised once,
after the last one. By default DDP all-reduces (and FSDP reduce-scatters) after every backward:
k syncs per optimizer step. `DDP.no_sync()` around the forward and backward of the first k-1
micro-batches, or FSDP2's `set_requires_gradient_sync(False)` for them, leaves the gradients local
and accumulating until the last forward-backward syncs the sum: 1 sync per step. Because the sync
averages linearly, the final gradients are the same (up to float rounding in the order of the
additions).

The forward belongs inside `no_sync()` too: DDP decides in its forward whether the coming backward
synchronises (it prepares the reducer only while syncing is on), so a forward run outside the
context still gets an all-reduce in its backward, whatever context the backward runs in.

FSDP still all-gathers the parameters for every micro-batch's forward and backward: skipping the
reduce-scatter saves gradient traffic, not parameter traffic; and it holds unsharded gradients
between micro-batches, which costs memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, SEED
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.trial import model_option

if TYPE_CHECKING:
    import torch

OPTIONS = [
    model_option(),
    click.Option(["--micro-batches", "k"], type=click.IntRange(2, 32), default=4, show_default=True,
                 help="Micro-batches accumulated per optimizer step (k)."),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=2, show_default=True,
                 help="Samples per rank per micro-batch."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Model and data seed."),
]

SYNC_OPS = {"ddp": "all_reduce", "fsdp": "reduce_scatter"}
GRAD_RTOL = 1e-5


class Accumulated(TypedDict):
    """One way of accumulating k micro-batches on one rank: the collectives its optimizer step issued."""

    comm: dict[str, dict[str, float]]  # op -> count, bytes, wire_bytes_per_rank
    describe: str


def _skip_sync(s: Any, strategy: str, skip: bool):
    """A context that leaves this micro-batch's gradients unsynchronised (or does nothing)."""
    import contextlib

    if not skip:
        return contextlib.nullcontext()
    if strategy == "ddp":
        return s.model.no_sync()

    @contextlib.contextmanager
    def fsdp_no_sync():
        s.model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            s.model.set_requires_gradient_sync(True)

    return fsdp_no_sync()


def _accumulate(ctx: Any, s: Any, strategy: str, k: int, skip: bool) -> tuple[dict, Any]:
    """One optimizer step's worth of k micro-batches; returns the collectives and the local grads."""
    import torch

    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.concepts.trial import WARMUP_STEPS, forward_backward

    # Uncounted backwards first: DDP rebuilds its buckets after the first and broadcasts their new
    # order in the second, so both runs then sync in the same buckets and nothing else.
    for _ in range(WARMUP_STEPS):
        forward_backward(s)
    s.prepared.optimizer.zero_grad(set_to_none=True)
    s.steps_done = 0
    with CommCounter() as counter:
        for micro in range(k):
            with _skip_sync(s, strategy, skip and micro < k - 1):
                forward_backward(s, loss_scale=1.0 / k)
    grads = []
    for param in s.model.parameters():
        grad = param.grad
        if grad is None:
            continue
        local = grad.to_local() if hasattr(grad, "to_local") else grad
        grads.append(local.detach().reshape(-1).float().cpu())
    return counter.per_op(), torch.cat(grads)


def run(ctx: Any, *, model: str | None, k: int, batch_size: int, seed: int) -> DemoResult | None:
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    accumulated: dict[str, dict[str, Accumulated]] = {}  # strategy -> mode -> its step's collectives
    grads: dict[str, dict[str, torch.Tensor]] = {}  # strategy -> mode -> this rank's flat gradient
    index = 0
    for strategy in ("ddp", "fsdp"):
        accumulated[strategy], grads[strategy] = {}, {}
        for mode, skip in (("sync every micro-batch", False), ("skip sync until the last", True)):
            ctx.step(index, 4, phase=f"{strategy}: {mode}")
            index += 1
            s = trial.setup(ctx, model=model, strategy=strategy, sharding="full", wrap="block",
                            batch_size=batch_size, seed=seed, batch_count=k)
            per_op, flat = _accumulate(ctx, s, strategy, k, skip)
            accumulated[strategy][mode] = Accumulated(comm=per_op, describe=s.prepared.describe())
            grads[strategy][mode] = flat
            trial.release(s)

    diffs = {}
    for strategy, pair in grads.items():
        synced, skipped = pair["sync every micro-batch"], pair["skip sync until the last"]
        diffs[strategy] = {"max_abs_diff": float((synced - skipped).abs().max()),
                           "max_abs_grad": float(synced.abs().max()), "numel": synced.numel()}
    gathered = ctx.gather({"runs": accumulated, "diffs": diffs})
    if not ctx.is_main:
        return None

    counts = {
        strategy: {mode: entry["comm"].get(SYNC_OPS[strategy], {}).get("count", 0) for mode, entry in modes.items()}
        for strategy, modes in accumulated.items()
    }
    per_rank = {strategy: [g["diffs"][strategy] for g in gathered] for strategy in diffs}
    _log_view(ctx, accumulated, counts, per_rank, k)
    checks = [
        check_no_sync_cuts_collectives(
            {s: (c["sync every micro-batch"], c["skip sync until the last"]) for s, c in counts.items()}, k),
        check_no_sync_same_gradients(
            {s: max(d["max_abs_diff"] for d in rows) for s, rows in per_rank.items()},
            {s: max(d["max_abs_grad"] for d in rows) for s, rows in per_rank.items()}),
    ]
    return ctx.result(
        "no-sync",
        {"model": model, "micro_batches": k, "batch_size": batch_size, "seed": seed, "precision": "fp32",
         "fsdp": {"sharding": "full", "wrap": "block"}},
        checks,
        runs=accumulated,
        syncs_per_optimizer_step=counts,
        gradient_diff_by_rank=per_rank,
        runs_by_rank=[g["runs"] for g in gathered],
        notes=[n for n in [trial.cpu_note(ctx)] if n],
    )


def _log_view(ctx: Any, accumulated: dict, counts: dict, per_rank: dict, k: int) -> None:
    ctx.log(f"one optimizer step of {k} micro-batches on {ctx.world_size} ranks, with and without skipping the sync")
    for strategy, modes in accumulated.items():
        skip_api = "DDP.no_sync()" if strategy == "ddp" else "FSDP2 set_requires_gradient_sync(False)"
        ctx.log(f"{strategy}: {next(iter(modes.values()))['describe']}")
        for mode, entry in modes.items():
            ops = ", ".join(f"{entry['count']} {op}" for op, entry in entry["comm"].items()) or "no collectives"
            how = f" ({skip_api} on the first {k - 1})" if mode.startswith("skip") else ""
            ctx.log(f"  {mode}{how}: {ops}")
        synced, skipped = counts[strategy]["sync every micro-batch"], counts[strategy]["skip sync until the last"]
        worst = max(d["max_abs_diff"] for d in per_rank[strategy])
        ctx.log(f"  gradient syncs ({SYNC_OPS[strategy]}) per optimizer step: {synced} vs {skipped}; "
                f"largest gradient difference {worst:.3g}")


def check_no_sync_cuts_collectives(counts: dict[str, tuple[int, int]], k: int) -> Check:
    """counts: strategy -> (syncs with every micro-batch synced, syncs with the first k-1 skipped)."""
    ok = {strategy: skipped > 0 and synced == k * skipped for strategy, (synced, skipped) in counts.items()}
    summary = "; ".join(f"{strategy}: {synced} vs {skipped}" for strategy, (synced, skipped) in counts.items())
    return Check(
        "no_sync_cuts_collectives",
        bool(counts) and all(ok.values()),
        f"gradient-sync collectives per optimizer step of k={k} micro-batches, synced every time vs skipped: "
        f"{summary} (expect k times as many without skipping)",
        {"k": k, "counts": {s: {"every_micro_batch": a, "last_only": b} for s, (a, b) in counts.items()}},
    )


def check_no_sync_same_gradients(max_abs_diff: dict[str, float], max_abs_grad: dict[str, float],
                                 rtol: float = GRAD_RTOL) -> Check:
    tolerance = {s: rtol * max_abs_grad[s] for s in max_abs_diff}
    passed = bool(max_abs_diff) and all(
        max_abs_grad[s] > 0 and max_abs_diff[s] <= tolerance[s] for s in max_abs_diff
    )
    summary = "; ".join(f"{s}: {max_abs_diff[s]:.3g} (tolerance {tolerance[s]:.3g})" for s in max_abs_diff)
    return Check(
        "no_sync_same_gradients",
        passed,
        f"largest |gradient with sync every micro-batch - gradient synced once| over ranks: {summary}",
        {"max_abs_diff": max_abs_diff, "max_abs_grad": max_abs_grad, "rtol": rtol},
    )
