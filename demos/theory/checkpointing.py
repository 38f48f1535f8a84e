"""Checkpoints against failures: what a checkpoint weighs, how long it takes to write, how often to take one.

All theory; nothing here is measured.

- Size. A checkpoint that can resume training holds the parameters as held and the optimizer's state
  (Adam's two moments, and the fp32 master copy where the recipe keeps one); gradients are not saved,
  since the step after a resume computes them afresh. Bytes per parameter: bf16-mixed or fp32 with
  Adam 4 + 8 = 12; bf16-master (Megatron, DeepSpeed) 2 + 12 = 14; pure bf16 2 + 4 = 6. A 175B model
  with bf16-master Adam weighs 175e9 x 14 = 2.45 TB.
- Who writes it. torch.distributed.checkpoint (`dcp.save` of `get_state_dict(model, optimizer)`)
  writes every rank's own shard: 1/N of the bytes each for FSDP. Replicated tensors (DDP) are written
  once: the save planner keeps each duplicated item on the rank whose plan is smallest so far
  (`_dedup_save_plans.dedup_save_plans`), which spreads whole tensors over the ranks. A full state dict
  gathered to rank 0 and written with `torch.save` puts every byte through one rank.
- Write time. A write is bounded by each rank's own path to storage and by the file system's aggregate
  bandwidth: max(bytes per rank / per-rank bandwidth, total bytes / aggregate bandwidth).
- Failures. With independent failures at a constant rate (exponential times between them), the job
  fails when any of its N GPUs does: the job's mean time between failures is one GPU's MTBF / N.
  Llama 3 405B's pre-training saw 419 unexpected interruptions in a 54-day snapshot on 16,384 H100s
  (Dubey et al., 2024, "The Llama 3 Herd of Models", the section on reliability): a job MTBF of 3.1
  hours, about 50,700 hours per GPU, all causes together.
- The interval. Young (1974, "A first order approximation to the optimum checkpoint interval") finds
  the compute time between checkpoints that loses least: tau = sqrt(2 C M), C the time one checkpoint
  pauses training, M the job's MTBF. Daly (2006, "A higher order estimate of the optimum checkpoint
  interval for restart dumps") refines it: tau = sqrt(2 C M) [1 + (1/3) sqrt(C / 2M) + (1/9) (C / 2M)]
  - C for C < 2M, and tau = M beyond.
- Lost goodput, first order (C and tau small against M): every interval pays C to checkpoint, a share
  C / tau; a failure lands on average half-way through an interval and loses that work, tau / 2 per
  failure, 1 / M failures per second: a share tau / (2M); each failure also costs the restart R, a
  share R / M. At Young's tau the first two are equal and sum to sqrt(2 C / M).
  Assumptions: failures independent and memoryless; checkpoints block training for C (an async save
  blocks only for its copy to host memory); no failure during a checkpoint or a restart; C, R and tau
  small against M (where they are not, the share is an underestimate).

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

from ddpfsdp.demos.theory.arguments import read_count
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown

HOUR_S = 3600.0

LLAMA3_GPUS = 16_384
LLAMA3_DAYS = 54
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
GPU_MTBF_HOURS = LLAMA3_DAYS * 24 * LLAMA3_GPUS / LLAMA3_UNEXPECTED_INTERRUPTIONS
"""One GPU's mean time between interruptions of the job it is in, all causes: Llama 3's 54-day snapshot
(Dubey et al., 2024): 54 x 24 h x 16,384 GPUs / 419 = 50,677 hours."""

MTBF_SOURCE = (f"Llama 3: {LLAMA3_UNEXPECTED_INTERRUPTIONS} unexpected interruptions in {LLAMA3_DAYS} days on "
               f"{LLAMA3_GPUS:,} GPUs (Dubey et al., 2024)")


def checkpoint_bytes_per_param(precision: str, optimizer: str) -> int:
    """Parameters as held plus the optimizer's state; no gradients."""
    per = bytes_per_param_breakdown(precision, optimizer)
    return per["params"] + per["optimizer"]


def checkpoint_bytes(params: int, precision: str, optimizer: str) -> int:
    return params * checkpoint_bytes_per_param(precision, optimizer)


