"""Levels: the range of question levels a session asks, as `--level 3` or `--level 2-3` gives it.

A question's level (quiz/loader.py's LEVELS) says how deep it goes, from 1 (fundamentals) to
4 (staff-level trade-offs). No torch or textual here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ddpfsdp.quiz.loader import LEVELS, Bank, Question

LOWEST, HIGHEST = min(LEVELS), max(LEVELS)
_RANGE = re.compile(r"^\s*(\d+)\s*(?:(?:-|\.\.|–)\s*(\d+))?\s*$")


class LevelError(ValueError):
    """A level range that cannot be read; the message says what to type."""


@dataclass(frozen=True)
class LevelRange:
    low: int = LOWEST
    high: int = HIGHEST

    def __contains__(self, level: int) -> bool:
        return self.low <= level <= self.high

    @property
    def everything(self) -> bool:
        return self.low == LOWEST and self.high == HIGHEST

    def keep(self, questions: list[Question]) -> list[Question]:
        return [q for q in questions if q.level in self]

    def restrict(self, bank: Bank) -> Bank:
        """The bank with only this range's questions; every topic stays, some perhaps empty."""
        if self.everything:
            return bank
        questions = {qid: q for qid, q in bank.questions.items() if q.level in self}
        topics = {tid: replace(t, question_ids=tuple(q for q in t.question_ids if q in questions))
                  for tid, t in bank.topics.items()}
        return Bank(topics=topics, questions=questions)

    def label(self) -> str:
        """'level 3 (in depth)', 'levels 2–3' or 'all levels'."""
        if self.everything:
            return "all levels"
        if self.low == self.high:
            return f"level {self.low} ({LEVELS[self.low]})"
        return f"levels {self.low}–{self.high}"

    def option(self) -> str:
        """The `--level` value that gives this range back."""
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def parse_levels(text: str) -> LevelRange:
    """`3` -> 3 to 3, `2-3` (or `2..3`) -> 2 to 3; LevelError naming the levels otherwise."""
    choices = "; ".join(f"{number} {name}" for number, name in LEVELS.items())
    advice = f"give a level from {LOWEST} to {HIGHEST}, or a range such as 2-3 ({choices})"
    match = _RANGE.match(str(text))
    if not match:
        raise LevelError(f"{text!r} is not a level; {advice}")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) is not None else low
    for value in (low, high):
        if value not in LEVELS:
            raise LevelError(f"there is no level {value}; {advice}")
    if low > high:
        raise LevelError(f"the range {low}-{high} is empty; write the lower level first ({high}-{low})")
    return LevelRange(low, high)
