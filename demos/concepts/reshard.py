"""Reshard after forward on vs off: FULL_SHARD (ZeRO-3) vs SHARD_GRAD_OP (FSDP grad-op).

With resharding on, each unit frees its unsharded parameters as soon as its forward ends and
all-gathers them again when backward reaches it: two all-gathers per unit per step, and only the
units in use are unsharded. With resharding off, each unit keeps its unsharded parameters from
its forward all-gather until backward is done with it: one all-gather per unit, less traffic, but
the whole model is unsharded at the start of backward, on top of the activations, so the peak is
higher. The same model, wrapped per block, is stepped once each way.
"""

from __future__ import annotations

from typing import Any

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, SEED
from ddpfsdp.demos.result.checks import Check, peak_lower_on_every_rank
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.trial import model_option

OPTIONS = [
    model_option(),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=4, show_default=True,
                 help="Samples per rank per step."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Model and data seed."),
]

SHARDINGS = [("reshard after forward (full, FULL_SHARD)", "full", True),
             ("keep unsharded until backward (grad-op, SHARD_GRAD_OP)", "grad-op", False)]


def run(ctx: Any, *, model: str | None, batch_size: int, seed: int) -> DemoResult | None:
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    configs = []
    for index, (label, sharding, reshard) in enumerate(SHARDINGS):
        ctx.step(index, len(SHARDINGS), phase=sharding)
        s = trial.setup(ctx, model=model, strategy="fsdp", sharding=sharding, wrap="block",
                        batch_size=batch_size, seed=seed)
        figures = trial.measure(ctx, s, timed_steps=0)
        figures.pop("step_time_s")
        configs.append({
            "label": label,
            "sharding": sharding,
            "reshard_after_forward": reshard,
            "units": list(s.prepared.units),
            "unit_params": list(s.prepared.unit_params),
            "units_with_params": trial.units_with_params(s.prepared.unit_params),
            "params": s.params,
            **figures,
        })
        trial.release(s)

    gathered = ctx.gather([(c["peak_bytes"], c["comm"]) for c in configs])
    if not ctx.is_main:
        return None
    for index, config in enumerate(configs):
        config["peak_bytes_by_rank"] = [g[index][0] for g in gathered]
        config["comm_by_rank"] = [g[index][1] for g in gathered]
    full, grad_op = configs

    _log_view(ctx, configs)
    checks = [
        check_reshard_lowers_peak(full["peak_bytes_by_rank"], grad_op["peak_bytes_by_rank"]),
        check_reshard_adds_all_gathers(
            full["comm"].get("all_gather", {}).get("count", 0),
            grad_op["comm"].get("all_gather", {}).get("count", 0),
            full["units_with_params"],
        ),
    ]
    return ctx.result(
        "reshard",
        {"model": model, "strategy": "fsdp", "wrap": "block", "batch_size": batch_size, "seed": seed,
         "precision": "fp32", "params": full["params"]},
        checks,
        configs=configs,
        notes=[n for n in [trial.cpu_note(ctx),
                           "peak: forward and backward of one step, this rank; the optimizer step is not in it"] if n],
    )


def _log_view(ctx: Any, configs: list[dict]) -> None:
    from ddpfsdp.demos.base.units import format_bytes

    ctx.log(f"FSDP2 per-block wrapping on {ctx.world_size} ranks, GPT with {configs[0]['params']:,} params, "
            f"{configs[0]['units_with_params']} units")
    for c in configs:
        ag = c["comm"].get("all_gather", {"count": 0, "bytes": 0, "wire_bytes_per_rank": 0})
        rs = c["comm"].get("reduce_scatter", {"count": 0, "bytes": 0})
        ctx.log(f"{c['label']}: reshard_after_forward={c['reshard_after_forward']}")
        ctx.log(f"  per step: {ag['count']} all-gathers, {format_bytes(ag['bytes'], 'MiB')} gathered "
                f"({format_bytes(ag['wire_bytes_per_rank'], 'MiB')} sent per rank); {rs['count']} reduce-scatters")
        ctx.log(f"  peak during forward+backward, per rank: "
                f"{', '.join(format_bytes(b, 'MiB') for b in c['peak_bytes_by_rank'])}")
    full, grad_op = configs
    extra = full["comm"].get("all_gather", {}).get("count", 0) - grad_op["comm"].get("all_gather", {}).get("count", 0)
    saved = max(grad_op["peak_bytes_by_rank"]) - max(full["peak_bytes_by_rank"])
    ctx.log(f"resharding costs {extra} more all-gathers per step (backward re-gathers the units) "
            f"and saves {format_bytes(saved, 'MiB')} of peak on the worst rank")


def check_reshard_lowers_peak(full_peak_by_rank: list[int], grad_op_peak_by_rank: list[int]) -> Check:
    return peak_lower_on_every_rank(
        "reshard_lowers_peak",
        ("grad op", grad_op_peak_by_rank),
        ("full", full_peak_by_rank),
        "resharding after forward",
    )


def check_reshard_adds_all_gathers(full_all_gathers: int, grad_op_all_gathers: int, units: int) -> Check:
    """Without resharding each unit is gathered once per step; with it, backward gathers it again.

    Some PyTorch versions keep the root unit unsharded after forward (backward starts with it), so
    the extra all-gathers are the units, or the units less one.
    """
    extra = full_all_gathers - grad_op_all_gathers
    passed = units > 0 and grad_op_all_gathers == units and units - 1 <= extra <= units and extra > 0
    return Check(
        "reshard_adds_all_gathers",
        passed,
        f"{units} units: {grad_op_all_gathers} all-gathers per step without resharding (expect {units}), "
        f"{full_all_gathers} with it: {extra} more (expect {units}, one re-gather per unit in backward)",
        {"units": units, "full_all_gathers": full_all_gathers, "grad_op_all_gathers": grad_op_all_gathers,
         "extra_all_gathers": extra},
    )
