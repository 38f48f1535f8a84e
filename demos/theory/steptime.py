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
- Calls, as each implementation issues them (`collective_calls`): DDP one all-reduce per gradient
  bucket, whole tensors filled in the order gradients arrive (`buckets.ddp_bucket_bytes`, 25 MiB cap,
  a tensor never split); ZeroRedundancyOptimizer one broadcast per parameter (`_broadcast_params_from_rank`
  without `parameters_as_bucket_view`); DeepSpeed ZeRO-1/2 one reduction per `reduce_bucket_size`
  (5e8 elements) of gradients and one all-gather of the updated partitions per parameter group
  (`all_gather_into_tensor_dp_groups`; one group here); FSDP one all-gather and one reduce-scatter per
  unit per pass (ZeRO-3 and HSDP gather twice, grad-op once), HSDP one all-reduce per unit.
- Overlap (`overlap`: which collective of which strategy runs during forward, during backward, or
  in neither, from the sources). A window hides its collectives up to its share of the compute
  (forward 2 of the 6 FLOPs, backward 4); what does not fit shows, and so does every collective in
  no window: exposed_s = sum over forward and backward of max(0, comm_in_window_s - share *
  compute_s) + comm_in_no_window_s. The step takes compute_s + exposed_s, and the exposed share is
  exposed_s / step_s. Without overlap every byte is exposed.

Torch-free: the quiz imports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.buckets import ddp_bucket_bytes
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.overlap import WINDOWS, by_window
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size
from ddpfsdp.demos.theory.working_set import DEEPSPEED_REDUCE_BUCKET_ELEMENTS
from ddpfsdp.demos.base.units import parse_count

FLOPS_PER_PARAM_TOKEN = 6

DEEPSPEED_PARAM_GROUPS = 1
"""Optimizer parameter groups DeepSpeed ZeRO-1/2 all-gathers one by one after the step (one here)."""


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


class CollectiveTime(TypedDict):
    """The alpha-beta model's time for `calls` ring collectives: latency, bandwidth, their sum."""

    latency_s: float
    bandwidth_s: float
    time_s: float
    wire_bytes: float
    intra_steps: int
    inter_steps: int
    calls: int


class TimedOp(CollectiveTime):
    """One collective of a step on the link its group runs over."""

    bytes: int
    ranks: int
    nodes: int
    bytes_per_s: float


class Exposure(TypedDict):
    """What shows of a step's communication, with the strategy's overlap and without any."""

    exposed_s: float
    exposed_by_window_s: dict[str, float]  # by overlap window
    step_s: float
    exposed_share: float
    step_no_overlap_s: float
    exposed_share_no_overlap: float


class StepTimes(Exposure):
    """One step's compute, each collective's time, and the seconds in each overlap window."""

    compute_s: float
    ops: dict[str, TimedOp]
    comm_s: float
    comm_by_window_s: dict[str, float]


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
) -> CollectiveTime:
    """The latency and bandwidth terms of `calls` ring collectives moving `logical_bytes` in all."""
    if bytes_per_s <= 0:
        raise ValueError("a link's bandwidth must be positive")
    intra, inter = ring_steps(op, ranks, nodes)
    latency_s = calls * (intra * intra_latency_s + inter * inter_latency_s)
    wire = logical_bytes * wire_factor(op, ranks)
    bandwidth_s = wire / bytes_per_s
    return {"latency_s": latency_s, "bandwidth_s": bandwidth_s, "time_s": latency_s + bandwidth_s, "wire_bytes": wire,
            "intra_steps": intra, "inter_steps": inter, "calls": calls}


def exposed(compute_s: float, comm_s: Mapping[str, float]) -> Exposure:
    """What shows of the communication in each overlap window (`overlap.WINDOWS`: seconds in forward,
    in backward, in none), with that overlap and without any."""
    unknown = set(comm_s) - set(WINDOWS)
    if unknown:
        raise ValueError(f"unknown overlap window {', '.join(sorted(unknown))}; choose from {', '.join(WINDOWS)}")
    shown_by = {window: max(0.0, comm_s.get(window, 0.0) - share * compute_s)
                for window, share in WINDOWS.items()}
    shown = sum(shown_by.values())
    total = sum(comm_s.values())
    return {
        "exposed_s": shown,
        "exposed_by_window_s": shown_by,
        "step_s": compute_s + shown,
        "exposed_share": shown / (compute_s + shown) if compute_s + shown > 0 else 0.0,
        "step_no_overlap_s": compute_s + total,
        "exposed_share_no_overlap": total / (compute_s + total) if compute_s + total > 0 else 0.0,
    }


