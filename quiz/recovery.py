"""What can still be read from a damaged progress file: its attempts, cards, bookmarks, kata events,
kata files and results.

A damaged file is never changed: it is copied (with its write-ahead log) into a temporary folder and
read there, in two ways.

1. Through SQLite, row by row: each table is read in order of its rows' ids until a read fails, then
   each following id is looked up on its own, so rows on pages that are still whole are read even when
   pages between them are lost (a page overwritten).
2. Where SQLite cannot read a table at all (the first page, which holds the schema, is damaged; or the
   file is shorter than its header says, which SQLite refuses as corrupt), from the file's pages
   themselves, as the SQLite file format lays them out
   (https://www.sqlite.org/fileformat2.html): every table-leaf page of the file and of its write-ahead
   log is decoded, and each record is recognised by the shape of the table it belongs to. Pages the
   file's header lists as free are skipped, so rows deleted before the damage stay deleted.

Rows come back in the store's own columns (`Store.rows`), ready for `Store.merge`, which adds an
attempt or a kata event only once however many times the same file is recovered. A table the file
never had (a file written before katas) is read as empty. No torch or textual here.
"""

from __future__ import annotations

import json
import operator
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ddpfsdp.quiz.store import FILENAME, KATA_EVENTS, TABLES, AttemptRow, Row, StoreRows

DAMAGED_GLOB = f"{FILENAME}.damaged-*"
PROBE_GAP = 50_000  # ids looked up past the last readable one when the table's largest id cannot be read
COLUMNS: dict[str, tuple[str, ...]] = {
    "attempts": ("question_id", "topic", "kind", "answer_json", "correct", "score", "time_s", "rating", "mode",
                 "answered_at"),
    "cards": ("question_id", "card_json", "due", "updated_at"),
    "demo_results": ("demo", "args_json", "result_json", "saved_at", "fingerprint", "hostname"),
    "bookmarks": ("question_id", "marked_at"),
    "kata_events": ("kata", "event", "passed", "detail_json", "at"),
    "kata_files": ("kata", "path", "started_at"),
}
_LEAF_TABLE = 0x0D
_WAL_MAGIC = (0x377F0682, 0x377F0683)


@dataclass
class Readable:
    """What could be read from one damaged file."""

    path: Path
    rows: StoreRows = field(default_factory=StoreRows)
    how: dict[str, str] = field(default_factory=dict)  # table -> "SQLite", "pages", or why nothing could be read

    @property
    def attempts(self) -> list[AttemptRow]:
        return self.rows.attempts


def damaged_files(folder: Path) -> list[Path]:
    """The damaged progress files moved aside in `folder`, oldest first (not their -wal and -shm)."""
    return sorted(p for p in folder.glob(DAMAGED_GLOB) if not p.name.endswith(("-wal", "-shm")) and p.is_file())


def read_damaged(path: Path) -> Readable:
    """Every row that can still be read from the progress file at `path`, which is left as it is."""
    path = Path(path)
    found = Readable(path)
    with tempfile.TemporaryDirectory(prefix="ddpfsdp-recover-") as folder:
        copy = Path(folder) / FILENAME
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        by_sql = _read_with_sqlite(copy)
        pages = None
        for table in TABLES:
            rows = by_sql.get(table)
            if rows is None:
                if pages is None:
                    pages = _read_pages(copy)
                rows = pages.get(table, [])
                found.how[table] = "pages"
            else:
                found.how[table] = "SQLite"
            setattr(found.rows, table, _unique(table, rows))
    return found


# --- through SQLite ------------------------------------------------------------------------------


def _read_with_sqlite(path: Path) -> dict[str, list[Row]]:
    """table -> its readable rows; a table SQLite cannot read at all is left out."""
    try:
        db = sqlite3.connect(str(path), isolation_level=None)
    except sqlite3.Error:
        return {}
    read: dict[str, list[Row]] = {}
    try:
        try:
            held = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError:
            held = None
        for table in TABLES:
            if held is not None and table not in held:
                read[table] = []  # the schema was read, and the file never had this table
                continue
            try:
                rows = _walk(db, table)
            except sqlite3.DatabaseError:
                continue
            read[table] = rows
    finally:
        db.close()
    return read


def _walk(db: sqlite3.Connection, table: str) -> list[Row]:
    """The readable rows of `table` in id order: ranges while they read, single ids around damage."""
    columns = COLUMNS[table]
    select = f"SELECT rowid, {', '.join(columns)} FROM {table}"
    db.execute(f"SELECT {', '.join(columns)} FROM {table} LIMIT 0")  # the table itself is known, or this raises
    try:
        largest = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        largest = None
    rows: list[Row] = []
    last = 0
    while True:
        read_any = False
        try:
            for row in db.execute(f"{select} WHERE rowid > ? ORDER BY rowid", (last,)):
                rows.append(dict(zip(columns, row[1:])))
                last, read_any = row[0], True
            break  # the rest of the table read whole
        except sqlite3.DatabaseError:
            pass
        if read_any:
            continue  # retry from the last good row: the failure is past it
        # Look up each id after the last good one until one reads, then read ranges again from there.
        end = largest if largest is not None else last + PROBE_GAP
        for rowid in range(last + 1, end + 1):
            try:
                row = db.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None:
                rows.append(dict(zip(columns, row[1:])))
                last = rowid
                break
        else:
            break
    return rows


