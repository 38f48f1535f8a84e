"""A learner's katas in the progress store: checks, hints and giving up review the kata's card like an
answer; the card counts toward its topic's mastery and readiness; the bank's questions link the katas."""

from __future__ import annotations

from datetime import datetime, timedelta, UTC

import pytest
from fsrs import Rating

from ddpfsdp.demos.katas.catalog import KATAS
from ddpfsdp.quiz import katas, scheduler
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(("passed", "failed", "hints", "rating"), [
    (True, 0, 0, Rating.Easy), (True, 2, 0, Rating.Good), (True, 5, 0, Rating.Hard), (True, 0, 1, Rating.Hard),
    (False, 0, 0, Rating.Again),
])
def test_a_kata_is_rated_by_how_it_was_passed(passed, failed, hints, rating):
    assert scheduler.kata_rating(passed, failed, hints) == rating


def test_a_pass_reviews_a_new_card_once_and_again_when_it_is_due():
    store = Store.memory()
    kata = KATAS["ring-allreduce"]
    assert katas.record_check(kata, store, False, ["equals_all_reduce"], T0) is None
    note = katas.record_check(kata, store, True, [], T0 + timedelta(minutes=5))
    assert note and note.startswith("reviewed as Good (1 failed check, 0 hints)")
    # Checking again while the card is not due changes nothing but the record of checks.
    assert katas.record_check(kata, store, True, [], T0 + timedelta(minutes=6)) is None
    assert len(store.attempts("kata:ring-allreduce")) == 1
    due = store.cards()["kata:ring-allreduce"][1]
    later = due + timedelta(hours=1)
    [status] = [s for s in katas.statuses(store, later) if s.name == "ring-allreduce"]
    assert status.state == "passed" and status.due and status.checks == 3
    assert katas.record_check(kata, store, True, [], later).startswith("reviewed as Easy")
    assert [a.correct for a in store.attempts("kata:ring-allreduce")] == [True, True]


def test_hints_taken_before_a_pass_make_it_hard():
    store = Store.memory()
    kata = KATAS["sampler-indices"]
    assert katas.next_hint(kata, store, T0) == (1, kata.hints[0])
    assert katas.next_hint(kata, store, T0)[0] == 2
    assert "Hard" in katas.record_check(kata, store, True, [], T0 + timedelta(minutes=1))


def test_katas_count_toward_their_topics_mastery(quiz_bank):
    from ddpfsdp.quiz.loader import load_bank

    bank = load_bank(*quiz_bank)
    store = Store.memory()
    before = {p.topic: p for p in scheduler.progress(bank, store, T0)}
    katas.record_check(KATAS["ddp-buckets"], store, True, [], T0)
    after = {p.topic: p for p in scheduler.progress(bank, store, T0 + timedelta(minutes=1))}
    assert before["ddp"].katas == 0 and after["ddp"].katas == 1
    assert after["ddp"].mastery > before["ddp"].mastery and after["ddp"].attempts == 1


def test_giving_up_is_again_and_its_status_says_so():
    store = Store.memory()
    kata = KATAS["fsdp-unit"]
    assert katas.give_up(kata, store, T0).startswith("reviewed as Again")
    [status] = [s for s in katas.statuses(store, T0) if s.name == "fsdp-unit"]
    assert status.state == "gave up" and not katas.has_passed(kata, store)


def test_every_kata_is_linked_from_a_question_and_every_link_names_a_kata():
    from ddpfsdp.quiz.loader import load_bank

    bank = load_bank()
    linked = {q.kata for q in bank.questions.values() if q.kata}
    assert linked == set(KATAS)
    for question in bank.questions.values():
        if question.kata:
            assert bank.topics[question.topic] and question.kata in KATAS


def test_a_question_linking_an_unknown_kata_is_refused(quiz_bank):
    from ddpfsdp.quiz.loader import BankError, load_bank

    bank_dir, answers_dir = quiz_bank
    path = bank_dir / "ddp.toml"
    path.write_text(path.read_text().replace('id = "ddp-grad-sync"\n', 'id = "ddp-grad-sync"\nkata = "ring-all-reduce"\n'))
    with pytest.raises(BankError, match="unknown kata 'ring-all-reduce'"):
        load_bank(bank_dir, answers_dir)
