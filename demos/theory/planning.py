"""Plans the analytic model picks: the lowest ZeRO stage that fits, whether to checkpoint, the HSDP group.

Each is a decision an interviewer asks for, made from the model's own figures (`calc` for memory,
`steptime` for time), so the interview can grade a choice as it grades a number. Torch-free.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ddpfsdp.demos.theory import steptime
from ddpfsdp.demos.theory.gpt_layout import gpt_unit_params
from ddpfsdp.demos.theory.quiz_answers import q_transformer_activation_bytes
from ddpfsdp.demos.theory.sharding import ZERO_STAGES, canonical_strategy
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.working_set import working_set
from ddpfsdp.demos.base.shapes import GPTShape
from ddpfsdp.demos.base.units import parse_bytes, parse_count

NONE_FITS = -1
"""`q_fit_stage`'s answer when even ZeRO-3 cannot hold the model state."""

CHECKPOINT_PLANS: tuple[str, ...] = ("keep", "checkpoint", "smaller-batch")
"""Keep every activation; checkpoint every block; or neither fits, so the micro-batch must shrink."""


def q_fit_stage(*, params: Any, gpus: Any, gpu_mem: Any, precision: str, optimizer: str) -> int:
    """The lowest ZeRO stage (0 = DDP) whose per-GPU model state fits in `gpu_mem`, or -1 for none."""
    count, world, limit = parse_count(params), parse_count(gpus), parse_bytes(gpu_mem)
    for stage, strategy in enumerate(ZERO_STAGES):
        if model_state(count, world, strategy, precision, optimizer)["model_state_bytes"] <= limit:
            return stage
    return NONE_FITS


def gpt_units(layers: int, d_model: int, vocab: int, seq_len: int) -> list[int]:
    """Parameters per FSDP unit of a GPT decoder wrapped per block (heads do not change the counts)."""
    return gpt_unit_params(GPTShape(layers=layers, d_model=d_model, heads=1, seq_len=seq_len, vocab=vocab))


class MemoryPlan(TypedDict):
    """Per-GPU bytes with activations kept and checkpointed, against the GPU, and the plan they give."""

    model_state_bytes: int
    working_set_bytes: int
    activations_kept_bytes: int
    activations_checkpointed_bytes: int
    kept_total_bytes: int
    checkpointed_total_bytes: int
    gpu_mem_bytes: int
    plan: str  # one of CHECKPOINT_PLANS


class HsdpGroup(TypedDict):
    """One HSDP shard-group size: its model state per GPU, whether that fits, and its step."""

    group_size: int
    model_state_bytes: int
    fits: bool
    comm_s: float
    step_s: float


def memory_plan(
    *, params: int, gpus: int, strategy: str, precision: str, optimizer: str, gpu_mem: int, layers: int,
    d_model: int, vocab: int, seq_len: int, micro_batch: int, group_size: int | None = None,
) -> MemoryPlan:
    """Per-GPU model state, working set and activations (kept or checkpointed) against the GPU's memory."""
    state = model_state(params, gpus, strategy, precision, optimizer, group_size)["model_state_bytes"]
    working = working_set(strategy, params, precision, gpt_units(layers, d_model, vocab, seq_len))["working_set_bytes"]
    shape = {"layers": layers, "d_model": d_model, "vocab": vocab, "seq_len": seq_len, "batch_size": micro_batch,
             "precision": precision, "strategy": strategy}
    keep = q_transformer_activation_bytes(**shape, checkpoint_activations=False)
    checkpointed = q_transformer_activation_bytes(**shape, checkpoint_activations=True)
    base = state + working
    if base + keep <= gpu_mem:
        plan = "keep"
    elif base + checkpointed <= gpu_mem:
        plan = "checkpoint"
    else:
        plan = "smaller-batch"
    return {"model_state_bytes": state, "working_set_bytes": working, "activations_kept_bytes": keep,
            "activations_checkpointed_bytes": checkpointed, "kept_total_bytes": base + keep,
            "checkpointed_total_bytes": base + checkpointed, "gpu_mem_bytes": gpu_mem, "plan": plan}


def q_checkpoint_plan(
    *, params: Any, gpus: Any, strategy: str, precision: str, optimizer: str, gpu_mem: Any, layers: Any,
    d_model: Any, vocab: Any, seq_len: Any, micro_batch: Any, group_size: Any = None,
) -> str:
    """keep, checkpoint or smaller-batch: the cheapest way this micro-batch fits beside the model state."""
    return memory_plan(
        params=parse_count(params), gpus=parse_count(gpus), strategy=canonical_strategy(strategy),
        precision=precision, optimizer=optimizer, gpu_mem=parse_bytes(gpu_mem), layers=parse_count(layers),
        d_model=parse_count(d_model), vocab=parse_count(vocab), seq_len=parse_count(seq_len),
        micro_batch=parse_count(micro_batch), group_size=None if group_size is None else parse_count(group_size),
    )["plan"]


def hsdp_groups(
    *, params: int, gpus: int, precision: str, optimizer: str, gpu_mem: int, tokens: int, peak_flops_per_s: float,
    mfu: float, units: int, **links: Any,
) -> list[HsdpGroup]:
    """Every HSDP shard-group size (powers of two from 2 to all GPUs): its model state and step time."""
    rows: list[HsdpGroup] = []
    size = 2
    while size <= gpus:
        if gpus % size == 0:
            state = model_state(params, gpus, "hsdp", precision, optimizer, size)["model_state_bytes"]
            comm = {"params": params, "gpus": gpus, "strategy": "hsdp", "precision": precision, "units": units,
                    "group_size": size, **links}
            rows.append({
                "group_size": size, "model_state_bytes": state, "fits": state <= gpu_mem,
                "comm_s": steptime.q_comm_time_s(**comm),
                "step_s": steptime.q_step_time_s(tokens=tokens, peak_flops_per_s=peak_flops_per_s, mfu=mfu, **comm),
            })
        size *= 2
    return rows


TIE_FIGURES = 4
"""Times that read the same to this many significant figures tie, as the interview shows them: a difference
nobody can see is no reason to prefer a group size."""


def _shown(seconds: float) -> float:
    return float(f"{seconds:.{TIE_FIGURES}g}")


def q_best_hsdp_group(*, gpu_mem: Any, **rest: Any) -> int:
    """The HSDP shard-group size whose model state fits and whose step (with overlap) is shortest; where
    steps tie (to `TIE_FIGURES` figures, as when overlap hides the communication of several), the one that
    communicates least (to as many figures), then holds least."""
    rows = [row for row in hsdp_groups(gpu_mem=parse_bytes(gpu_mem), **rest) if row["fits"]]
    if not rows:
        raise ValueError("no HSDP group size fits the model state in this GPU's memory")
    for figure in ("step_s", "comm_s"):
        least = min(_shown(row[figure]) for row in rows)
        rows = [row for row in rows if _shown(row[figure]) == least]
    return min(rows, key=lambda row: row["model_state_bytes"])["group_size"]


QUIZ_FUNCTIONS = {
    "fit_stage": q_fit_stage,
    "checkpoint_plan": q_checkpoint_plan,
    "best_hsdp_group": q_best_hsdp_group,
}
