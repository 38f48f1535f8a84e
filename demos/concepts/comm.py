"""DDP vs FSDP traffic per training step, measured per collective, beside the textbook theory.

With Ψ the bytes of the parameters (fp32 here, so the gradients are Ψ bytes too) and N ranks:
  DDP  all-reduces every gradient once:                  2(N-1)/N x Ψ sent per rank per step
  FSDP all-gathers the parameters in forward and again in backward (reshard after forward), and
       reduce-scatters the gradients once:     (N-1)/N x (Ψ + Ψ + Ψ) = 3(N-1)/N x Ψ
so FSDP full sharding moves 1.5x DDP's bytes in exchange for holding 1/N of the model state. The
measured figures are every collective the step issued, intercepted by CommCounter; the theory is
the analytic model's (`ddpfsdp calc`) for the same configuration.
"""

from __future__ import annotations

from typing import Any

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, SEED
from ddpfsdp.demos.result.checks import Check, within
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.trial import model_option

OPTIONS = [
    model_option(),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=2, show_default=True,
                 help="Samples per rank per step (traffic does not depend on it)."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Model and data seed."),
]

DDP_TOLERANCE = 0.01  # DDP all-reduces exactly the gradients; 1% leaves room for nothing else
FSDP_TOLERANCE = 0.05  # FSDP pads each parameter's shard to a multiple of N rows


def run(ctx: Any, *, model: str | None, batch_size: int, seed: int) -> DemoResult | None:
    from ddpfsdp.demos.theory.run import theory_for_run
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    traffic = {}
    for index, strategy in enumerate(("ddp", "fsdp")):
        ctx.step(index, 2, phase=strategy)
        s = trial.setup(ctx, model=model, strategy=strategy, sharding="full", wrap="block",
                        batch_size=batch_size, seed=seed)
        figures = trial.measure(ctx, s, timed_steps=0, memory=False)
        traffic[strategy] = {"describe": s.prepared.describe(), "params": s.params,
                          "unit_params": list(s.prepared.unit_params), "comm": figures["comm"]}
        trial.release(s)

    gathered = ctx.gather({strategy: figures["comm"] for strategy, figures in traffic.items()})
    if not ctx.is_main:
        return None
    params = traffic["ddp"]["params"]
    param_bytes = params * 4
    world = ctx.world_size
    theory = {
        "ddp": theory_for_run(strategy="ddp", params=params, world_size=world, precision="fp32",
                              optimizer="adamw")["comm"],
        "fsdp": theory_for_run(strategy="fsdp", sharding="full", params=params, world_size=world,
                               precision="fp32", optimizer="adamw",
                               unit_params=traffic["fsdp"]["unit_params"])["comm"],
    }
    for strategy, figures in traffic.items():
        figures["comm_by_rank"] = [g[strategy] for g in gathered]
        figures["wire_bytes_per_rank"] = sum(entry["wire_bytes_per_rank"] for entry in figures["comm"].values())
        figures["theory"] = theory[strategy]

    _log_view(ctx, traffic, param_bytes, world)
    checks = [
        check_ddp_traffic_is_2psi(traffic["ddp"]["comm"], param_bytes, world),
        check_fsdp_traffic_is_3psi(traffic["fsdp"]["comm"], param_bytes, world),
    ]
    return ctx.result(
        "comm",
        {"model": model, "params": params, "precision": "fp32", "batch_size": batch_size, "seed": seed,
         "fsdp": {"sharding": "full", "wrap": "block"}},
        checks,
        param_bytes=param_bytes,
        runs=traffic,
        fsdp_to_ddp_wire_ratio=traffic["fsdp"]["wire_bytes_per_rank"] / traffic["ddp"]["wire_bytes_per_rank"]
        if traffic["ddp"]["wire_bytes_per_rank"] else None,
        theory={
            "ddp_wire_bytes_per_rank": 2 * (world - 1) / world * param_bytes,
            "fsdp_wire_bytes_per_rank": 3 * (world - 1) / world * param_bytes,
            "formula": "DDP 2(N-1)/N x Ψ, FSDP full 3(N-1)/N x Ψ, Ψ = parameter bytes",
            "per_op": theory,
        },
        notes=[n for n in [trial.cpu_note(ctx)] if n],
    )