# ----------------------------------------------------------------------------- a training step


def collective_calls(
    strategy: str, op: str, *, params: int, precision: str, units: int, tensor_numels: list[int] | None = None,
) -> int:
    """How many calls of `op` one step of `strategy` issues, as its implementation issues them.

    `tensor_numels`: the parameters' sizes in registration order, which DDP's buckets and
    ZeroRedundancyOptimizer's broadcasts follow; `units`: the FSDP units.
    """
    strategy = canonical_strategy(strategy)
    if strategy in ("zero3", "hsdp"):
        return 2 * units if op == "all_gather" else units  # gathered again in backward
    if strategy == "grad-op":
        return units  # gathered once, in forward; reduce-scattered once
    if strategy in ("zero1", "zero2"):
        if op == "all_gather":
            return DEEPSPEED_PARAM_GROUPS
        return max(1, math.ceil(params / DEEPSPEED_REDUCE_BUCKET_ELEMENTS))
    if not tensor_numels:
        raise ValueError(f"{strategy}'s calls follow its parameter tensors: give the model's layers, d_model, "
                         "vocab and seq_len")
    if op == "broadcast":
        return sum(1 for numel in tensor_numels if numel > 0)
    # Gradients arrive in about the reverse of registration order; DDP buckets them in that order.
    reduce_bytes = implementation(strategy, precision).reduce_bytes
    return len(ddp_bucket_bytes([numel * reduce_bytes for numel in reversed(tensor_numels)]))


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
    layers: int | None = None,
    d_model: int | None = None,
    vocab: int | None = None,
    seq_len: int | None = None,
) -> dict[str, TimedOp]:
    """Each collective of one step (step_comm) timed on the link its group runs over.

    A group inside one node (HSDP's shard group of at most a node) runs over the intra-node link;
    any group spanning nodes runs at the inter-node bandwidth. Calls as `collective_calls` counts them;
    DDP's and ZeroRedundancyOptimizer's need the GPT decoder's shape (`layers`, `d_model`, `vocab`,
    `seq_len`: `gpt_layout.gpt_param_numels`).
    """
    strategy = canonical_strategy(strategy)
    if gpus % gpus_per_node and gpus > gpus_per_node:
        raise ValueError(f"{gpus} GPUs do not make whole nodes of {gpus_per_node}")
    nodes = max(1, gpus // gpus_per_node)
    group = resolve_group_size(strategy, gpus, group_size)
    ops = step_comm(strategy, params, gpus, precision, group)
    shape = (layers, d_model, vocab, seq_len)
    numels = gpt_param_numels(*shape) if None not in shape else None
    timed: dict[str, TimedOp] = {}
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
            inter_latency_s=inter_latency_s, nodes=spans,
            calls=collective_calls(strategy, op, params=params, precision=precision, units=units, tensor_numels=numels),
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


def step_times(*, tokens: Any, peak_flops_per_s: float, mfu: float, **comm: Any) -> StepTimes:
    """One step's compute, each collective's time, the seconds in each overlap window, and what shows."""
    compute_s = q_compute_time_s(params=comm["params"], tokens=tokens, gpus=comm["gpus"],
                                 peak_flops_per_s=peak_flops_per_s, mfu=mfu)
    ops = step_comm_times(**comm)
    in_windows = by_window(comm["strategy"], {op: timing["time_s"] for op, timing in ops.items()})
    return {"compute_s": compute_s, "ops": ops, "comm_s": sum(in_windows.values()), "comm_by_window_s": in_windows,
            **exposed(compute_s, in_windows)}


def q_exposed_share(*, tokens: Any, peak_flops_per_s: float, mfu: float, overlap: bool = True, **comm: Any) -> float:
    """The exposed share of a step: with the strategy's overlap (`overlap.OVERLAP`), or without."""
    shown = step_times(tokens=tokens, peak_flops_per_s=peak_flops_per_s, mfu=mfu, **comm)
    return shown["exposed_share"] if overlap else shown["exposed_share_no_overlap"]


def q_step_time_s(*, tokens: Any, peak_flops_per_s: float, mfu: float, overlap: bool = True, **comm: Any) -> float:
    """Seconds per step: compute plus what shows of the communication, with overlap or without."""
    shown = step_times(tokens=tokens, peak_flops_per_s=peak_flops_per_s, mfu=mfu, **comm)
    return shown["step_s"] if overlap else shown["step_no_overlap_s"]


QUIZ_FUNCTIONS = {
    "compute_time_s": q_compute_time_s,
    "comm_time_s": q_comm_time_s,
    "exposed_share": q_exposed_share,
    "step_time_s": q_step_time_s,
}
