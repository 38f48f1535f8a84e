"""Progress that moves between machines (export, import, merge), a reset with a backup, and what can be
read back from a damaged progress file, which a read-only command leaves where it is."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timedelta, UTC
from pathlib import Path

import pytest
from conftest import run_cli

from ddpfsdp.quiz import portable, scheduler
from ddpfsdp.quiz.grading import grade_multi, grade_order, grade_single
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.recovery import _recognise, damaged_files, read_damaged
from ddpfsdp.quiz.store import FILENAME, Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def _answer(store, bank, qid: str, right: bool, at: datetime) -> None:
    q = bank.questions[qid]
    if q.kind == "single":
        grade = grade_single(q, q.answer if right else next(c for c in q.choices if c != q.answer))
    elif q.kind == "multi":
        grade = grade_multi(q, list(q.answer) if right else ["parameters"])
    else:
        grade = grade_order(q, list(q.steps) if right else [q.steps[1], q.steps[0], *q.steps[2:]])
    scheduler.record_answer(store, q, grade, time_s=15, now=at)


def _history(store, bank, start: datetime, right: bool = True) -> None:
    """A few answers, a bookmark, a kata started, hinted and checked, and a saved result, as one machine
    would have them."""
    for minutes, qid in enumerate(("ddp-grad-sync", "ddp-replicated-state", "wrap-forward-order", "ddp-grad-sync")):
        _answer(store, bank, qid, right, start + timedelta(minutes=minutes))
    store.add_bookmark("wrap-forward-order", start)
    path = f"/home/learner-{start:%H%M}/ddpfsdp-katas/ring_allreduce.py"
    store.set_kata_file("ring-allreduce", path, at=start)
    store.record_kata_event("ring-allreduce", "start", detail={"path": path}, at=start)
    store.record_kata_event("ring-allreduce", "hint", detail={"hint": 1}, at=start + timedelta(minutes=5))
    store.record_kata_event("ring-allreduce", "check", passed=right,
                            detail={"failed": [] if right else ["equals_all_reduce"]}, at=start + timedelta(minutes=6))
    store.save_demo_result("sampler", [], {"env": {"hostname": "box"}, "checks": []}, saved_at=start)


KEPT = ("attempts", "cards", "bookmarks", "kata_events", "kata_files", "demo_results")


def _state(store, bank, now: datetime) -> dict:
    """Everything progress is made of, without the store's own row ids."""
    return {table: store.rows(table) for table in KEPT} | {
        "progress": scheduler.progress(bank, store, now), "levels": scheduler.level_progress(bank, store, now)}


def _said(outcome) -> str:
    """What a command printed, as one line (its text is wrapped to the terminal)."""
    return " ".join(outcome.stdout.split())


@pytest.fixture
def bank(quiz_bank):
    return load_bank(*quiz_bank)


def test_export_wipe_import_gives_back_identical_progress(bank, tmp_path):
    store = Store.open()
    _history(store, bank, T0)
    before = _state(store, bank, T0 + timedelta(days=1))
    store.close()
    exported = tmp_path / "progress.json"
    outcome = run_cli("progress", "--export", str(exported))
    assert outcome.exit_code == 0, outcome.stderr
    assert "Wrote 4 attempts, 3 cards, 1 bookmark, 3 kata events and 1 saved result" in _said(outcome)
    document = json.loads(exported.read_text())
    assert document["schema"] == "ddpfsdp.progress-export/2"
    assert document["attempts"][0]["question_id"] == "ddp-grad-sync" and document["attempts"][0]["correct"] is True
    # A kata event's detail and verdict are JSON values, not the store's encoding of them.
    assert document["kata_events"][2] == {"kata": "ring-allreduce", "event": "check", "passed": True,
                                          "detail": {"failed": []}, "at": (T0 + timedelta(minutes=6)).isoformat()}

    reset = run_cli("progress", "--reset", "--yes")
    assert reset.exit_code == 0, reset.stderr
    with Store.open() as wiped:
        assert wiped.rows("attempts") == [] and wiped.rows("cards") == [] and wiped.bookmarks() == {}
        assert wiped.kata_events() == [] and wiped.kata_files() == {}
    imported = run_cli("progress", "--import", str(exported))
    assert imported.exit_code == 0, imported.stderr
    assert "4 new attempts (0 already here)" in _said(imported)
    assert "3 new kata events (0 already here)" in _said(imported)
    with Store.open() as restored:
        after = _state(restored, bank, T0 + timedelta(days=1))
    # Saved results stay through a reset, so the import finds the one it carries already there.
    assert after == before


