"""The expert-parallel drill (quiz/drill_experts.py): every answer worked out again by hand, from the rules the
Switch Transformer, Megatron-LM and torch's all-to-all state, not from the analytic model."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ddpfsdp.quiz import drill as drills


def _capacity(tokens: int, experts: int, top_k: int, factor: float) -> int:
    return math.ceil(Fraction(str(factor)) * tokens * top_k / experts)


def experts_by_hand(fn: str, args: dict) -> float:
    if fn == "ep_capacity":
        return _capacity(args["tokens"], args["experts"], args["top_k"], args["capacity_factor"])
    if fn == "ep_dropped":
        capacity = _capacity(args["tokens"], len(args["loads"]), args["top_k"], args["capacity_factor"])
        return sum(load - capacity for load in args["loads"] if load > capacity)
    if fn == "ep_all_to_all_bytes_per_step":
        # T·k slots of d bf16 elements, (ep-1)/ep leave the rank; 4 all-to-alls per layer (6 recomputed).
        sent = Fraction(args["tokens"] * args["top_k"] * args["d_model"] * 2 * (args["ep"] - 1), args["ep"])
        return round(sent * (6 if args["recompute"] else 4) * args["layers"])
    if fn == "ep_expert_params_per_rank":
        d = args["d_model"]
        return args["layers"] * args["experts"] // args["ep"] * (d * 4 * d + 4 * d + 4 * d * d + d)
    if fn == "ep_switch_aux_loss":
        return args["alpha"] * len(args["fractions"]) * sum(f * p for f, p in zip(args["fractions"], args["probs"]))
    raise AssertionError(f"no hand computation for {fn}")


def test_every_expert_problem_over_100_seeds_agrees_with_the_hand_computation():
    seen = set()
    for seed in range(100):
        for problem in drills.generate(seed, 6, ["expert-parallel"]):
            assert problem.topic == "expert-parallel"
            assert problem.answer == pytest.approx(experts_by_hand(problem.fn, problem.args), rel=1e-12), problem.prompt
            assert problem.answer > 0 or problem.fn == "ep_dropped"
            assert problem.answer_text in problem.working, (seed, problem.working)
            seen.add(problem.fn)
    assert seen == {"ep_capacity", "ep_dropped", "ep_all_to_all_bytes_per_step", "ep_expert_params_per_rank",
                    "ep_switch_aux_loss"}


def test_loads_sum_to_the_routed_slots_and_capacity_is_exact():
    for seed in range(50):
        for problem in drills.generate(seed, 6, ["expert-parallel"]):
            if problem.fn == "ep_dropped":
                assert sum(problem.args["loads"]) == problem.args["tokens"] * problem.args["top_k"]
            if problem.fn == "ep_switch_aux_loss":
                assert sum(problem.args["fractions"]) == pytest.approx(1) and sum(problem.args["probs"]) == pytest.approx(1)
    # 1.1 x 8192 / 64 = 140.8: 141, not 140 or 142.
    assert drills.compute("ep_capacity", {"tokens": 4096, "experts": 64, "top_k": 2, "capacity_factor": 1.1}) == 141


def test_counts_are_graded_exactly():
    capacity = next(p for p in drills.generate(1, 30, ["expert-parallel"]) if p.fn == "ep_capacity")
    assert drills.grade(capacity, f"{capacity.answer:.0f}").correct
    assert not drills.grade(capacity, f"{capacity.answer + 1:.0f}").correct
