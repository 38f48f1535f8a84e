"""The progress store: one SQLite file in the data directory.

It holds every attempt, each question's FSRS card, the questions bookmarked, saved demo results with a
fingerprint of the machine that produced them, and what a learner did with each kata (started it where,
checked it, took a hint, gave up). Each answer is committed in its own transaction the moment it is given,
so a crash loses nothing already answered. The file is in WAL mode with a busy timeout, so two app
instances (or the app and `ddpfsdp demo`) can write at once without corrupting it. A file that is
not a readable database is moved aside, never deleted, and a fresh one is started with a warning.

No torch or textual here: the CLI's `ddpfsdp demo` saves results through it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, Mapping, TypedDict

from ddpfsdp.demos.result.schema import RENAMED, DemoResult, Env, JsonObject, upgraded
from ddpfsdp.quiz.paths import data_dir

log = logging.getLogger(__name__)

FILENAME = "ddpfsdp.sqlite3"
SCHEMA_VERSION = 2  # 2: kata_events and kata_files; a version-1 file gains them when first opened
BUSY_TIMEOUT_S = 10.0
# How a demo is launched does not change what it measures about the model, so results are keyed by
# what the demo was asked (`demos.launch.request.key`: the options that differ from their defaults),
# without its launch options; the fingerprint records where it ran. Keys written before that were the
# command line's words less these flags (a JSON list); they are re-keyed when first read.
_LEGACY_LAUNCH_FLAGS = {"--procs": True, "--gpus": True, "--json": False, "--force": False}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    question_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    kind TEXT NOT NULL,
    answer_json TEXT NOT NULL,
    correct INTEGER NOT NULL,
    score REAL NOT NULL,
    time_s REAL NOT NULL,
    rating INTEGER NOT NULL,
    mode TEXT NOT NULL DEFAULT 'practice',
    answered_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_question ON attempts (question_id, id);
CREATE TABLE IF NOT EXISTS cards (
    question_id TEXT PRIMARY KEY,
    card_json TEXT NOT NULL,
    due TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS demo_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    demo TEXT NOT NULL,
    args_json TEXT NOT NULL,
    result_json TEXT NOT NULL,
    saved_at TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    hostname TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS demo_results_key ON demo_results (demo, args_json, id);
CREATE TABLE IF NOT EXISTS bookmarks (
    question_id TEXT PRIMARY KEY,
    marked_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kata_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kata TEXT NOT NULL,
    event TEXT NOT NULL,
    passed INTEGER,
    detail_json TEXT NOT NULL DEFAULT '{}',
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kata_events_kata ON kata_events (kata, id);
CREATE TABLE IF NOT EXISTS kata_files (
    kata TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    started_at TEXT NOT NULL
);
"""
KATA_EVENTS = ("start", "check", "hint", "solution", "gave_up")


TABLES = ("attempts", "cards", "demo_results", "bookmarks", "kata_events", "kata_files")


class StoreError(Exception):
    """The store cannot be opened or written; the message says what to do."""


