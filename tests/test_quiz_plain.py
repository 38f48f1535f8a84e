"""Plain mode driven through stdin: the same grading and store as the app, line by line."""

from __future__ import annotations

import subprocess
import sys

from ddpfsdp.quiz.store import Store


def _run(quiz_bank, *args, stdin: str):
    bank_dir, answers_dir = quiz_bank
    return subprocess.run(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", "quiz", "--plain", "--bank", str(bank_dir), "--answers", str(answers_dir), "--seed", "5", *args],
        input=stdin, capture_output=True, text=True, timeout=120,
    )


def test_plain_mode_answers_every_kind_and_saves(quiz_bank):
    # The ddp topic in its first-visit order: single, multi, numeric (level 2), explain (level 3).
    from ddpfsdp.quiz.loader import load_bank
    from ddpfsdp.quiz import grading
    import random

    bank = load_bank(*quiz_bank)
    rng = random.Random(5)
    single = bank.questions["ddp-grad-sync"]
    order = grading.shuffled(single.choices, rng)
    right_single = order.index(single.answer) + 1
    multi = bank.questions["ddp-replicated-state"]
    order = grading.shuffled(multi.choices, rng)
    wrong_multi = order.index("parameters") + 1
    lines = [
        str(right_single),
        "seven",  # not a number: asked again
        str(wrong_multi),
        "sixteen",  # numeric nonsense: asked again
        "1.5 GB",
        "I would mention overlap",
        "3",
    ]
    proc = _run(quiz_bank, "--topic", "ddp", stdin="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Traceback" not in out + proc.stderr
    assert "Type numbers from 1 to 4" in out
    assert "is not a number" in out
    assert "✔ Correct." in out and "✘ Not quite: missed 2." in out
    assert "within 5% of 1.5 GB" in out
    # Every choice is shown again with its reason; the wrong pick and the right ones are marked.
    assert "Right: the reducer all-reduces each full bucket while backward goes on." in out
    assert "Wrong: sharding parameters is FSDP's idea, not DDP's." in out
    assert "✔ " + str(wrong_multi) + ". parameters  <- yours" in out
    shown_multi = [line for line in out.splitlines() if line[:1] in "✔✘ " and ". " in line and "<- yours" in line]
    assert len(shown_multi) == 2  # the single question's pick and the multi question's one pick
    assert "What an interviewer listens for" in out and "fewer, larger collectives" in out
    assert "4 answered, 3 right (75%)" in out
    attempts = Store.open().attempts()
    assert [(a.question_id, a.correct) for a in attempts] == [
        ("ddp-grad-sync", True),
        ("ddp-replicated-state", False),
        ("ddp-allreduce-wire", True),
        ("ddp-explain-buckets", True),
    ]
    assert attempts[-1].answer == {"notes": "I would mention overlap"}


def test_plain_mode_stops_on_q_and_end_of_input_keeping_answers(quiz_bank):
    proc = _run(quiz_bank, "--topic", "fsdp-wrap", stdin="1 2 3\n")
    assert proc.returncode == 0, proc.stderr
    assert "1 answered" in proc.stdout
    assert len(Store.open().attempts()) == 1
    proc = _run(quiz_bank, "--topic", "fsdp-wrap", stdin="q\n")
    assert proc.returncode == 0 and "No answers this time" in proc.stdout


def test_plain_review_with_nothing_due(quiz_bank):
    proc = _run(quiz_bank, "--review", stdin="")
    assert proc.returncode == 0 and "Nothing is due" in proc.stdout


def test_unknown_topic_is_a_usage_error(quiz_bank):
    proc = _run(quiz_bank, "--topic", "nope", stdin="")
    assert proc.returncode == 2 and "no topic 'nope'" in proc.stderr and "fsdp-wrap" in proc.stderr
