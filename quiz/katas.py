"""A learner's katas: where their files are, what they did with each, and what that does to their cards.

    ddpfsdp kata start ring-allreduce          the starter into ./ddpfsdp-katas/ (never over their work)
    ddpfsdp kata check ring-allreduce          their file on real ranks (quiz.commands.kata)
    ddpfsdp kata hint ring-allreduce           the next hint, counted

A kata's card (`scheduler.kata_card`) is reviewed when a check passes while the card is new or due, and
when the learner gives up: Easy at the first check without a hint, Good after a few failed checks, Hard
after many or with hints, Again when given up (`scheduler.kata_rating`). A passing check of a card that
is not due records the check and leaves the card alone, so re-running a check does not inflate mastery.
The CLI and the app's Katas screen both go through here. No torch, no textual.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ddpfsdp.demos.katas.catalog import KATAS, Kata
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.store import Store

DEFAULT_FOLDER = "ddpfsdp-katas"


class KataError(Exception):
    """What a learner asked cannot be done as asked; the message says what to do instead."""


CHECK_PROCS = 3  # as `ddpfsdp kata check`: an odd world, chunks N does not divide


def check_run(kata: str, path: Path) -> Any:
    """The run of one check from the app: the kata's ranks on CPU processes, through the one launcher."""
    from ddpfsdp.demos.katas.rank import DEFAULT_DEADLINE_S
    from ddpfsdp.demos.launch.launcher import DemoRun

    asked = {"kata": kata, "file": str(Path(path).resolve()), "deadline_s": DEFAULT_DEADLINE_S, "seed": 0}
    return DemoRun("kata", asked=asked, procs=CHECK_PROCS)


def workspace(folder: Path | str | None = None) -> Path:
    """The folder a learner's kata files go in: `folder`, else ./ddpfsdp-katas."""
    return Path(folder).expanduser() if folder else Path.cwd() / DEFAULT_FOLDER


