"""The progress store: attempts and cards committed at once, damage moved aside, concurrent writers."""

from __future__ import annotations

import socket
import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, UTC
from pathlib import Path

import pytest

from ddpfsdp.quiz.store import FILENAME, Store, canonical_args, fingerprint

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def _attempt(store, qid="q-one", correct=True, at=T0, **extra):
    return store.record_attempt(
        question_id=qid, topic="ddp", kind="single", answer="all-reduce", correct=correct, score=float(correct),
        time_s=12.5, rating=3 if correct else 1, answered_at=at, **extra,
    )


def test_store_lives_in_the_data_dir_and_keeps_attempts(ddpfsdp_home):
    store = Store.open()
    assert store.path == ddpfsdp_home / FILENAME
    _attempt(store)
    _attempt(store, correct=False, at=T0 + timedelta(minutes=1), card_json='{"x": 1}', due=T0 + timedelta(days=1))
    store.close()
    # Another connection (another process would be the same) sees what was committed.
    reopened = Store.open()
    attempts = reopened.attempts()
    assert [a.correct for a in attempts] == [True, False]
    assert attempts[0].answer == "all-reduce" and attempts[0].time_s == 12.5
    assert attempts[0].answered_at == T0
    assert reopened.card_json("q-one") == '{"x": 1}'
    assert reopened.due_question_ids(T0 + timedelta(days=2)) == ["q-one"]
    assert reopened.due_question_ids(T0) == []
    mode = sqlite3.connect(reopened.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_each_answer_is_committed_when_given(ddpfsdp_home):
    store = Store.open()
    _attempt(store)
    # Read from a separate connection while the first is still open: nothing waits for a close.
    other = sqlite3.connect(ddpfsdp_home / FILENAME)
    assert other.execute("SELECT count(*) FROM attempts").fetchone()[0] == 1


def test_a_failed_write_leaves_no_half_attempt(ddpfsdp_home):
    store = Store.open()
    with pytest.raises(ValueError):
        # A naive time is refused inside the transaction, after the attempt row would have been written.
        _attempt(store, card_json="{}", due=datetime(2025, 1, 1))
    assert store.attempts() == []
    assert store.card_json("q-one") is None


def test_a_transaction_opened_inside_another_joins_it(ddpfsdp_home):
    store = Store.open()
    with store.transaction():
        _attempt(store, qid="kept", card_json="{}", due=T0)  # its own transaction joins the open one
    with pytest.raises(RuntimeError):
        with store.transaction():
            _attempt(store, qid="undone", card_json="{}", due=T0)
            raise RuntimeError("after the attempt was written, before the outer transaction commits")
    assert [a.question_id for a in store.attempts()] == ["kept"]
    assert store.card_json("kept") == "{}" and store.card_json("undone") is None


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_file_is_moved_aside_and_a_fresh_one_started(ddpfsdp_home, damage):
    store = Store.open()
    for i in range(200):
        _attempt(store, qid=f"q-{i}")
    store.close()
    path = ddpfsdp_home / FILENAME
    # Fold the WAL into the main file so the damage below hits the real data.
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    original = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"this is not a database" * 100)
    else:
        path.write_bytes(original[:100] + b"\xff" * 4000 + original[4100:])
    damaged_bytes = path.read_bytes()

    store = Store.open()
    assert store.warning and "moved to" in store.warning and "fresh" in store.warning
    assert store.attempts() == []
    _attempt(store)
    assert len(store.attempts()) == 1
    moved = list(ddpfsdp_home.glob(f"{FILENAME}.damaged-*"))
    assert len([m for m in moved if not m.name.endswith(("-wal", "-shm"))]) == 1
    # Nothing is deleted: the damaged file is there byte for byte.
    assert [m for m in moved if m.read_bytes() == damaged_bytes]


