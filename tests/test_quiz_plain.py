"""Plain mode driven through stdin: the same grading and store as the app, line by line."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import pytest

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
    missed = sorted(order.index(c) + 1 for c in ("gradients", "optimizer state"))
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
    assert "✔ Correct." in out and f"✘ Not quite: missed 2 right choices ({missed[0]}, {missed[1]})." in out
    # No line is padded to the terminal's width.
    assert [line for line in out.splitlines() if line != line.rstrip()] == []
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


def test_plain_order_feedback_gives_the_reason_for_each_misplaced_step(quiz_bank):
    from ddpfsdp.quiz import grading
    from ddpfsdp.quiz.loader import load_bank

    bank = load_bank(*quiz_bank)
    question = bank.questions["wrap-forward-order"]
    shown = grading.shuffled(question.steps, random.Random(5))
    # Forward before the gather: steps 1 and 2 swap places, step 3 stays.
    answer = [question.steps[1], question.steps[0], question.steps[2]]
    typed = " ".join(str(shown.index(step) + 1) for step in answer)
    proc = _run(quiz_bank, "--topic", "fsdp-wrap", stdin=typed + "\nq\n")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())  # lines wrap at the console's width
    assert "✘ 1. all-gather the unit's parameters" in out and "you put: run the unit's forward" in out
    assert "why here: Each rank holds only a shard, and the forward needs the whole weights." in out
    assert "why here: The forward runs once the gathered parameters are there." in out
    assert "✔ 3. free the unsharded parameters" in out
    assert "why here: Once the forward is done" not in out  # in place: no reason needed


def test_plain_skip_is_acknowledged(quiz_bank):
    proc = _run(quiz_bank, "--topic", "fsdp-wrap", stdin="s\nq\n")
    assert proc.returncode == 0, proc.stderr
    assert "Skipped: it stays unanswered" in proc.stdout
    assert Store.open().attempts() == []


def _drill_plain(monkeypatch, lines: list[str], **kwargs) -> str:
    """run_drill_plain in this process, typing `lines`; what it printed."""
    from ddpfsdp.quiz.drill_plain import run_drill_plain
    from ddpfsdp.quiz.plain_console import plain_console

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert run_drill_plain(console=plain_console(out), **kwargs) == 0
    return out.getvalue()


def test_drill_plain_skip_says_so_and_shows_the_answer_and_its_working(monkeypatch):
    from ddpfsdp.quiz import drill as drills

    problem = drills.generate(21, 1, ["model-state"])[0]
    out = _drill_plain(monkeypatch, ["s", "q"], seed=21, kinds=["model-state"])
    assert f"Skipped (not saved). The answer: {problem.answer_text}." in out
    assert " ".join(problem.working.split()) in " ".join(out.split())
    assert "No answers this time." in out
    assert Store.open().attempts() == []


def test_drill_plain_lines_carry_no_padding(monkeypatch):
    out = _drill_plain(monkeypatch, ["1 GB", "q"], seed=3, kinds=["model-state"])
    assert "Working:" in out  # 1 GB misses, so the working is printed too
    assert [line for line in out.splitlines() if line != line.rstrip()] == []


@pytest.mark.parametrize(
    "line, trimmed",
    [
        ("answer   ", "answer"),
        ("answer\x1b[0m", "answer\x1b[0m"),
        ("answer \x1b[1m  \x1b[0m", "answer\x1b[1m\x1b[0m"),
        ("  indented", "  indented"),
        ("", ""),
    ],
)
def test_trim_line_drops_trailing_spaces_and_keeps_style_codes(line, trimmed):
    from ddpfsdp.quiz.plain_console import trim_line

    assert trim_line(line) == trimmed
