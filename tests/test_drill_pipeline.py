"""The pipeline drill (quiz/drill_pipeline.py): every answer worked out again by hand, from the schedules'
rules as the papers and torch 2.13's schedules.py state them, not from the analytic model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddpfsdp.quiz import drill as drills


def _hand_bubble_fraction(pp: int, m: int, v: int) -> float:
    # Fill and drain take (pp-1) slots of t/V; the step is m t of work plus them: (pp-1) / (V m + pp - 1).
    return (pp - 1) / (v * m + pp - 1)


def _accepted(pp: int, m: int, schedule: str) -> bool:
    # torch: Schedule1F1B refuses m < pp; ScheduleInterleaved1F1B wants m % max(1, m // pp) == 0.
    if schedule == "1f1b":
        return m >= pp
    if schedule == "interleaved":
        return m % max(1, m // pp) == 0
    return True


def pipeline_by_hand(fn: str, args: dict) -> float:
    pp, schedule = args["pp"], args["schedule"]
    if fn == "pipeline_bubble_fraction":
        return _hand_bubble_fraction(pp, args["microbatches"], args["stages_per_rank"])
    if fn == "pipeline_microbatches_for_bubble":
        m = 1
        while not (_accepted(pp, m, schedule)
                   and _hand_bubble_fraction(pp, m, args["stages_per_rank"]) <= args["target_fraction"] + 1e-12):
            m += 1
        return m
    if fn == "pipeline_in_flight":
        m, stage = args["microbatches"], args["stage"]
        # GPipe: every forward before any backward. 1F1B: min(m, pp - stage) warm-up forwards, then backward first.
        return m if schedule == "gpipe" else min(m, pp - stage)
    raise AssertionError(f"no hand computation for {fn}")


def test_every_pipeline_problem_over_100_seeds_agrees_with_the_hand_computation():
    seen = set()
    for seed in range(100):
        for problem in drills.generate(seed, 6, ["pipeline"]):
            assert problem.topic == "pipeline"
            assert problem.answer == pipeline_by_hand(problem.fn, problem.args), (seed, problem.prompt)
            assert problem.answer_text in problem.working
            seen.add(problem.fn)
    assert seen == {"pipeline_bubble_fraction", "pipeline_microbatches_for_bubble", "pipeline_in_flight"}


def test_hand_examples():
    # pp 4, m 8, 1F1B: 3/11; interleaved V 2: 3/19.
    assert pipeline_by_hand("pipeline_bubble_fraction", {"pp": 4, "microbatches": 8, "schedule": "1f1b",
                                                         "stages_per_rank": 1}) == 3 / 11
    assert pipeline_by_hand("pipeline_bubble_fraction", {"pp": 4, "microbatches": 8, "schedule": "interleaved",
                                                         "stages_per_rank": 2}) == 3 / 19
    # pp 8 at 10%: 7/(m + 7) <= 0.1 <=> m >= 63.
    assert pipeline_by_hand("pipeline_microbatches_for_bubble", {"pp": 8, "target_fraction": 0.1, "schedule": "1f1b",
                                                                 "stages_per_rank": 1}) == 63
    assert drills.compute("pipeline_microbatches_for_bubble",
                          {"pp": 8, "target_fraction": 0.1, "schedule": "1f1b", "stages_per_rank": 1}) == 63


def test_a_broken_pipeline_problem_fails_the_recomputation():
    for problem in drills.generate(5, 9, ["pipeline"]):
        assert problem.answer == pipeline_by_hand(problem.fn, problem.args)
        assert problem.answer + 1 != pipeline_by_hand(problem.fn, problem.args)
        assert replace(problem, answer=problem.answer * 1.5).answer != pipeline_by_hand(problem.fn, problem.args)
    # Twice the micro-batches shrink the bubble: an answer kept from the old arguments no longer agrees.
    fraction = next(p for p in drills.generate(2, 20, ["pipeline"]) if p.fn == "pipeline_bubble_fraction")
    doubled = {**fraction.args, "microbatches": 2 * fraction.args["microbatches"]}
    assert pipeline_by_hand(fraction.fn, doubled) < fraction.answer


def test_fractions_are_graded_within_two_percent_and_counts_exactly():
    fraction = next(p for p in drills.generate(1, 20, ["pipeline"]) if p.fn == "pipeline_bubble_fraction")
    assert drills.grade(fraction, f"{fraction.answer * 1.01:.6f}").correct
    assert not drills.grade(fraction, f"{fraction.answer * 1.05:.6f}").correct
    assert "fraction" in fraction.hint
    count = next(p for p in drills.generate(1, 20, ["pipeline"]) if p.fn == "pipeline_microbatches_for_bubble")
    assert drills.grade(count, str(int(count.answer))).correct
    assert not drills.grade(count, str(int(count.answer) - 1)).correct


@pytest.mark.parametrize("seed", [0, 7])
def test_prompts_name_the_schedule_and_its_torch_class(seed):
    for problem in drills.generate(seed, 6, ["pipeline"]):
        assert "Schedule" in problem.prompt and f"pp = {problem.args['pp']}" in problem.prompt