# --- from the pages ------------------------------------------------------------------------------


def _read_pages(path: Path) -> dict[str, list[Row]]:
    """Rows of each table found in the file's table-leaf pages and in its write-ahead log's frames."""
    data = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    wal_data = wal.read_bytes() if wal.is_file() else b""
    header_ok = data[:16] == b"SQLite format 3\x00"
    sizes = [_page_size(data)] if header_ok and _page_size(data) else [4096, 1024, 2048, 8192, 16384, 32768, 65536, 512]
    reserved = data[20] if header_ok else 0
    best: dict[str, list[Row]] = {}
    for page_size in sizes:
        free = _free_pages(data, page_size) if header_ok else set()
        pages = [(number, data[(number - 1) * page_size: number * page_size])
                 for number in range(1, len(data) // page_size + 1) if number not in free]
        found: dict[str, list[Row]] = {table: [] for table in TABLES}
        for number, page in [*pages, *_wal_pages(wal_data)]:
            if len(page) != page_size:
                continue
            for record in _leaf_records(page, number, page_size - reserved, data, page_size):
                table, row = _recognise(record)
                if table is not None:
                    found[table].append(row)
        if sum(map(len, found.values())) > sum(map(len, best.values())):
            best = found
    return best


def _page_size(data: bytes) -> int | None:
    if len(data) < 100:
        return None
    size = struct.unpack(">H", data[16:18])[0]
    size = 65536 if size == 1 else size
    return size if size >= 512 and size & (size - 1) == 0 else None


def _free_pages(data: bytes, page_size: int) -> set[int]:
    """The pages the header's freelist names (trunks and leaves); empty when it cannot be followed."""
    free: set[int] = set()
    trunk = struct.unpack(">I", data[32:36])[0] if len(data) >= 36 else 0
    while trunk and trunk not in free and trunk * page_size <= len(data):
        free.add(trunk)
        page = data[(trunk - 1) * page_size: trunk * page_size]
        following, count = struct.unpack(">II", page[:8])
        if count > (page_size - 8) // 4:
            break
        free.update(struct.unpack(f">{count}I", page[8: 8 + 4 * count]))
        trunk = following
    return free


def _wal_pages(wal: bytes) -> Iterator[tuple[int, bytes]]:
    """(page number, page) of each frame of the log's current generation (its salts match the header's)."""
    if len(wal) < 32 or struct.unpack(">I", wal[:4])[0] not in _WAL_MAGIC:
        return
    page_size = struct.unpack(">I", wal[8:12])[0]
    if page_size < 512 or page_size & (page_size - 1):
        return
    salts = wal[16:24]
    offset = 32
    while offset + 24 + page_size <= len(wal):
        number = struct.unpack(">I", wal[offset: offset + 4])[0]
        if wal[offset + 8: offset + 16] == salts:
            yield number, wal[offset + 24: offset + 24 + page_size]
        offset += 24 + page_size


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A SQLite varint at `at`: (value, the offset after it)."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def _leaf_records(page: bytes, number: int, usable: int, data: bytes, page_size: int) -> Iterator[list[Any]]:
    """The decoded records of a table-leaf page; a cell that does not decode is skipped."""
    start = 100 if number == 1 else 0
    if len(page) < start + 8 or page[start] != _LEAF_TABLE:
        return
    cells = struct.unpack(">H", page[start + 3: start + 5])[0]
    for i in range(cells):
        try:
            pointer = struct.unpack(">H", page[start + 8 + 2 * i: start + 10 + 2 * i])[0]
            size, at = _varint(page, pointer)
            _, at = _varint(page, at)
            payload = _payload(page, at, size, usable, data, page_size)
            record = _record(payload)
        except (IndexError, struct.error, ValueError, UnicodeDecodeError):
            continue
        if record is not None:
            yield record


def _payload(page: bytes, at: int, size: int, usable: int, data: bytes, page_size: int) -> bytes:
    """A cell's payload: its bytes on the page, then its overflow pages' (the file format's formula)."""
    most = usable - 35
    if size <= most:
        return page[at: at + size]
    least = (usable - 12) * 32 // 255 - 23
    local = least + (size - least) % (usable - 4)
    local = local if local <= most else least
    parts = [page[at: at + local]]
    following = struct.unpack(">I", page[at + local: at + local + 4])[0]
    remaining, seen = size - local, set()
    while remaining > 0 and following and following not in seen:
        seen.add(following)
        overflow = data[(following - 1) * page_size: following * page_size]
        if len(overflow) < usable:
            raise ValueError("an overflow page is past the end of the file")
        parts.append(overflow[4: 4 + min(remaining, usable - 4)])
        remaining -= usable - 4
        following = struct.unpack(">I", overflow[:4])[0]
    if remaining > 0:
        raise ValueError("the payload's overflow pages are lost")
    return b"".join(parts)


def _record(payload: bytes) -> list[Any] | None:
    header_size, at = _varint(payload, 0)
    types = []
    while at < header_size:
        kind, at = _varint(payload, at)
        types.append(kind)
    at = header_size
    values: list[Any] = []
    for kind in types:
        if kind == 0:
            values.append(None)
        elif 1 <= kind <= 6:
            width = (1, 2, 3, 4, 6, 8)[kind - 1]
            values.append(int.from_bytes(payload[at: at + width], "big", signed=True))
            at += width
        elif kind == 7:
            values.append(struct.unpack(">d", payload[at: at + 8])[0])
            at += 8
        elif kind in (8, 9):
            values.append(kind - 8)
        elif kind >= 12:
            width = (kind - 12) // 2 if kind % 2 == 0 else (kind - 13) // 2
            raw = payload[at: at + width]
            if len(raw) != width:
                return None
            values.append(raw if kind % 2 == 0 else raw.decode("utf-8"))
            at += width
        else:
            return None
    return values


def _is_time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _is_json(value: Any, kind: type | None = None) -> bool:
    if not isinstance(value, str):
        return False
    try:
        decoded = json.loads(value)
    except ValueError:
        return False
    return kind is None or isinstance(decoded, kind)


def _recognise(values: list[Any]) -> tuple[str | None, Row | None]:
    """Which table a record is a row of, by its shape; (None, {}) for the rest (schema, meta, indexes)."""
    number = (int, float)
    if (len(values) == 11 and values[0] is None and all(isinstance(v, str) for v in values[1:5])
            and isinstance(values[5], int) and isinstance(values[6], number) and isinstance(values[7], number)
            and isinstance(values[8], int) and isinstance(values[9], str) and _is_time(values[10])
            and _is_json(values[4])):
        row = dict(zip(COLUMNS["attempts"], values[1:]))
        return "attempts", {**row, "score": float(row["score"]), "time_s": float(row["time_s"])}
    if (len(values) == 4 and isinstance(values[0], str) and _is_json(values[1], dict) and _is_time(values[2])
            and _is_time(values[3])):
        return "cards", dict(zip(COLUMNS["cards"], values))
    if len(values) == 2 and isinstance(values[0], str) and _is_time(values[1]):
        return "bookmarks", dict(zip(COLUMNS["bookmarks"], values))
    if (len(values) == 7 and values[0] is None and all(isinstance(v, str) for v in values[1:])
            and _is_json(values[3], dict) and _is_time(values[4])):
        return "demo_results", dict(zip(COLUMNS["demo_results"], values[1:]))
    # A kata's event: its rowid alias (NULL), then the kata, one of the known events, a verdict of 0, 1 or
    # NULL, a JSON object and a time. Six values, where a demo result has seven and an attempt eleven.
    if (len(values) == 6 and values[0] is None and isinstance(values[1], str) and values[2] in KATA_EVENTS
            and values[3] in (0, 1, None) and not isinstance(values[3], float) and _is_json(values[4], dict)
            and _is_time(values[5])):
        return "kata_events", dict(zip(COLUMNS["kata_events"], values[1:]))
    # Where a kata's file is: three values, between a bookmark's two and a card's four. The path is
    # neither a time nor a JSON object, so a card's record cut short is not read as one.
    if (len(values) == 3 and isinstance(values[0], str) and isinstance(values[1], str) and values[1]
            and not _is_time(values[0]) and not _is_time(values[1]) and not _is_json(values[1], dict)
            and _is_time(values[2])):
        return "kata_files", dict(zip(COLUMNS["kata_files"], values))
    return None, None


def _kept(rows: list[Row], name: str, stamp: str, better: Callable[[datetime, datetime], bool]) -> list[Row]:
    """One row per `name`: the one whose time `stamp` is best by `better` (operator.gt: the latest, lt: the
    earliest), the first of equal ones."""
    kept: dict[str, Row] = {}
    for row in rows:
        held = kept.get(row[name])
        if held is None or better(datetime.fromisoformat(row[stamp]), datetime.fromisoformat(held[stamp])):
            kept[row[name]] = row
    return list(kept.values())


def _unique(table: str, rows: list[Row]) -> list[Row]:
    """One row per attempt, card, bookmark, kata event, kata file or result (a page can be in the file
    and in its log): the newest card, the first mark, the kata file started last."""
    kept_by = {"cards": ("question_id", "updated_at", operator.gt),
               "bookmarks": ("question_id", "marked_at", operator.lt),
               "kata_files": ("kata", "started_at", operator.gt)}
    if table in kept_by:
        return _kept(rows, *kept_by[table])
    key, when = {"attempts": (("question_id", "answered_at"), "answered_at"),
                 "demo_results": (("demo", "args_json", "saved_at", "fingerprint"), "saved_at"),
                 "kata_events": (("kata", "event", "at"), "at")}[table]
    unique = {tuple(row[k] for k in key): row for row in rows}
    return sorted(unique.values(), key=lambda row: row[when])
