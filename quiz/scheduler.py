"""Spaced repetition with FSRS, what to ask next, and mastery by topic.

Objective answers (single, multi, numeric, order) are rated from correctness and the time taken: a
wrong answer is Again; a right one is Easy when quick, Good at a normal pace, Hard when slow, with the
pace judged against what a kind of question usually needs. An `explain` answer uses the person's own
self-grade. Mastery of a question is the probability FSRS gives of recalling it now, counted only when
the last answer was right; a topic's mastery is the mean over its questions, unseen ones counting 0.

No torch or textual here.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from datetime import datetime

from fsrs import Card, Rating, Scheduler, State

from ddpfsdp.quiz.grading import SELF_GRADES, Grade
from ddpfsdp.quiz.loader import Bank, Question
from ddpfsdp.quiz.store import Store

# Seconds a prepared person needs for a question of each kind; quick is under half, slow over twice.
EXPECTED_TIME_S = {"single": 20.0, "multi": 35.0, "numeric": 60.0, "order": 40.0, "explain": 120.0, "drill": 90.0}

DRILL_PREFIX = "drill:"
"""Drill results are attempts at the card `drill:<kind>`: one card per kind of sizing problem."""

# Fuzzing spreads reviews of large decks; this bank is small, and a deterministic schedule is easier
# to reason about (and to test).
_SCHEDULER = Scheduler(enable_fuzzing=False)


def rating_for(question: Question, grade: Grade, time_s: float) -> Rating:
    if question.kind == "explain":
        if grade.self_grade is None:
            raise ValueError("an explain answer is rated by its self-grade")
        return Rating(SELF_GRADES.index(grade.self_grade) + 1)
    if not grade.correct:
        return Rating.Again
    expected_s = EXPECTED_TIME_S[question.kind] * (1 + 0.25 * (question.level - 1))
    if time_s < 0.5 * expected_s:
        return Rating.Easy
    if time_s > 2.0 * expected_s:
        return Rating.Hard
    return Rating.Good


def _card_id(question_id: str) -> int:
    # A stable id per question (fsrs would otherwise derive one from the clock and sleep 1 ms).
    if question_id.startswith(DRILL_PREFIX):
        # Every drill card shares the prefix, so its id comes from the kind's name.
        return int.from_bytes(hashlib.sha256(question_id.encode()).digest()[:7], "big")
    return int.from_bytes(question_id.encode()[:7].ljust(7, b"\0"), "big")


def load_card(store: Store, question_id: str, now: datetime) -> Card:
    raw = store.card_json(question_id)
    if raw is None:
        return Card(card_id=_card_id(question_id), due=now)
    return Card.from_json(raw)


def record_answer(
    store: Store,
    question: Question,
    grade: Grade,
    *,
    time_s: float,
    now: datetime,
    mode: str = "practice",
) -> tuple[int, Card, Rating]:
    """Rate the answer, move the card, and commit attempt and card together."""
    rating = rating_for(question, grade, time_s)
    card = load_card(store, question.id, now)
    card, _log = _SCHEDULER.review_card(card, rating, review_datetime=now, review_duration=int(time_s * 1000))
    attempt_id = store.record_attempt(
        question_id=question.id,
        topic=question.topic,
        kind=question.kind,
        answer=grade.given,
        correct=grade.correct,
        score=grade.score,
        time_s=time_s,
        rating=int(rating),
        answered_at=now,
        card_json=card.to_json(),
        due=card.due,
        mode=mode,
    )
    return attempt_id, card, rating


def record_drill(
    store: Store,
    *,
    kind: str,
    topic: str,
    grade: Grade,
    time_s: float,
    now: datetime,
) -> tuple[int, Card, Rating]:
    """Save a sizing-drill answer as an attempt at its kind's card, rated as a numeric answer is."""
    if not grade.correct:
        rating = Rating.Again
    elif time_s < 0.5 * EXPECTED_TIME_S["drill"]:
        rating = Rating.Easy
    elif time_s > 2.0 * EXPECTED_TIME_S["drill"]:
        rating = Rating.Hard
    else:
        rating = Rating.Good
    card_key = DRILL_PREFIX + kind
    card = load_card(store, card_key, now)
    card, _log = _SCHEDULER.review_card(card, rating, review_datetime=now, review_duration=int(time_s * 1000))
    attempt_id = store.record_attempt(
        question_id=card_key,
        topic=topic,
        kind="drill",
        answer=grade.given,
        correct=grade.correct,
        score=grade.score,
        time_s=time_s,
        rating=int(rating),
        answered_at=now,
        card_json=card.to_json(),
        due=card.due,
        mode="drill",
    )
    return attempt_id, card, rating


# --- what to ask ---------------------------------------------------------------------------------


def due_questions(bank: Bank, store: Store, now: datetime, topic: str | None = None) -> list[Question]:
    """Cards due now, most overdue first (questions no longer in the bank are skipped)."""
    ids = store.due_question_ids(now)
    return [bank.questions[q] for q in ids if q in bank.questions and (topic is None or bank.questions[q].topic == topic)]


def practice_queue(bank: Bank, store: Store, now: datetime, topic: str | None = None) -> list[Question]:
    """A topic's questions (or all): due first, then never seen (by level), then the rest by due date."""
    candidates = bank.in_topic(topic) if topic else list(bank.questions.values())
    cards = store.cards()
    due = [q for q in candidates if q.id in cards and cards[q.id][1] <= now]
    due.sort(key=lambda q: cards[q.id][1])
    new = sorted((q for q in candidates if q.id not in cards), key=lambda q: q.level)
    later = sorted((q for q in candidates if q.id in cards and cards[q.id][1] > now), key=lambda q: cards[q.id][1])
    return due + new + later


