"""Readiness: per quiz topic and per interview skill, how ready you are, and the three things to study next.

Readiness is half memory and half performance under interview conditions:
- memory: the FSRS mastery of the cards behind it (a topic's questions, drill kinds and interview
  steps, as `scheduler.progress` counts them; a skill's kinds of interview step), unseen cards 0;
- performance: the mean score of your mock-interview and interview answers in it over the last
  `WINDOW_DAYS` days, 0 when there are none yet.
Each counts in proportion to the evidence behind it, up to `EVIDENCE_ANSWERS` answers: one right
answer is one answer's worth of readiness, not 100% (mastery scaled by answers so far / 5; the
recent mean taken over at least 5 answers, the missing ones counted as 0).
The three lowest name what to study next, each with the command that studies it.

No torch or textual here: `ddpfsdp progress` and the app's progress screen both show it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from fsrs import Card
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ddpfsdp.demos.base.prose import Prose
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.interview.scenario import SKILLS, STEP_KINDS
from ddpfsdp.quiz.loader import Bank
from ddpfsdp.quiz.store import Attempt, Store

WINDOW_DAYS = 30
MEMORY_WEIGHT = 0.5
EVIDENCE_ANSWERS = 5  # answers behind a figure before it counts in full
METHOD = (f"half FSRS mastery, half your mean score in mock-interview and interview answers over the last "
          f"{WINDOW_DAYS} days (0 until you have some); each counts in full only from {EVIDENCE_ANSWERS} answers "
          f"on, in proportion before")

SKILL_COMMANDS: dict[str, str] = {
    "memory": "ddpfsdp drill --kind model-state",
    "strategy": "ddpfsdp drill --kind fit-stage",
    "communication": "ddpfsdp drill --kind wire-bytes",
    "time": "ddpfsdp interview --family faster",
    "activations": "ddpfsdp drill --kind activations",
    "explanation": "ddpfsdp quiz --mock",
}


class ReadinessDocument(TypedDict):
    """One row as `ddpfsdp progress --json` writes it."""

    kind: str
    name: str
    title: str
    readiness: float
    mastery: float
    recent: float | None
    recent_answers: int
    command: str
    answers: int
    why: str


@dataclass(frozen=True)
class Readiness:
    kind: str  # "topic" or "skill"
    name: str
    title: str
    readiness: float  # 0..1
    mastery: float  # 0..1
    recent: float | None  # mean score of recent mock and interview answers; None when there are none
    recent_answers: int
    command: str
    answers: int = 0  # every answer behind the mastery, whenever given

    @property
    def why(self) -> str:
        shown = (f"{self.recent:.0%} over {self.recent_answers} mock/interview answer{'s' if self.recent_answers != 1 else ''}"
                 if self.recent is not None else f"no mock or interview answers in {WINDOW_DAYS} days")
        few = (f"; {self.answers} answer{'s' if self.answers != 1 else ''} of the {EVIDENCE_ANSWERS} it takes to "
               "count in full" if 0 < self.answers < EVIDENCE_ANSWERS else "")
        return f"mastery {self.mastery:.0%}, {shown}{few}"

    def to_dict(self) -> ReadinessDocument:
        return ReadinessDocument(**asdict(self), why=self.why)


def _score(mastery: float, answers: int, recent: list[float]) -> float:
    """Mastery weighed by the answers behind it, and the recent mean over at least EVIDENCE_ANSWERS answers."""
    evidence = min(1.0, answers / EVIDENCE_ANSWERS)
    performance = sum(recent) / max(len(recent), EVIDENCE_ANSWERS)
    return MEMORY_WEIGHT * mastery * evidence + (1 - MEMORY_WEIGHT) * performance


def _row(kind: str, name: str, title: str, mastery: float, answers: int, recent: list[float],
         command: str) -> Readiness:
    return Readiness(kind, name, title, _score(mastery, answers, recent), mastery,
                     sum(recent) / len(recent) if recent else None, len(recent), command, answers)


def _skill(attempt: Attempt) -> str | None:
    answer = attempt.answer if isinstance(attempt.answer, dict) else {}
    return answer.get("skill")


class Report(TypedDict):
    """Readiness per topic and per skill, weakest first, and the three to study next."""

    method: str
    window_days: int
    topics: list[Readiness]
    skills: list[Readiness]
    next: list[Readiness]


class ReportDocument(TypedDict):
    method: str
    window_days: int
    topics: list[ReadinessDocument]
    skills: list[ReadinessDocument]
    next: list[ReadinessDocument]


def report(bank: Bank, store: Store, now: datetime) -> Report:
    """Readiness per topic and per skill, weakest first, and the three to study next."""
    since = now - timedelta(days=WINDOW_DAYS)
    attempts = store.attempts()
    recent = [a for a in attempts if a.mode in ("mock", "interview") and a.answered_at >= since]
    topics = [
        _row("topic", p.topic, p.title, p.mastery, sum(1 for a in attempts if a.topic == p.topic),
             [a.score for a in recent if a.topic == p.topic], f"ddpfsdp quiz --topic {p.topic}")
        for p in scheduler.progress(bank, store, now)
    ]
    cards = store.cards()
    last_correct = {a.question_id: a.correct for a in attempts if a.question_id.startswith(scheduler.INTERVIEW_PREFIX)}
    skills = []
    for skill, title in SKILLS.items():
        kinds = [kind for kind, (owner, _) in STEP_KINDS.items() if owner == skill]
        masteries = []
        for kind in kinds:
            card_id = scheduler.INTERVIEW_PREFIX + kind
            card = Card.from_json(cards[card_id][0]) if card_id in cards else None
            masteries.append(scheduler.question_mastery(card, last_correct.get(card_id, False), now))
        scores = [a.score for a in recent if a.mode == "interview" and _skill(a) == skill]
        answered = sum(1 for a in attempts if a.question_id in {scheduler.INTERVIEW_PREFIX + kind for kind in kinds})
        skills.append(_row("skill", skill, title, sum(masteries) / len(masteries), answered, scores,
                           SKILL_COMMANDS[skill]))
    # Ties keep the order they came in (topics: the bank's order, weakest first); untried before tried.
    order = lambda r: (round(r.readiness, 6), r.recent is not None)  # noqa: E731
    topics.sort(key=order)
    skills.sort(key=order)
    return Report(method=METHOD, window_days=WINDOW_DAYS, topics=topics, skills=skills,
                  next=sorted(topics + skills, key=order)[:3])


def to_dict(readiness: Report) -> ReportDocument:
    return ReportDocument(method=readiness["method"], window_days=readiness["window_days"],
                          topics=[r.to_dict() for r in readiness["topics"]],
                          skills=[r.to_dict() for r in readiness["skills"]],
                          next=[r.to_dict() for r in readiness["next"]])


# --- showing it ----------------------------------------------------------------------------------


def _bar(share: float, width: int = 10) -> str:
    filled = round(share * width)
    return "█" * filled + "░" * (width - filled)


def table(rows: list[Readiness], title: str, first: str) -> Table:
    shown = Table(title=title, title_justify="left", expand=True, show_edge=False, pad_edge=False)
    shown.add_column(first)
    shown.add_column("ready", justify="right")
    shown.add_column("", no_wrap=True)
    shown.add_column("mastery", justify="right")
    shown.add_column("mock/interview", justify="right")
    for row in rows:
        recent = "–" if row.recent is None else f"{row.recent:.0%} ({row.recent_answers})"
        shown.add_row(row.title, f"{row.readiness:.0%}", _bar(row.readiness), f"{row.mastery:.0%}", recent)
    return shown


def study_next(readiness: Report) -> Group:
    lines: list[Any] = [Text("Study next", style="bold")]
    for number, row in enumerate(readiness["next"], start=1):
        lines.append(Prose(Text.assemble(f"{number}. ", (row.title, "bold"), f" ({row.kind}, ready "
                                         f"{row.readiness:.0%}: {row.why}): ", (row.command, "bold cyan"))))
    lines.append(Text(f"Readiness is {METHOD}.", style="dim"))
    return Group(*lines)


def render(readiness: Report) -> Group:
    return Group(table(readiness["skills"], "Readiness by interview skill, least ready first", "skill"),
                 table(readiness["topics"], "Readiness by topic, least ready first", "topic"), Text(""),
                 study_next(readiness))
