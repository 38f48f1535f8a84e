"""The bank as flashcards: one card per question, with its choices, key, reasons and model answer.

`ddpfsdp export csv` writes these rows as they are; `ddpfsdp export anki` (quiz/anki.py) makes Anki
notes of them. A card's id is its question's id, so a card exported again is the same card.
No torch or textual here.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass

from ddpfsdp.quiz.grading import format_quantity
from ddpfsdp.quiz.loader import LEVELS, Bank, Question

CSV_COLUMNS = ("id", "topic", "topic_title", "level", "level_name", "kind", "prompt", "choices", "key", "reasons",
               "model_answer", "tags")


@dataclass(frozen=True)
class Card:
    id: str
    topic: str
    topic_title: str
    level: int
    level_name: str
    kind: str
    prompt: str  # Markdown
    choices: tuple[str, ...]  # single and multi: the choices; order: the steps as the bank lists them
    key: tuple[str, ...]  # the right choice(s), the value with its unit, the steps in order, or the talking points
    reasons: tuple[str, ...]  # single, multi and order: one line per choice or step, "choice: why"
    model_answer: str  # Markdown
    tags: tuple[str, ...]  # "topic::<id>", "level::<n>", the question's own tags

    def csv_row(self) -> dict[str, str]:
        """One CSV row: lists one item a line."""
        return {name: "\n".join(value) if isinstance(value, tuple) else str(value)
                for name, value in asdict(self).items()}


def key_of(question: Question) -> tuple[str, ...]:
    if question.kind == "single":
        return (question.answer,)
    if question.kind == "multi":
        return tuple(question.answer)
    if question.kind == "numeric":
        return (format_quantity(question.value, question.unit),)
    if question.kind == "order":
        return question.steps
    return question.talking_points


def card_of(bank: Bank, question: Question) -> Card:
    items = question.choices or question.steps
    reasons = tuple(f"{item}: {why}" for item, why in zip(items, question.why))
    try:
        answer = question.model_answer()
    except OSError as error:
        answer = f"(The model answer {question.answer_file} could not be read: {error.strerror}.)"
    tags = (f"topic::{question.topic}", f"level::{question.level}", *(f"tag::{tag}" for tag in question.tags))
    return Card(question.id, question.topic, bank.topics[question.topic].title, question.level,
                LEVELS[question.level], question.kind, question.prompt.strip(), items, key_of(question), reasons,
                answer.strip(), tags)


def cards(bank: Bank) -> list[Card]:
    """Every question of the bank as a card, in bank order."""
    return [card_of(bank, question) for question in bank.questions.values()]


def csv_text(rows: list[Card]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for card in rows:
        writer.writerow(card.csv_row())
    return out.getvalue()