def _log_view(ctx: Any, traffic: dict, param_bytes: int, world: int) -> None:
    from ddpfsdp.demos.base.units import format_bytes

    factor = (world - 1) / world
    ctx.log(f"one training step on {world} ranks; Ψ = {format_bytes(param_bytes, 'MiB')} of fp32 parameters; "
            f"(N-1)/N = {factor:.3f}")
    for strategy, figures in traffic.items():
        ctx.log(f"{strategy}: {figures['describe']}")
        for op, entry in figures["comm"].items():
            expected = figures["theory"].get(op, {}).get("wire_bytes_per_rank")
            theory = f"; theory {format_bytes(expected, 'MiB')}" if expected is not None else "; not in theory"
            ctx.log(f"  {op}: {entry['count']} calls, {format_bytes(entry['bytes'], 'MiB')} of buffers, "
                    f"{format_bytes(entry['wire_bytes_per_rank'], 'MiB')} sent per rank{theory}")
        multiple = figures["wire_bytes_per_rank"] / param_bytes / factor
        ctx.log(f"  total sent per rank {format_bytes(figures['wire_bytes_per_rank'], 'MiB')} = {multiple:.3f} x (N-1)/N x Ψ "
                f"(theory: {'2' if strategy == 'ddp' else '3'})")
    if traffic["ddp"]["wire_bytes_per_rank"]:
        ctx.log(f"FSDP sends {traffic['fsdp']['wire_bytes_per_rank'] / traffic['ddp']['wire_bytes_per_rank']:.3f}x "
                f"DDP's bytes (theory 1.5x)")


def _wire(per_op: dict, op: str) -> float:
    return float(per_op.get(op, {}).get("wire_bytes_per_rank", 0.0))


def check_ddp_traffic_is_2psi(ddp_per_op: dict, grad_bytes: int, world_size: int) -> Check:
    expected = 2 * (world_size - 1) / world_size * grad_bytes
    measured = _wire(ddp_per_op, "all_reduce")
    others = {op: entry["count"] for op, entry in ddp_per_op.items() if op != "all_reduce" and entry["count"]}
    passed = not others and measured > 0 and within(measured, expected, DDP_TOLERANCE)
    return Check(
        "ddp_traffic_is_2psi",
        passed,
        f"DDP all_reduce sent {measured:,.0f} B per rank; theory 2(N-1)/N x {grad_bytes:,} B = {expected:,.0f} B "
        f"(within {DDP_TOLERANCE:.0%}); other collectives: {others or 'none'}",
        {"measured_wire_bytes_per_rank": measured, "theory_wire_bytes_per_rank": expected,
         "grad_bytes": grad_bytes, "world_size": world_size, "other_ops": others},
    )


def check_fsdp_traffic_is_3psi(fsdp_per_op: dict, param_bytes: int, world_size: int) -> Check:
    factor = (world_size - 1) / world_size
    expected = 3 * factor * param_bytes
    all_gather, reduce_scatter = _wire(fsdp_per_op, "all_gather"), _wire(fsdp_per_op, "reduce_scatter")
    measured = all_gather + reduce_scatter
    others = {op: entry["count"] for op, entry in fsdp_per_op.items()
              if op not in ("all_gather", "reduce_scatter") and entry["count"]}
    passed = (
        not others
        and within(measured, expected, FSDP_TOLERANCE)
        and within(all_gather, 2 * factor * param_bytes, FSDP_TOLERANCE)
        and within(reduce_scatter, factor * param_bytes, FSDP_TOLERANCE)
    )
    return Check(
        "fsdp_traffic_is_3psi",
        passed,
        f"FSDP sent {measured:,.0f} B per rank (all_gather {all_gather:,.0f} + reduce_scatter {reduce_scatter:,.0f}); "
        f"theory 3(N-1)/N x {param_bytes:,} B = {expected:,.0f} B (2 parts gather, 1 part reduce-scatter, "
        f"within {FSDP_TOLERANCE:.0%}); other collectives: {others or 'none'}",
        {"measured_wire_bytes_per_rank": measured, "all_gather_wire_bytes_per_rank": all_gather,
         "reduce_scatter_wire_bytes_per_rank": reduce_scatter, "theory_wire_bytes_per_rank": expected,
         "param_bytes": param_bytes, "world_size": world_size, "other_ops": others},
    )
