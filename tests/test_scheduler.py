"""Scheduling: ratings from correctness and time, FSRS intervals, what is asked next, mastery."""

from __future__ import annotations

import json
import random
import threading
from datetime import datetime, timedelta, UTC

import pytest
from click.testing import CliRunner
from fsrs import Rating

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.grading import grade_explain, grade_multi, grade_order, grade_single
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.fixture
def bank(quiz_bank):
    return load_bank(*quiz_bank)


def test_rating_from_correctness_and_time(bank):
    question = bank.questions["ddp-grad-sync"]  # single, level 1: 20 s expected
    right = grade_single(question, question.answer)
    wrong = grade_single(question, "a parameter server that averages gradients")
    assert scheduler.rating_for(question, wrong, 3.0) == Rating.Again
    assert scheduler.rating_for(question, right, 5.0) == Rating.Easy
    assert scheduler.rating_for(question, right, 20.0) == Rating.Good
    assert scheduler.rating_for(question, right, 100.0) == Rating.Hard


def test_explain_rating_is_the_self_grade(bank):
    question = bank.questions["ddp-explain-buckets"]
    for name, rating in zip(("again", "hard", "good", "easy"), Rating):
        assert scheduler.rating_for(question, grade_explain(question, "", name), 1.0) == rating


def test_right_answers_space_out_and_a_wrong_one_comes_back_soon(bank):
    store = Store.memory()
    question = bank.questions["ddp-grad-sync"]
    right = grade_single(question, question.answer)
    now = T0
    intervals = []
    for _ in range(4):
        _, card, _ = scheduler.record_answer(store, question, right, time_s=15.0, now=now)
        intervals.append(card.due - now)
        now = card.due
    assert intervals == sorted(intervals) and intervals[-1] > timedelta(days=3)
    _, card, rating = scheduler.record_answer(store, question, grade_single(question, "a parameter server that averages gradients"), time_s=15.0, now=now)
    assert rating == Rating.Again
    assert card.due - now < timedelta(hours=1)
    assert len(store.attempts("ddp-grad-sync")) == 5
    assert json.loads(store.card_json("ddp-grad-sync"))["due"] == card.due.isoformat()


def test_two_writers_answering_one_card_at_once_lose_no_review(bank, tmp_path, monkeypatch):
    """Two apps on one progress file answer the same card at once: the second answers while the first sits
    between reading the card and writing it back. The first holds the write lock from its read, so the
    second waits, then reviews the card the first wrote. Read outside the transaction, the first would
    write back a card that never saw the second's review."""
    question = bank.questions["ddp-grad-sync"]
    right = grade_single(question, question.answer)
    later = T0 + timedelta(days=2)
    alone = Store.memory()  # the card after both reviews, one after the other
    scheduler.record_answer(alone, question, right, time_s=15.0, now=T0)
    _, both, _ = scheduler.record_answer(alone, question, right, time_s=15.0, now=later)

    first, second = Store.open(tmp_path / "progress.sqlite3"), Store.open(tmp_path / "progress.sqlite3")
    real = scheduler._SCHEDULER
    meanwhile: list[threading.Thread] = []

    class SecondAnswersMeanwhile:
        def review_card(self, card, *args, **kwargs):
            if not meanwhile:  # the first writer, between its read and its write
                answer = threading.Thread(target=scheduler.record_answer, args=(second, question, right),
                                          kwargs={"time_s": 15.0, "now": later})
                meanwhile.append(answer)
                answer.start()
                answer.join(timeout=1.0)  # done within a few ms, unless it waits for the first's transaction
            return real.review_card(card, *args, **kwargs)

    monkeypatch.setattr(scheduler, "_SCHEDULER", SecondAnswersMeanwhile())
    scheduler.record_answer(first, question, right, time_s=15.0, now=T0)
    meanwhile[0].join()
    assert sorted(a.answered_at for a in first.attempts(question.id)) == [T0, later]
    assert first.card_json(question.id) == both.to_json()


def test_practice_queue_due_then_new_then_later(bank):
    store = Store.memory()
    single = bank.questions["ddp-grad-sync"]
    multi = bank.questions["ddp-replicated-state"]
    scheduler.record_answer(store, single, grade_single(single, "a parameter server that averages gradients"), time_s=10, now=T0)
    scheduler.record_answer(store, multi, grade_multi(multi, list(multi.answer)), time_s=10, now=T0)
    later = T0 + timedelta(hours=1)
    queue = [q.id for q in scheduler.practice_queue(bank, store, later, topic="ddp")]
    assert queue[0] == "ddp-grad-sync"  # due again after the wrong answer
    assert queue[-1] == "ddp-replicated-state"  # answered right: not due yet
    assert set(queue[1:-1]) == {"ddp-allreduce-wire", "ddp-explain-buckets"}
    assert [q.id for q in scheduler.due_questions(bank, store, later)] == ["ddp-grad-sync"]


