"""The planning follow-ups: the same job, now free to use tensor and pipeline parallelism as well.

Which tp x pp x dp the planner ranks first (the best candidate against three that lose, each for its
own reason), then the memory per GPU that plan needs, and the closing explanation. Every figure comes
from the analytic model (`demos.theory.plan3d`), through the step's own function and arguments. The
global batch is the scenario's own (a micro-batch per GPU), so each data-parallel replica runs tp x pp
micro-batches per step.
"""

from __future__ import annotations

import functools
import random
from typing import TYPE_CHECKING, TypedDict

from ddpfsdp.demos.theory import plan3d
from ddpfsdp.quiz.interview import steps
from ddpfsdp.quiz.interview.scenario import Option, Setup, Step, compute, gb, new_step, pct, secs

HEAD_DIM = 128
"""Heads of d_model / 128, as the Llama models the presets are shaped like have."""

LOSERS = ("memory", "tp-across-nodes", "bubble", "recompute", "dp", "tp", "pp")
"""The reasons a candidate loses, in the order the step picks one loser of each."""

CLEAR_MARGIN = 0.05
"""A loser offered as a choice fails to fit, or is at least 5% slower than the first: no near tie to split hairs."""

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.plan3d import Candidate, Degrees, Loser, PlanSection


class JobArgs(TypedDict):
    """The planner's job as `plan3d.job_from_args` takes it: the steps' `args`, saved with each step."""

    layers: int
    d_model: int
    heads: int
    vocab: int
    seq_len: int
    gpus: int
    gpus_per_node: int
    gpu_mem: int
    peak_flops_per_s: float
    intra_bytes_per_s: float
    inter_bytes_per_s: float
    intra_latency_s: float
    inter_latency_s: float
    global_batch: int
    micro_batch: int
    precision: str
    optimizer: str
    mfu: float
    dp_mode: str


def job_args(setup: Setup) -> JobArgs:
    """The planner's job for this scenario, as `plan3d.q_plan_degrees` and `q_plan_memory_bytes` take it."""
    return {"layers": setup.layers, "d_model": setup.d_model, "heads": setup.d_model // HEAD_DIM, "vocab": setup.vocab,
            "seq_len": setup.seq_len, "gpus": setup.gpus, "gpus_per_node": setup.gpus_per_node,
            "gpu_mem": setup.gpu_mem_bytes, "peak_flops_per_s": setup.peak_flops_per_s,
            "intra_bytes_per_s": setup.intra_bytes_per_s, "inter_bytes_per_s": setup.inter_bytes_per_s,
            "intra_latency_s": setup.intra_latency_s, "inter_latency_s": setup.inter_latency_s,
            "global_batch": setup.gpus * setup.micro_batch, "micro_batch": setup.micro_batch,
            "precision": setup.precision, "optimizer": setup.optimizer, "mfu": setup.mfu, "dp_mode": "zero1"}


@functools.cache
def the_plan(setup: Setup) -> PlanSection:
    """The planner's answer for this setup (computed once: the steps and the draw all read it)."""
    return plan3d.plan(plan3d.job_from_args(**job_args(setup)), top=1)


def has_plan(setup: Setup) -> bool:
    """Some tp x pp x dp fits this job with ZeRO-1, and at least two others lose to it clearly, each for its
    own reason: the step then has a right answer and wrong ones worth telling apart."""
    try:
        return len(_options(the_plan(setup))) >= 3
    except ValueError:
        return False


def _text(row: Degrees) -> str:
    return plan3d.degrees_text(row["tp"], row["pp"], row["dp"])


def _options(plan: PlanSection, order_seed: str = "") -> tuple[Option, ...]:
    """The first candidate and up to three that lose clearly, each for a different reason."""
    best = plan["candidates"][0]
    clear = [other for other in plan["others"]
             if not other["fits"] or other["step_s"] >= best["step_s"] * (1 + CLEAR_MARGIN)]
    losers: list[Loser] = []
    for kind in LOSERS:
        row = next((other for other in clear if other["loses_by"] == kind), None)
        if row is not None and len(losers) < 3:
            losers.append(row)
    # In an order drawn from the job, so where the first lands tells nothing.
    rows: list[Candidate | Loser] = [best, *losers]
    random.Random(f"plan-options:{order_seed}").shuffle(rows)
    return tuple(
        Option(_text(row), _text(row),
               (f"the planner's first: step {secs(row['step_s'])}, {gb(row['memory']['total_bytes'])} per GPU, bubble "
                f"{pct(row['bubble_fraction'])}" if row is best else row["reason"]))
        for row in rows
    )


