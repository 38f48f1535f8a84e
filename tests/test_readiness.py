"""Readiness per topic and per interview skill: half mastery, half recent mock and interview scores;
the three things to study next; and `ddpfsdp progress --json`'s `readiness`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, UTC

import pytest
from click.testing import CliRunner

from ddpfsdp.quiz import readiness, scheduler
from ddpfsdp.quiz.grading import Grade, grade_single
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.fixture
def bank(quiz_bank):
    return load_bank(*quiz_bank)


def _step(store: Store, kind: str, topic: str, skill: str, correct: bool, at: datetime) -> None:
    grade = Grade(correct, 1.0 if correct else 0.0, "", "", {"text": "", "value": 1, "skill": skill})
    scheduler.record_answer(store, scheduler.interview_card(kind, topic), grade, time_s=60, now=at, mode="interview")


def test_a_new_user_is_ready_for_nothing_and_is_told_where_to_start(bank):
    report = readiness.report(bank, Store.memory(), T0)
    assert {r.readiness for r in report["topics"] + report["skills"]} == {0.0}
    assert len(report["next"]) == 3
    assert report["next"][0].command == "ddpfsdp quiz --topic ddp"  # the bank's first topic
    assert {r.name for r in report["skills"]} == {"memory", "strategy", "communication", "time", "activations",
                                                 "explanation"}


def test_readiness_is_half_mastery_half_recent_mock_and_interview_scores(bank):
    store = Store.memory()
    single = bank.questions["ddp-grad-sync"]
    scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=10, now=T0, mode="mock")
    _step(store, "model-state", "ddp", "memory", True, T0)
    _step(store, "comm-time", "ddp", "time", False, T0)
    report = readiness.report(bank, store, T0)
    topics = {r.name: r for r in report["topics"]}
    skills = {r.name: r for r in report["skills"]}
    # ddp: three recent answers (mock right 1.0, interview right 1.0, interview wrong 0.0) -> 2/3.
    ddp = topics["ddp"]
    assert ddp.recent == pytest.approx(2 / 3) and ddp.recent_answers == 3
    # Three answers of the five it takes to count in full: mastery at 3/5, the mean over 5 (2 of 5 right).
    assert ddp.answers == 3
    assert ddp.readiness == pytest.approx(0.5 * ddp.mastery * 3 / 5 + 0.5 * 2 / 5)
    # memory: its one kind of step answered right; time: one of its three kinds, answered wrong.
    assert skills["memory"].recent == 1.0 and skills["memory"].mastery > 0
    assert skills["time"].recent == 0.0 and skills["time"].mastery == 0 and skills["time"].readiness == 0
    # Not ready at all: fsdp-wrap and four skills never tried, and time tried and missed; the untried
    # come first, topics before skills, each in its own order.
    assert topics["fsdp-wrap"].readiness == 0 and topics["fsdp-wrap"].recent is None
    assert [r.name for r in report["next"]] == ["fsdp-wrap", "strategy", "communication"]


def test_old_answers_no_longer_count_as_recent(bank):
    store = Store.memory()
    _step(store, "model-state", "ddp", "memory", True, T0 - timedelta(days=readiness.WINDOW_DAYS + 1))
    memory = {r.name: r for r in readiness.report(bank, store, T0)["skills"]}["memory"]
    assert memory.recent is None and memory.readiness == pytest.approx(0.5 * memory.mastery / 5)


def test_one_right_answer_is_not_readiness(bank):
    """One right interview answer is evidence for one answer's worth: at most a fifth, not 100%."""
    store = Store.memory()
    _step(store, "model-state", "ddp", "memory", True, T0)
    memory = {r.name: r for r in readiness.report(bank, store, T0)["skills"]}["memory"]
    assert memory.recent == 1.0 and memory.mastery > 0
    assert memory.readiness <= 1 / readiness.EVIDENCE_ANSWERS
    assert "1 answer of the 5 it takes to count in full" in memory.why


def test_readiness_grows_with_the_evidence_and_reaches_full_only_with_enough(bank):
    store = Store.memory()
    shown = []
    for day in range(8):
        at = T0 + timedelta(days=day * 3)
        # Each kind of step the memory skill asks: the model state under DDP, a 3-D plan's memory per GPU.
        _step(store, "model-state", "memory", "memory", True, at)
        _step(store, "plan-memory", "at-scale", "memory", True, at)
        shown.append({r.name: r for r in readiness.report(bank, store, at)["skills"]}["memory"].readiness)
    assert shown == sorted(shown) and shown[0] < shown[2]
    for days, ready in enumerate(shown, start=1):
        assert ready <= 2 * days / readiness.EVIDENCE_ANSWERS + 1e-9
    assert shown[-1] > 0.75  # eight right answers to each over three weeks: well on the way


def test_each_thing_to_study_comes_with_its_command(bank):
    store = Store.memory()
    for kind, skill in (("model-state", "memory"), ("fit-strategy", "strategy"), ("wire-bytes", "communication"),
                        ("activations", "activations"), ("explain-fit", "explanation")):
        _step(store, kind, "ddp", skill, True, T0)
    single = bank.questions["ddp-grad-sync"]
    scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=10, now=T0, mode="mock")
    report = readiness.report(bank, store, T0)
    commands = {r.name: r.command for r in report["next"]}
    assert commands.get("time", "ddpfsdp interview --family faster") == "ddpfsdp interview --family faster"
    assert commands.get("fsdp-wrap", "ddpfsdp quiz --topic fsdp-wrap") == "ddpfsdp quiz --topic fsdp-wrap"
    assert {"time", "fsdp-wrap"} <= set(commands)


def test_progress_json_carries_readiness(quiz_bank, monkeypatch):
    from ddpfsdp.quiz import loader
    from ddpfsdp.quiz.cli import cli

    bank_dir, answers_dir = quiz_bank
    monkeypatch.setattr(loader, "default_bank_dir", lambda: bank_dir)
    monkeypatch.setattr(loader, "default_answers_dir", lambda: answers_dir)
    with Store.open() as store:
        _step(store, "model-state", "ddp", "memory", True, datetime.now(UTC))
    result = CliRunner().invoke(cli, ["progress", "--json"])
    assert result.exit_code == 0, result.output
    ready = json.loads(result.output)["readiness"]
    assert ready["window_days"] == readiness.WINDOW_DAYS and "mastery" in ready["method"]
    assert {row["name"] for row in ready["skills"]} >= {"memory", "time"}
    assert len(ready["next"]) == 3 and all(row["command"].startswith("ddpfsdp ") for row in ready["next"])
    memory = next(row for row in ready["skills"] if row["name"] == "memory")
    assert memory["recent"] == 1.0 and memory["recent_answers"] == 1
    text = CliRunner().invoke(cli, ["progress"])
    assert text.exit_code == 0 and "Study next" in text.output and "Readiness by interview skill" in text.output