def start(kata: Kata, store: Store | None, folder: Path | str | None = None, force: bool = False,
          now: datetime | None = None) -> Path:
    """Write the kata's starter into the workspace and remember where; never over a file without `force`."""
    target_dir = workspace(folder)
    target = target_dir / kata.file_name
    if target.exists() and not force:
        raise KataError(f"{target} exists already, with your work in it; check it with `ddpfsdp kata check "
                        f"{kata.name}`, or start over with `ddpfsdp kata start {kata.name} --force` (it overwrites "
                        "the file)")
    if target_dir.exists() and not target_dir.is_dir():
        raise KataError(f"{target_dir} is a file, not a folder: choose another with --dir")
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(target_dir, os.W_OK):
            raise PermissionError(13, "permission denied")
        target.write_text(kata.starter_path.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as error:
        raise KataError(f"cannot write {target} ({error.strerror or error}); choose a folder you can write to with "
                        "--dir") from None
    if store is not None:
        store.set_kata_file(kata.name, target.resolve(), at=now)
        store.record_kata_event(kata.name, "start", detail={"path": str(target.resolve())}, at=now)
    return target


def learner_path(kata: Kata, store: Store | None, file: Path | str | None = None) -> Path:
    """The learner's file: as given, else where `kata start` put it, else ./ddpfsdp-katas/<file>."""
    if file:
        return Path(file).expanduser()
    recorded = store.kata_files().get(kata.name) if store is not None else None
    if recorded is not None and recorded.exists():
        return recorded
    return workspace() / kata.file_name


def shown_path(path: Path) -> str:
    """A learner's file as they would name it: relative to the current folder when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass(frozen=True)
class KataStatus:
    kata: Kata
    state: str  # "new", "started", "failing", "passed", "gave up"
    checks: int  # checks run on the learner's file
    hints: int  # hints taken
    due: bool  # its card is due for review (a kata passed before)
    file: Path | None

    @property
    def name(self) -> str:
        return self.kata.name

    def to_dict(self) -> dict:
        return {"name": self.kata.name, "title": self.kata.title, "topic": self.kata.topic, "level": self.kata.level,
                "summary": self.kata.summary, "status": self.state, "checks": self.checks, "hints": self.hints,
                "due": self.due, "file": str(self.file) if self.file else None}


def statuses(store: Store | None, now: datetime) -> list[KataStatus]:
    """Every kata with what the learner did with it, in the catalogue's order."""
    events = store.kata_events() if store is not None else []
    files = store.kata_files() if store is not None else {}
    cards = store.cards() if store is not None else {}
    found = []
    for name, kata in KATAS.items():
        mine = [e for e in events if e.kata == name]
        checks = [e for e in mine if e.event == "check"]
        state = "new"
        if any(e.event == "start" for e in mine) or checks:
            state = "started"
        if checks:
            state = "passed" if any(e.passed for e in checks) else "failing"
        if any(e.event == "gave_up" for e in mine) and state != "passed":
            state = "gave up"
        card = cards.get(scheduler.KATA_PREFIX + name)
        found.append(KataStatus(kata, state, len(checks), sum(e.event == "hint" for e in mine),
                                card is not None and card[1] <= now, files.get(name)))
    return found


def _since_review(store: Store, kata: Kata) -> datetime | None:
    reviews = store.attempts(scheduler.KATA_PREFIX + kata.name)
    return reviews[-1].answered_at if reviews else None


def next_hint(kata: Kata, store: Store | None, now: datetime | None = None) -> tuple[int, str]:
    """The next hint (1-based number and text), counted; the last one again once all are taken."""
    taken = sum(1 for e in store.kata_events(kata.name) if e.event == "hint") if store is not None else 0
    number = min(taken + 1, len(kata.hints))
    if store is not None:
        store.record_kata_event(kata.name, "hint", detail={"hint": number}, at=now)
    return number, kata.hints[number - 1]


def record_check(kata: Kata, store: Store, passed: bool, failed: list[str], now: datetime,
                 elapsed_s: float = 0.0) -> str | None:
    """Record a check of the learner's file; on a pass of a new or due card, review it. What happened to the
    card, for a person ("reviewed: Easy, next in 4 days"), or None."""
    store.record_kata_event(kata.name, "check", passed=passed, detail={"failed": failed}, at=now)
    if not passed:
        return None
    card = store.cards().get(scheduler.KATA_PREFIX + kata.name)
    if card is not None and card[1] > now:
        return None
    return _review(kata, store, True, now, elapsed_s)


def give_up(kata: Kata, store: Store, now: datetime) -> str:
    store.record_kata_event(kata.name, "gave_up", at=now)
    return _review(kata, store, False, now, 0.0)


def _review(kata: Kata, store: Store, passed: bool, now: datetime, elapsed_s: float) -> str:
    since = _since_review(store, kata)
    recent = [e for e in store.kata_events(kata.name) if since is None or e.at > since]
    failed = sum(1 for e in recent if e.event == "check" and e.passed is False)
    hints = sum(1 for e in recent if e.event == "hint")
    card, rating = scheduler.record_kata(store, kata.name, kata.topic, passed=passed, failed_checks=failed,
                                         hints=hints, time_s=elapsed_s, now=now)
    days = max(0.0, (card.due - now).total_seconds() / 86400)
    when = f"in {days:.0f} day{'s' if round(days) != 1 else ''}" if days >= 1 else "later today"
    return f"reviewed as {rating.name} ({failed} failed check{'s' if failed != 1 else ''}, {hints} hint" \
           f"{'s' if hints != 1 else ''}); write it again {when}"


def has_passed(kata: Kata, store: Store | None) -> bool:
    return store is not None and any(e.event == "check" and e.passed for e in store.kata_events(kata.name))


def solution_text(kata: Kata) -> str:
    return kata.solution_path.read_text(encoding="utf-8")
