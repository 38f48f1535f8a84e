"""A learner's katas in the progress store: checks, hints and giving up review the kata's card like an
answer; the card counts toward its topic's mastery and readiness; the bank's questions link the katas."""

from __future__ import annotations

import json
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


def _written(store, folder, now):
    """A learner's katas: one passed after a failed check and a hint, one given up, one only started."""
    ring, sampler, buckets = KATAS["ring-allreduce"], KATAS["sampler-indices"], KATAS["ddp-buckets"]
    katas.start(ring, store, folder, now=now)
    katas.record_check(ring, store, False, ["equals_all_reduce"], now + timedelta(minutes=3))
    katas.next_hint(ring, store, now + timedelta(minutes=4))
    katas.record_check(ring, store, True, [], now + timedelta(minutes=9))
    katas.start(sampler, store, folder, now=now + timedelta(minutes=10))
    katas.give_up(sampler, store, now + timedelta(minutes=20))
    katas.start(buckets, store, folder, now=now + timedelta(minutes=30))


def _katas_held(store, now):
    return {"statuses": katas.statuses(store, now), "events": store.rows("kata_events"),
            "files": store.rows("kata_files"), "cards": store.rows("cards"), "reviews": store.rows("attempts")}


def test_a_learners_katas_travel_with_an_export_to_another_machine(tmp_path):
    from ddpfsdp.quiz import portable

    laptop = Store.memory()
    _written(laptop, tmp_path / "katas", T0)
    later = T0 + timedelta(days=2)
    held = _katas_held(laptop, later)
    states = {s.name: s.state for s in held["statuses"]}
    assert [states[name] for name in ("ring-allreduce", "sampler-indices", "ddp-buckets")] == ["passed", "gave up", "started"]
    document = json.loads(json.dumps(portable.export_document(laptop, T0)))  # as the file carries it

    desktop = Store.memory()
    merged = desktop.merge(portable.store_rows(document))
    assert (merged.kata_events, merged.kata_events_known, merged.kata_files) == (7, 0, 3)
    assert _katas_held(desktop, later) == held
    [ring] = [s for s in katas.statuses(desktop, later) if s.name == "ring-allreduce"]
    assert (ring.state, ring.checks, ring.hints) == ("passed", 2, 1)
    assert ring.file == (tmp_path / "katas" / KATAS["ring-allreduce"].file_name).resolve()
    # Taken back to the laptop, nothing is counted twice: a second hint is the second, not the third.
    assert laptop.merge(portable.store_rows(json.loads(json.dumps(portable.export_document(desktop, T0))))).kata_events == 0
    assert katas.next_hint(KATAS["ring-allreduce"], laptop, later)[0] == 2


def test_reset_forgets_katas_and_its_backup_brings_them_back(tmp_path):
    from ddpfsdp.quiz import portable

    store = Store.memory()
    _written(store, tmp_path / "katas", T0)
    later = T0 + timedelta(days=2)
    held = _katas_held(store, later)
    backup = portable.reset(store, tmp_path, T0)
    assert {s.state for s in katas.statuses(store, later)} == {"new"} and store.kata_files() == {}
    assert (tmp_path / "katas" / KATAS["ring-allreduce"].file_name).exists()  # the learner's file stays
    merged = portable.import_file(store, backup)
    assert merged.kata_events == 7 and _katas_held(store, later) == held


def test_a_learner_who_has_only_written_katas_can_reset(tmp_path):
    from conftest import run_cli

    with Store.open() as store:
        katas.start(KATAS["ring-allreduce"], store, tmp_path, now=T0)
        katas.next_hint(KATAS["ring-allreduce"], store, T0)
    outcome = run_cli("progress", "--reset", "--yes")
    assert outcome.exit_code == 0, outcome.stderr
    assert "Progress reset" in outcome.stdout
    with Store.open() as store:
        assert store.kata_events() == [] and store.kata_files() == {}
