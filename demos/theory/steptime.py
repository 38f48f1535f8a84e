"""Step time: compute from FLOPs, collectives from bytes over a link, and how much of them shows.

All theory, the napkin model interviews use; nothing here is measured.

- Compute. Training costs about 6 FLOPs per parameter per token (2 in forward, 4 in backward;
  Kaplan et al. 2020, "Scaling Laws for Neural Language Models", C ~ 6N per token), attention's
  own FLOPs left out. Spread over N GPUs, each at a model FLOP utilisation (MFU) of its peak:
  compute_s = 6 * P * T / (N * peak * MFU), T the tokens of one optimizer step (the global batch).
- One collective over a ring of n ranks (the alpha-beta model): each step of the ring pays a
  latency, and each rank sends its wire bytes (wire_factor: 2(n-1)/n of the buffer for an
  all-reduce, (n-1)/n for an all-gather or a reduce-scatter) at the link's bandwidth:
  time_s = calls * (intra_steps * intra_latency + inter_steps * inter_latency) + wire / bandwidth.
  A ring of n ranks takes 2(n-1) steps for an all-reduce and n-1 for the others; as NCCL's own cost
  model counts them (src/graph/tuning.cc), a ring that spans k nodes crosses the network on 2(k-1)
  of an all-reduce's steps and k-1 of the others' (all of them with one rank per node), and runs
  at the network's bandwidth throughout, since the slowest link paces a ring.
- Overlap. Collectives can run while the GPU computes; the part of the step's compute they can
  hide behind is `hideable`: backward only for DDP and ZeRO-1/2 (their gradient collectives start
  as backward produces gradients; backward is 4 of the 6 FLOPs, so 2/3), forward and backward for
  ZeRO-3 and HSDP (FSDP prefetches the next unit's all-gather). What does not fit behind it is
  exposed: exposed_s = max(0, comm_s - hideable * compute_s); the step takes compute_s +
  exposed_s, and the exposed share is exposed_s / step_s. Without overlap every byte is exposed.

Torch-free: the quiz imports it.
"""

from __future__ import annotations

import math
from typing import Any

from ddpfsdp.demos.collectives import wire_factor
from ddpfsdp.demos.theory.buckets import DDP_BUCKET_CAP_MB
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size
from ddpfsdp.demos.units import parse_count

FLOPS_PER_PARAM_TOKEN = 6
BACKWARD_SHARE = 4 / 6
"""Backward's share of a step's FLOPs: 4 of the 6 per parameter and token."""

BUCKET_BYTES = DDP_BUCKET_CAP_MB * 2**20
"""How DDP and ZeRO-1/2 gradient collectives are counted into calls: DDP's default bucket cap."""

HIDEABLE: dict[str, float] = {"ddp": BACKWARD_SHARE, "zro": BACKWARD_SHARE, "zero1": BACKWARD_SHARE, "zero2": BACKWARD_SHARE,
                              "grad-op": 1.0, "zero3": 1.0, "hsdp": 1.0}


def compute_time_s(params: float, tokens: float, gpus: int, peak_flops_per_s: float, mfu: float) -> float:
    """Seconds of compute per optimizer step: 6 * params * tokens / (gpus * peak * mfu)."""
    if not 0 < mfu <= 1:
        raise ValueError(f"MFU is a share of the peak, in (0, 1]; got {mfu}")
    if gpus < 1 or peak_flops_per_s <= 0:
        raise ValueError("compute time needs at least one GPU and a positive peak")
    return FLOPS_PER_PARAM_TOKEN * params * tokens / (gpus * peak_flops_per_s * mfu)


def ring_steps(op: str, ranks: int, nodes: int = 1) -> tuple[int, int]:
    """(steps inside a node, steps across the network) of one ring collective over `ranks` on `nodes`."""
    wire_factor(op, ranks)  # checks the op and the rank count
    if ranks == 1:
        return 0, 0
    total = 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
    if nodes <= 1:
        return total, 0
    inter = 2 * (nodes - 1) if op == "all_reduce" else nodes - 1
    return total - inter, inter


def collective_time_s(
    op: str,
    logical_bytes: float,
    ranks: int,
    *,
    bytes_per_s: float,
    intra_latency_s: float,
    inter_latency_s: float = 0.0,
    nodes: int = 1,
    calls: int = 1,
) -> dict[str, float]:
    """The latency and bandwidth terms of `calls` ring collectives moving `logical_bytes` in all."""
    if bytes_per_s <= 0:
        raise ValueError("a link's bandwidth must be positive")
    intra, inter = ring_steps(op, ranks, nodes)
    latency_s = calls * (intra * intra_latency_s + inter * inter_latency_s)
    wire = logical_bytes * wire_factor(op, ranks)
    bandwidth_s = wire / bytes_per_s
    return {"latency_s": latency_s, "bandwidth_s": bandwidth_s, "time_s": latency_s + bandwidth_s, "wire_bytes": wire,
            "intra_steps": intra, "inter_steps": inter, "calls": calls}