_WRITER = """
import sys
from datetime import datetime, timezone
from ddpfsdp.quiz.store import Store
store = Store.open()
for i in range(int(sys.argv[2])):
    store.record_attempt(question_id=f"{sys.argv[1]}-{i}", topic="ddp", kind="single", answer=i,
        correct=True, score=1.0, time_s=1.0, rating=3, answered_at=datetime.now(timezone.utc),
        card_json="{}", due=datetime.now(timezone.utc))
    if i % 10 == 0:
        store.save_demo_result("sampler", [], {"env": {"hostname": "h"}, "i": i})
store.close()
"""


def test_two_processes_writing_at_once_do_not_corrupt_it(ddpfsdp_home):
    Store.open().close()
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, name, "60"], stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    store = Store.open()
    assert store.warning is None
    attempts = store.attempts()
    assert len(attempts) == 120
    assert {a.question_id for a in attempts} == {f"{w}-{i}" for w in "ab" for i in range(60)}
    assert len(store.cards()) == 120
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_demo_results_keyed_without_launch_flags_and_marked_here():
    store = Store.memory()
    env = {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": None, "hostname": socket.gethostname()}
    import os

    env["cpu_count"] = os.cpu_count()
    assert store.last_demo_result("wrap", ["--model", "tiny"]) is None
    store.save_demo_result("wrap", ["--model", "tiny", "--procs", "2"], {"demo": "wrap", "env": env, "n": 1}, saved_at=T0)
    store.save_demo_result("wrap", ["--model", "small"], {"demo": "wrap", "env": env, "n": 2}, saved_at=T0)
    saved = store.last_demo_result("wrap", ["--model", "tiny"])
    assert saved.result["n"] == 1 and saved.saved_at == T0 and saved.here
    assert saved.hostname == socket.gethostname()
    assert saved.fingerprint == fingerprint(env)
    # A newer result from another machine does not hide the one measured here.
    elsewhere = dict(env, hostname="gpu-node-7", device_names=["NVIDIA H100 80GB HBM3"] * 8)
    store.save_demo_result("wrap", ["--model", "tiny"], {"demo": "wrap", "env": elsewhere, "n": 3}, saved_at=T0)
    assert store.last_demo_result("wrap", ["--model", "tiny"]).result["n"] == 1
    store2 = Store.memory()
    store2.save_demo_result("wrap", ["--model", "tiny"], {"demo": "wrap", "env": elsewhere, "n": 3}, saved_at=T0)
    other = store2.last_demo_result("wrap", ["--gpus", "8", "--model", "tiny", "--json"])
    assert other.result["n"] == 3 and not other.here and other.hostname == "gpu-node-7"


def test_canonical_args():
    assert canonical_args(["--model", "tiny", "--procs", "2", "--json", "--gpus=4", "--force"]) == ["--model", "tiny"]


def test_a_number_is_one_value_however_it_is_spelled():
    # The CLI saves --bucket-mb 1 as click parsed it ("1.0"); the bank links the demo as typed ("1").
    assert canonical_args(["--model", "tiny", "--bucket-mb", "1.0"]) == ["--model", "tiny", "--bucket-mb", "1"]
    assert canonical_args(["--bucket-mb", "0.5", "--lr", "1e-3", "--world", "64"]) == ["--bucket-mb", "0.5", "--lr", "0.001", "--world", "64"]
    with Store.open() as store:
        store.save_demo_result("ddp", ["--model", "tiny", "--bucket-mb", "1.0"], {"demo": "ddp"})
        assert store.last_demo_result("ddp", ["--model", "tiny", "--bucket-mb", "1"]) is not None


def _on(device: str, n: int) -> dict:
    return {"demo": "x", "config": {"device": device}, "n": n}


def test_a_result_is_found_however_its_options_were_spelled():
    """Keyed by what was asked: defaults given or left out, any order, FSDP1's names, launch flags."""
    from ddpfsdp.demos.train.spec import RunSpec

    store = Store.memory()
    store.save_demo_result("wrap", [], _on("cpu", 1))  # `ddpfsdp demo wrap` on CPU trains the tiny model
    for words in (["--model", "tiny"], ["--seed", "0", "--model=tiny", "--procs", "2"], ["--batch-size", "4"]):
        assert store.last_demo_result("wrap", words).result["n"] == 1, words
    assert store.last_demo_result("wrap", ["--model", "small"]) is None  # what a GPU run of `wrap` trains
    asked = RunSpec.for_demo("fsdp", {"model": "tiny", "sharding": "SHARD_GRAD_OP", "steps": 6})
    store.save_demo_result("fsdp", asked, _on("cpu", 2))  # the CLI saves the spec it ran
    found = store.last_demo_result("fsdp", ["--steps", "6", "--lr", "1e-3", "--sharding", "grad-op", "--wrap", "block",
                                            "--model", "tiny", "--json"])
    assert found.result["n"] == 2
    assert store.last_demo_result("fsdp", ["--steps", "6", "--model", "tiny"]) is None  # full, not grad-op
    # Without --steps a CPU run takes 8: the run asked with --steps 8 is that run.
    store.save_demo_result("ddp", ["--model", "tiny"], _on("cpu", 3))
    assert store.last_demo_result("ddp", ["--model", "tiny", "--steps", "8"]).result["n"] == 3
    assert store.last_demo_result("ddp", ["--model", "tiny", "--steps", "20"]) is None


def test_results_saved_under_the_old_word_keys_are_found(tmp_path):
    path = tmp_path / "old.sqlite3"
    Store.open(path).close()
    db = sqlite3.connect(path)
    rows = [("wrap", "[]", _on("cpu", 1)), ("fault", '["desync"]', _on("cpu", 2)),
            ("ddp", '["--no-such-option"]', _on("cpu", 3))]
    db.executemany("INSERT INTO demo_results (demo, args_json, result_json, saved_at, fingerprint, hostname)"
                   " VALUES (?, ?, ?, ?, 'f', 'h')", [(d, a, json.dumps(r), T0.isoformat()) for d, a, r in rows])
    db.commit()
    db.close()
    with Store.open(path) as store:
        assert store.last_demo_result("wrap", ["--model", "tiny"]).result["n"] == 1
        assert store.last_demo_result("fault", ["desync"]).result["n"] == 2
        assert store.last_demo_result("ddp", ["--no-such-option"]).result["n"] == 3  # kept as it was


def test_store_imports_neither_torch_nor_textual():
    code = "import sys, ddpfsdp.quiz.store; print(','.join(m for m in ('torch', 'textual') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stderr


# The tables of a version-1 file, as the store wrote them before katas.
VERSION_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, question_id TEXT NOT NULL, topic TEXT NOT NULL,
    kind TEXT NOT NULL, answer_json TEXT NOT NULL, correct INTEGER NOT NULL, score REAL NOT NULL, time_s REAL NOT NULL,
    rating INTEGER NOT NULL, mode TEXT NOT NULL DEFAULT 'practice', answered_at TEXT NOT NULL);
