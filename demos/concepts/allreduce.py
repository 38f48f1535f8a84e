"""Ring all-reduce written out with point-to-point sends, one chunk move at a time.

The buffer is split into N chunks (N = world size). Ranks form a ring: each sends only to rank+1
and receives only from rank-1.
  - reduce-scatter phase, N-1 steps: at step s rank r sends chunk (r-s-1) mod N and adds the chunk it
    receives into its own copy; afterwards rank r holds chunk r summed over every rank.
  - all-gather phase, N-1 steps: at step s rank r sends chunk (r-s) mod N (the complete sums it has)
    and overwrites its copy with the chunk it receives; afterwards every rank holds every sum.
Each rank sends N-1 + N-1 chunks of B/N bytes: 2(N-1)/N x B, whatever N is, which is why ring
all-reduce's per-rank traffic barely grows with the number of ranks. The bytes are counted here, by
the code that sends them, and the result is compared with dist.all_reduce on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

import click

from ddpfsdp.demos.base.bounds import SEED
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult

OPTIONS = [
    click.Option(["--numel"], type=click.IntRange(1, 50_000_000), default=12, show_default=True,
                 help="Elements in each rank's buffer (float32); the step-by-step view prints values up to 64."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Seed for the buffers' values."),
]

SHOW_VALUES_UP_TO = 64


class RingMove(TypedDict):
    """One chunk a rank sent to the next in one step of a ring phase."""

    phase: str
    step: int
    src: int
    dst: int
    chunk: int
    received_chunk: int
    bytes: int
    values: NotRequired[list[float]]  # the chunk's values, for a buffer small enough to show


@dataclass
class RingTrace:
    """What one rank sent and held during ring phases."""

    sent_bytes: int = 0
    received_bytes: int = 0
    moves: list[RingMove] = field(default_factory=list)  # one per step this rank sent in
    snapshots: list[list[float]] = field(default_factory=list)  # the buffer after each step (small ones)


def chunks_of(buffer: Any, world_size: int) -> list[Any]:
    """N contiguous views of a 1-D buffer (the first numel % N chunks one element longer)."""
    return list(buffer.tensor_split(world_size))


def _exchange(send: Any, recv: Any, rank: int, world_size: int) -> None:
    """Send to the next rank and receive from the previous one, concurrently."""
    import torch.distributed as dist

    successor, predecessor = (rank + 1) % world_size, (rank - 1) % world_size
    if dist.get_backend() == "nccl":
        # Separate NCCL sends around a ring can deadlock (each rank blocks on a peer that is itself
        # blocked sending); one group call posts the send and the receive together.
        ops = [dist.P2POp(dist.isend, send, successor), dist.P2POp(dist.irecv, recv, predecessor)]
        works = dist.batch_isend_irecv(ops)
    else:
        # gloo's coalesced point-to-point path can abort a rank at shutdown; plain isend/irecv
        # are already concurrent there.
        works = [dist.isend(send, successor), dist.irecv(recv, predecessor)]
    for work in works:
        work.wait()


def ring_reduce_scatter(buffer: Any, rank: int, world_size: int, trace: RingTrace, on_step=None) -> None:
    """Sum `buffer` over the ring in place so that this rank's chunk `rank` holds the full sum."""
    chunks = chunks_of(buffer, world_size)
    for step in range(world_size - 1):
        send_index = (rank - step - 1) % world_size
        recv_index = (rank - step - 2) % world_size
        incoming = chunks[recv_index].clone()
        _exchange(chunks[send_index], incoming, rank, world_size)
        chunks[recv_index].add_(incoming)
        _record(trace, buffer, "reduce-scatter", step, rank, world_size, chunks[send_index], send_index, recv_index)
        if on_step:
            on_step("reduce-scatter", step)


def ring_all_gather(buffer: Any, rank: int, world_size: int, trace: RingTrace, on_step=None) -> None:
    """Starting from chunk `rank` on each rank, give every rank every chunk, in place."""
    chunks = chunks_of(buffer, world_size)
    for step in range(world_size - 1):
        send_index = (rank - step) % world_size
        recv_index = (rank - step - 1) % world_size
        _exchange(chunks[send_index], chunks[recv_index], rank, world_size)
        _record(trace, buffer, "all-gather", step, rank, world_size, chunks[send_index], send_index, recv_index)
        if on_step:
            on_step("all-gather", step)