def exposed(compute_s: float, comm_s: float, hideable: float) -> dict[str, float]:
    """What shows of `comm_s` with overlap behind `hideable` of the compute, and without any overlap."""
    if not 0 <= hideable <= 1:
        raise ValueError(f"the hideable share of compute is in [0, 1]; got {hideable}")
    shown = max(0.0, comm_s - hideable * compute_s)
    return {
        "exposed_s": shown,
        "step_s": compute_s + shown,
        "exposed_share": shown / (compute_s + shown) if compute_s + shown > 0 else 0.0,
        "step_no_overlap_s": compute_s + comm_s,
        "exposed_share_no_overlap": comm_s / (compute_s + comm_s) if compute_s + comm_s > 0 else 0.0,
    }


# ----------------------------------------------------------------------------- a training step


def _calls(strategy: str, op: str, logical_bytes: int, units: int) -> int:
    if strategy in ("zero3", "hsdp"):
        return 2 * units if op == "all_gather" else units  # gathered again in backward
    return max(1, math.ceil(logical_bytes / BUCKET_BYTES))


def step_comm_times(
    *,
    params: int,
    gpus: int,
    strategy: str,
    precision: str,
    units: int,
    gpus_per_node: int,
    intra_bytes_per_s: float,
    intra_latency_s: float,
    inter_bytes_per_s: float,
    inter_latency_s: float,
    group_size: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Each collective of one step (step_comm) timed on the link its group runs over.

    A group inside one node (HSDP's shard group of at most a node) runs over the intra-node link;
    any group spanning nodes runs at the inter-node bandwidth. Calls: per FSDP unit for ZeRO-3 and
    HSDP (two all-gathers per unit), per DDP-sized bucket for the others.
    """
    strategy = canonical_strategy(strategy)
    if gpus % gpus_per_node and gpus > gpus_per_node:
        raise ValueError(f"{gpus} GPUs do not make whole nodes of {gpus_per_node}")
    nodes = max(1, gpus // gpus_per_node)
    group = resolve_group_size(strategy, gpus, group_size)
    ops = step_comm(strategy, params, gpus, precision, group)
    timed = {}
    for op, figures in ops.items():
        if strategy == "hsdp" and op != "all_reduce":
            ranks = group
        elif strategy == "hsdp":
            ranks = gpus // group  # one rank of each shard group: the replicas of one shard
        else:
            ranks = gpus
        # Consecutive ranks fill a node first; a replica group takes one rank per shard group.
        spans = min(nodes, ranks) if strategy == "hsdp" and op == "all_reduce" else math.ceil(ranks / gpus_per_node)
        bandwidth = inter_bytes_per_s if spans > 1 else intra_bytes_per_s
        timing = collective_time_s(
            op, figures["bytes"], ranks, bytes_per_s=bandwidth, intra_latency_s=intra_latency_s,
            inter_latency_s=inter_latency_s, nodes=spans, calls=_calls(strategy, op, figures["bytes"], units),
        )
        timed[op] = {"bytes": figures["bytes"], "ranks": ranks, "nodes": spans, "bytes_per_s": bandwidth, **timing}
    return timed


# ----------------------------------------------------------------------------- quiz answers
# Keywords only, results in seconds or shares, as the interview's steps call them.


def q_compute_time_s(*, params: Any, tokens: Any, gpus: Any, peak_flops_per_s: float, mfu: float) -> float:
    return compute_time_s(parse_count(params), parse_count(tokens), parse_count(gpus), float(peak_flops_per_s), float(mfu))


def q_comm_time_s(**kwargs: Any) -> float:
    """Seconds of communication per step, every collective one after another (no overlap)."""
    return sum(op["time_s"] for op in step_comm_times(**kwargs).values())


def _step(tokens: Any, peak_flops_per_s: float, mfu: float, comm: dict[str, Any]) -> dict[str, float]:
    compute_s = q_compute_time_s(params=comm["params"], tokens=tokens, gpus=comm["gpus"],
                                 peak_flops_per_s=peak_flops_per_s, mfu=mfu)
    return exposed(compute_s, q_comm_time_s(**comm), HIDEABLE[canonical_strategy(comm["strategy"])])


def q_exposed_share(*, tokens: Any, peak_flops_per_s: float, mfu: float, overlap: bool = True, **comm: Any) -> float:
    """The exposed share of a step: with overlap behind the strategy's hideable compute, or without."""
    shown = _step(tokens, peak_flops_per_s, mfu, comm)
    return shown["exposed_share"] if overlap else shown["exposed_share_no_overlap"]


def q_step_time_s(*, tokens: Any, peak_flops_per_s: float, mfu: float, overlap: bool = True, **comm: Any) -> float:
    """Seconds per step: compute plus what shows of the communication, with overlap or without."""
    shown = _step(tokens, peak_flops_per_s, mfu, comm)
    return shown["step_s"] if overlap else shown["step_no_overlap_s"]


QUIZ_FUNCTIONS = {
    "compute_time_s": q_compute_time_s,
    "comm_time_s": q_comm_time_s,
    "exposed_share": q_exposed_share,
    "step_time_s": q_step_time_s,
}
