"""FSDP wrap granularity on one model: root only, per block, per layer.

A unit is what FSDP all-gathers in one go. Wrapping only the root makes the whole model one unit:
every parameter is unsharded from the start of forward to the end of backward (FSDP keeps the
root's parameters after forward, since backward begins with them), so the peak holds the full
model and its full gradients beside the activations. Wrapping each transformer block
makes a unit per block: only one block (plus the one being prefetched) is unsharded at a time, so
the peak falls, at the price of more, smaller collectives: each unit all-gathers in forward, again
in backward (reshard after forward), and reduce-scatters its gradients once. Wrapping per layer
(attention and MLP inside each block) shrinks the largest unit further and multiplies the calls.
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

WRAPS = [("root only", "model"), ("per block", "block"), ("per layer", "layer")]


def run(ctx: Any, *, model: str | None, batch_size: int, seed: int) -> DemoResult | None:
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    configs = []
    for index, (label, wrap) in enumerate(WRAPS):
        ctx.step(index, len(WRAPS), phase=label)
        s = trial.setup(ctx, model=model, strategy="fsdp", wrap=wrap, batch_size=batch_size, seed=seed)
        figures = trial.measure(ctx, s, timed_steps=0)
        figures.pop("step_time_s")
        param_bytes = s.params * 4
        unit_params = list(s.prepared.unit_params)
        configs.append({
            "label": label,
            "wrap": wrap,
            "units": list(s.prepared.units),
            "unit_params": unit_params,
            "units_with_params": trial.units_with_params(unit_params),
            "largest_unit_params": max(unit_params),
            "largest_unit_bytes": max(unit_params) * 4,
            "params": s.params,
            "param_bytes": param_bytes,
            **figures,
        })
        trial.release(s)

    gathered = ctx.gather([(c["peak_bytes"], c["comm"]) for c in configs])
    if not ctx.is_main:
        return None
    for index, config in enumerate(configs):
        config["peak_bytes_by_rank"] = [g[index][0] for g in gathered]
        config["comm_by_rank"] = [g[index][1] for g in gathered]

    _log_view(ctx, configs)
    by_wrap = {c["wrap"]: c for c in configs}
    checks = [
        check_per_block_peak_below_root_only(by_wrap["model"]["peak_bytes_by_rank"],
                                             by_wrap["block"]["peak_bytes_by_rank"]),
        check_collectives_scale_with_units([
            {"label": c["label"], "units": c["units_with_params"],
             "all_gather": c["comm"].get("all_gather", {}).get("count", 0),
             "reduce_scatter": c["comm"].get("reduce_scatter", {}).get("count", 0)}
            for c in configs
        ]),
    ]
    return ctx.result(
        "wrap",
        {"model": model, "strategy": "fsdp", "sharding": "full", "batch_size": batch_size, "seed": seed,
         "precision": "fp32", "params": configs[0]["params"]},
        checks,
        configs=configs,
        notes=[n for n in [trial.cpu_note(ctx),
                           "peak: forward and backward of one step, this rank; the optimizer step is not in it"] if n],
    )


def _log_view(ctx: Any, configs: list[dict]) -> None:
    from ddpfsdp.demos.base.units import format_bytes

    first = configs[0]
    ctx.log(f"FSDP2 full sharding on {ctx.world_size} ranks, GPT with {first['params']:,} params "
            f"({format_bytes(first['param_bytes'], 'MiB')} fp32); one training step per wrapping")
    for c in configs:
        comm = c["comm"]
        ag = comm.get("all_gather", {"count": 0, "bytes": 0})
        rs = comm.get("reduce_scatter", {"count": 0, "bytes": 0})
        named = [name for name, count in zip(c["units"], c["unit_params"]) if count]
        ctx.log(f"{c['label']}: {c['units_with_params']} unit(s) holding parameters, largest "
                f"{c['largest_unit_params']:,} params ({format_bytes(c['largest_unit_bytes'], 'MiB')}) unsharded at once")
        ctx.log(f"  units: {', '.join(named[:8])}{' ...' if len(named) > 8 else ''}")
        ctx.log(f"  per step: {ag['count']} all-gathers ({format_bytes(ag['bytes'], 'MiB')}), "
                f"{rs['count']} reduce-scatters ({format_bytes(rs['bytes'], 'MiB')})")
        ctx.log(f"  peak during forward+backward, per rank: "
                f"{', '.join(format_bytes(b, 'MiB') for b in c['peak_bytes_by_rank'])} ({c['peak_kind']})")


def check_per_block_peak_below_root_only(root_only_peak_by_rank: list[int], per_block_peak_by_rank: list[int]) -> Check:
    return peak_lower_on_every_rank(
        "per_block_peak_below_root_only",
        ("root only", root_only_peak_by_rank),
        ("per block", per_block_peak_by_rank),
        "wrapping per block",
    )


def check_collectives_scale_with_units(rows: list[dict]) -> Check:
    """rows: {"label", "units" (units holding parameters), "all_gather", "reduce_scatter"} per wrapping.

    Each unit reduce-scatters its gradients once per step and all-gathers its parameters once in
    forward and, when resharded, once more in backward: units <= all-gathers <= 2 x units.
    """
    ordered = sorted(rows, key=lambda r: r["units"])
    increasing = all(
        a["units"] < b["units"] and a["all_gather"] < b["all_gather"] and a["reduce_scatter"] < b["reduce_scatter"]
        for a, b in zip(ordered, ordered[1:])
    )
    per_unit = all(r["reduce_scatter"] == r["units"] and r["units"] <= r["all_gather"] <= 2 * r["units"]
                   for r in rows)
    table = "; ".join(f"{r['label']}: {_counted(r['units'], 'unit')}, {_counted(r['all_gather'], 'all-gather')}, "
                      f"{_counted(r['reduce_scatter'], 'reduce-scatter')}" for r in ordered)
    return Check(
        "collectives_scale_with_units",
        len(rows) >= 2 and increasing and per_unit,
        f"{table} (expect both counts to rise with the units: one reduce-scatter per unit, "
        f"between one and two all-gathers per unit)",
        {"rows": ordered},
    )


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