def _record(trace: RingTrace, buffer: Any, phase: str, step: int, rank: int, world_size: int, sent: Any,
            send_index: int, recv_index: int) -> None:
    chunk_bytes = sent.numel() * sent.element_size()
    trace.sent_bytes += chunk_bytes
    trace.received_bytes += chunks_of(buffer, world_size)[recv_index].numel() * sent.element_size()
    move: RingMove = {"phase": phase, "step": step, "src": rank, "dst": (rank + 1) % world_size, "chunk": send_index,
            "received_chunk": recv_index, "bytes": chunk_bytes}
    if buffer.numel() <= SHOW_VALUES_UP_TO:
        move["values"] = sent.tolist()
        trace.snapshots.append(buffer.tolist())
    trace.moves.append(move)


def rank_buffer(numel: int, rank: int, seed: int, device: Any) -> Any:
    """Small whole numbers, different on each rank: sums are exact in float32, so any order agrees."""
    import torch

    generator = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(0, 10, (numel,), generator=generator).to(torch.float32).to(device)


def format_chunks(values: list[float], world_size: int) -> str:
    """A buffer as its chunks, e.g. [3 1 | 4 1 | 5 9]."""
    import torch

    parts = torch.tensor(values).tensor_split(world_size)
    return "[" + " | ".join(" ".join(_number(v) for v in part.tolist()) for part in parts) + "]"


