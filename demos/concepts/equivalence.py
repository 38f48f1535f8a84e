"""Data-parallel training is large-batch training: DDP, FSDP and one process agree step for step.

Each of N ranks takes its own slice of a global batch of N x B samples. DDP averages the ranks'
gradients with all-reduce, FSDP with reduce-scatter into shards; either way every rank applies the
gradient of the mean loss over the whole global batch, which is exactly what one process computes
on all N x B samples at once. So the losses and the updated weights agree, up to float rounding in
the order of the additions. The single-process reference runs on rank 0 with the whole global
batch; FSDP's sharded weights are gathered in full to compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, FiniteFloat, SEED
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.trial import model_option

if TYPE_CHECKING:
    import torch

OPTIONS = [
    model_option(),
    click.Option(["--steps"], type=click.IntRange(1, 50), default=3, show_default=True,
                 help="Optimizer steps to train each way."),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=2, show_default=True,
                 help="Samples per rank per step (the reference takes world size x this)."),
    click.Option(["--optimizer"], type=click.Choice(["sgd", "adamw"]), default="sgd", show_default=True,
                 help="Optimizer for all three runs."),
    click.Option(["--lr"], type=FiniteFloat(min=0, min_open=True), default=0.05, show_default=True, help="Learning rate."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Model and data seed."),
]

# fp32 sums in a different order differ by a few ulps per step; these bounds sit well above that
# and far below any real difference (a wrong averaging factor moves weights by lr-sized amounts).
LOSS_RTOL = 1e-5
# Relative to the largest weight update of the reference. Adam divides each gradient element by
# its own running magnitude, so an element whose gradient is near zero turns a rounding-sized
# difference into an update-sized one: its bound is looser (and Adam cannot reveal a wrong
# averaging factor at all, being scale invariant, which is why SGD is the default here).
WEIGHT_RTOL = {"sgd": 1e-4, "adamw": 1e-2}


def _optimizer(name: str, params: Any, lr: float) -> Any:
    import torch

    # The same optimizers ddpfsdp.demos.parallel.parallelize builds for the distributed runs.
    return torch.optim.AdamW(params, lr=lr) if name == "adamw" else torch.optim.SGD(params, lr=lr)


def _global_losses(ctx: Any, local_losses: list[Any]) -> list[float]:
    """The mean of the ranks' losses per step: the global batch's mean loss (equal slices)."""
    import torch
    import torch.distributed as dist

    stacked = torch.stack(local_losses).to(ctx.device)
    dist.all_reduce(stacked)
    return (stacked / ctx.world_size).tolist()


def _distributed(ctx: Any, strategy: str, *, model: str, steps: int, batch_size: int, optimizer: str, lr: float,
                 seed: int, step_offset: int, total_steps: int) -> tuple[list[float], dict[str, torch.Tensor] | None]:
    from ddpfsdp.demos.concepts import trial

    s = trial.setup(ctx, model=model, strategy=strategy, sharding="full", wrap="block", batch_size=batch_size,
                    seed=seed, optimizer=optimizer, lr=lr, batch_count=steps)
    local = []
    for step in range(steps):
        ctx.step(step_offset + step, total_steps, phase=strategy)
        local.append(trial.train_step(s))
    losses = _global_losses(ctx, local)
    module = s.model.module if strategy == "ddp" else s.model
    weights = {}
    for name, param in module.named_parameters():
        # FSDP: every rank must take part in gathering each full parameter.
        full = param.full_tensor() if hasattr(param, "full_tensor") else param
        if ctx.is_main:
            weights[name] = full.detach().float().cpu().clone()
    trial.release(s)
    return losses, weights if ctx.is_main else None


def _single_process(ctx: Any, *, model: str, steps: int, batch_size: int, optimizer: str, lr: float,
                    seed: int) -> tuple[list[float], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One process, the whole global batch per step; also the initial weights."""
    from types import SimpleNamespace

    from ddpfsdp.demos.concepts.trial import rank_batches
    from ddpfsdp.demos.train.data import compute_loss
    from ddpfsdp.demos.train.models import build_model

    net = build_model("gpt", model, seed=seed).to(ctx.device)
    initial = {name: p.detach().float().cpu().clone() for name, p in net.named_parameters()}
    # rank 0 of a world of one, with the global batch size: exactly the ranks' slices, in rank order
    whole = SimpleNamespace(rank=0, world_size=1)
    batches = rank_batches(whole, net.shape, batch_size=batch_size * ctx.world_size, seed=seed, count=steps)
    opt = _optimizer(optimizer, net.parameters(), lr)
    losses = []
    for batch in batches:
        loss = compute_loss("gpt", net, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    weights = {name: p.detach().float().cpu().clone() for name, p in net.named_parameters()}
    return losses, weights, initial


def _weight_diff(weights: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> tuple[float, str | None]:
    worst, where = 0.0, None
    for name, ref in reference.items():
        if name not in weights:
            return float("inf"), name
        diff = float((weights[name] - ref).abs().max())
        if diff > worst:
            worst, where = diff, name
    return worst, where


def run(ctx: Any, *, model: str | None, steps: int, batch_size: int, optimizer: str, lr: float,
        seed: int) -> DemoResult | None:
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    common = dict(model=model, steps=steps, batch_size=batch_size, optimizer=optimizer, lr=lr, seed=seed,
                  total_steps=2 * steps)
    ddp_losses, ddp_weights = _distributed(ctx, "ddp", step_offset=0, **common)
    fsdp_losses, fsdp_weights = _distributed(ctx, "fsdp", step_offset=steps, **common)
    if not ctx.is_main:
        return None  # the reference needs no other rank

    ref_losses, ref_weights, initial = _single_process(ctx, model=model, steps=steps, batch_size=batch_size,
                                                       optimizer=optimizer, lr=lr, seed=seed)
    update = max(float((ref_weights[n] - initial[n]).abs().max()) for n in ref_weights)
    compared = {}
    for strategy, losses, weights in (("ddp", ddp_losses, ddp_weights), ("fsdp", fsdp_losses, fsdp_weights)):
        diff, where = _weight_diff(weights, ref_weights)
        compared[strategy] = {"losses": losses, "max_abs_weight_diff": diff, "worst_param": where,
                              "max_abs_loss_diff": max(abs(a - b) for a, b in zip(losses, ref_losses))}

    _log_view(ctx, ref_losses, compared, update, batch_size)
    checks = [
        check_matches_single_process("ddp_matches_single_process", "DDP", ddp_losses, ref_losses,
                                     compared["ddp"]["max_abs_weight_diff"], update, WEIGHT_RTOL[optimizer]),
        check_matches_single_process("fsdp_matches_single_process", "FSDP", fsdp_losses, ref_losses,
                                     compared["fsdp"]["max_abs_weight_diff"], update, WEIGHT_RTOL[optimizer]),
    ]
    return ctx.result(
        "equivalence",
        {"model": model, "steps": steps, "batch_size": batch_size, "global_batch_size": batch_size * ctx.world_size,
         "optimizer": optimizer, "lr": lr, "seed": seed, "precision": "fp32",
         "fsdp": {"sharding": "full", "wrap": "block"}},
        checks,
        single_process={"losses": ref_losses, "max_abs_weight_update": update},
        ddp=compared["ddp"],
        fsdp=compared["fsdp"],
    )


def _log_view(ctx: Any, ref_losses: list[float], compared: dict, update: float, batch_size: int) -> None:
    ctx.log(f"{ctx.world_size} ranks x {batch_size} samples vs one process with {ctx.world_size * batch_size} "
            f"samples per step (the reference ran on rank 0)")
    for step, ref in enumerate(ref_losses):
        ctx.log(f"step {step}: loss single process {ref:.7f}   DDP {compared['ddp']['losses'][step]:.7f}   "
                f"FSDP {compared['fsdp']['losses'][step]:.7f}")
    for strategy, row in compared.items():
        ctx.log(f"{strategy.upper()} weights after training: largest difference from the single process "
                f"{row['max_abs_weight_diff']:.3g} (in {row['worst_param']}); the largest weight update was "
                f"{update:.3g}")


def check_matches_single_process(name: str, label: str, losses: list[float], reference_losses: list[float],
                                 max_abs_weight_diff: float, max_abs_weight_update: float,
                                 weight_rtol: float = WEIGHT_RTOL["sgd"]) -> Check:
    loss_diffs = [abs(a - b) for a, b in zip(losses, reference_losses)]
    loss_ok = len(losses) == len(reference_losses) > 0 and all(
        d <= LOSS_RTOL * abs(ref) for d, ref in zip(loss_diffs, reference_losses))
    weight_tolerance = weight_rtol * max_abs_weight_update
    weight_ok = max_abs_weight_update > 0 and max_abs_weight_diff <= weight_tolerance
    return Check(
        name,
        loss_ok and weight_ok,
        f"{label} vs one process on the global batch: largest loss difference "
        f"{max(loss_diffs, default=float('nan')):.3g} (tolerance {LOSS_RTOL:g} x loss); largest weight "
        f"difference {max_abs_weight_diff:.3g} (tolerance {weight_tolerance:.3g} = {weight_rtol:g} x the "
        f"largest weight update {max_abs_weight_update:.3g})",
        {"losses": losses, "reference_losses": reference_losses, "loss_diffs": loss_diffs,
         "max_abs_weight_diff": max_abs_weight_diff, "max_abs_weight_update": max_abs_weight_update,
         "weight_tolerance": weight_tolerance},
    )