def choose_degrees(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    """Free to use tensor and pipeline parallelism too: which degrees?"""
    args = job_args(setup)
    chosen = the_plan(setup)
    options = _options(chosen, repr(setup))
    number = steps.choice(options, compute("plan_degrees", args))
    change = (f"You may now use tensor and pipeline parallelism as well: tp up to two nodes' worth, pp across nodes, "
              f"ZeRO-1 over the data-parallel rest. The global batch stays {setup.gpus * setup.micro_batch:,} sequences, "
              "so each replica runs tp x pp micro-batches per step (1F1B).")
    return setup, plan, group, new_step(
        "plan-3d", title="A 3-D plan",
        prompt="Tensor parallelism's all-reduces (4 per block and micro-batch) sit on the critical path; the pipeline "
        "sends one b·s·d boundary activation per micro-batch and adds a bubble of (p-1)/(m+p-1); data parallelism "
        "moves 2x the parameters it holds per step. Which degrees give the shortest step that fits "
        f"{gb(setup.gpu_mem_bytes)} per GPU?",
        unit="choice", answer=number, fn="plan_degrees", args=args, options=options, change=change,
        working="; ".join(f"{o.text}: {o.reason}" for o in options) + f". The planner's first is option {number}.",
    )


def plan_memory(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    """That plan's memory per GPU at its fullest pipeline rank."""
    best = the_plan(setup)["candidates"][0]
    args = {**job_args(setup), "tp": best["tp"], "pp": best["pp"], "dp": best["dp"]}
    answer = compute("plan_memory_bytes", args)
    memory = best["memory"]
    checkpointed = " with every block checkpointed" if best["checkpoint_activations"] else ""
    change = f"You run {_text(best)}, with {best['microbatches']} micro-batches per replica per step."
    return setup, plan, group, new_step(
        "plan-memory", title="Memory per GPU of the plan",
        prompt=f"Each GPU holds 1/{best['tp']} of its stage's parameters (TP), with ZeRO-1 over the {best['dp']} "
        f"replicas, plus the activations of the micro-batches 1F1B keeps in flight on the first stage (up to pp of "
        f"them){checkpointed}. How much memory does the fullest GPU need? Answer in GB.",
        unit="GB", answer=answer, tolerance=0.10, fn="plan_memory_bytes", args=args, change=change,
        working=f"Rank {memory['rank']} of the pipeline: {memory['local_params']:,} parameters per GPU after TP; model "
        f"state {gb(memory['model_state_bytes'])} with ZeRO-1 over dp {best['dp']}; activations "
        f"{gb(memory['activation_bytes'])} for {memory['in_flight']:g} micro-batch(es) in flight; total {gb(answer)}.",
    )


def explain(setup: Setup, plan: str) -> Step:
    """Why these degrees: from this scenario's plan."""
    chosen = the_plan(setup)
    best = chosen["candidates"][0]
    comm = best["comm"]
    points = [
        f"TP {best['tp']} on {'NVLink, inside a node' if comm.get('tp', {}).get('link') != 'inter' else 'the network'}"
        f": its all-reduces take {secs(best['terms']['tp_s'])} a step on the critical path.",
        f"PP {best['pp']}: a bubble of {pct(best['bubble_fraction'])} with {best['microbatches']} micro-batches per "
        f"replica; boundary activations are all that crosses between stages.",
        f"DP {best['dp']} with ZeRO-1: {secs(best['terms']['dp_s'])} of gradient and parameter traffic a step, "
        "counted as not overlapped.",
        f"Memory: {gb(best['memory']['total_bytes'])} per GPU against {gb(setup.gpu_mem_bytes)}"
        + (", with every block checkpointed (a third more compute)." if best["checkpoint_activations"] else
           ", without activation checkpointing."),
    ]
    for kind, count in sorted(chosen["loses_by"].items(), key=lambda item: -item[1])[:2]:
        example = next(other for other in chosen["others"] if other["loses_by"] == kind)
        points.append(f"{count} other candidate(s) lose on {kind}, e.g. {_text(example)}: {example['reason']}.")
    return new_step("explain-plan", title="Explain it", unit="explain", answer=None,
        prompt="Explain to the interviewer how you chose the tensor, pipeline and data-parallel degrees, and why the "
        "others lose. Say it aloud or type notes, then compare with the talking points and grade yourself.",
        talking_points=tuple(points))
