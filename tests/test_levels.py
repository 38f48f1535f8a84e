"""Levels: `--level N` and `--level A-B` limit a session, and progress shows mastery by level."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, UTC

import pytest
from conftest import run_cli

from ddpfsdp.quiz.messages import SessionLeft
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.grading import grade_multi, grade_single
from ddpfsdp.quiz.levels import LevelError, LevelRange, parse_levels
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, expected", [("3", (3, 3)), ("2-3", (2, 3)), (" 1..4 ", (1, 4)), ("2–4", (2, 4))])
def test_a_level_or_a_range_is_read(text, expected):
    levels = parse_levels(text)
    assert (levels.low, levels.high) == expected


@pytest.mark.parametrize("text, said", [
    ("0", "there is no level 0"), ("5", "there is no level 5"), ("x", "'x' is not a level"),
    ("", "'' is not a level"), ("-1", "'-1' is not a level"), ("3-2", "write the lower level first (2-3)"),
    ("2-9", "there is no level 9"), ("1e3", "'1e3' is not a level"),
])
def test_a_level_that_does_not_exist_is_refused_with_the_levels_named(text, said):
    with pytest.raises(LevelError) as caught:
        parse_levels(text)
    assert said in str(caught.value)
    assert "1 fundamentals" in str(caught.value) or "lower level first" in str(caught.value)


@pytest.mark.parametrize("value", ["0", "5", "x"])
def test_quiz_level_out_of_range_is_a_click_error(quiz_bank, value):
    outcome = run_cli("quiz", "--plain", "--level", value, "--bank", str(quiz_bank[0]), "--answers", str(quiz_bank[1]))
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 2
    assert "Invalid value for '--level'" in outcome.stderr and "from 1 to 4" in outcome.stderr
    assert "Traceback" not in outcome.stderr


def test_a_level_a_topic_does_not_have_is_named(quiz_bank):
    outcome = run_cli("quiz", "--plain", "--topic", "fsdp-wrap", "--level", "4", "--bank", str(quiz_bank[0]),
                      "--answers", str(quiz_bank[1]))
    assert outcome.exit_code == 2
    assert "topic 'fsdp-wrap' has no question at level 4" in outcome.stderr and "its levels are 2" in outcome.stderr


def test_a_plain_session_asks_only_the_levels_given(quiz_bank):
    outcome = run_cli("quiz", "--plain", "--level", "2", "--bank", str(quiz_bank[0]), "--answers", str(quiz_bank[1]),
                      stdin="s\ns\ns\ns\ns\ns\nq\n")
    assert outcome.exit_code == 0, outcome.stderr
    asked = [line for line in outcome.stdout.splitlines() if " · level " in line]
    assert len(asked) == 4 and all("· level 2 ·" in line for line in asked), asked


def test_a_range_restricts_a_bank_and_keeps_every_topic(quiz_bank):
    bank = load_bank(*quiz_bank)
    narrowed = LevelRange(1, 1).restrict(bank)
    assert list(narrowed.questions) == ["ddp-grad-sync"]
    assert list(narrowed.topics) == list(bank.topics) and narrowed.topics["fsdp-wrap"].question_ids == ()
    assert LevelRange().restrict(bank) is bank


def test_mastery_by_level_counts_each_level_on_its_own(quiz_bank):
    bank = load_bank(*quiz_bank)
    store = Store.open()
    single, multi = bank.questions["ddp-grad-sync"], bank.questions["ddp-replicated-state"]
    scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=8, now=T0)
    scheduler.record_answer(store, multi, grade_multi(multi, ["parameters"]), time_s=30, now=T0)
    scheduler.record_answer(store, scheduler.drill_card("model-state", "ddp"), grade_single(single, single.answer),
                            time_s=30, now=T0, mode="drill")
    report = {p.level: p for p in scheduler.level_progress(bank, store, T0 + timedelta(hours=1))}
    assert [report[level].questions for level in (1, 2, 3, 4)] == [1, 4, 1, 0]
    assert (report[1].attempts, report[1].correct, report[1].seen) == (1, 1, 1)
    assert report[1].mastery > 0
    assert (report[2].attempts, report[2].correct, report[2].accuracy, report[2].mastery) == (1, 0, 0.0, 0.0)
    assert report[3].accuracy is None and report[4].mastery == 0.0  # the drill has no level


def test_progress_shows_mastery_by_level_as_text_and_json():
    text = run_cli("progress", env={"COLUMNS": "100"})
    assert text.exit_code == 0, text.stderr
    assert "Progress by level" in text.stdout and "4 staff-level trade-offs" in text.stdout
    document = json.loads(run_cli("progress", "--json").stdout)
    assert [row["level"] for row in document["levels"]] == [1, 2, 3, 4]
    assert {"mastery", "accuracy", "seen", "questions", "name"} <= set(document["levels"][0])


async def test_the_app_asks_only_the_chosen_levels(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="ddp", levels=LevelRange(2, 2),
                   clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert [q.level for q in app.session.questions] == [2, 2]
        app.levels = LevelRange(4, 4)
        app.post_message(SessionLeft())
        await pilot.pause()
        app.start_session("practice", topic="ddp")
        await pilot.pause()
        assert app.session is None
        assert any("at level 4" in n.message for n in app._notifications)