def test_merging_two_machines_keeps_both_histories_and_the_newer_card(bank, tmp_path, monkeypatch):
    exports = {}
    for machine, start, right in (("laptop", T0, True), ("desktop", T0 + timedelta(hours=2), False)):
        monkeypatch.setenv("DDPFSDP_HOME", str(tmp_path / machine))
        with Store.open() as store:
            _history(store, bank, start, right)
        exports[machine] = tmp_path / f"{machine}.json"
        assert run_cli("progress", "--export", str(exports[machine])).exit_code == 0

    monkeypatch.setenv("DDPFSDP_HOME", str(tmp_path / "laptop"))
    outcome = run_cli("progress", "--import", str(exports["desktop"]))
    assert outcome.exit_code == 0, outcome.stderr
    again = run_cli("progress", "--import", str(exports["desktop"]))  # a no-op
    assert "0 new attempts (4 already here)" in _said(again) and "0 new kata events (3 already here)" in _said(again)
    laptop = json.loads(exports["laptop"].read_text())
    desktop = json.loads(exports["desktop"].read_text())
    with Store.open() as store:
        attempts = store.attempts()
        cards = {row["question_id"]: row for row in store.rows("cards")}
        assert len(store.rows("demo_results")) == 2  # the same demo saved at two times on two machines
        assert store.bookmarks() == {"wrap-forward-order": T0}  # the first mark
        events = store.kata_events()
        files = store.kata_files()
    assert len(attempts) == len(laptop["attempts"]) + len(desktop["attempts"]) == 8
    # Both kata histories, each event once, in the order they happened; the file started later is the desktop's.
    assert [(e.event, e.passed) for e in events] == [("start", None), ("hint", None), ("check", True),
                                                     ("start", None), ("hint", None), ("check", False)]
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert files == {"ring-allreduce": Path(desktop["kata_files"][0]["path"])} and "learner-1100" in str(files["ring-allreduce"])
    assert [a.answered_at for a in attempts] == sorted(a.answered_at for a in attempts)
    # The desktop answered later (wrongly): its cards are the newer ones and replace the laptop's.
    assert {qid: row["updated_at"] for qid, row in cards.items()} == {
        row["question_id"]: row["updated_at"] for row in desktop["cards"]}
    # Ordered by when they were answered, the last answer to each question is the desktop's.
    assert scheduler.progress(bank, Store.open(), T0 + timedelta(days=1))[0].accuracy == 0.5


