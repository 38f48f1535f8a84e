"""The at-scale drills (quiz/drill_scale.py): every answer worked out again by hand from the formulas the
prompts state, not from the analytic model; a broken answer fails; the working shows the figures."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from ddpfsdp.quiz import drill as drills

# Bytes per parameter a resumable checkpoint holds: parameters as held + optimizer state (no gradients).
CHECKPOINT_BYTES = {("bf16-mixed", "adamw"): 4 + 8, ("bf16-master", "adam"): 2 + 4 + 8, ("fp32", "adam"): 4 + 8,
                    ("bf16", "adamw"): 2 + 2 * 2}


def _hierarchical_ms(args: dict) -> float:
    # Reduce-scatter and all-gather in the node: (g-1)/g of the buffer each, over the intra link; the all-reduce of
    # 1/g of it across k nodes: 2(k-1)/k, over each GPU's own NIC.
    size, g = args["size_bytes"], args["gpus_per_node"]
    k = args["gpus"] // g
    inside = 2 * (g - 1) / g * size / args["intra_bytes_per_s"]
    across = 2 * (k - 1) / k * size / g / args["inter_bytes_per_s"]
    return (inside + across) * 1e3


def scale_by_hand(fn: str, args: dict) -> float:
    if fn == "slow_step_probability":
        return 1 - (1 - args["p"]) ** args["ranks"]
    if fn == "straggler_expected_step_ms":
        return args["step_ms"] + args["delay_ms"] * (1 - (1 - args["p"]) ** args["ranks"])
    if fn == "persistent_straggler_efficiency":
        return args["step_s"] / args["slow_step_s"]
    if fn == "checkpoint_bytes":
        total = args["params"] * CHECKPOINT_BYTES[(args["precision"], args["optimizer"])]
        return -(-total // args["gpus"])
    if fn == "young_interval_min_for_gpus":
        mtbf_min = args["gpu_mtbf_hours"] / args["gpus"] * 60
        return math.sqrt(2 * args["checkpoint_min"] * mtbf_min)
    if fn == "checkpoint_lost_share":
        return args["checkpoint_min"] / args["interval_min"] + args["interval_min"] / (2 * 60 * args["mtbf_hours"])
    if fn == "hierarchical_all_reduce_ms":
        return _hierarchical_ms(args)
    raise AssertionError(f"no hand computation for {fn}")


KINDS = ("stragglers", "checkpoint", "hier-allreduce")


def test_every_at_scale_problem_over_100_seeds_agrees_with_the_hand_computation():
    seen = set()
    for seed in range(100):
        for problem in drills.generate(seed, 9, KINDS):
            assert problem.topic == "at-scale"
            assert problem.answer == pytest.approx(scale_by_hand(problem.fn, problem.args), rel=1e-9), problem.prompt
            assert problem.answer_text in problem.working
            seen.add(problem.fn)
    assert seen == {"slow_step_probability", "straggler_expected_step_ms", "persistent_straggler_efficiency",
                    "checkpoint_bytes", "young_interval_min_for_gpus", "checkpoint_lost_share",
                    "hierarchical_all_reduce_ms"}


def test_hand_examples():
    # 1 - 0.999^1024 = 1 - e^(1024 x -0.0010005) = 1 - e^-1.0245 = 1 - 0.35897 = 0.64103.
    assert drills.compute("slow_step_probability", {"p": 0.001, "ranks": 1024}) == pytest.approx(0.64103, rel=1e-4)
    # 2-minute checkpoints, 50,000 h GPUs, 16,384 of them: M = 3.0518 h = 183.11 min; sqrt(2 x 2 x 183.11) = 27.06 min.
    assert drills.compute("young_interval_min_for_gpus", {"checkpoint_min": 2, "gpu_mtbf_hours": 50_000,
                                                          "gpus": 16_384}) == pytest.approx(27.06, rel=1e-3)
    # 14 GB over 64 DGX H100 nodes: 2 x 7/8 x 14e9 / 450e9 = 54.44 ms inside; 2 x 63/64 x 1.75e9 / 50e9 = 68.91 ms.
    assert drills.compute("hierarchical_all_reduce_ms", {
        "size_bytes": 14e9, "gpus": 512, "gpus_per_node": 8, "intra_bytes_per_s": 450e9, "inter_bytes_per_s": 50e9,
    }) == pytest.approx(54.444 + 68.906, rel=1e-4)


def test_a_broken_problem_fails_the_recomputation():
    for problem in drills.generate(6, 9, KINDS):
        right = scale_by_hand(problem.fn, problem.args)
        assert problem.answer == pytest.approx(right, rel=1e-9)
        assert replace(problem, answer=problem.answer * 1.1).answer != pytest.approx(right, rel=1e-3)
    # Twice the ranks make a slow step likelier: an answer kept from the old arguments no longer agrees.
    slow = next(p for p in drills.generate(2, 30, ["stragglers"]) if p.fn == "slow_step_probability")
    assert scale_by_hand(slow.fn, {**slow.args, "ranks": 2 * slow.args["ranks"]}) > slow.answer


def test_fractions_within_tolerance_and_milliseconds_as_numbers():
    fraction = next(p for p in drills.generate(1, 30, ["stragglers"]) if p.unit == "x")
    assert drills.grade(fraction, f"{fraction.answer:.6g}").correct
    assert not drills.grade(fraction, f"{fraction.answer * 1.05:.6g}").correct
    time = next(p for p in drills.generate(1, 30, ["hier-allreduce"]))
    assert drills.grade(time, f"{time.answer * 1.03:.6g}").correct
    assert not drills.grade(time, f"{time.answer * 1.2:.6g}").correct
    assert "type a number, such as 12 or 12.5" in time.hint