CREATE TABLE cards (question_id TEXT PRIMARY KEY, card_json TEXT NOT NULL, due TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE demo_results (id INTEGER PRIMARY KEY AUTOINCREMENT, demo TEXT NOT NULL, args_json TEXT NOT NULL,
    result_json TEXT NOT NULL, saved_at TEXT NOT NULL, fingerprint TEXT NOT NULL, hostname TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO attempts (question_id, topic, kind, answer_json, correct, score, time_s, rating, mode, answered_at)
    VALUES ('ddp-grad-sync', 'ddp', 'single', '"all-reduce"', 1, 1.0, 9.0, 3, 'practice', '2025-01-06T09:00:00+00:00');
"""


def test_a_version_1_file_gains_the_kata_tables_and_keeps_its_attempts(ddpfsdp_home):
    ddpfsdp_home.mkdir(parents=True)
    old = sqlite3.connect(ddpfsdp_home / FILENAME)
    old.executescript(VERSION_1)
    old.close()
    with Store.open() as store:
        assert store.warning is None
        assert store.schema_version() == 2
        assert [a.question_id for a in store.attempts()] == ["ddp-grad-sync"]
        store.record_kata_event("ring-allreduce", "check", passed=False, detail={"failed": ["no_deadlock"]}, at=T0)
        store.set_kata_file("ring-allreduce", ddpfsdp_home / "ring_allreduce.py", at=T0)
    with Store.open() as again:
        events = again.kata_events("ring-allreduce")
        assert [(e.event, e.passed, e.detail, e.at) for e in events] == [("check", False, {"failed": ["no_deadlock"]}, T0)]
        assert again.kata_files() == {"ring-allreduce": ddpfsdp_home / "ring_allreduce.py"}


def test_a_newer_files_version_is_never_lowered(ddpfsdp_home):
    with Store.open() as store:
        with store.transaction() as db:
            db.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    with Store.open() as store:
        assert store.schema_version() == 7


def test_an_unknown_kata_event_is_refused():
    store = Store.memory()
    with pytest.raises(ValueError, match="unknown kata event"):
        store.record_kata_event("ring-allreduce", "won")
    assert store.kata_events() == []


def _katas_on(store, path: str, start: datetime, verdict: bool) -> None:
    """A kata started, hinted and checked on one machine."""
    store.set_kata_file("ring-allreduce", path, at=start)
    store.record_kata_event("ring-allreduce", "start", detail={"path": path}, at=start)
    store.record_kata_event("ring-allreduce", "hint", detail={"hint": 1}, at=start + timedelta(minutes=1))
    store.record_kata_event("ring-allreduce", "check", passed=verdict, detail={"failed": []}, at=start + timedelta(minutes=2))


def test_merging_kata_rows_adds_each_event_once_and_keeps_the_file_started_last():
    laptop, desktop = Store.memory(), Store.memory()
    _katas_on(laptop, "/laptop/ring_allreduce.py", T0, False)
    _katas_on(desktop, "/desktop/ring_allreduce.py", T0 + timedelta(seconds=30), True)
    # The desktop had imported the laptop's start once already: the same kata, event and time is one event.
    desktop.record_kata_event("ring-allreduce", "start", detail={"path": "/laptop/ring_allreduce.py"}, at=T0)

    merged = laptop.merge(desktop.all_rows())
    assert (merged.kata_events, merged.kata_events_known, merged.kata_files) == (3, 1, 1)
    assert laptop.kata_files() == {"ring-allreduce": Path("/desktop/ring_allreduce.py")}
    # In the order they happened, however they arrived: the desktop's events fall between the laptop's.
    assert [(e.event, e.at, e.passed) for e in laptop.kata_events()] == [
        ("start", T0, None), ("start", T0 + timedelta(seconds=30), None), ("hint", T0 + timedelta(minutes=1), None),
        ("hint", T0 + timedelta(minutes=1, seconds=30), None), ("check", T0 + timedelta(minutes=2), False),
        ("check", T0 + timedelta(minutes=2, seconds=30), True)]
    assert [r["at"] for r in laptop.rows("kata_events")] == [e.at.isoformat() for e in laptop.kata_events()]

    again = laptop.merge(desktop.all_rows())
    assert (again.kata_events, again.kata_events_known, again.kata_files) == (0, 4, 0)
    # The other way round, the laptop's file was started earlier: the desktop keeps its own.
    back = desktop.merge(laptop.all_rows())
    assert back.kata_files == 0 and desktop.kata_files() == {"ring-allreduce": Path("/desktop/ring_allreduce.py")}
    assert desktop.rows("kata_events") == laptop.rows("kata_events")


def test_reset_forgets_katas_as_it_forgets_attempts():
    store = Store.memory()
    _attempt(store, card_json="{}", due=T0)
    _katas_on(store, "/home/me/ring_allreduce.py", T0, True)
    store.save_demo_result("sampler", [], {"env": {"hostname": "h"}}, saved_at=T0)
    store.reset()
    assert store.attempts() == [] and store.kata_events() == [] and store.kata_files() == {}
    assert len(store.rows("demo_results")) == 1