def test_mock_interview_mixes_topics_and_includes_explain(bank):
    picked = scheduler.mock_interview(bank, random.Random(1), size=5)
    assert len(picked) == 5 == len({q.id for q in picked})
    assert any(q.kind == "explain" for q in picked)
    assert {q.topic for q in picked} == {"ddp", "fsdp-wrap"}


def test_the_mock_mixes_kinds_and_topics_with_at_most_two_explain_harder_last():
    bank = load_bank()  # the real bank: its explain questions sort last, where the old draw took all 8
    for seed in range(20):
        picked = scheduler.mock_interview(bank, random.Random(seed))
        kinds = [q.kind for q in picked]
        assert len(picked) == 8 == len({q.id for q in picked}), seed
        assert kinds.count("explain") <= 2, (seed, kinds)
        assert len(set(kinds)) >= 4, (seed, kinds)
        assert len({q.topic for q in picked}) >= 5, seed
        assert [q.level for q in picked] == sorted(q.level for q in picked), seed


def test_drills_and_interview_steps_are_rated_at_their_own_pace():
    from ddpfsdp.quiz.grading import Grade

    right, wrong = Grade(True, 1.0, "", "", {}), Grade(False, 0.0, "", "", {})
    drill = scheduler.drill_card("model-state", "memory")  # 90 s expected: quick under 45, slow over 180
    assert (drill.card_id, drill.kind) == ("drill:model-state", "drill")
    assert scheduler.rating_for(drill, right, 40) == Rating.Easy
    assert scheduler.rating_for(drill, right, 100) == Rating.Good
    assert scheduler.rating_for(drill, right, 200) == Rating.Hard
    assert scheduler.rating_for(drill, wrong, 40) == Rating.Again
    step = scheduler.interview_card("comm-time", "comm")  # 120 s expected
    assert scheduler.rating_for(step, right, 100) == Rating.Good and scheduler.rating_for(step, right, 50) == Rating.Easy
    store = Store.memory()
    _, card, rating = scheduler.record_answer(store, step, right, time_s=100, now=T0, mode="interview")
    [attempt] = store.attempts()
    assert (attempt.question_id, attempt.kind, attempt.mode, rating) == ("interview:comm-time", "interview", "interview", Rating.Good)
    assert json.loads(store.card_json("interview:comm-time"))["due"] == card.due.isoformat()


def test_progress_weakest_first_and_mastery_decays(bank):
    store = Store.memory()
    for question in bank.in_topic("fsdp-wrap"):
        answer = list(question.steps) if question.kind == "order" else question.answer
        grade = grade_order(question, answer) if question.kind == "order" else grade_single(question, answer)
        scheduler.record_answer(store, question, grade, time_s=10, now=T0)
    single = bank.questions["ddp-grad-sync"]
    scheduler.record_answer(store, single, grade_single(single, "a parameter server that averages gradients"), time_s=10, now=T0)
    report = scheduler.progress(bank, store, T0)
    assert [p.topic for p in report] == ["ddp", "fsdp-wrap"]
    ddp, wrap = report
    assert ddp.attempts == 1 and ddp.accuracy == 0 and ddp.mastery == 0 and ddp.seen == 1
    assert wrap.accuracy == 1 and wrap.mastery > 0 and wrap.seen == 2
    assert ddp.due == 0
    # The wrong answer is due again within minutes.
    assert {p.topic: p for p in scheduler.progress(bank, store, T0 + timedelta(minutes=5))}["ddp"].due == 1
    later = scheduler.progress(bank, store, T0 + timedelta(days=60))
    assert {p.topic: p for p in later}["fsdp-wrap"].mastery < wrap.mastery


def test_progress_command_json(quiz_bank, monkeypatch):
    from ddpfsdp.quiz import loader
    from ddpfsdp.quiz.cli import cli

    bank_dir, answers_dir = quiz_bank
    monkeypatch.setattr(loader, "default_bank_dir", lambda: bank_dir)
    monkeypatch.setattr(loader, "default_answers_dir", lambda: answers_dir)
    bank = load_bank()
    with Store.open() as store:
        single = bank.questions["ddp-grad-sync"]
        scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=10, now=datetime.now(UTC))
    result = CliRunner().invoke(cli, ["progress", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["attempts"] == 1 and report["accuracy"] == 1
    assert [t["topic"] for t in report["topics"]] == ["fsdp-wrap", "ddp"]
    text = CliRunner().invoke(cli, ["progress"])
    assert text.exit_code == 0 and "weakest first" in text.output and "DDP basics" in text.output
    assert "1 attempt, 100% correct;" in " ".join(text.output.split())  # one, not "1 attempts"


def test_a_topic_answered_wrong_ranks_weaker_than_one_not_tried(bank):
    store = Store.memory()
    wrong = bank.questions["wrap-peak-vs-units"]
    scheduler.record_answer(store, wrong, grade_single(wrong, "it raises the peak"), time_s=10, now=T0)
    report = scheduler.progress(bank, store, T0)
    assert [p.topic for p in report] == ["fsdp-wrap", "ddp"]  # ddp comes first in the bank's order
    assert report[0].accuracy == 0 and report[1].accuracy is None
