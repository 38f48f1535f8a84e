"""Reduce-scatter and all-gather on real tensors, and why the two together are an all-reduce.

Each rank holds an input of N chunks (N = world size). Reduce-scatter leaves rank r with chunk r
summed over every rank (what FSDP does to gradients in backward: each rank keeps the gradient of
its own shard). All-gather then gives every rank every summed chunk (what FSDP does to parameters
before a unit's forward and backward). The two in a row equal dist.all_reduce, and each sends
(N-1)/N of the buffer per rank, so all-reduce's 2(N-1)/N is exactly their sum.

The library collectives are counted by CommCounter (op, logical bytes, ring wire bytes per rank for
the op's group size); the same two phases written with send/recv (the allreduce demo's ring) count
the bytes they actually hand to the transport.
"""

from __future__ import annotations

from typing import Any

import click

from ddpfsdp.demos.base.bounds import SEED
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.allreduce import byte_count

OPTIONS = [
    click.Option(["--chunk-numel"], type=click.IntRange(1, 10_000_000), default=3, show_default=True,
                 help="Elements each rank ends up owning; each input has world size x this many (float32)."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Seed for the inputs' values."),
]


def _collectives() -> tuple[Any, Any]:
    """reduce-scatter and all-gather into a single tensor; renamed *_single in newer torch."""
    import torch.distributed as dist

    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return reduce_scatter, all_gather


def run(ctx: Any, *, chunk_numel: int, seed: int) -> DemoResult | None:
    import torch
    import torch.distributed as dist

    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.concepts.allreduce import (
        SHOW_VALUES_UP_TO,
        RingTrace,
        rank_buffer,
        ring_all_gather,
        ring_reduce_scatter,
    )

    world = ctx.world_size
    numel = world * chunk_numel
    reduce_scatter, all_gather = _collectives()
    x = rank_buffer(numel, ctx.rank, seed, ctx.device)

    ctx.step(0, 3, phase="reduce-scatter")
    shard = torch.empty(chunk_numel, dtype=x.dtype, device=ctx.device)
    with CommCounter() as rs_counter:
        reduce_scatter(shard, x)
    ctx.step(1, 3, phase="all-gather")
    full = torch.empty(numel, dtype=x.dtype, device=ctx.device)
    with CommCounter() as ag_counter:
        all_gather(full, shard)
    ctx.step(2, 3, phase="all-reduce")
    reference = x.clone()
    dist.all_reduce(reference)

    # The same two phases with send/recv, counting the bytes handed to the transport.
    ring = x.clone()
    rs_trace, ag_trace = RingTrace(), RingTrace()
    ring_reduce_scatter(ring, ctx.rank, world, rs_trace)
    ring_shard = ring.tensor_split(world)[ctx.rank].clone()
    ring_all_gather(ring, ctx.rank, world, ag_trace)

    small = numel <= SHOW_VALUES_UP_TO
    gathered = ctx.gather({
        "input": x.tolist() if small else None,
        "shard": shard.tolist() if small else None,
        "full": full.tolist() if small else None,
        "max_abs_diff": float((full - reference).abs().max()),
        "ring_max_abs_diff": max(float((ring_shard - shard).abs().max()), float((ring - full).abs().max())),
        "max_abs_value": float(reference.abs().max()),
        "reduce_scatter": rs_counter.per_op(),
        "all_gather": ag_counter.per_op(),
        "ring_reduce_scatter_sent_bytes": rs_trace.sent_bytes,
        "ring_all_gather_sent_bytes": ag_trace.sent_bytes,
    })
    names = {"reduce_scatter": reduce_scatter.__name__, "all_gather": all_gather.__name__}
    result = _summary(ctx, gathered, chunk_numel, seed, x.element_size(), names) if ctx.is_main else None
    # Ranks leave together, so none tears down its process group while rank 0 is still summarising.
    dist.barrier()
    return result


def _summary(ctx: Any, gathered: list[dict], chunk_numel: int, seed: int, element_bytes: int,
             names: dict[str, str]) -> dict:
    from ddpfsdp.demos.concepts.allreduce import SHOW_VALUES_UP_TO

    world = ctx.world_size
    numel = world * chunk_numel
    small = numel <= SHOW_VALUES_UP_TO
    buffer_bytes = numel * element_bytes
    intercepted = {
        op: [g[op].get(op, {"count": 0, "bytes": 0, "wire_bytes_per_rank": 0.0}) for g in gathered]
        for op in ("reduce_scatter", "all_gather")
    }
    sent = {
        "reduce_scatter (CommCounter)": [entry["wire_bytes_per_rank"] for entry in intercepted["reduce_scatter"]],
        "all_gather (CommCounter)": [entry["wire_bytes_per_rank"] for entry in intercepted["all_gather"]],
        "ring reduce-scatter phase (send/recv)": [g["ring_reduce_scatter_sent_bytes"] for g in gathered],
        "ring all-gather phase (send/recv)": [g["ring_all_gather_sent_bytes"] for g in gathered],
    }
    logical = {op: [entry["bytes"] for entry in entries] for op, entries in intercepted.items()}
    counts = {op: [entry["count"] for entry in entries] for op, entries in intercepted.items()}
    max_abs_value = max(g["max_abs_value"] for g in gathered)

    _log_view(ctx, gathered, world, numel, buffer_bytes, sent, small)
    checks = [
        check_rs_then_ag_equals_all_reduce([g["max_abs_diff"] for g in gathered],
                                           [g["ring_max_abs_diff"] for g in gathered], max_abs_value),
        check_rs_ag_send(sent, logical, counts, buffer_bytes, world),
    ]
    return ctx.result(
        "reduce-scatter",
        {"chunk_numel": chunk_numel, "numel": numel, "dtype": "float32", "seed": seed,
         **names},
        checks,
        buffer_bytes=buffer_bytes,
        comm={"reduce_scatter": intercepted["reduce_scatter"], "all_gather": intercepted["all_gather"]},
        sent_bytes_per_rank=sent,
        theory={"wire_bytes_per_rank_each": (world - 1) / world * buffer_bytes,
                "formula": "(N-1)/N x buffer bytes for each of reduce-scatter and all-gather"},
        max_abs_diff_vs_all_reduce=[g["max_abs_diff"] for g in gathered],
        tensors={"input": [g["input"] for g in gathered], "shard": [g["shard"] for g in gathered],
                 "full": [g["full"] for g in gathered]} if small else None,
    )


def _log_view(ctx: Any, gathered: list[dict], world: int, numel: int, buffer_bytes: int,
              sent: dict[str, list[float]], small: bool) -> None:
    from ddpfsdp.demos.concepts.allreduce import format_chunks

    ctx.log(f"{world} ranks, each with an input of {numel} float32 ({buffer_bytes} B) in {world} chunks")
    if small:
        for rank, g in enumerate(gathered):
            ctx.log(f"  rank {rank} input   {format_chunks(g['input'], world)}")
        ctx.log("reduce-scatter: rank r receives chunk r summed over all ranks (FSDP: gradients in backward)")
        for rank, g in enumerate(gathered):
            ctx.log(f"  rank {rank} output  {format_chunks(g['shard'], 1)}  (chunk {rank})")
        ctx.log("all-gather: every rank receives every rank's chunk (FSDP: parameters before forward/backward)")
        for rank, g in enumerate(gathered):
            ctx.log(f"  rank {rank} output  {format_chunks(g['full'], world)}")
    ctx.log("dist.all_reduce of the inputs: largest difference from reduce-scatter + all-gather "
            f"{max(g['max_abs_diff'] for g in gathered):g}")
    expected = (world - 1) / world * buffer_bytes
    ctx.log(f"bytes sent per rank (theory (N-1)/N x {buffer_bytes} B = {byte_count(expected)} B for each op):")
    for source, per_rank in sent.items():
        ctx.log(f"  {source}: {', '.join(f'{byte_count(b)}' for b in per_rank)}")


def check_rs_then_ag_equals_all_reduce(max_abs_diff_by_rank: list[float], ring_max_abs_diff_by_rank: list[float],
                                       max_abs_value: float, rtol: float = 1e-6) -> Check:
    worst = max(max_abs_diff_by_rank)
    ring_worst = max(ring_max_abs_diff_by_rank)
    tolerance = rtol * max(1.0, max_abs_value)
    return Check(
        "rs_then_ag_equals_all_reduce",
        worst <= tolerance and ring_worst <= tolerance,
        f"largest |all_gather(reduce_scatter(x)) - all_reduce(x)| is {worst:g}, and the send/recv ring "
        f"differs from the library ops by {ring_worst:g} (tolerance {tolerance:g})",
        {"max_abs_diff_by_rank": max_abs_diff_by_rank, "ring_max_abs_diff_by_rank": ring_max_abs_diff_by_rank,
         "tolerance": tolerance},
    )


def check_rs_ag_send(sent_bytes: dict[str, list[float]], logical_bytes: dict[str, list[int]],
                     counts: dict[str, list[int]], buffer_bytes: int, world_size: int) -> Check:
    """Every source of sent bytes shows (N-1)/N of the buffer per rank, for one op of the whole buffer."""
    expected = (world_size - 1) / world_size * buffer_bytes
    tolerance = 1e-9 * buffer_bytes
    off = {source: [b for b in per_rank if abs(b - expected) > tolerance] for source, per_rank in sent_bytes.items()}
    wrong_sizes = {op: [b for b in per_rank if b != buffer_bytes] for op, per_rank in logical_bytes.items()}
    wrong_counts = {op: [c for c in per_rank if c != 1] for op, per_rank in counts.items()}
    passed = (
        all(len(per_rank) == world_size for per_rank in sent_bytes.values())
        and not any(off.values())
        and not any(wrong_sizes.values())
        and not any(wrong_counts.values())
        and {"reduce_scatter", "all_gather"} <= set(logical_bytes)
    )
    summary = "; ".join(f"{source} {sorted(set(per_rank))}" for source, per_rank in sent_bytes.items())
    return Check(
        "rs_ag_send_n_minus_1_over_n",
        passed,
        f"expected (N-1)/N x {buffer_bytes} B = {byte_count(expected)} B per rank for each op (N={world_size}); "
        f"measured {summary}; buffers seen by the counter {logical_bytes}",
        {"expected_bytes": expected, "buffer_bytes": buffer_bytes, "world_size": world_size,
         "sent_bytes": sent_bytes, "logical_bytes": logical_bytes, "counts": counts},
    )