MOCK_SIZE = 8
MOCK_MINUTES = 20


def mock_interview(bank: Bank, rng: random.Random, size: int = MOCK_SIZE) -> list[Question]:
    """A mixed set across topics, at least two `explain` questions where the bank has them, harder last."""
    questions = list(bank.questions.values())
    explain = [q for q in questions if q.kind == "explain"]
    others = [q for q in questions if q.kind != "explain"]
    rng.shuffle(explain)
    rng.shuffle(others)
    picked = explain[: min(2, len(explain))]
    # Round-robin over topics so one large topic does not dominate.
    by_topic: dict[str, list[Question]] = {}
    for question in others + explain[len(picked):]:
        by_topic.setdefault(question.topic, []).append(question)
    while len(picked) < size and any(by_topic.values()):
        for topic in list(by_topic):
            if by_topic[topic] and len(picked) < size:
                picked.append(by_topic[topic].pop())
    picked.sort(key=lambda q: (q.level, q.kind == "explain"))
    return picked


# --- progress ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicProgress:
    topic: str
    title: str
    questions: int
    seen: int
    attempts: int
    correct: int
    accuracy: float | None  # None before the first attempt
    mastery: float  # 0..1
    due: int
    drills: int = 0  # drill kinds of this topic tried, each counted as one more card

    def to_dict(self) -> dict:
        return asdict(self)


def question_mastery(card: Card | None, last_correct: bool, now: datetime) -> float:
    if card is None or not last_correct or card.stability is None:
        return 0.0
    retrievability = _SCHEDULER.get_card_retrievability(card, current_datetime=now)
    # Still in learning steps: recalled once today, not yet a memory to count on.
    if card.state != State.Review:
        retrievability *= 0.5
    return float(retrievability)


def progress(bank: Bank, store: Store, now: datetime) -> list[TopicProgress]:
    """Per topic, weakest first (lowest mastery, then lowest accuracy).

    Each drill kind tried counts as one more card of its topic: its attempts join the topic's
    accuracy and its card joins the topic's mastery.
    """
    cards = store.cards()
    attempts = store.attempts()
    last_correct: dict[str, bool] = {}
    per_topic: dict[str, list[bool]] = {}
    drill_topic: dict[str, str] = {}
    for attempt in attempts:
        if attempt.question_id in bank.questions:
            topic_id = bank.questions[attempt.question_id].topic
        elif attempt.question_id.startswith(DRILL_PREFIX) and attempt.topic in bank.topics:
            topic_id = drill_topic[attempt.question_id] = attempt.topic
        else:
            continue
        last_correct[attempt.question_id] = attempt.correct
        per_topic.setdefault(topic_id, []).append(attempt.correct)
    report = []
    for topic in bank.topics.values():
        ids = topic.question_ids
        drills = [card for card, topic_id in drill_topic.items() if topic_id == topic.id]
        masteries = [
            question_mastery(Card.from_json(cards[q][0]) if q in cards else None, last_correct.get(q, False), now)
            for q in (*ids, *drills)
        ]
        results = per_topic.get(topic.id, [])
        report.append(
            TopicProgress(
                topic=topic.id,
                title=topic.title,
                questions=len(ids),
                seen=sum(1 for q in ids if q in last_correct),
                attempts=len(results),
                correct=sum(results),
                accuracy=(sum(results) / len(results)) if results else None,
                mastery=sum(masteries) / len(masteries) if masteries else 0.0,
                due=sum(1 for q in ids if q in cards and cards[q][1] <= now),
                drills=len(drills),
            )
        )
    # At equal mastery a topic answered badly is weaker than one not tried yet.
    report.sort(key=lambda p: (p.mastery, p.accuracy is None, p.accuracy or 0.0, bank.topics[p.topic].order))
    return report


@dataclass(frozen=True)
class DrillProgress:
    kind: str
    topic: str
    attempts: int
    correct: int
    accuracy: float
    mastery: float  # 0..1, as a question's: FSRS recall probability, 0 when the last answer was wrong
    last_at: datetime

    def to_dict(self) -> dict:
        return {**asdict(self), "last_at": self.last_at.isoformat()}


def drill_progress(store: Store, now: datetime) -> list[DrillProgress]:
    """Sizing drills by kind, weakest first."""
    cards = store.cards()
    by_kind: dict[str, list] = {}
    for attempt in store.attempts():
        if attempt.question_id.startswith(DRILL_PREFIX):
            by_kind.setdefault(attempt.question_id, []).append(attempt)
    report = []
    for key, tries in by_kind.items():
        card = Card.from_json(cards[key][0]) if key in cards else None
        right = sum(a.correct for a in tries)
        report.append(
            DrillProgress(
                kind=key.removeprefix(DRILL_PREFIX),
                topic=tries[-1].topic,
                attempts=len(tries),
                correct=right,
                accuracy=right / len(tries),
                mastery=question_mastery(card, tries[-1].correct, now),
                last_at=tries[-1].answered_at,
            )
        )
    report.sort(key=lambda p: (p.mastery, p.accuracy, p.kind))
    return report
