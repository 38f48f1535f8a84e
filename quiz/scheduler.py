"""Spaced repetition with FSRS, what to ask next, and mastery by topic.

Objective answers (single, multi, numeric, order, sizing drills, interview steps) are rated from
correctness and the time taken: a wrong answer is Again; a right one is Easy when quick, Good at a
normal pace, Hard when slow, with the pace judged against what a kind of question usually needs. An
`explain` answer (a question or an interview's closing step) uses the person's own self-grade. Mastery of a question is the probability FSRS gives of recalling it now, counted only when
the last answer was right; a topic's mastery is the mean over its questions, unseen ones counting 0.

No torch or textual here.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fsrs import Card, Rating, Scheduler, State

from ddpfsdp.quiz.loader import Bank, Question
from ddpfsdp.quiz.store import Store

if TYPE_CHECKING:  # grading is imported when an answer is rated, not for home's progress
    from ddpfsdp.quiz.grading import Grade

# Seconds a prepared person needs for a question of each kind; quick is under half, slow over twice.
EXPECTED_TIME_S = {"single": 20.0, "multi": 35.0, "numeric": 60.0, "order": 40.0, "explain": 120.0, "drill": 90.0,
                   "interview": 120.0, "kata": 1800.0}

DRILL_PREFIX = "drill:"
"""Drill results are attempts at the card `drill:<kind>`: one card per kind of sizing problem."""

INTERVIEW_PREFIX = "interview:"
"""Interview steps are attempts at the card `interview:<step kind>`: one card per kind of step."""

KATA_PREFIX = "kata:"
"""A kata passed (or given up) is an attempt at the card `kata:<name>`: code written counts like an answer."""

GENERATED_PREFIXES = (DRILL_PREFIX, INTERVIEW_PREFIX, KATA_PREFIX)
"""Cards that are not bank questions, which count toward the topic their attempts name."""

# Fuzzing spreads reviews of large decks; this bank is small, and a deterministic schedule is easier
# to reason about (and to test).
_SCHEDULER = Scheduler(enable_fuzzing=False)


@dataclass(frozen=True)
class CardRef:
    """What an attempt is at: its card, the topic it counts toward, the kind saved with it, and the
    time a prepared person needs for it (the pace its rating is judged against)."""

    card_id: str
    topic: str
    kind: str
    expected_s: float


def card_of(question: Question) -> CardRef:
    """A bank question's card: harder levels are given more time."""
    expected_s = EXPECTED_TIME_S[question.kind] * (1 + 0.25 * (question.level - 1))
    return CardRef(question.id, question.topic, question.kind, expected_s)


def drill_card(kind: str, topic: str) -> CardRef:
    return CardRef(DRILL_PREFIX + kind, topic, "drill", EXPECTED_TIME_S["drill"])


def interview_card(kind: str, topic: str) -> CardRef:
    return CardRef(INTERVIEW_PREFIX + kind, topic, "interview", EXPECTED_TIME_S["interview"])


def kata_card(name: str, topic: str) -> CardRef:
    return CardRef(KATA_PREFIX + name, topic, "kata", EXPECTED_TIME_S["kata"])


def kata_rating(passed: bool, failed_checks: int, hints: int) -> Rating:
    """A kata's review: given up is Again; passed at the first check with no hint is Easy; after a few failed
    checks and no hint Good; after more, or with hints, Hard."""
    if not passed:
        return Rating.Again
    if hints:
        return Rating.Hard
    if failed_checks == 0:
        return Rating.Easy
    return Rating.Good if failed_checks <= 3 else Rating.Hard


def record_kata(store: Store, name: str, topic: str, *, passed: bool, failed_checks: int, hints: int, time_s: float,
                now: datetime) -> tuple[Card, Rating]:
    """Review a kata's card once it is passed or given up, and commit it as an attempt of its topic."""
    ref = kata_card(name, topic)
    rating = kata_rating(passed, failed_checks, hints)
    card = load_card(store, ref.card_id, now)
    card, _log = _SCHEDULER.review_card(card, rating, review_datetime=now, review_duration=int(time_s * 1000))
    store.record_attempt(question_id=ref.card_id, topic=topic, kind="kata",
                         answer={"failed_checks": failed_checks, "hints": hints, "gave_up": not passed},
                         correct=passed, score=float(passed), time_s=time_s, rating=int(rating), answered_at=now,
                         card_json=card.to_json(), due=card.due, mode="kata")
    return card, rating


def rating_for(item: Question | CardRef, grade: Grade, time_s: float) -> Rating:
    """A self-grade as given; otherwise Again when wrong, else Easy, Good or Hard by the pace."""
    ref = item if isinstance(item, CardRef) else card_of(item)
    if grade.self_grade is not None:
        from ddpfsdp.quiz.grading import SELF_GRADES

        return Rating(SELF_GRADES.index(grade.self_grade) + 1)
    if ref.kind == "explain":
        raise ValueError("an explain answer is rated by its self-grade")
    if not grade.correct:
        return Rating.Again
    if time_s < 0.5 * ref.expected_s:
        return Rating.Easy
    if time_s > 2.0 * ref.expected_s:
        return Rating.Hard
    return Rating.Good


def _card_id(question_id: str) -> int:
    # A stable id per question (fsrs would otherwise derive one from the clock and sleep 1 ms).
    if question_id.startswith(GENERATED_PREFIXES):
        # Generated cards share their prefix, so their id comes from the whole name.
        return int.from_bytes(hashlib.sha256(question_id.encode()).digest()[:7], "big")
    return int.from_bytes(question_id.encode()[:7].ljust(7, b"\0"), "big")


def load_card(store: Store, question_id: str, now: datetime) -> Card:
    raw = store.card_json(question_id)
    if raw is None:
        return Card(card_id=_card_id(question_id), due=now)
    return Card.from_json(raw)