def byte_count(value: float) -> str:
    """Bytes with thousands separators; fractions only where a formula gives them."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def run(ctx: Any, *, numel: int, seed: int) -> DemoResult | None:
    import torch.distributed as dist

    world = ctx.world_size
    original = rank_buffer(numel, ctx.rank, seed, ctx.device)
    buffer = original.clone()
    trace = RingTrace()
    steps = 2 * (world - 1)

    def on_step(phase: str, step: int) -> None:
        done = step if phase == "reduce-scatter" else world - 1 + step
        ctx.step(done, steps, phase=phase)

    from ddpfsdp.demos.measure.comm import CommCounter

    # The counter intercepts the sends as the transport sees them: a cross-check on our own count.
    with CommCounter() as counter:
        ring_reduce_scatter(buffer, ctx.rank, world, trace, on_step)
        ring_all_gather(buffer, ctx.rank, world, trace, on_step)
    intercepted_send_bytes = counter.per_op().get("send", {}).get("bytes", 0)

    reference = original.clone()
    dist.all_reduce(reference)
    max_abs_diff = float((buffer - reference).abs().max())
    max_abs_value = float(reference.abs().max())

    small = numel <= SHOW_VALUES_UP_TO
    gathered = ctx.gather({
        "sent_bytes": trace.sent_bytes,
        "intercepted_send_bytes": intercepted_send_bytes,
        "received_bytes": trace.received_bytes,
        "moves": trace.moves,
        "snapshots": trace.snapshots,
        "start": original.tolist() if small else None,
        "max_abs_diff": max_abs_diff,
        "max_abs_value": max_abs_value,
        "result": buffer.tolist() if small else None,
    })
    result = _summary(ctx, gathered, numel, seed, original.element_size()) if ctx.is_main else None
    # Ranks leave together, so none tears down its process group while rank 0 is still summarising.
    dist.barrier()
    return result


def _summary(ctx: Any, gathered: list[dict], numel: int, seed: int, element_bytes: int) -> dict:
    world = ctx.world_size
    small = numel <= SHOW_VALUES_UP_TO
    buffer_bytes = numel * element_bytes
    sent = [g["sent_bytes"] for g in gathered]
    _log_view(ctx, gathered, world, numel, buffer_bytes, element_bytes)

    checks = [
        check_ring_equals_all_reduce([g["max_abs_diff"] for g in gathered], max(g["max_abs_value"] for g in gathered)),
        check_ring_sends(sent, buffer_bytes, world, element_bytes, numel),
    ]
    return ctx.result(
        "allreduce", {"numel": numel, "dtype": "float32", "seed": seed}, checks,
        buffer_bytes=buffer_bytes,
        sent_bytes_per_rank=sent,
        received_bytes_per_rank=[g["received_bytes"] for g in gathered],
        intercepted_send_bytes_per_rank=[g["intercepted_send_bytes"] for g in gathered],
        theory={"ring_wire_bytes_per_rank": 2 * (world - 1) / world * buffer_bytes,
                "formula": "2(N-1)/N x buffer bytes"},
        max_abs_diff_vs_all_reduce=[g["max_abs_diff"] for g in gathered],
        moves=[move for g in gathered for move in g["moves"]],
        buffers={"start": [g["start"] for g in gathered], "result": [g["result"] for g in gathered]}
        if small else None,
    )


def _log_view(ctx: Any, gathered: list[dict], world: int, numel: int, buffer_bytes: int, element_bytes: int) -> None:
    ctx.log(f"ring all-reduce of {numel} float32 ({buffer_bytes} bytes) on {world} ranks: "
            f"{world} chunks, rank r sends to rank r+1 only")
    small = numel <= SHOW_VALUES_UP_TO
    if small:
        for rank, g in enumerate(gathered):
            ctx.log(f"  rank {rank} starts with {format_chunks(g['start'], world)}")
    for index in range(2 * (world - 1)):
        move0 = gathered[0]["moves"][index]
        phase, step = move0["phase"], move0["step"]
        verb = "adds it into" if phase == "reduce-scatter" else "overwrites"
        ctx.log(f"{phase} step {step + 1} of {world - 1}:")
        for rank, g in enumerate(gathered):
            move = g["moves"][index]
            values = f" {format_chunks(move['values'], 1)}" if "values" in move else ""
            ctx.log(f"  rank {rank} -> rank {move['dst']}: chunk {move['chunk']}{values} "
                    f"({move['bytes']} B); rank {move['dst']} {verb} its chunk {move['chunk']}")
        if small:
            for rank, g in enumerate(gathered):
                ctx.log(f"    rank {rank} now holds {format_chunks(g['snapshots'][index], world)}")
        if phase == "reduce-scatter" and step == world - 2:
            ctx.log("  reduce-scatter done: rank r holds the full sum of chunk r")
    for rank, g in enumerate(gathered):
        expected = 2 * (world - 1) / world * buffer_bytes
        ctx.log(f"rank {rank} sent {g['sent_bytes']} B = {g['sent_bytes'] / buffer_bytes:.3f} x buffer "
                f"(theory 2(N-1)/N = {2 * (world - 1) / world:.3f} x, {expected:.0f} B; the send ops "
                f"intercepted by CommCounter carried {g['intercepted_send_bytes']} B); "
                f"max |ring - dist.all_reduce| = {g['max_abs_diff']:g}")


def check_ring_equals_all_reduce(max_abs_diff_by_rank: list[float], max_abs_value: float,
                                 rtol: float = 1e-6) -> Check:
    worst = max(max_abs_diff_by_rank)
    tolerance = rtol * max(1.0, max_abs_value)
    return Check(
        "ring_equals_all_reduce",
        worst <= tolerance,
        f"largest |ring - dist.all_reduce| over {len(max_abs_diff_by_rank)} ranks is {worst:g} "
        f"(tolerance {tolerance:g})",
        {"max_abs_diff_by_rank": max_abs_diff_by_rank, "max_abs_value": max_abs_value, "tolerance": tolerance},
    )


def check_ring_sends(sent_bytes_by_rank: list[int], buffer_bytes: int, world_size: int, element_bytes: int,
                     numel: int) -> Check:
    expected = 2 * (world_size - 1) / world_size * buffer_bytes
    # Chunks differ by at most one element when numel does not divide by N.
    slack = 0 if numel % world_size == 0 else 2 * (world_size - 1) * element_bytes
    off = [abs(sent - expected) for sent in sent_bytes_by_rank]
    passed = len(sent_bytes_by_rank) == world_size and all(d <= slack for d in off)
    return Check(
        "ring_sends_2_n_minus_1_over_n",
        passed,
        f"bytes sent per rank {sent_bytes_by_rank} vs 2(N-1)/N x {buffer_bytes} B = {byte_count(expected)} B "
        f"(N={world_size}, allowed difference {slack} B)",
        {"sent_bytes_by_rank": sent_bytes_by_rank, "expected_bytes": expected, "buffer_bytes": buffer_bytes,
         "world_size": world_size, "slack_bytes": slack},
    )
