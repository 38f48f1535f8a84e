"""The bank loader: a valid bank loads; each kind of mistake is refused naming file, question and field."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from ddpfsdp.quiz.loader import BankError, load_bank


def _edit(bank_dir, name, old, new, count=1):
    path = bank_dir / f"{name}.toml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, count))


def test_fixture_bank_loads_every_kind(quiz_bank):
    bank = load_bank(*quiz_bank)
    assert list(bank.topics) == ["ddp", "fsdp-wrap"]
    kinds = {q.kind for q in bank.questions.values()}
    assert kinds == {"single", "multi", "numeric", "order", "explain"}
    single = bank.questions["ddp-grad-sync"]
    assert single.answer == "all-reduce in buckets during backward"
    assert single.demo.name == "ddp" and single.demo.args == ("--model", "tiny", "--steps", "6")
    assert single.evidence == ("ddp_uses_all_reduce",)
    numeric = bank.questions["ddp-allreduce-wire"]
    # A ring all-reduce sends 2(N-1)/N of the buffer per rank: 1 GB over 4 ranks is 1.5 GB.
    assert numeric.value == pytest.approx(1.5e9)
    assert numeric.unit == "GB" and numeric.tolerance == 0.05
    assert bank.questions["wrap-peak-vs-units"].spot_the_flaw
    assert bank.in_topic("fsdp-wrap")[0].id == "wrap-forward-order"
    assert "model answer" in single.model_answer()


@pytest.mark.parametrize(
    "name, old, new, question, field, words",
    [
        ("ddp", 'level = 1\nkind = "single"', 'level = 1\nkind = "single"\ncolour = "red"', "ddp-grad-sync", "colour", "unknown field"),
        ("ddp", 'kind = "explain"', 'kind = "essay"', "ddp-explain-buckets", "kind", "unknown kind"),
        ("ddp", "level = 3", "level = 7", "ddp-explain-buckets", "level", "out of range"),
        ("ddp", 'answer = "all-reduce in buckets during backward"', 'answer = "all-reduce"', "ddp-grad-sync", "answer", "not among the choices"),
        ("ddp", '"optimizer state"]\n', '"optimiser state"]\n', "ddp-replicated-state", "answer", "not among the choices"),
        ("ddp", 'name = "ddp"', 'name = "dpp"', "ddp-grad-sync", "demo.name", "unknown demo"),
        ("ddp", 'name = "ddp"', 'name = "zero1"', "ddp-grad-sync", "demo.name", "is `ddpfsdp demo zro`"),
        ("ddp", '["ddp_uses_all_reduce"]', '["ddp_uses_magic"]', "ddp-grad-sync", "evidence", "has no check"),
        ("ddp", '"--steps", "6"', '"--steps", "6", "--procs", "2"', "ddp-grad-sync", "demo.args", "--procs"),
        ("fsdp-wrap", 'demo = { name = "wrap", args = ["--model", "tiny"] }\n', "", "wrap-peak-vs-units", "evidence", "needs a demo"),
        ("ddp", 'fn = "wire_bytes_per_rank"', 'fn = "wire_bytes"', "ddp-allreduce-wire", "calc.fn", "unknown calc function"),
        ("ddp", 'op = "all_reduce"', 'op = "all_to_all"', "ddp-allreduce-wire", "calc.args", "failed"),
        ("ddp", 'op = "all_reduce"', 'opp = "all_reduce"', "ddp-allreduce-wire", "calc.args", "failed"),
        ("ddp", 'unit = "GB"', 'unit = "gigabytes"', "ddp-allreduce-wire", "unit", "not one of"),
        ("ddp", "tolerance = 0.05", "tolerance = 5", "ddp-allreduce-wire", "tolerance", "relative tolerance"),
        ("ddp", 'id = "ddp-replicated-state"', 'id = "Replicated State"', None, "id", "lowercase"),
        ("fsdp-wrap", 'id = "wrap-forward-order"', 'id = "ddp-grad-sync"', "ddp-grad-sync", "id", "duplicate id"),
        ("fsdp-wrap", 'steps = ["all-gather', 'stepz = ["all-gather', "wrap-forward-order", "stepz", "unknown field"),
        ("ddp", 'prompt = "Explain why DDP buckets gradients."\n', "", "ddp-explain-buckets", "prompt", "is missing"),
    ],
)
def test_each_mistake_names_file_question_and_field(quiz_bank, name, old, new, question, field, words):
    bank_dir, answers_dir = quiz_bank
    _edit(bank_dir, name, old, new)
    with pytest.raises(BankError) as raised:
        load_bank(bank_dir, answers_dir)
    error = raised.value
    message = str(error)
    assert words in message
    assert error.field == field
    if question is not None:
        assert error.question == question
        assert repr(question) in message
    assert error.file.endswith(".toml") and error.file in message


def test_missing_answer_file(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    (answers_dir / "wrap-forward-order.md").unlink()
    with pytest.raises(BankError) as raised:
        load_bank(bank_dir, answers_dir)
    assert raised.value.question == "wrap-forward-order"
    assert "answers/wrap-forward-order.md" in str(raised.value)


def test_bad_toml_and_misnamed_file(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    (bank_dir / "ddp.toml").write_text((bank_dir / "ddp.toml").read_text() + "\n[[question]\n")
    with pytest.raises(BankError, match=r"ddp\.toml: not valid TOML"):
        load_bank(bank_dir, answers_dir)
    (bank_dir / "ddp.toml").rename(bank_dir / "data-parallel.toml")
    (bank_dir / "data-parallel.toml").write_text(
        (bank_dir / "data-parallel.toml").read_text().removesuffix("\n[[question]\n")
    )
    with pytest.raises(BankError, match="name it ddp.toml"):
        load_bank(bank_dir, answers_dir)


def test_empty_bank_dir(tmp_path):
    with pytest.raises(BankError, match="no topic files"):
        load_bank(tmp_path, tmp_path)


def test_real_bank_loads():
    # The shipped bank must always pass its own validation.
    bank = load_bank()
    assert bank.questions
    for question in bank.questions.values():
        assert re.match(r"^[a-z0-9-]+$", question.id)


def test_quiz_check_command(quiz_bank):
    from ddpfsdp.quiz.cli import cli

    bank_dir, answers_dir = quiz_bank
    ok = CliRunner().invoke(cli, ["quiz", "--check", "--bank", str(bank_dir), "--answers", str(answers_dir)])
    assert ok.exit_code == 0, ok.output
    assert "6 questions in 2 topics" in ok.output
    assert "strictly the longest choice in 0 of 2 single questions (0%, limit 30%)" in ok.output
    _edit(bank_dir, "ddp", 'kind = "explain"', 'kind = "essay"')
    bad = CliRunner().invoke(cli, ["quiz", "--check", "--bank", str(bank_dir), "--answers", str(answers_dir)])
    assert bad.exit_code != 0
    assert "ddp-explain-buckets" in bad.output and "'kind'" in bad.output
    assert "Traceback" not in bad.output


def test_why_is_loaded_parallel_to_choices(quiz_bank):
    question = load_bank(*quiz_bank).questions["ddp-grad-sync"]
    assert len(question.why) == len(question.choices)
    assert question.why[0].startswith("Right: the reducer")


@pytest.mark.parametrize(
    "old, new, words",
    [
        ('    "Wrong: rank 0\'s broadcast happens once, at construction.",\n', "", "3 reasons for 4 choices"),
        ('    "Wrong: rank 0\'s broadcast happens once, at construction.",\n', '    "Wrong: once.",\n    "Extra.",\n', "5 reasons for 4 choices"),
        ('"Wrong: rank 0\'s broadcast happens once, at construction."', '""', "non-empty strings"),
        ('"Wrong: rank 0\'s broadcast happens once, at construction."', '"""Wrong: rank 0\nbroadcasts once."""', "one line"),
    ],
)
def test_why_of_the_wrong_shape_is_rejected(quiz_bank, old, new, words):
    """Wrong length, an empty or multi-line reason, or none at all: each names the question and field."""
    bank_dir, answers_dir = quiz_bank
    _edit(bank_dir, "ddp", old, new)
    with pytest.raises(BankError, match=words) as raised:
        load_bank(bank_dir, answers_dir)
    assert raised.value.field == "why" and raised.value.question == "ddp-grad-sync"


def _check(bank_dir, answers_dir):
    from ddpfsdp.quiz.cli import cli

    return CliRunner().invoke(cli, ["quiz", "--check", "--bank", str(bank_dir), "--answers", str(answers_dir)])


def test_quiz_check_fails_a_bank_whose_right_answers_are_the_longest(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    # Both single questions now have a right answer strictly longer than every other choice: 100%.
    _edit(bank_dir, "ddp", '"a parameter server that averages gradients"', '"a parameter server"', count=2)
    _edit(bank_dir, "fsdp-wrap", '"it lowers the peak"', '"it lowers the peak by one unit"', count=2)
    bad = _check(bank_dir, answers_dir)
    assert bad.exit_code == 1, bad.output
    assert "strictly the longest choice in 2 of 2 single questions (100%, limit 30%)" in bad.output
    assert "ddp-grad-sync" in bad.output and "wrap-peak-vs-units" in bad.output
    assert "Traceback" not in bad.output


def test_quiz_check_fails_all_of_the_above(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    _edit(bank_dir, "ddp", '"a 1/N shard of the parameters"', '"all of the above"')
    bad = _check(bank_dir, answers_dir)
    assert bad.exit_code == 1, bad.output
    assert "'all/none of the above' choices in: ddp-replicated-state" in bad.output


def test_cue_statistics_of_a_balanced_bank(quiz_bank):
    from ddpfsdp.quiz.cues import cue_stats

    stats = cue_stats(load_bank(*quiz_bank))
    assert stats.singles == 2 and stats.right_is_longest == () and stats.problems == []
    def ratio(right, others):
        return (sum(map(len, right)) / len(right)) / (sum(map(len, others)) / len(others))

    expected = (
        ratio(["all-reduce in buckets during backward"],
              ["all-gather after the step", "a parameter server that averages gradients", "broadcast from rank 0 every step"])
        + ratio(["parameters", "gradients", "optimizer state"], ["a 1/N shard of the parameters"])
        + ratio(["it lowers the peak"], ["it raises the peak", "no change"])
    ) / 3
    assert stats.mean_length_ratio == pytest.approx(expected)


def test_cue_statistics_rank_the_right_answer_by_length(quiz_bank):
    from ddpfsdp.quiz.cues import cue_stats

    # ddp-grad-sync is the one four-choice single question; one choice is longer than its answer.
    stats = cue_stats(load_bank(*quiz_bank))
    assert stats.four_choice == 1 and stats.rank_shares == (0.0, 1.0, 0.0, 0.0)
    assert stats.problems == []  # too few questions for the shares to mean anything


@pytest.mark.parametrize(
    "shares, failing",
    [
        ((0.13, 0.47, 0.17, 0.23), "second-longest choice by length in 47%"),
        ((0.10, 0.20, 0.30, 0.40), "fourth-longest choice by length in 40%"),
        ((0.25, 0.25, 0.25, 0.25), None),
        ((0.30, 0.35, 0.20, 0.15), None),
    ],
)
def test_no_length_rank_may_hold_the_right_answer_beyond_its_limit(shares, failing):
    from ddpfsdp.quiz.cues import CueStats

    stats = CueStats(singles=100, right_is_longest=(), mean_length_ratio=1.0, catch_all=(), rank_shares=shares, four_choice=100)
    if failing is None:
        assert stats.problems == []
    else:
        assert len(stats.problems) == 1 and failing in stats.problems[0]
    few = CueStats(singles=19, right_is_longest=(), mean_length_ratio=1.0, catch_all=(), rank_shares=shares, four_choice=19)
    assert few.problems == []


@pytest.mark.parametrize(
    "topic, starts, question, item",
    [
        ("ddp", 'why = [\n    "Right: the reducer', "ddp-grad-sync", "choice"),
        ("fsdp-wrap", 'why = [\n    "Each rank holds only a shard', "wrap-forward-order", "step"),
    ],
)
def test_a_question_without_reasons_is_rejected(quiz_bank, topic, starts, question, item):
    bank_dir, answers_dir = quiz_bank
    path = bank_dir / f"{topic}.toml"
    text = path.read_text()
    start = text.index(starts)
    path.write_text(text[:start] + text[text.index("]\n", start) + 2 :])
    with pytest.raises(BankError, match=f"is missing; give one line per {item}") as raised:
        load_bank(bank_dir, answers_dir)
    assert raised.value.field == "why" and raised.value.question == question


def test_an_order_question_needs_one_reason_per_step(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    _edit(bank_dir, "fsdp-wrap", '    "The forward runs once the gathered parameters are there.",\n', "")
    with pytest.raises(BankError, match="2 reasons for 3 steps; give one line per step") as raised:
        load_bank(bank_dir, answers_dir)
    assert raised.value.field == "why" and raised.value.question == "wrap-forward-order"