def record_answer(
    store: Store,
    item: Question | CardRef,
    grade: Grade,
    *,
    time_s: float,
    now: datetime,
    mode: str = "practice",
) -> tuple[int, Card, Rating]:
    """Rate an answer to a question, a drill or an interview step, move its card, and commit the
    attempt and the card together.

    The card is read in the transaction that writes it: another writer (a second app, the plain quiz)
    moving the same card waits for this one and then reads its result, so no review is lost."""
    ref = item if isinstance(item, CardRef) else card_of(item)
    rating = rating_for(ref, grade, time_s)
    with store.transaction():
        card = load_card(store, ref.card_id, now)
        card, _log = _SCHEDULER.review_card(card, rating, review_datetime=now, review_duration=int(time_s * 1000))
        attempt_id = store.record_attempt(
            question_id=ref.card_id,
            topic=ref.topic,
            kind=ref.kind,
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
MOCK_MAX_EXPLAIN = 2


def mock_interview(bank: Bank, rng: random.Random, size: int = MOCK_SIZE) -> list[Question]:
    """A mixed set, harder last: one question of every kind the bank has first, then the rest from
    topics not yet asked, at most `MOCK_MAX_EXPLAIN` of them `explain`.

    Picking a kind, or filling, takes a question from a topic the set does not have yet when there is
    one, so 8 questions cover 8 topics where the bank has them.
    """
    pool = list(bank.questions.values())
    rng.shuffle(pool)
    picked: list[Question] = []

    def take(wanted) -> None:
        topics = {q.topic for q in picked}
        explains = sum(q.kind == "explain" for q in picked)
        fits = [q for q in pool if q not in picked and wanted(q) and (q.kind != "explain" or explains < MOCK_MAX_EXPLAIN)]
        fresh = [q for q in fits if q.topic not in topics]
        if fresh or fits:
            picked.append((fresh or fits)[0])

    kinds = sorted({q.kind for q in pool})
    rng.shuffle(kinds)
    for kind in kinds[:size]:
        take(lambda q, kind=kind: q.kind == kind)
    while len(picked) < min(size, len(pool)):
        before = len(picked)
        take(lambda q: True)
        if len(picked) == before:
            break
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
    interview_steps: int = 0  # kinds of interview step of this topic tried, each one more card
    katas: int = 0  # katas of this topic written (passed or given up at least once), each one more card

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

    Each drill kind, each kind of interview step and each kata tried counts as one more card of the topic its
    attempts name: its attempts join the topic's accuracy and its card joins the topic's mastery.
    """
    cards = store.cards()
    last_correct: dict[str, bool] = {}
    per_topic: dict[str, list[bool]] = {}
    generated: dict[str, str] = {}  # card -> topic, for drill and interview cards
    for attempt in store.attempts():
        if attempt.question_id in bank.questions:
            topic_id = bank.questions[attempt.question_id].topic
        elif attempt.question_id.startswith(GENERATED_PREFIXES) and attempt.topic in bank.topics:
            topic_id = generated[attempt.question_id] = attempt.topic
        else:
            continue
        last_correct[attempt.question_id] = attempt.correct
        per_topic.setdefault(topic_id, []).append(attempt.correct)
    report = []
    for topic in bank.topics.values():
        ids = topic.question_ids
        extra = [card for card, topic_id in generated.items() if topic_id == topic.id]
        masteries = [
            question_mastery(Card.from_json(cards[q][0]) if q in cards else None, last_correct.get(q, False), now)
            for q in (*ids, *extra)
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
                drills=sum(1 for card in extra if card.startswith(DRILL_PREFIX)),
                interview_steps=sum(1 for card in extra if card.startswith(INTERVIEW_PREFIX)),
                katas=sum(1 for card in extra if card.startswith(KATA_PREFIX)),
            )
        )
    # At equal mastery a topic answered badly is weaker than one not tried yet.
    report.sort(key=lambda p: (p.mastery, p.accuracy is None, p.accuracy or 0.0, bank.topics[p.topic].order))
    return report


@dataclass(frozen=True)
class LevelProgress:
    level: int
    name: str  # loader.LEVELS: fundamentals ... staff-level trade-offs
    questions: int
    seen: int
    attempts: int
    correct: int
    accuracy: float | None  # None before the first attempt
    mastery: float  # 0..1, the mean over the level's questions, unseen ones 0

    def to_dict(self) -> dict:
        return asdict(self)


def level_progress(bank: Bank, store: Store, now: datetime) -> list[LevelProgress]:
    """Per question level, 1 to 4, mastery and accuracy as `progress` counts them for a topic.

    Only the bank's questions have a level: drills and interview steps count toward their topics, not here.
    """
    from ddpfsdp.quiz.loader import LEVELS

    cards = store.cards()
    last_correct: dict[str, bool] = {}
    results: dict[int, list[bool]] = {}
    for attempt in store.attempts():
        question = bank.questions.get(attempt.question_id)
        if question is not None:
            last_correct[question.id] = attempt.correct
            results.setdefault(question.level, []).append(attempt.correct)
    report = []
    for level, name in LEVELS.items():
        ids = [q.id for q in bank.questions.values() if q.level == level]
        masteries = [question_mastery(Card.from_json(cards[q][0]) if q in cards else None, last_correct.get(q, False), now)
                     for q in ids]
        answers = results.get(level, [])
        report.append(LevelProgress(
            level=level, name=name, questions=len(ids), seen=sum(1 for q in ids if q in last_correct),
            attempts=len(answers), correct=sum(answers), accuracy=sum(answers) / len(answers) if answers else None,
            mastery=sum(masteries) / len(masteries) if masteries else 0.0,
        ))
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
