"""Grading: choices by identity under shuffling, numbers with units and tolerance, order, self-grade."""

from __future__ import annotations

import random

import pytest

from ddpfsdp.quiz.grading import (
    QuantityError,
    format_quantity,
    grade_explain,
    grade_multi,
    grade_numeric,
    grade_order,
    grade_single,
    parse_quantity,
    review_steps,
    shuffled,
)
from ddpfsdp.quiz.loader import load_bank


@pytest.fixture
def bank(quiz_bank):
    return load_bank(*quiz_bank)


def test_single_is_graded_by_text_whatever_the_shuffle(bank):
    question = bank.questions["ddp-grad-sync"]
    positions = set()
    for seed in range(20):
        order = shuffled(question.choices, random.Random(seed))
        assert sorted(order) == sorted(question.choices)
        positions.add(order.index(question.answer))
        assert grade_single(question, order[order.index(question.answer)]).correct
        wrong = next(c for c in order if c != question.answer)
        assert not grade_single(question, wrong).correct
    # The right answer really moves around between attempts.
    assert len(positions) > 1
    assert not grade_single(question, None).correct


def test_multi_needs_exactly_the_right_set(bank):
    question = bank.questions["ddp-replicated-state"]
    right = ["optimizer state", "parameters", "gradients"]
    assert grade_multi(question, right).correct
    partial = grade_multi(question, ["parameters", "gradients"])
    assert not partial.correct and partial.details["missed"] == ["optimizer state"]
    assert 0 < partial.score < 1
    extra = grade_multi(question, right + ["a 1/N shard of the parameters"])
    assert not extra.correct and extra.details["wrong"] == ["a 1/N shard of the parameters"]
    assert grade_multi(question, []).score == 0


def test_a_single_miss_names_the_right_choice_by_its_number_as_shown(bank):
    question = bank.questions["ddp-grad-sync"]
    shown = ["broadcast from rank 0 every step", "all-reduce in buckets during backward",
             "all-gather after the step", "a parameter server that averages gradients"]
    assert grade_single(question, "all-gather after the step", shown).verdict == "Not quite: the right answer is 2."
    assert grade_single(question, "all-gather after the step").verdict == "Not quite."


def test_multi_verdict_counts_and_numbers_the_missed_and_wrong_choices_as_shown(bank):
    question = bank.questions["ddp-replicated-state"]
    shown = ["a 1/N shard of the parameters", "gradients", "parameters", "optimizer state"]
    # Picked parameters (3) and the shard (1): missed gradients (2) and optimizer state (4).
    grade = grade_multi(question, ["parameters", "a 1/N shard of the parameters"], shown)
    assert grade.verdict == "Not quite: missed 2 right choices (2, 4); chose 1 wrong choice (1)."
    one = grade_multi(question, ["parameters", "gradients"], shown)
    assert one.verdict == "Not quite: missed 1 right choice (4)."
    # Without the shown order there are no numbers to name.
    assert grade_multi(question, ["parameters"]).verdict == "Not quite: missed 2 right choices."


def test_review_steps_pairs_each_place_with_what_was_put_there_and_why(bank):
    question = bank.questions["wrap-forward-order"]
    gather, forward, free = question.steps
    review = review_steps(question, grade_order(question, [forward, gather, free]))
    assert [(r.number, r.text, r.yours, r.in_place) for r in review] == [
        (1, gather, forward, False),
        (2, forward, gather, False),
        (3, free, free, True),
    ]
    assert review[0].reason == "Each rank holds only a shard, and the forward needs the whole weights."


@pytest.mark.parametrize(
    "text, unit, expected",
    [
        ("16 GB", "GB", 16e9),
        ("16GB", "GB", 16e9),
        ("16", "GB", 16e9),
        ("1.5e10", "GB", 1.5e10),
        ("14.9GiB", "GB", 14.9 * 2**30),
        ("14.9 gib", "GiB", 14.9 * 2**30),
        ("512 MiB", "GB", 512 * 2**20),
        ("1,500,000,000 bytes", "GB", 1.5e9),
        ("7B", "", 7e9),
        ("350M", "", 350e6),
        ("124439808", "", 124439808),
        ("1.5x", "x", 1.5),
        ("1.5", "x", 1.5),
    ],
)
def test_parse_quantity(text, unit, expected):
    assert parse_quantity(text, unit) == pytest.approx(expected)


@pytest.mark.parametrize("text, unit", [("lots", "GB"), ("16 parsecs", "GB"), ("", "GB"), ("2 GB", "x"), ("3 Q", "")])
def test_parse_quantity_refuses_nonsense_with_a_hint(text, unit):
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text, unit)
    assert str(raised.value)


@pytest.mark.parametrize("text, unit", [
    ("1e400", "GB"), ("1e400 GB", "GB"), ("1e308 GB", "GB"), ("1e999GiB", "GiB"), ("-1e400", "GB"),
    ("1e400", ""), ("1e300T", ""), ("1e400x", "x"), ("1e400", "x"),
])
def test_a_number_that_overflows_to_infinity_is_refused(text, unit):
    """1e400 reads as float('inf'): no answer, with a message that says so and how to type one."""
    with pytest.raises(QuantityError, match="out of range: it reads as infinity; type") as raised:
        parse_quantity(text, unit)
    assert repr(text) in str(raised.value)


def test_an_infinite_answer_is_not_graded(bank):
    question = bank.questions["ddp-allreduce-wire"]
    with pytest.raises(QuantityError, match="infinity"):
        grade_numeric(question, "1e400")
    assert grade_numeric(question, "1e300").verdict.startswith("Not quite")  # large but finite: a wrong answer


def test_numeric_relative_tolerance(bank):
    question = bank.questions["ddp-allreduce-wire"]  # 1.5 GB, tolerance 5%
    assert grade_numeric(question, "1.5 GB").correct
    assert grade_numeric(question, "1.55GB").correct
    assert grade_numeric(question, "1.5e9").correct
    assert grade_numeric(question, "1.397 GiB").correct
    low = grade_numeric(question, "0.75 GB")
    assert not low.correct and "low" in low.verdict and "1.5 GB" in low.verdict
    assert not grade_numeric(question, "1.6 GB").correct
    with pytest.raises(QuantityError):
        grade_numeric(question, "about two")


def test_order_partial_credit(bank):
    question = bank.questions["wrap-forward-order"]
    steps = list(question.steps)
    assert grade_order(question, steps).correct
    swapped = [steps[1], steps[0], steps[2]]
    grade = grade_order(question, swapped)
    assert not grade.correct and grade.details["in_place"] == 1
    assert "step 1 should be" in grade.verdict
    with pytest.raises(ValueError):
        grade_order(question, steps[:2])


def test_explain_uses_the_self_grade(bank):
    question = bank.questions["ddp-explain-buckets"]
    assert grade_explain(question, "overlap", "good").correct
    assert not grade_explain(question, "", "again").correct
    assert grade_explain(question, "", "hard").self_grade == "hard"
    with pytest.raises(ValueError):
        grade_explain(question, "", "perfect")


def test_format_quantity():
    assert format_quantity(1.5e9, "GB") == "1.5 GB"
    assert format_quantity(2**30, "GiB") == "1 GiB"
    assert format_quantity(1.5, "x") == "1.5x"
    assert format_quantity(7e9, "").startswith("7B")
