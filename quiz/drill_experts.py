"""The expert-parallel drill: capacity per expert, slots dropped, the all-to-alls' bytes per step, experts'
parameters per rank, and the Switch Transformer's load-balancing loss.

Each problem is drawn from a seeded generator and answered by the analytic model's expert-parallel
functions (`demos.theory.expert_parallel.QUIZ_FUNCTIONS`); nothing here types in a number. `quiz.drill`
registers `expert_parallel_problem` as a kind, with the same return shape as its own kinds.

No torch or textual here.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from ddpfsdp.demos.theory import presets
from ddpfsdp.demos.theory.expert_parallel import (
    all_to_all_bytes,
    expert_capacity,
    expert_params,
)
from ddpfsdp.quiz.drill_pipeline import shown

Problem = tuple[str, str, dict[str, Any], str, float, Callable[[float], str]]

FACTORS = (1.0, 1.1, 1.25, 1.5, 2.0)
CAPACITY_RULE = ("Capacity per expert is ceil(capacity factor x tokens x top-k / experts) slots (the Switch "
                 "Transformer's tokens/experts x factor, with k slots per token as Megatron-LM counts them).")


def capacity_problem(rng: random.Random) -> Problem:
    experts = rng.choice((8, 16, 32, 64, 128))
    top_k = rng.choice((1, 2, 2, 4, 8))
    tokens = rng.choice((1024, 2048, 4096, 8192, 6000, 3000))
    factor = rng.choice(FACTORS)
    args = {"tokens": tokens, "experts": experts, "top_k": top_k, "capacity_factor": factor}
    prompt = (
        f"A mixture-of-experts layer routes a batch of **{tokens:,} tokens** top-**{top_k}** over **{experts} experts**, "
        f"with a **capacity factor of {factor:g}**. {CAPACITY_RULE}\n\n"
        "How many **token slots** does each expert have?"
    )

    def working(answer: float) -> str:
        exact = factor * tokens * top_k / experts
        return (f"{factor:g} x {tokens:,} x {top_k} / {experts} = {shown(exact)}; rounded up: {shown(answer)} slots per "
                f"expert ({shown(answer * experts)} in all for {tokens * top_k:,} routed slots).")

    return prompt, "ep_capacity", args, "", 0.0, working


def _loads(rng: random.Random, slots: int, experts: int) -> list[int]:
    """`slots` routed slots over `experts`, skewed the way routers collapse: a few favourites."""
    weights = [rng.choice((1, 1, 2, 4)) for _ in range(experts)]
    loads = [0] * experts
    for _ in range(slots):
        loads[rng.choices(range(experts), weights=weights)[0]] += 1
    return loads


def dropped_problem(rng: random.Random) -> Problem:
    experts = rng.choice((4, 8))
    top_k = rng.choice((1, 2))
    tokens = rng.choice((16, 24, 32, 48))
    factor = rng.choice((1.0, 1.25, 1.5))
    loads = _loads(rng, tokens * top_k, experts)
    args = {"loads": loads, "tokens": tokens, "top_k": top_k, "capacity_factor": factor}
    prompt = (
        f"A router sends **{tokens} tokens** top-**{top_k}** to **{experts} experts**, capacity factor **{factor:g}**. "
        f"{CAPACITY_RULE} The experts receive these slots: **{', '.join(map(str, loads))}**.\n\n"
        "How many routed slots are **dropped** (an expert takes slots up to its capacity and drops the rest)?"
    )

    def working(answer: float) -> str:
        capacity = expert_capacity(tokens, experts, top_k, factor)
        over = [f"{load} - {capacity}" for load in loads if load > capacity]
        return (f"capacity = ceil({factor:g} x {tokens} x {top_k} / {experts}) = {capacity}; over it: "
                + (" + ".join(over) if over else "none") + f" = {shown(answer)} dropped slot(s) of {tokens * top_k}.")

    return prompt, "ep_dropped", args, "", 0.0, working


def all_to_all_problem(rng: random.Random) -> Problem:
    model = rng.choice(list(presets.MODELS.values()))
    ep = rng.choice((4, 8, 16, 32))
    experts = ep * rng.choice((1, 2, 4, 8))
    top_k = rng.choice((1, 2, 2, 4, 8)) if experts >= 8 else rng.choice((1, 2))
    tokens = rng.choice((4096, 8192, 16384))
    recompute = rng.random() < 0.25
    args = {"tokens": tokens, "top_k": top_k, "d_model": model.d_model, "precision": "bf16-mixed", "ep": ep,
            "layers": model.layers, "experts": experts, "recompute": recompute}
    prompt = (
        f"A decoder shaped like **{model.name}** ({model.layers} layers, d = {model.d_model}) has an MoE MLP of "
        f"{experts} experts in every layer, spread over **ep = {ep}** ranks. Each rank routes its **{tokens:,} tokens** "
        f"top-**{top_k}**, evenly over the experts, dropless; activations in bf16 (2 bytes)"
        + (", and every block is checkpointed (the forward's dispatch and combine run again in backward)" if recompute
           else "")
        + ".\n\nPer MoE layer a step runs a dispatch and a combine all-to-all forward, and their gradients backward "
        "(an all-to-all with the splits swapped). A rank keeps the slots its own experts take and sends the rest. "
        "How many bytes does **each rank send in all-to-alls per step**, all layers? Answer in GB."
    )

    def working(answer: float) -> str:
        one = all_to_all_bytes(tokens, top_k, model.d_model, 2, ep)
        calls = (6 if recompute else 4) * model.layers
        return (f"{tokens:,} x {top_k} = {tokens * top_k:,} slots of {model.d_model}·2 bytes, ({ep}-1)/{ep} of them "
                f"sent: {shown(float(one) / 1e9)} GB per all-to-all; x {calls} all-to-alls "
                f"({6 if recompute else 4} per layer) = {shown(answer / 1e9)} GB.")

    return prompt, "ep_all_to_all_bytes_per_step", args, "GB", 0.05, working


def params_problem(rng: random.Random) -> Problem:
    model = rng.choice(list(presets.MODELS.values()))
    ep = rng.choice((2, 4, 8, 16, 32, 64))
    experts = ep * rng.choice((1, 2, 4))
    args = {"layers": model.layers, "d_model": model.d_model, "experts": experts, "ep": ep}
    prompt = (
        f"Every layer of a decoder shaped like **{model.name}** ({model.layers} layers, d = {model.d_model}) swaps its "
        f"MLP for **{experts} experts**, each an MLP of the same shape (d x 4d and 4d x d, with biases: 8d² + 5d "
        f"parameters). Expert parallelism spreads them over **ep = {ep}** ranks.\n\n"
        "How many **expert parameters** does each rank hold? (A whole count; 1.6e9 or 1.6B both work.)"
    )

    def working(answer: float) -> str:
        one = expert_params(model.d_model)
        return (f"one expert = 8·{model.d_model}² + 5·{model.d_model} = {one:,}; {experts}/{ep} = {experts // ep} per "
                f"rank per layer x {model.layers} layers = {shown(answer)}.")

    return prompt, "ep_expert_params_per_rank", args, "", 0.05, working


def _percentages(rng: random.Random, parts: int, least: int) -> list[int]:
    """`parts` whole percentages, each at least `least`, summing to 100."""
    cuts = sorted(rng.sample(range(1, 100 - parts * least + parts), parts - 1))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, 100 - parts * least + parts])]
    return [size - 1 + least for size in sizes]


def aux_loss_problem(rng: random.Random) -> Problem:
    experts = rng.choice((2, 4))
    fractions = [p / 100 for p in _percentages(rng, experts, 0)]
    probs = [p / 100 for p in _percentages(rng, experts, 1)]
    args = {"fractions": fractions, "probs": probs, "alpha": 0.01}
    prompt = (
        f"A top-1 router over **{experts} experts** sends these shares of a batch's tokens to each expert: "
        f"f = {', '.join(f'{f:g}' for f in fractions)}; its mean router probabilities per expert are "
        f"P = {', '.join(f'{p:g}' for p in probs)}.\n\n"
        "What is the Switch Transformer's **auxiliary load-balancing loss**, alpha·E·sum f_i·P_i, with alpha = 0.01? "
        "Answer as a number, such as 0.0125."
    )

    def working(answer: float) -> str:
        terms = " + ".join(f"{f:g}·{p:g}" for f, p in zip(fractions, probs))
        return (f"0.01 x {experts} x ({terms}) = {shown(answer)}; perfectly uniform routing would give 0.01, and all "
                "tokens on one expert with all the probability 0.01 x E.")

    return prompt, "ep_switch_aux_loss", args, "x", 0.02, working


def expert_parallel_problem(rng: random.Random) -> Problem:
    """One of the five, drawn in turn by weight."""
    make = rng.choices((capacity_problem, dropped_problem, all_to_all_problem, params_problem, aux_loss_problem),
                       weights=(2, 2, 3, 2, 1))[0]
    return make(rng)
