"""The pipeline drill: bubble fraction, micro-batches for a target bubble, activations in flight.

Each problem is drawn from a seeded generator and answered by the analytic model's pipeline
functions (`demos.theory.pipeline.QUIZ_FUNCTIONS`); nothing here types in a number. `quiz.drill`
registers `pipeline_problem` as a kind, with the same return shape as its own kinds: (prompt, the
function's name, its arguments, the unit, the relative tolerance, the working as a function of the
answer).

No torch or textual here.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from ddpfsdp.demos.theory.pipeline import (
    TORCH_SCHEDULES,
    bubble,
    check_pipeline,
)

SCHEDULE_TEXT = {
    "gpipe": "**GPipe** (all forwards, then all backwards)",
    "1f1b": "**1F1B** (one forward, one backward in the steady state)",
    "interleaved": "the **interleaved 1F1B** schedule",
}

RULES = (
    "Take t as one micro-batch's forward and backward through one rank's layers, all stages equal, no "
    "communication time: a step does m·t of work per rank, and fill and drain add (pp-1)·t for GPipe and 1F1B, "
    "(pp-1)·t/V for the interleaved schedule (each of a rank's V chunks is 1/V of its layers)."
)

Problem = tuple[str, str, dict[str, Any], str, float, Callable[[float], str]]


def shown(value: float) -> str:
    """A figure as the drill prints an answer in a count or a ratio (`drill.show`)."""
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def _schedule(rng: random.Random, pp: int, microbatches: int, choices: tuple[str, ...]) -> tuple[str, int]:
    """A schedule (and V) torch accepts for these degrees, drawn from `choices`."""
    while True:
        name = rng.choice(choices)
        v = rng.choice((2, 4)) if name == "interleaved" else 1
        try:
            check_pipeline(pp, microbatches, name, v)
        except ValueError:
            continue
        return name, v


def _with_v(schedule: str, v: int) -> str:
    return SCHEDULE_TEXT[schedule] + (f" with V = {v} stages per rank" if v > 1 else "")


def bubble_fraction_problem(rng: random.Random) -> Problem:
    pp = rng.choice((2, 4, 8, 16))
    m = rng.choice(tuple(k * pp for k in (1, 2, 4, 8)) + (pp + 2, 3 * pp))
    schedule, v = _schedule(rng, pp, m, ("gpipe", "1f1b", "interleaved"))
    args = {"pp": pp, "microbatches": m, "schedule": schedule, "stages_per_rank": v}
    prompt = (
        f"A model is split into a pipeline of **pp = {pp}** ranks running {_with_v(schedule, v)} "
        f"(torch's {TORCH_SCHEDULES[schedule]}), with **m = {m} micro-batches** per step. {RULES}\n\n"
        "What **share of the step** is each rank idle (the bubble fraction)? Answer as a fraction, such as 0.25."
    )

    def working(answer: float) -> str:
        fill = f"({pp}-1)/{v}" if v > 1 else f"{pp}-1"
        return (f"Idle = {fill} = {bubble(pp, m, schedule, v)['bubble_t']:g} t of fill and drain; step = {m} t of work "
                f"+ that; fraction = ({pp}-1) / ({v}·{m} + {pp}-1) = {shown(answer)}: the share of the step, as GPipe's "
                f"paper gives it for one stage per rank, (K-1)/(M+K-1). (Megatron-LM's (p-1)/(v·m) is idle over the "
                f"ideal time instead: ({pp}-1)/({v}·{m}) = {bubble(pp, m, schedule, v)['bubble_ratio']:.4g}.)")

    return prompt, "pipeline_bubble_fraction", args, "x", 0.02, working


def microbatches_problem(rng: random.Random) -> Problem:
    pp = rng.choice((4, 8, 16))
    target = rng.choice((0.05, 0.10, 0.15, 0.20, 0.25))
    schedule = rng.choice(("1f1b", "1f1b", "interleaved"))
    v = 2 if schedule == "interleaved" else 1
    args = {"pp": pp, "target_fraction": target, "schedule": schedule, "stages_per_rank": v}
    rounds = (" torch's ScheduleInterleaved1F1B also needs m to be a multiple of its rounds, max(1, m // pp)."
              if schedule == "interleaved" else " torch's Schedule1F1B also needs m >= pp.")
    prompt = (
        f"A pipeline of **pp = {pp}** ranks runs {_with_v(schedule, v)}. {RULES}{rounds}\n\n"
        f"What is the **fewest micro-batches** m per step that keeps the bubble at or below **{target:.0%}** of "
        "the step?"
    )

    def working(answer: float) -> str:
        fill = bubble(pp, 1, schedule, v)["bubble_t"]
        bound = fill * (1 - target) / target
        return (f"fill/(m + fill) <= {target:g} with fill = {fill:g} t  <=>  m >= {fill:g}·(1 - {target:g})/{target:g} "
                f"= {bound:.4g}; the fewest whole m the schedule accepts is {shown(answer)} (bubble "
                f"{bubble(pp, int(answer), schedule, v)['bubble_fraction']:.1%}).")

    return prompt, "pipeline_microbatches_for_bubble", args, "", 0.0, working


def in_flight_problem(rng: random.Random) -> Problem:
    pp = rng.choice((4, 8))
    m = rng.choice((pp, 2 * pp, 4 * pp))
    schedule = rng.choice(("gpipe", "1f1b", "1f1b"))
    stage = rng.randrange(pp)
    args = {"pp": pp, "microbatches": m, "schedule": schedule, "stage": stage}
    prompt = (
        f"A pipeline of **pp = {pp}** ranks (stages 0 to {pp - 1}) runs {SCHEDULE_TEXT[schedule]} with "
        f"**m = {m} micro-batches** per step, as torch's {TORCH_SCHEDULES[schedule]} orders them.\n\n"
        f"At its peak, the activations of **how many micro-batches** does **stage {stage}** hold (forwards done, "
        "backwards not yet)?"
    )

    def working(answer: float) -> str:
        if schedule == "gpipe":
            return f"GPipe runs every forward before any backward: every stage holds all m = {shown(answer)}."
        return (f"1F1B: stage s runs min(m, pp - s) warm-up forwards, then a backward before each further forward "
                f"(torch: warmup_chunks = min(n_microbatches, num_stages - stage_index)): min({m}, {pp} - {stage}) "
                f"= {shown(answer)}.")

    return prompt, "pipeline_in_flight", args, "", 0.0, working


def pipeline_problem(rng: random.Random) -> Problem:
    """One of the three, drawn in turn by weight."""
    make = rng.choices((bubble_fraction_problem, microbatches_problem, in_flight_problem), weights=(2, 2, 1))[0]
    return make(rng)