def check_positive(value: Any, what: str, advice: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number; {advice}") from None
    if not number > 0 or math.isinf(number):
        raise ValueError(f"{what} must be more than 0 (got {value!r}); {advice}")
    return number


def job_mtbf_s(gpu_mtbf_s: float, gpus: int) -> float:
    """The job fails when any GPU does: rates add, so the MTBF divides by N."""
    mtbf = check_positive(gpu_mtbf_s, "a GPU's MTBF", f"give hours between failures, e.g. {GPU_MTBF_HOURS:,.0f} "
                          f"({MTBF_SOURCE})")
    return mtbf / read_count(gpus, "gpus")


def write_time_s(bytes_per_rank: float, total_bytes: float, rank_bytes_per_s: float | None,
                 storage_bytes_per_s: float | None) -> float:
    """max(bytes per rank / per-rank bandwidth, total / aggregate bandwidth), over the bounds given."""
    bounds = []
    if rank_bytes_per_s is not None:
        bounds.append(bytes_per_rank / check_positive(rank_bytes_per_s, "a rank's write bandwidth", "e.g. 2GB/s"))
    if storage_bytes_per_s is not None:
        bounds.append(total_bytes / check_positive(storage_bytes_per_s, "the storage's bandwidth", "e.g. 100GB/s"))
    if not bounds:
        raise ValueError("a write time needs a bandwidth: a rank's (e.g. 2GB/s) or the storage's (e.g. 100GB/s)")
    return max(bounds)


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974): sqrt(2 C M)."""
    c = check_positive(checkpoint_s, "the checkpoint time", "give the seconds one checkpoint pauses training")
    m = check_positive(mtbf_s, "the job's MTBF", "give a positive MTBF")
    return math.sqrt(2 * c * m)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006): sqrt(2CM)[1 + sqrt(C/2M)/3 + (C/2M)/9] - C for C < 2M, else M."""
    c, m = float(checkpoint_s), float(mtbf_s)
    if c >= 2 * m:
        return m
    ratio = c / (2 * m)
    return young_interval_s(c, m) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - c


class LostShares(TypedDict):
    """Shares of wall time lost to each cause, in all, and what is left for training."""

    checkpoint: float
    rework: float
    restart: float
    total: float
    goodput: float


class CheckpointSection(TypedDict):
    """The `checkpoint` section of the `ddpfsdp.calc/1` document; the write times on are None without a
    bandwidth, `at_interval` without an interval to price."""

    theory: bool
    bytes_per_param: int
    total_bytes: int
    sharded_bytes_per_rank: int
    gathered_rank0_bytes: int
    gpu_mtbf_hours: float
    job_mtbf_s: float
    rank_bytes_per_s: float | None
    storage_bytes_per_s: float | None
    sharded_write_s: float | None
    gathered_write_s: float | None
    young_interval_s: float | None
    daly_interval_s: float | None
    at_young: LostShares | None
    interval_s: float | None
    at_interval: LostShares | None
    restart_s: float


def lost_shares(interval_s: float, checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0) -> LostShares:
    """First-order shares of wall time lost: checkpointing C/tau, rework tau/(2M), restarts R/M."""
    tau = check_positive(interval_s, "the checkpoint interval", "give the compute time between checkpoints")
    c = check_positive(checkpoint_s, "the checkpoint time", "give the seconds one checkpoint pauses training")
    m = check_positive(mtbf_s, "the job's MTBF", "give a positive MTBF")
    if restart_s < 0:
        raise ValueError(f"a restart cannot take negative time (got {restart_s!r} s)")
    checkpoint, rework, restart = c / tau, tau / (2 * m), restart_s / m
    total = sum((checkpoint, rework, restart))
    return {"checkpoint": checkpoint, "rework": rework, "restart": restart, "total": total,
            "goodput": max(0.0, 1 - total)}


def checkpoint_figures(*, params: int, gpus: int, precision: str, optimizer: str,
                       rank_bytes_per_s: float | None = None, storage_bytes_per_s: float | None = None,
                       gpu_mtbf_hours: float = GPU_MTBF_HOURS, interval_s: float | None = None,
                       restart_s: float = 0.0) -> CheckpointSection:
    """The `checkpoint` section of `ddpfsdp calc --json`: size, write time, the interval and what is lost."""
    total = checkpoint_bytes(params, precision, optimizer)
    per_rank = math.ceil(total / gpus)
    figures: CheckpointSection = {
        "theory": True,
        "bytes_per_param": checkpoint_bytes_per_param(precision, optimizer),
        "total_bytes": total,
        "sharded_bytes_per_rank": per_rank,
        "gathered_rank0_bytes": total,
        "gpu_mtbf_hours": check_positive(gpu_mtbf_hours, "a GPU's MTBF", f"e.g. {GPU_MTBF_HOURS:,.0f} hours"),
        "job_mtbf_s": job_mtbf_s(gpu_mtbf_hours * HOUR_S, gpus),
        "rank_bytes_per_s": rank_bytes_per_s,
        "storage_bytes_per_s": storage_bytes_per_s,
        "sharded_write_s": None,
        "gathered_write_s": None,
        "young_interval_s": None,
        "daly_interval_s": None,
        "at_young": None,
        "interval_s": interval_s,
        "at_interval": None,
        "restart_s": restart_s,
    }
    if rank_bytes_per_s is None and storage_bytes_per_s is None:
        return figures
    sharded = write_time_s(per_rank, total, rank_bytes_per_s, storage_bytes_per_s)
    figures["sharded_write_s"] = sharded
    figures["gathered_write_s"] = write_time_s(total, total, rank_bytes_per_s, storage_bytes_per_s)
    mtbf = figures["job_mtbf_s"]
    figures["young_interval_s"] = young_interval_s(sharded, mtbf)
    figures["daly_interval_s"] = daly_interval_s(sharded, mtbf)
    figures["at_young"] = lost_shares(figures["young_interval_s"], sharded, mtbf, restart_s)
    if interval_s is not None:
        figures["at_interval"] = lost_shares(interval_s, sharded, mtbf, restart_s)
    return figures