class DamagedStore(StoreError):
    """The progress file is not a readable database, and whoever opened it asked that it stay where it is."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"the progress file {path} is damaged ({reason})")


RECOVER_COMMAND = "ddpfsdp progress --recover"


class AttemptRow(TypedDict):
    """An attempt as its table holds it (without its local id)."""

    question_id: str
    topic: str
    kind: str
    answer_json: str
    correct: int
    score: float
    time_s: float
    rating: int
    mode: str
    answered_at: str  # ISO 8601 in UTC, as every time in the store


class CardRow(TypedDict):
    question_id: str
    card_json: str
    due: str
    updated_at: str


class BookmarkRow(TypedDict):
    question_id: str
    marked_at: str


class ResultRow(TypedDict):
    """A saved demo result as its table holds it (without its local id)."""

    demo: str
    args_json: str
    result_json: str
    saved_at: str
    fingerprint: str
    hostname: str


class KataEventRow(TypedDict):
    """What a learner did with a kata, as its table holds it (without its local id)."""

    kata: str
    event: str  # one of KATA_EVENTS
    passed: int | None  # a check's verdict (1 or 0); None for the other events
    detail_json: str
    at: str


class KataFileRow(TypedDict):
    kata: str
    path: str  # the learner's file on the machine that started the kata
    started_at: str


Row = AttemptRow | CardRow | BookmarkRow | ResultRow | KataEventRow | KataFileRow


@dataclass
class StoreRows:
    """Rows of the store's tables, as `Store.rows` gives them and `Store.merge` takes them; a table by
    name is `getattr(rows, table)`."""

    attempts: list[AttemptRow] = field(default_factory=list)
    cards: list[CardRow] = field(default_factory=list)
    demo_results: list[ResultRow] = field(default_factory=list)
    bookmarks: list[BookmarkRow] = field(default_factory=list)
    kata_events: list[KataEventRow] = field(default_factory=list)
    kata_files: list[KataFileRow] = field(default_factory=list)


@dataclass(frozen=True)
class Merged:
    """What a merge added: rows new to this store, and rows it already had (or held newer)."""

    attempts: int = 0
    attempts_known: int = 0
    cards: int = 0
    cards_kept: int = 0  # this store's card was as new or newer
    bookmarks: int = 0
    demo_results: int = 0
    kata_events: int = 0
    kata_events_known: int = 0
    kata_files: int = 0  # new here, or started later than this store's record of the kata's file


@dataclass(frozen=True)
class Attempt:
    id: int
    question_id: str
    topic: str
    kind: str
    answer: Any
    correct: bool
    score: float
    time_s: float
    rating: int
    mode: str
    answered_at: datetime


@dataclass(frozen=True)
class KataEvent:
    id: int
    kata: str
    event: str  # one of KATA_EVENTS
    passed: bool | None  # a check's verdict; None for the other events
    detail: JsonObject
    at: datetime


@dataclass(frozen=True)
class SavedResult:
    result: dict[str, Any]  # the result's JSON as saved, upgraded to this schema (`schema.as_result` types it)
    saved_at: datetime
    fingerprint: str
    hostname: str
    here: bool  # produced on this machine (same hostname and hardware fingerprint)


def utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("times in the store are timezone-aware (UTC)")
    return moment.astimezone(UTC).isoformat()


def canonical_args(args: Sequence[str]) -> list[str]:
    """The key results were saved under before they were keyed by what was asked: the words less the
    launch flags, numbers in one spelling. Still the key of a demo that parses its own command line
    (the failure lab), and of words no demo takes."""
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in _LEGACY_LAUNCH_FLAGS:
            skip_value = _LEGACY_LAUNCH_FLAGS[name] and "=" not in arg
            continue
        kept.append(_number_spelling(arg))
    return kept


DEVICES = ("cpu", "cuda")  # the devices whose defaults a saved key fills in


def demo_keys(demo: str, asked: Any, device: str | None = None) -> list[str]:
    """The keys a demo's result is found by (`device` None: those of every device, and the one that
    leaves the device's part open) or saved under (the
    device it ran on; another word, such as "fake", leaves what the device decides open): the JSON of
    `request.key` for what was asked, given as a command line (its words, launch options among them or
    not) or as the value the demo runs (a RunSpec or a concept demo's options). So on CPU `wrap` and
    `wrap --model tiny --procs 2` share one key. Words no demo takes are keyed as given."""
    import click

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request

    words = isinstance(asked, (list, tuple))
    as_given = [json.dumps(canonical_args(asked) if words else request.options_of(asked), sort_keys=True)]
    try:
        entry = registry.get(demo)
        if entry.runner:  # the failure lab parses its own words
            return as_given
        value = request.from_command_line(entry, asked) if words else asked
        devices = [device] if device in DEVICES else [None] if device else [*DEVICES, None]
        return list(dict.fromkeys(json.dumps(request.key(entry, value, each), sort_keys=True) for each in devices))
    except (ValueError, click.ClickException):
        return as_given


def _device_of(result: Any) -> str | None:
    config = result.get("config") if isinstance(result, dict) else None
    return config.get("device") if isinstance(config, dict) else None


def _number_spelling(arg: str) -> str:
    if arg.startswith("-") and not arg[1:2].isdigit():
        return arg
    try:
        value = float(arg)
    except ValueError:
        return arg
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _env(env: Env | Mapping[str, Any] | None) -> Env:
    return Env.from_json(env) if isinstance(env, (Env, Mapping)) else Env()


def fingerprint(env: Env | Mapping[str, Any] | None, hostname: str | None = None) -> str:
    """A short hash of where a result was measured: host, devices and CPU count.

    It is derived from the result's own `env`, so it describes the machine that produced the numbers.
    """
    env = _env(env)
    host = hostname or env.hostname or socket.gethostname()
    devices = env.device_names or []
    key = json.dumps({"host": host, "devices": sorted(map(str, devices)), "cpus": env.cpu_count}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class Store:
    def __init__(self, connection: sqlite3.Connection, path: Path | None, warning: str | None = None):
        self._db = connection
        self._lock = threading.RLock()
        self.path = path
        # Set when the file on disk was damaged and moved aside; the app and CLI show it to the user.
        self.warning = warning
        self._rekeyed = False

    # --- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None, *, move_damaged: bool = True) -> Store:
        """Open (or create) the store; a damaged file is moved aside with a warning, never deleted.

        A command that only reads (`ddpfsdp progress`) passes `move_damaged=False`: a damaged file then
        stays where it is and DamagedStore is raised, so reading never changes what is on disk.
        """
        path = Path(path) if path is not None else data_dir() / FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return cls(cls._connect(path), path)
        except sqlite3.DatabaseError as error:
            if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
                raise StoreError(f"{path} is locked by another program; close it and try again") from None
            if isinstance(error, sqlite3.OperationalError) and "readonly" in str(error):
                # A file that cannot be written is not damaged: moving it aside would hide every answer in it.
                raise StoreError(f"the progress file {path} is read-only ({error}); nothing was changed. Make it "
                                 "writable, or set DDPFSDP_HOME to a folder you can write to") from None
            if not move_damaged:
                raise DamagedStore(path, str(error)) from None
            try:
                moved = cls._move_aside(path)
            except OSError as failure:
                raise StoreError(f"the progress file {path} cannot be read ({error}) and cannot be moved aside "
                                 f"({failure.strerror}); nothing was changed. Set DDPFSDP_HOME to a folder you "
                                 "can write to") from None
            # Said once, by whoever opened the store (the CLI, the plain modes, the app), not logged as well.
            warning = (
                f"The progress file {path} was damaged ({error}). It was moved to {moved.name} "
                "and a fresh one was started; your earlier attempts are in the moved file. Bring back the "
                f"ones that can still be read with:\n  {RECOVER_COMMAND}"
            )
            try:
                return cls(cls._connect(path), path, warning)
            except sqlite3.DatabaseError as again:
                raise StoreError(f"cannot create a progress file at {path}: {again}") from None

    @classmethod
    def memory(cls) -> Store:
        return cls(cls._connect(":memory:"), None)

    @staticmethod
    def _connect(path: Path | str) -> sqlite3.Connection:
        # isolation_level=None: transactions are opened explicitly (BEGIN IMMEDIATE) around each write.
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if str(path) != ":memory:":
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    log.warning("SQLite journal mode is %s, not WAL", mode)
            db.execute("PRAGMA synchronous = NORMAL")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    db.execute(statement)
                # The tables above are created where they are missing, so an older file is migrated by opening it;
                # its version is raised to this one's (never lowered by an older program's file).
                db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE"
                           " SET value = excluded.value WHERE CAST(meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)",
                           (str(SCHEMA_VERSION),))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            # Any table we rely on must be readable; a page-level fault often shows only here.
            for table in TABLES:
                db.execute(f"SELECT count(*) FROM {table}").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _move_aside(path: Path) -> Path:
        stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
        target = path.with_name(f"{path.name}.damaged-{stamp}")
        counter = 1
        while target.exists():
            target = path.with_name(f"{path.name}.damaged-{stamp}-{counter}")
            counter += 1
        os.replace(path, target)
        for suffix in ("-wal", "-shm"):
            sidecar = path.with_name(path.name + suffix)
            if sidecar.exists():
                os.replace(sidecar, target.with_name(target.name + suffix))
        return target

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE takes the write lock up front so two writers queue, not fail.

        Opened inside another on this thread (the lock is this thread's then), it joins that one: what is
        read in it and what is written after commit together, or not at all.
        """
        with self._lock:
            if self._db.in_transaction:
                yield self._db
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                raise StoreError(f"the progress file is busy ({error}); try again in a moment") from None
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cursor = self._db.execute(sql, params)
            cursor.row_factory = sqlite3.Row
            return cursor.fetchall()

    # --- attempts and cards ------------------------------------------------------------------------

    def record_attempt(
        self,
        *,
        question_id: str,
        topic: str,
        kind: str,
        answer: Any,
        correct: bool,
        score: float,
        time_s: float,
        rating: int,
        answered_at: datetime,
        card_json: str | None = None,
        due: datetime | None = None,
        mode: str = "practice",
    ) -> int:
        """Save an attempt and, in the same transaction, the question's new card state."""
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO attempts (question_id, topic, kind, answer_json, correct, score, time_s, rating, mode, answered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (question_id, topic, kind, json.dumps(answer), int(correct), float(score), float(time_s), int(rating), mode, _iso(answered_at)),
            )
            if card_json is not None:
                assert due is not None
                db.execute(
                    "INSERT INTO cards (question_id, card_json, due, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (question_id) DO UPDATE SET card_json = excluded.card_json,"
                    " due = excluded.due, updated_at = excluded.updated_at",
                    (question_id, card_json, _iso(due), _iso(answered_at)),
                )
            return int(cursor.lastrowid)

    def attempts(self, question_id: str | None = None) -> list[Attempt]:
        """Attempts in the order they were answered (imported ones among them, by their own times)."""
        # ISO times in UTC sort as text in time order; the id orders answers given in the same instant.
        if question_id is None:
            rows = self._query("SELECT * FROM attempts ORDER BY answered_at, id")
        else:
            rows = self._query("SELECT * FROM attempts WHERE question_id = ? ORDER BY answered_at, id", (question_id,))
        return [
            Attempt(
                id=row["id"],
                question_id=row["question_id"],
                topic=row["topic"],
                kind=row["kind"],
                answer=json.loads(row["answer_json"]),
                correct=bool(row["correct"]),
                score=row["score"],
                time_s=row["time_s"],
                rating=row["rating"],
                mode=row["mode"],
                answered_at=datetime.fromisoformat(row["answered_at"]),
            )
            for row in rows
        ]

    def card_json(self, question_id: str) -> str | None:
        rows = self._query("SELECT card_json FROM cards WHERE question_id = ?", (question_id,))
        return rows[0]["card_json"] if rows else None

    def cards(self) -> dict[str, tuple[str, datetime]]:
        """question id -> (card JSON, due)."""
        rows = self._query("SELECT question_id, card_json, due FROM cards")
        return {row["question_id"]: (row["card_json"], datetime.fromisoformat(row["due"])) for row in rows}

    def due_question_ids(self, now: datetime) -> list[str]:
        rows = self._query("SELECT question_id FROM cards WHERE due <= ? ORDER BY due", (_iso(now),))
        return [row["question_id"] for row in rows]

    # --- moving progress between stores ------------------------------------------------------------

    def rows(self, table: str) -> list[Row]:
        """Every row of `table` as stored (attempts, demo results and kata events without their local ids)."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; the store has {', '.join(TABLES)}")
        order = {"attempts": "answered_at, id", "cards": "question_id", "demo_results": "id",
                 "bookmarks": "marked_at, question_id", "kata_events": "at, id", "kata_files": "kata"}[table]
        rows = [dict(row) for row in self._query(f"SELECT * FROM {table} ORDER BY {order}")]
        for row in rows:
            row.pop("id", None)
        return rows

    def all_rows(self) -> StoreRows:
        return StoreRows(**{table: self.rows(table) for table in TABLES})

    def merge(self, rows: StoreRows) -> Merged:
        """Add rows from another store (their columns as `rows` gives them), in one transaction.

        An attempt is the same attempt when its question and the instant it was answered match: it is
        never added twice. A card is replaced only by a newer one (its `updated_at`); a bookmark keeps
        its first mark; a demo result is the same when its demo, key, time and machine match. A kata event
        is the same event when its kata, event and time match: it is never added twice either. Of two
        records of where a kata's file is, the one started later is kept.
        """
        counts = dict.fromkeys(("attempts", "attempts_known", "cards", "cards_kept", "bookmarks", "demo_results",
                                "kata_events", "kata_events_known", "kata_files"), 0)
        with self.transaction() as db:
            for row in rows.attempts:
                known = db.execute("SELECT 1 FROM attempts WHERE question_id = ? AND answered_at = ?",
                                   (row["question_id"], row["answered_at"])).fetchone()
                if known:
                    counts["attempts_known"] += 1
                    continue
                db.execute(
                    "INSERT INTO attempts (question_id, topic, kind, answer_json, correct, score, time_s, rating, mode,"
                    " answered_at) VALUES (:question_id, :topic, :kind, :answer_json, :correct, :score, :time_s, :rating,"
                    " :mode, :answered_at)", dict(row))
                counts["attempts"] += 1
            for row in rows.cards:
                here = db.execute("SELECT updated_at FROM cards WHERE question_id = ?", (row["question_id"],)).fetchone()
                if here is not None and datetime.fromisoformat(here[0]) >= datetime.fromisoformat(row["updated_at"]):
                    counts["cards_kept"] += 1
                    continue
                db.execute("INSERT INTO cards (question_id, card_json, due, updated_at) VALUES (:question_id,"
                           " :card_json, :due, :updated_at) ON CONFLICT (question_id) DO UPDATE SET card_json ="
                           " excluded.card_json, due = excluded.due, updated_at = excluded.updated_at", dict(row))
                counts["cards"] += 1
            for row in rows.bookmarks:
                here = db.execute("SELECT marked_at FROM bookmarks WHERE question_id = ?", (row["question_id"],)).fetchone()
                if here is None or datetime.fromisoformat(here[0]) > datetime.fromisoformat(row["marked_at"]):
                    counts["bookmarks"] += here is None
                    db.execute("INSERT OR REPLACE INTO bookmarks (question_id, marked_at) VALUES (:question_id,"
                               " :marked_at)", dict(row))
            for row in rows.demo_results:
                known = db.execute("SELECT 1 FROM demo_results WHERE demo = ? AND args_json = ? AND saved_at = ? AND"
                                   " fingerprint = ?", (row["demo"], row["args_json"], row["saved_at"],
                                                        row["fingerprint"])).fetchone()
                if not known:
                    db.execute("INSERT INTO demo_results (demo, args_json, result_json, saved_at, fingerprint, hostname)"
                               " VALUES (:demo, :args_json, :result_json, :saved_at, :fingerprint, :hostname)", dict(row))
                    counts["demo_results"] += 1
            for row in rows.kata_events:
                known = db.execute("SELECT 1 FROM kata_events WHERE kata = ? AND event = ? AND at = ?",
                                   (row["kata"], row["event"], row["at"])).fetchone()
                if known:
                    counts["kata_events_known"] += 1
                    continue
                db.execute("INSERT INTO kata_events (kata, event, passed, detail_json, at) VALUES (:kata, :event,"
                           " :passed, :detail_json, :at)", dict(row))
                counts["kata_events"] += 1
            for row in rows.kata_files:
                here = db.execute("SELECT started_at FROM kata_files WHERE kata = ?", (row["kata"],)).fetchone()
                if here is not None and datetime.fromisoformat(here[0]) >= datetime.fromisoformat(row["started_at"]):
                    continue
                db.execute("INSERT INTO kata_files (kata, path, started_at) VALUES (:kata, :path, :started_at)"
                           " ON CONFLICT (kata) DO UPDATE SET path = excluded.path, started_at = excluded.started_at",
                           dict(row))
                counts["kata_files"] += 1
        return Merged(**counts)

    def reset(self) -> None:
        """Forget every attempt, card, bookmark and kata event and where each kata's file is (the files
        themselves stay), in one transaction; saved demo results stay."""
        with self.transaction() as db:
            for table in ("attempts", "cards", "bookmarks", "kata_events", "kata_files"):
                db.execute(f"DELETE FROM {table}")

    # --- bookmarks ---------------------------------------------------------------------------------

    def add_bookmark(self, question_id: str, marked_at: datetime) -> bool:
        """Mark a question; False when it was already marked (its first mark's time is kept)."""
        with self.transaction() as db:
            cursor = db.execute("INSERT OR IGNORE INTO bookmarks (question_id, marked_at) VALUES (?, ?)",
                                (question_id, _iso(marked_at)))
            return cursor.rowcount > 0

    def remove_bookmark(self, question_id: str) -> bool:
        """Unmark a question; False when it was not marked."""
        with self.transaction() as db:
            return db.execute("DELETE FROM bookmarks WHERE question_id = ?", (question_id,)).rowcount > 0

    def bookmarks(self) -> dict[str, datetime]:
        """question id -> when it was marked, oldest mark first."""
        rows = self._query("SELECT question_id, marked_at FROM bookmarks ORDER BY marked_at, question_id")
        return {row["question_id"]: datetime.fromisoformat(row["marked_at"]) for row in rows}

    # --- katas ---------------------------------------------------------------------------------------

    def schema_version(self) -> int:
        rows = self._query("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0]["value"]) if rows else 0

    def record_kata_event(self, kata: str, event: str, *, passed: bool | None = None,
                          detail: Mapping[str, Any] | None = None, at: datetime | None = None) -> int:
        """One thing a learner did with a kata: start, check (passed or not), hint, solution, gave_up."""
        if event not in KATA_EVENTS:
            raise ValueError(f"unknown kata event {event!r}; one of {', '.join(KATA_EVENTS)}")
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO kata_events (kata, event, passed, detail_json, at) VALUES (?, ?, ?, ?, ?)",
                (kata, event, None if passed is None else int(passed), json.dumps(dict(detail or {})),
                 _iso(at or utc_now())))
            return int(cursor.lastrowid)

    def kata_events(self, kata: str | None = None) -> list[KataEvent]:
        """Events in the order they happened (imported ones among them, by their own times)."""
        if kata is None:
            rows = self._query("SELECT * FROM kata_events ORDER BY at, id")
        else:
            rows = self._query("SELECT * FROM kata_events WHERE kata = ? ORDER BY at, id", (kata,))
        return [KataEvent(row["id"], row["kata"], row["event"], None if row["passed"] is None else bool(row["passed"]),
                          json.loads(row["detail_json"]), datetime.fromisoformat(row["at"])) for row in rows]

    def set_kata_file(self, kata: str, path: Path | str, at: datetime | None = None) -> None:
        """Where the learner's file of this kata is (what `kata check NAME` reads without a FILE)."""
        with self.transaction() as db:
            db.execute("INSERT INTO kata_files (kata, path, started_at) VALUES (?, ?, ?) ON CONFLICT (kata) DO UPDATE"
                       " SET path = excluded.path, started_at = excluded.started_at",
                       (kata, str(path), _iso(at or utc_now())))

    def kata_files(self) -> dict[str, Path]:
        return {row["kata"]: Path(row["path"]) for row in self._query("SELECT kata, path FROM kata_files")}

    # --- demo results ------------------------------------------------------------------------------

    def save_demo_result(self, demo: str, asked: Any, result: DemoResult | Mapping[str, Any], *,
                         saved_at: datetime | None = None) -> None:
        """Save a result under what the demo was asked: its command line's words, or its RunSpec or options.
        The result is written as its JSON here, once."""
        demo = RENAMED.get(demo, demo)
        result = result.to_json() if isinstance(result, DemoResult) else dict(result)
        env = result.get("env") if isinstance(result, dict) else None
        host = (env or {}).get("hostname") or socket.gethostname()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO demo_results (demo, args_json, result_json, saved_at, fingerprint, hostname) VALUES (?, ?, ?, ?, ?, ?)",
                (demo, demo_keys(demo, asked, _device_of(result) or "unknown")[0], json.dumps(result),
                 _iso(saved_at or utc_now()), fingerprint(env, host), host),
            )

    def _rekey_demo_results(self) -> None:
        """Once per store: file results saved under a demo's retired name under today's (`result.RENAMED`),
        and key those saved under the command line's words by what they asked."""
        if self._rekeyed:
            return
        self._rekeyed = True
        old = list(RENAMED)
        if self._query(f"SELECT 1 FROM demo_results WHERE demo IN ({', '.join('?' * len(old))}) LIMIT 1", old):
            with self.transaction() as db:
                db.executemany("UPDATE demo_results SET demo = ? WHERE demo = ?", [(RENAMED[o], o) for o in old])
        rows = self._query("SELECT id, demo, args_json, result_json FROM demo_results WHERE args_json LIKE '[%'")
        changed = []
        for row in rows:
            try:
                words, result = json.loads(row["args_json"]), json.loads(row["result_json"])
            except json.JSONDecodeError:
                continue
            key = demo_keys(row["demo"], words, _device_of(result) or "unknown")[0] if isinstance(words, list) else row["args_json"]
            if key != row["args_json"]:
                changed.append((key, row["id"]))
        if changed:
            with self.transaction() as db:
                db.executemany("UPDATE demo_results SET args_json = ? WHERE id = ?", changed)

    def last_demo_result(self, demo: str, asked: Any) -> SavedResult | None:
        """The newest result of this demo asked the same (however its options were spelled or ordered,
        defaults given or left out), preferring one measured on this machine."""
        self._rekey_demo_results()
        demo = RENAMED.get(demo, demo)
        keys = demo_keys(demo, asked)
        rows = self._query(
            "SELECT result_json, saved_at, fingerprint, hostname FROM demo_results"
            f" WHERE demo = ? AND args_json IN ({', '.join('?' * len(keys))}) ORDER BY id DESC",
            (demo, *keys),
        )
        if not rows:
            return None
        here_host = socket.gethostname()
        saved = []
        for row in rows:
            try:
                result = json.loads(row["result_json"])
            except json.JSONDecodeError:
                continue
            result = upgraded(result) if isinstance(result, dict) else result
            here = row["hostname"] == here_host and row["fingerprint"] == _fingerprint_here(result.get("env"), here_host)
            saved.append(SavedResult(result, datetime.fromisoformat(row["saved_at"]), row["fingerprint"], row["hostname"], here))
        return next((s for s in saved if s.here), saved[0] if saved else None)


def _fingerprint_here(env: Env | Mapping[str, Any] | None, host: str) -> str:
    """This machine's fingerprint, as far as it can be known without importing torch.

    Device names need torch (or the driver), so the saved result's own device list stands in for
    them: a result is "here" when its hostname and CPU count match this machine's.
    """
    env = _env(env)
    if env.cpu_count is not None and env.cpu_count != os.cpu_count():
        env = replace(env, cpu_count=os.cpu_count())
    return fingerprint(env, host)
