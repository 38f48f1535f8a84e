"""Progress that moves: export it as JSON, import (merge) it on another machine, reset it with a backup.

The export is one JSON document of schema `ddpfsdp.progress-export/2`: every attempt, each card's
FSRS state, the bookmarks, what the learner did with each kata and where each kata's file is, and the
saved demo results, each as the store holds it. (`ddpfsdp.progress/1` is the report `progress --json`
prints; an export is what can be imported.) Version 2 added the two kata parts; a version-1 export,
which has neither, is imported as it is, with no kata events. Importing validates the whole document
first and then merges it in one transaction (`Store.merge`): an attempt or kata event already here is
not added again, a card is replaced only by a newer one, so importing the same file twice, or two
machines' exports one after the other, keeps every answer once.

No torch or textual here.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import tempfile
from collections.abc import Mapping
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, TypedDict

from ddpfsdp.quiz.store import KATA_EVENTS, TABLES, BookmarkRow, KataFileRow, Merged, Store, StoreRows, utc_now

SCHEMA_NAME = "ddpfsdp.progress-export"
VERSION = 2  # 2: kata_events and kata_files; a version-1 export has neither and is read with both empty
SCHEMA = f"{SCHEMA_NAME}/{VERSION}"
_SCHEMA = re.compile(r"^(?P<name>[\w.-]+)/(?P<version>\d+)$")

# The columns each part of an export carries, and what each must be (JSON types after decoding).
ATTEMPT_FIELDS: dict[str, tuple[type, ...]] = {
    "question_id": (str,), "topic": (str,), "kind": (str,), "answer": (object,), "correct": (bool,),
    "score": (int, float), "time_s": (int, float), "rating": (int,), "mode": (str,), "answered_at": (str,),
}
CARD_FIELDS: dict[str, tuple[type, ...]] = {"question_id": (str,), "card": (dict,), "due": (str,), "updated_at": (str,)}
BOOKMARK_FIELDS: dict[str, tuple[type, ...]] = {"question_id": (str,), "marked_at": (str,)}
RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "demo": (str,), "key": (str,), "result": (dict,), "saved_at": (str,), "fingerprint": (str,), "hostname": (str,),
}
KATA_EVENT_FIELDS: dict[str, tuple[type, ...]] = {
    "kata": (str,), "event": (str,), "passed": (bool, type(None)), "detail": (dict,), "at": (str,),
}
KATA_FILE_FIELDS: dict[str, tuple[type, ...]] = {"kata": (str,), "path": (str,), "started_at": (str,)}
_TIMES = ("answered_at", "due", "updated_at", "marked_at", "saved_at", "at", "started_at")


class ExportDocument(TypedDict):
    """`ddpfsdp progress --export`'s file; each list holds the store's rows with their JSON decoded (an
    attempt's answer, a card's FSRS state, a demo's result) and a demo result's key named `key`."""

    schema: str
    exported_at: str
    hostname: str
    attempts: list[Mapping[str, Any]]
    cards: list[Mapping[str, Any]]
    bookmarks: list[Mapping[str, Any]]
    kata_events: list[Mapping[str, Any]]
    kata_files: list[Mapping[str, Any]]
    demo_results: list[Mapping[str, Any]]


class PortableError(Exception):
    """A progress file that cannot be written or read; the message says what to do."""


# --- export -------------------------------------------------------------------------------------


def export_document(store: Store, now: datetime | None = None) -> ExportDocument:
    """Everything the store holds, as the export's JSON document."""
    return {
        "schema": SCHEMA,
        "exported_at": (now or utc_now()).astimezone(UTC).isoformat(),
        "hostname": socket.gethostname(),
        "attempts": [
            {**{k: row[k] for k in ATTEMPT_FIELDS if k not in ("answer", "correct")},
             "answer": json.loads(row["answer_json"]), "correct": bool(row["correct"])}
            for row in store.rows("attempts")
        ],
        "cards": [{"question_id": row["question_id"], "card": json.loads(row["card_json"]), "due": row["due"],
                   "updated_at": row["updated_at"]} for row in store.rows("cards")],
        "bookmarks": store.rows("bookmarks"),
        "kata_events": [{"kata": row["kata"], "event": row["event"],
                         "passed": None if row["passed"] is None else bool(row["passed"]),
                         "detail": json.loads(row["detail_json"]), "at": row["at"]} for row in store.rows("kata_events")],
        "kata_files": store.rows("kata_files"),
        "demo_results": [{"demo": row["demo"], "key": row["args_json"], "result": json.loads(row["result_json"]),
                          "saved_at": row["saved_at"], "fingerprint": row["fingerprint"], "hostname": row["hostname"]}
                         for row in store.rows("demo_results")],
    }


def write_json(path: Path, document: Any, *, overwrite: bool) -> None:
    """Write `document` to `path` whole or not at all (a temporary file beside it, then a rename)."""
    write_file(path, json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8") + b"\n", overwrite=overwrite)


def check_writable(path: Path, *, overwrite: bool, example: str = "progress.json") -> None:
    """Raise PortableError, saying what to do, when `path` cannot take a new file."""
    path = Path(path)
    if path.is_dir():
        raise PortableError(f"{path} is a folder; give a file name inside it, such as {path / example}")
    folder = path.parent
    if not folder.is_dir():
        raise PortableError(f"the folder {folder} does not exist; create it first, or choose a file in a folder that does")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PortableError(f"the folder {folder} cannot be written to; choose a folder you can write to")
    if path.exists() and not overwrite:
        raise PortableError(f"{path} already exists; choose another name, or add --yes to replace it")


def usual_mode() -> int:
    """The permissions a new file gets from the umask (a temporary file is made private, 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_file(path: Path, data: bytes, *, overwrite: bool, example: str = "progress.json") -> None:
    path = Path(path)
    check_writable(path, overwrite=overwrite, example=example)
    try:
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(partial, usual_mode())
            os.replace(partial, path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise PortableError(f"cannot write {path} ({error.strerror or error}); nothing was written. Choose a folder "
                            "you can write to, with room to spare") from None


# --- import -------------------------------------------------------------------------------------


def read_document(path: Path) -> ExportDocument:
    """Read and validate an export, naming the first problem; nothing is written here."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PortableError(f"{path} does not exist; give the file `ddpfsdp progress --export` wrote") from None
    except IsADirectoryError:
        raise PortableError(f"{path} is a folder; give the file `ddpfsdp progress --export` wrote") from None
    except UnicodeDecodeError:
        raise PortableError(f"{path} is not a text file; give the JSON file `ddpfsdp progress --export` wrote") from None
    except OSError as error:
        raise PortableError(f"cannot read {path} ({error.strerror or error})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise PortableError(f"{path} is not JSON ({error.msg} at line {error.lineno}, column {error.colno}); give the "
                            "file `ddpfsdp progress --export` wrote") from None
    check_schema(document, path)
    return document


def check_schema(document: Any, path: Path | str) -> None:
    if not isinstance(document, dict) or "schema" not in document:
        raise PortableError(f"{path} is not a ddpfsdp progress export (it has no \"schema\" field); write one with "
                            "`ddpfsdp progress --export FILE`")
    schema = document["schema"]
    match = _SCHEMA.match(schema) if isinstance(schema, str) else None
    if match is None or match["name"] != SCHEMA_NAME:
        if schema == "ddpfsdp.progress/1":
            raise PortableError(f"{path} is the progress report `ddpfsdp progress --json` prints, not an export; "
                                "write an export with `ddpfsdp progress --export FILE`")
        raise PortableError(f"{path} is a {schema!r} document, not a ddpfsdp progress export ({SCHEMA}); write one "
                            "with `ddpfsdp progress --export FILE`")
    version = int(match["version"])
    if version > VERSION:
        raise PortableError(f"{path} was written by a newer ddpfsdp (schema {schema}; this one reads up to {SCHEMA}); "
                            "upgrade ddpfsdp (pip install -U ddpfsdp) and import it again")
    if version < 1:
        raise PortableError(f"{path} has schema {schema}, which no ddpfsdp wrote")


def _check_rows(document: Mapping[str, Any], part: str, fields: dict[str, tuple[type, ...]], path) -> list[Mapping[str, Any]]:
    rows = document.get(part, [])
    if not isinstance(rows, list):
        raise PortableError(f"{path}: \"{part}\" must be a list")
    for number, row in enumerate(rows):
        where = f"{path}: {part}[{number}]"
        if not isinstance(row, dict):
            raise PortableError(f"{where} must be an object")
        for name, kinds in fields.items():
            if name not in row:
                raise PortableError(f"{where} has no \"{name}\"")
            value = row[name]
            wrong_bool = isinstance(value, bool) and bool not in kinds
            if object not in kinds and (wrong_bool or not isinstance(value, kinds)):
                raise PortableError(f"{where}.{name} must be {' or '.join(map(_type_name, kinds))}, "
                                    f"not {_type_name(type(value))}")
            if name in _TIMES:
                row = {**row, name: _utc_text(value, f"{where}.{name}")}
            if isinstance(value, float) and not math.isfinite(value):
                raise PortableError(f"{where}.{name} must be a finite number, not {value}")
        if part == "attempts" and row["time_s"] < 0:
            raise PortableError(f"{where}.time_s must not be negative")
        if part == "kata_events":
            _check_kata_event(row, where)
        rows[number] = row
    return rows


def _type_name(kind: type) -> str:
    return "null" if kind is type(None) else kind.__name__


def _check_kata_event(row: Mapping[str, Any], where: str) -> None:
    if row["event"] not in KATA_EVENTS:
        raise PortableError(f"{where}.event is {row['event']!r}, not one of {', '.join(KATA_EVENTS)}")
    # A check's verdict is what `kata check` recorded; the other events have none.
    if row["event"] == "check" and row["passed"] is None:
        raise PortableError(f"{where}.passed must be true or false for a check")
    if row["event"] != "check" and row["passed"] is not None:
        raise PortableError(f"{where}.passed must be null for a {row['event']} event")


def _utc_text(value: str, where: str) -> str:
    """A time as the store writes it (ISO 8601 in UTC), from any ISO time with a timezone."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise PortableError(f"{where}: {value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise PortableError(f"{where}: {value!r} has no timezone; write it in UTC, e.g. 2025-01-06T09:00:00+00:00")
    return moment.astimezone(UTC).isoformat()


def store_rows(document: Mapping[str, Any], path: Path | str = "the export") -> StoreRows:
    """A validated export as the store's rows, for `Store.merge`; PortableError names the first problem."""
    from fsrs import Card

    check_schema(document, path)
    attempts = _check_rows(document, "attempts", ATTEMPT_FIELDS, path)
    cards = _check_rows(document, "cards", CARD_FIELDS, path)
    bookmarks = _check_rows(document, "bookmarks", BOOKMARK_FIELDS, path)
    kata_events = _check_rows(document, "kata_events", KATA_EVENT_FIELDS, path)
    kata_files = _check_rows(document, "kata_files", KATA_FILE_FIELDS, path)
    results = _check_rows(document, "demo_results", RESULT_FIELDS, path)
    for number, row in enumerate(cards):
        try:
            Card.from_dict(row["card"])
        except (KeyError, TypeError, ValueError) as error:
            raise PortableError(f"{path}: cards[{number}].card is not an FSRS card ({error})") from None
    return StoreRows(
        attempts=[{**{k: row[k] for k in ATTEMPT_FIELDS if k not in ("answer", "correct")},
                   "answer_json": json.dumps(row["answer"]), "correct": int(row["correct"])} for row in attempts],
        cards=[{"question_id": row["question_id"], "card_json": json.dumps(row["card"]), "due": row["due"],
                "updated_at": row["updated_at"]} for row in cards],
        bookmarks=[BookmarkRow(question_id=row["question_id"], marked_at=row["marked_at"]) for row in bookmarks],
        demo_results=[{"demo": row["demo"], "args_json": row["key"], "result_json": json.dumps(row["result"]),
                       "saved_at": row["saved_at"], "fingerprint": row["fingerprint"], "hostname": row["hostname"]}
                      for row in results],
        kata_events=[{"kata": row["kata"], "event": row["event"],
                      "passed": None if row["passed"] is None else int(row["passed"]),
                      "detail_json": json.dumps(row["detail"]), "at": row["at"]} for row in kata_events],
        kata_files=[KataFileRow(kata=row["kata"], path=row["path"], started_at=row["started_at"]) for row in kata_files],
    )


def import_file(store: Store, path: Path) -> Merged:
    """Merge an export into `store`: all of it or, on any problem, nothing."""
    return store.merge(store_rows(read_document(path), path))


# --- reset --------------------------------------------------------------------------------------


def backup_path(folder: Path, now: datetime) -> Path:
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    path, counter = folder / f"progress-backup-{stamp}.json", 1
    while path.exists():
        path, counter = folder / f"progress-backup-{stamp}-{counter}.json", counter + 1
    return path


def reset(store: Store, folder: Path, now: datetime | None = None) -> Path:
    """Write a backup export into `folder`, then forget every attempt, card, bookmark and kata event; the
    backup's path."""
    now = now or utc_now()
    backup = backup_path(folder, now)
    write_json(backup, export_document(store, now), overwrite=False)
    store.reset()
    return backup


def counts(store: Store) -> dict[str, int]:
    return {table: len(store.rows(table)) for table in TABLES}