# ----------------------------------------------------------------------------- quiz answers


def q_checkpoint_bytes(*, params: Any, precision: str, optimizer: str, gpus: Any = 1) -> int:
    """Bytes of a resumable checkpoint each of `gpus` ranks writes when it is sharded evenly (1: the whole)."""
    return math.ceil(checkpoint_bytes(read_count(params, "params"), precision, optimizer) / read_count(gpus, "gpus"))


def q_checkpoint_write_s(*, params: Any, precision: str, optimizer: str, gpus: Any, rank_bytes_per_s: Any = None,
                         storage_bytes_per_s: Any = None) -> float:
    """Seconds to write a sharded checkpoint: max(per rank / rank bandwidth, total / storage bandwidth)."""
    from ddpfsdp.demos.theory.bandwidth import parse_rate

    total = checkpoint_bytes(read_count(params, "params"), precision, optimizer)
    world = read_count(gpus, "gpus")
    rank = None if rank_bytes_per_s is None else parse_rate(rank_bytes_per_s)
    storage = None if storage_bytes_per_s is None else parse_rate(storage_bytes_per_s)
    return write_time_s(math.ceil(total / world), total, rank, storage)


def q_job_mtbf_hours(*, gpu_mtbf_hours: Any, gpus: Any) -> float:
    return job_mtbf_s(float(gpu_mtbf_hours) * HOUR_S, gpus) / HOUR_S


def q_young_interval_min(*, checkpoint_min: Any, mtbf_hours: Any) -> float:
    """Young's interval in minutes, for a checkpoint of `checkpoint_min` minutes and a job MTBF in hours."""
    return young_interval_s(float(checkpoint_min) * 60, float(mtbf_hours) * HOUR_S) / 60


def q_young_interval_min_for_gpus(*, checkpoint_min: Any, gpu_mtbf_hours: Any, gpus: Any) -> float:
    """Young's interval in minutes for a job of `gpus` GPUs, each failing once every `gpu_mtbf_hours`."""
    return young_interval_s(float(checkpoint_min) * 60, job_mtbf_s(float(gpu_mtbf_hours) * HOUR_S, gpus)) / 60


def q_lost_share(*, interval_min: Any, checkpoint_min: Any, mtbf_hours: Any, restart_min: Any = 0) -> float:
    """The share of wall time lost, first order: C/tau + tau/(2M) + R/M."""
    return lost_shares(float(interval_min) * 60, float(checkpoint_min) * 60, float(mtbf_hours) * HOUR_S,
                       float(restart_min) * 60)["total"]


def q_lost_share_at_young(*, checkpoint_min: Any, mtbf_hours: Any) -> float:
    """The share lost at Young's interval: sqrt(2C/M)."""
    tau_min = q_young_interval_min(checkpoint_min=checkpoint_min, mtbf_hours=mtbf_hours)
    return q_lost_share(interval_min=tau_min, checkpoint_min=checkpoint_min, mtbf_hours=mtbf_hours)


QUIZ_FUNCTIONS = {
    "checkpoint_bytes": q_checkpoint_bytes,
    "checkpoint_write_s": q_checkpoint_write_s,
    "job_mtbf_hours": q_job_mtbf_hours,
    "young_interval_min": q_young_interval_min,
    "young_interval_min_for_gpus": q_young_interval_min_for_gpus,
    "checkpoint_lost_share": q_lost_share,
    "checkpoint_lost_share_at_young": q_lost_share_at_young,
}