def test_an_older_card_never_replaces_a_newer_one(bank, tmp_path):
    with Store.open() as store:
        _answer(store, bank, "ddp-grad-sync", True, T0 + timedelta(days=3))
        newest = store.rows("cards")
    older = {"schema": "ddpfsdp.progress-export/1", "attempts": [], "bookmarks": [], "demo_results": [],
             "cards": [{"question_id": "ddp-grad-sync", "card": json.loads(newest[0]["card_json"]),
                        "due": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"}]}
    path = tmp_path / "older.json"
    path.write_text(json.dumps(older))
    assert "0 cards newer than this machine's (1 kept as they were)" in _said(run_cli("progress", "--import", str(path)))
    with Store.open() as store:
        assert store.rows("cards") == newest


KATA_EVENT = {"kata": "ring-allreduce", "event": "check", "passed": False, "detail": {"failed": ["no_deadlock"]},
              "at": "2025-01-06T09:00:00Z"}


@pytest.mark.parametrize("content, said", [
    ("{not json", "is not JSON"),
    ("[1, 2]", "has no \"schema\" field"),
    (json.dumps({"schema": "ddpfsdp.progress/1", "attempts": 0}), "is the progress report"),
    (json.dumps({"schema": "ddpfsdp.demo/1"}), "'ddpfsdp.demo/1' document, not a ddpfsdp progress export"),
    (json.dumps({"schema": "ddpfsdp.progress-export/3"}), "written by a newer ddpfsdp"),
    (json.dumps({"schema": "ddpfsdp.progress-export/1", "attempts": {}}), "\"attempts\" must be a list"),
    (json.dumps({"schema": "ddpfsdp.progress-export/1", "attempts": [{"question_id": "q"}]}), "attempts[0] has no"),
    ('{"schema": "ddpfsdp.progress-export/1", "attempts": [{"question_id": "q", "topic": "t", "kind": "single", '
     '"answer": 1, "correct": true, "score": NaN, "time_s": 1, "rating": 3, "mode": "practice", '
     '"answered_at": "2025-01-06T09:00:00+00:00"}]}', "score must be a finite number"),
    ('{"schema": "ddpfsdp.progress-export/1", "bookmarks": [{"question_id": "q", "marked_at": "2025-01-06 09:00"}]}',
     "has no timezone"),
    ('{"schema": "ddpfsdp.progress-export/1", "cards": [{"question_id": "q", "card": {"x": 1}, '
     '"due": "2025-01-06T09:00:00Z", "updated_at": "2025-01-06T09:00:00Z"}]}', "is not an FSRS card"),
    *[(json.dumps({"schema": "ddpfsdp.progress-export/2", part: rows}), said) for part, rows, said in (
        ("kata_events", {}, "\"kata_events\" must be a list"),
        ("kata_events", [{**KATA_EVENT, "at": None}], "kata_events[0].at must be str, not null"),
        ("kata_events", [{k: v for k, v in KATA_EVENT.items() if k != "detail"}], "kata_events[0] has no \"detail\""),
        ("kata_events", [KATA_EVENT, {**KATA_EVENT, "event": "won"}], "kata_events[1].event is 'won', not one of"),
        ("kata_events", [{**KATA_EVENT, "passed": 1}], "kata_events[0].passed must be bool or null, not int"),
        ("kata_events", [{**KATA_EVENT, "passed": None}], "kata_events[0].passed must be true or false for a check"),
        ("kata_events", [{**KATA_EVENT, "event": "hint"}], "kata_events[0].passed must be null for a hint event"),
        ("kata_events", [{**KATA_EVENT, "detail": "[]"}], "kata_events[0].detail must be dict, not str"),
        ("kata_events", [{**KATA_EVENT, "at": "2025-01-06T09:00"}], "kata_events[0].at: '2025-01-06T09:00' has no timezone"),
        ("kata_files", [{"kata": "ring-allreduce", "started_at": "2025-01-06T09:00:00Z"}], "kata_files[0] has no \"path\""),
        ("kata_files", [{"kata": "ring-allreduce", "path": "/r.py", "started_at": "Monday"}],
         "kata_files[0].started_at: 'Monday' is not an ISO 8601 time"),
    )],
])
def test_a_file_that_is_not_an_export_is_refused_and_nothing_changes(bank, tmp_path, content, said):
    with Store.open() as store:
        _history(store, bank, T0)
        before = _state(store, bank, T0)
    path = tmp_path / "other.json"
    path.write_text(content)
    outcome = run_cli("progress", "--import", str(path))
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 1 and said in outcome.stderr and "Nothing was imported" in outcome.stderr, outcome.stderr
    with Store.open() as store:
        assert _state(store, bank, T0) == before


def test_a_version_1_export_without_kata_parts_still_imports(bank, tmp_path):
    with Store.open() as store:
        _history(store, bank, T0)
        document = portable.export_document(store)
    assert len(document["kata_events"]) == 3
    # What the version before katas wrote: the same parts less the two kata ones.
    older = {k: v for k, v in document.items() if k not in ("kata_events", "kata_files")} | {
        "schema": "ddpfsdp.progress-export/1"}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(older))
    with Store.open() as store:
        store.reset()
    outcome = run_cli("progress", "--import", str(path))
    assert outcome.exit_code == 0, outcome.stderr
    assert "4 new attempts (0 already here)" in _said(outcome) and "0 new kata events (0 already here)" in _said(outcome)
    with Store.open() as store:
        assert len(store.attempts()) == 4 and store.kata_events() == [] and store.kata_files() == {}


def test_bad_export_paths_are_refused_with_what_to_do(tmp_path):
    cases = [
        (tmp_path / "no-such-folder" / "p.json", "the folder", "does not exist"),
        (tmp_path, "is a folder", "give a file name inside it"),
    ]
    existing = tmp_path / "kept.json"
    existing.write_text("mine")
    cases.append((existing, "already exists", "--yes"))
    for path, first, then in cases:
        outcome = run_cli("progress", "--export", str(path))
        assert outcome.exit_code == 1 and first in outcome.stderr and then in outcome.stderr, outcome.stderr
    assert existing.read_text() == "mine"
    assert run_cli("progress", "--export", str(existing), "--yes").exit_code == 0
    assert json.loads(existing.read_text())["schema"] == portable.SCHEMA


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_an_unwritable_folder_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    outcome = run_cli("progress", "--export", str(locked / "p.json"))
    assert outcome.exit_code == 1 and "cannot be written to" in outcome.stderr


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(portable.os, "replace", full)
    with pytest.raises(portable.PortableError, match="No space left on device"):
        portable.write_json(tmp_path / "p.json", {"a": 1}, overwrite=False)
    assert list(tmp_path.iterdir()) == []


def test_reset_asks_first_and_keeps_a_backup(bank):
    with Store.open() as store:
        _history(store, bank, T0)
    declined = run_cli("progress", "--reset", stdin="n\n")
    assert declined.exit_code == 1 and "nothing was reset" in declined.stderr
    with Store.open() as store:
        assert len(store.attempts()) == 4
    accepted = run_cli("progress", "--reset", stdin="y\n")
    assert accepted.exit_code == 0, accepted.stderr
    assert "Forget 4 attempts, 3 cards, 1 bookmark and 3 kata events?" in _said(accepted)
    assert "your kata files stay" in _said(accepted)
    backup = next(Store.open().path.parent.glob("progress-backup-*.json"))
    assert str(backup) in _said(accepted)
    saved = json.loads(backup.read_text())
    assert len(saved["attempts"]) == 4 and len(saved["kata_events"]) == 3 and len(saved["kata_files"]) == 1
    with Store.open() as store:
        assert store.attempts() == [] and len(store.rows("demo_results")) == 1
        assert store.kata_events() == [] and store.kata_files() == {}
    assert "3 new kata events" in _said(run_cli("progress", "--import", str(backup)))
    with Store.open() as store:
        assert [e.event for e in store.kata_events()] == ["start", "hint", "check"]
        assert list(store.kata_files()) == ["ring-allreduce"]


def _filled_file(bank, count: int = 600) -> tuple[list[dict], bytes]:
    """A progress file of `count` attempts folded into the main file (no write-ahead log): its attempts
    as stored, and its bytes."""
    with Store.open() as store:
        questions = ("ddp-grad-sync", "ddp-replicated-state", "wrap-forward-order")
        for i in range(count):
            _answer(store, bank, questions[i % 3], i % 2 == 0, T0 + timedelta(seconds=i))
        path = store.path
        originals = store.rows("attempts")
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return originals, path.read_bytes()


def test_a_truncated_files_readable_attempts_are_recovered(bank, ddpfsdp_home):
    originals, data = _filled_file(bank)
    path = ddpfsdp_home / FILENAME
    path.write_bytes(data[: len(data) // 2])
    outcome = run_cli("quiz", "--plain", "--bank", str(bank.topics["ddp"].file.parent),
                      "--answers", str(bank.questions["ddp-grad-sync"].answer_file.parent), stdin="q\n")
    assert outcome.stdout.startswith("warning: The progress file"), outcome.stdout[:300]
    assert "ddpfsdp progress --recover" in outcome.stdout
    [moved] = damaged_files(ddpfsdp_home)

    recovered = run_cli("progress", "--recover")
    assert recovered.exit_code == 0, recovered.stderr
    with Store.open() as store:
        back = store.rows("attempts")
    assert 0 < len(back) < len(originals)
    # Each one is an attempt the file held, whole; the ones lost are the newest, past the cut.
    assert back == originals[: len(back)]
    assert moved.read_bytes() == data[: len(data) // 2]  # read, never changed
    again = run_cli("progress", "--recover")
    assert f"Brought back 0 attempts ({len(back)} already here)" in _said(again)


def test_a_file_whose_first_pages_are_overwritten_is_read_from_its_pages(bank, tmp_path):
    originals, data = _filled_file(bank)
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(data[:100] + b"\xff" * 4000 + data[4100:])  # the schema is gone
    readable = read_damaged(damaged)
    assert readable.how["attempts"] == "pages"
    assert readable.attempts == originals


def test_a_damaged_page_in_the_middle_is_stepped_over_through_sqlite(bank, tmp_path):
    originals, data = _filled_file(bank, count=1500)
    page_size = 4096
    # a page of the attempts table in the middle of it: the one holding the middle attempt's time
    middle = data.index(originals[len(originals) // 2]["answered_at"].encode()) // page_size
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(data[: middle * page_size] + b"\xaa" * page_size + data[(middle + 1) * page_size:])
    readable = read_damaged(damaged)
    assert readable.how["attempts"] == "SQLite"
    assert 0 < len(originals) - len(readable.attempts) < 100
    assert all(row in originals for row in readable.attempts)


def _kata_file(count: int = 900) -> tuple[list[dict], list[dict], bytes]:
    """A progress file of `count` kata events and a file for each kata, folded into the main file: its
    kata events and kata files as stored, and its bytes."""
    names = ("ring-allreduce", "sampler-indices", "ddp-buckets", "fsdp-unit")
    with Store.open() as store:
        for i, kata in enumerate(names):
            store.set_kata_file(kata, f"/home/learner/ddpfsdp-katas/{kata.replace('-', '_')}.py", at=T0 + timedelta(hours=i))
        for i in range(count):
            event = ("start", "hint", "check", "check", "solution", "gave_up")[i % 6]
            store.record_kata_event(names[i % 4], event, passed=(i % 4 == 0) if event == "check" else None,
                                    detail={"failed": ["equals_all_reduce"] * (i % 3), "i": i},
                                    at=T0 + timedelta(seconds=i))
        path = store.path
        events, files = store.rows("kata_events"), store.rows("kata_files")
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return events, files, path.read_bytes()


def test_a_truncated_files_readable_kata_events_are_recovered(ddpfsdp_home):
    events, files, data = _kata_file()
    path = ddpfsdp_home / FILENAME
    path.write_bytes(data[: len(data) // 2])
    Store.open().close()  # a command that writes moves the damaged file aside
    [moved] = damaged_files(ddpfsdp_home)

    recovered = run_cli("progress", "--recover")
    assert recovered.exit_code == 0, recovered.stderr
    with Store.open() as store:
        back = store.rows("kata_events")
        assert store.rows("kata_files") == files
    assert 0 < len(back) < len(events)
    assert back == events[: len(back)]  # whole events, the newest past the cut lost
    # SQLite refuses a file shorter than its header says (SQLITE_CORRUPT in btree.c's lockBtree), so it is
    # read from its pages.
    assert f"{len(back)} kata events and 0 saved results (from its pages)" in _said(recovered)
    assert moved.read_bytes() == data[: len(data) // 2]
    again = run_cli("progress", "--recover")
    assert f"0 kata events ({len(back)} already here)" in _said(again)


def test_a_file_whose_schema_is_overwritten_gives_back_its_kata_events_from_its_pages(tmp_path):
    events, files, data = _kata_file()
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(data[:100] + b"\xff" * 4000 + data[4100:])
    readable = read_damaged(damaged)
    assert readable.how["kata_events"] == readable.how["kata_files"] == "pages"
    assert readable.rows.kata_events == events
    assert sorted(readable.rows.kata_files, key=lambda row: row["kata"]) == files
    assert readable.rows.attempts == readable.rows.bookmarks == readable.rows.cards == []


def test_a_damaged_page_of_kata_events_is_stepped_over_through_sqlite(tmp_path):
    events, files, data = _kata_file()
    page_size = 4096
    middle = data.index(events[len(events) // 2]["at"].encode()) // page_size
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(data[: middle * page_size] + b"\xaa" * page_size + data[(middle + 1) * page_size:])
    readable = read_damaged(damaged)
    assert readable.how["kata_events"] == "SQLite"
    assert 0 < len(events) - len(readable.rows.kata_events) < 100
    assert all(row in events for row in readable.rows.kata_events)
    assert sorted(readable.rows.kata_files, key=lambda row: row["kata"]) == files


def test_a_file_from_before_katas_is_read_through_sqlite_with_no_kata_rows(tmp_path):
    from test_store import VERSION_1

    old = tmp_path / "old.sqlite3"
    db = sqlite3.connect(old)
    db.executescript(VERSION_1)
    db.close()
    readable = read_damaged(old)
    # The file's schema says it never had the kata tables: empty, not a reason to search its pages.
    assert readable.how == dict.fromkeys(("attempts", "cards", "demo_results", "bookmarks", "kata_events",
                                          "kata_files"), "SQLite")
    assert len(readable.attempts) == 1 and readable.rows.kata_events == readable.rows.kata_files == []


RECORDS = {  # one record of each table as its leaf cell decodes, rowid aliases NULL
    "attempts": [None, "ddp-grad-sync", "ddp", "single", '"all-reduce"', 1, 1.0, 9.0, 3, "practice",
                 "2025-01-06T09:00:00+00:00"],
    "cards": ["ddp-grad-sync", '{"state": 2}', "2025-01-08T09:00:00+00:00", "2025-01-06T09:00:00+00:00"],
    "demo_results": [None, "sampler", "{}", '{"checks": []}', "2025-01-06T09:00:00+00:00", "abc", "box"],
    "bookmarks": ["ddp-grad-sync", "2025-01-06T09:00:00+00:00"],
    "kata_events": [None, "ring-allreduce", "check", 0, '{"failed": ["no_deadlock"]}', "2025-01-06T09:00:00+00:00"],
    "kata_files": ["ring-allreduce", "/home/learner/ring_allreduce.py", "2025-01-06T09:00:00+00:00"],
}


NOT_KATA_ROWS = [
    RECORDS["cards"][:3],  # a card's record cut short: where a path would be, JSON; a time after it
    ["ring-allreduce", "2025-01-06T09:00:00+00:00", "2025-01-06T09:00:00+00:00"],  # a time where the path goes
    [None, "ring-allreduce", "won", None, "{}", "2025-01-06T09:00:00+00:00"],  # no kata event is called that
    [None, "ring-allreduce", "check", 7, "{}", "2025-01-06T09:00:00+00:00"],  # not a verdict
    [None, "ring-allreduce", "check", 1, "[]", "2025-01-06T09:00:00+00:00"],  # its detail is not an object
    RECORDS["kata_files"][:2],  # a kata's file less its time is no bookmark
]


def test_each_tables_record_is_recognised_as_its_own_and_no_other():
    for table, record in RECORDS.items():
        found, row = _recognise(record)
        assert found == table and list(row.values())[-1] == record[-1], (table, found)
    for record in NOT_KATA_ROWS:
        assert _recognise(record) == (None, None), record


def test_a_read_only_command_reports_a_damaged_file_first_and_leaves_it_alone(bank, ddpfsdp_home):
    originals, data = _filled_file(bank)
    path = ddpfsdp_home / FILENAME
    path.write_bytes(data[: len(data) // 2])
    outcome = run_cli("progress", env={"COLUMNS": "80"})
    assert outcome.exit_code == 0, outcome.stderr
    first = " ".join(outcome.stdout.split("Progress by topic")[0].split())
    assert first.startswith(f"warning: the progress file {path} is damaged")
    assert "left as it is" in first and "can still be read from it" in first and "ddpfsdp progress --recover" in first
    assert path.read_bytes() == data[: len(data) // 2]
    assert damaged_files(ddpfsdp_home) == [] and not (ddpfsdp_home / f"{FILENAME}-wal").exists()
    document = json.loads(run_cli("progress", "--json").stdout)
    assert "is damaged" in document["warning"] and 0 < document["attempts"] < len(originals)
    assert path.read_bytes() == data[: len(data) // 2]


def test_export_refuses_a_damaged_file_and_says_how_to_recover(ddpfsdp_home, tmp_path):
    ddpfsdp_home.mkdir(parents=True, exist_ok=True)
    (ddpfsdp_home / FILENAME).write_bytes(b"not a database " * 300)
    outcome = run_cli("progress", "--export", str(tmp_path / "p.json"))
    assert outcome.exit_code == 1 and "--recover" in outcome.stderr
    assert not (tmp_path / "p.json").exists() and damaged_files(ddpfsdp_home) == []


def test_recover_says_when_there_is_nothing_to_recover(ddpfsdp_home):
    outcome = run_cli("progress", "--recover")
    assert outcome.exit_code == 0 and "nothing to recover" in outcome.stdout
    missing = run_cli("progress", "--recover", str(ddpfsdp_home / "nope"))
    assert missing.exit_code == 2 and "is not a file" in missing.stderr


@pytest.mark.parametrize("argv, said", [
    (["progress", "--export", "a.json", "--import", "b.json"], "give one of them at a time"),
    (["progress", "--json", "--reset"], "--json prints the report"),
    (["progress", "--yes"], "--yes goes with --reset or --export"),
])
def test_progress_options_that_do_not_go_together_are_refused(argv, said):
    outcome = run_cli(*argv)
    assert outcome.exit_code == 2 and said in outcome.stderr
