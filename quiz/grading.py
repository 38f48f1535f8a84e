"""Grading one answer of each kind, the same way in the app and in plain mode.

Choices are shuffled per attempt and graded by their text, never by position, so a shuffled screen
cannot grade a right answer wrong. Numeric answers are read with their units ("16 GB", "1.5e10",
"14.9GiB") and compared with a relative tolerance. An `explain` answer is graded by the person, who
compares their notes with the model answer's talking points.

No torch or textual here: plain mode and the CLI import it.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpfsdp.quiz.loader import BYTE_UNITS, UNITS, Question

# Self-grades for `explain`, in FSRS's rating order (1..4).
SELF_GRADES = ("again", "hard", "good", "easy")


@dataclass(frozen=True)
class Grade:
    correct: bool
    score: float  # 0..1: partial credit for multi and order, the self-grade for explain
    verdict: str  # one line for a person
    expected: str  # the right answer, written out
    given: Any  # what was answered, in a JSON-friendly form (texts, not positions)
    details: dict[str, Any] = field(default_factory=dict)
    self_grade: str | None = None


def shuffled(items: Sequence[str], rng: random.Random) -> list[str]:
    """A new order for one attempt; the caller keeps the texts, so grading never depends on positions."""
    order = list(items)
    rng.shuffle(order)
    return order


# --- numbers with units -------------------------------------------------------------------------

_NUMBER = re.compile(r"^\s*([-+]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


class QuantityError(ValueError):
    """An answer that cannot be read as a number in the question's unit."""


def parse_quantity(text: str, unit: str) -> float:
    """Read a typed answer into base units (bytes, a count, or a ratio).

    Units with a suffix are read by the analytic model's own parser (GB = 1e9, GiB = 2**30), so the
    quiz and `ddpfsdp calc` agree on what "16 GB" means. A bare number is read in the question's
    own unit ("16" to a question in GB is 16 GB), except that a bare number of 1e6 or more to a
    question in a byte unit is taken as bytes, since nobody means 15 billion GB.
    """
    match = _NUMBER.match(text.replace("×", "x"))
    if not match:
        raise QuantityError(f"{text.strip()!r} is not a number; {input_hint(unit)}")
    digits = match.group(1).replace("_", "").replace(",", "")
    number = finite(float(digits), text, input_hint(unit))
    suffix = match.group(2)
    try:
        return finite(_in_base_units(number, digits, suffix, unit), text, input_hint(unit))
    except OverflowError:
        raise QuantityError(_too_large(text, input_hint(unit))) from None


def unit_suffix(text: str) -> str:
    """The letters after a typed number ("GB" of "10 GB"); empty for a bare number or no number."""
    match = _NUMBER.match(text.replace("×", "x"))
    return match.group(2) if match else ""


def finite(value: float, text: str, hint: str) -> float:
    """`value`, or a QuantityError where it overflowed to infinity: 1e400 is read as inf, not a size."""
    if not math.isfinite(value):
        raise QuantityError(_too_large(text, hint))
    return value


def _too_large(text: str, hint: str) -> str:
    return f"{text.strip()!r} is out of range: it reads as infinity; {hint}"


def _in_base_units(number: float, digits: str, suffix: str, unit: str) -> float:
    from ddpfsdp.demos.base.units import parse_bytes, parse_count

    try:
        if unit in BYTE_UNITS:
            if not suffix:
                return number if number >= 1e6 else number * UNITS[unit]
            if suffix.lower() in ("byte", "bytes"):
                suffix = "B"
            return float(parse_bytes(f"{digits}{suffix}"))
        if unit == "x":
            if suffix and suffix.lower() != "x":
                raise QuantityError(f"the answer is a ratio; type a number such as 1.5 or 1.5x, not {suffix!r}")
            return number
        if not suffix:
            return number
        return float(parse_count(f"{digits}{suffix}"))
    except QuantityError:
        raise
    except ValueError as error:
        raise QuantityError(str(error)) from None


def input_placeholder(unit: str) -> str:
    """How to type an answer in `unit`, short enough for an input box at 80 columns."""
    if unit in BYTE_UNITS:
        return f"e.g. 16 {unit if unit != 'bytes' else 'GB'}, 14.9GiB or 1.5e10"
    if unit == "x":
        return "a ratio, e.g. 1.5 or 1.5x"
    return "a count, e.g. 7B, 350M or 1.2e9"


def input_hint(unit: str) -> str:
    """The placeholder as a sentence, with how a bare number is read."""
    if unit in BYTE_UNITS:
        return f"type {input_placeholder(unit)} (bytes); a bare small number is read in {unit}"
    return f"type {input_placeholder(unit)}"


def format_quantity(value: float, unit: str) -> str:
    """A value in base units, shown in the question's unit."""
    if unit in ("", "x"):
        if unit == "x":
            return f"{value:.3g}x"
        if abs(value) >= 1e4:
            for suffix, factor in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
                if abs(value) >= factor:
                    return f"{value / factor:.3g}{suffix} ({value:,.0f})"
        return f"{value:,.6g}"
    shown = value / UNITS[unit]
    if unit == "bytes":
        return f"{value:,.0f} bytes"
    return f"{shown:,.4g} {unit}"


# --- grading per kind ---------------------------------------------------------------------------


def grade_single(question: Question, chosen: str | None, shown: Sequence[str] = ()) -> Grade:
    """`shown` is the order the choices were displayed in, so a miss can name the right one by number."""
    correct = chosen == question.answer
    if correct:
        verdict = "Correct."
    elif chosen is None:
        verdict = "No answer chosen."
    elif question.answer in shown:
        verdict = f"Not quite: the right answer is {list(shown).index(question.answer) + 1}."
    else:
        verdict = "Not quite."
    return Grade(correct, 1.0 if correct else 0.0, verdict, str(question.answer), chosen)


@dataclass(frozen=True)
class ChoiceReview:
    """One choice as the feedback shows it: right or not, picked or not, and why."""

    number: int  # as it was shown, from 1
    text: str
    right: bool
    picked: bool
    reason: str  # "" for a question written without reasons


def review_choices(question: Question, grade: Grade, display_order: Sequence[str] = ()) -> list[ChoiceReview]:
    """Every choice of a single or multi question in the order it was shown, with its reason."""
    right = {question.answer} if question.kind == "single" else set(question.answer or ())
    picked = {grade.given} if question.kind == "single" else set(grade.given or ())
    reasons = dict(zip(question.choices, question.why))
    return [
        ChoiceReview(number, choice, choice in right, choice in picked, reasons.get(choice, ""))
        for number, choice in enumerate(display_order or question.choices, start=1)
    ]


def grade_multi(question: Question, chosen: Sequence[str], shown: Sequence[str] = ()) -> Grade:
    """`shown` is the order the choices were displayed in, so the verdict can name them by number."""
    right = set(question.answer or ())
    picked = set(chosen)
    missed = right - picked
    wrong = picked - right
    correct = not missed and not wrong
    # Partial credit for the progress view only; the card counts it as wrong unless it is exact.
    score = max(0.0, (len(right & picked) - len(wrong)) / len(right))
    if correct:
        verdict = f"Correct: all {len(right)} right choices and nothing else."
    else:
        parts = []
        if missed:
            parts.append(f"missed {_count_choices(missed, 'right choice', shown)}")
        if wrong:
            parts.append(f"chose {_count_choices(wrong, 'wrong choice', shown)}")
        verdict = "Not quite: " + "; ".join(parts) + "."
    ordered = [c for c in question.choices if c in picked]
    return Grade(
        correct,
        1.0 if correct else score,
        verdict,
        "; ".join(c for c in question.choices if c in right),
        ordered,
        {"missed": [c for c in question.choices if c in missed], "wrong": [c for c in question.choices if c in wrong]},
    )


def _count_choices(choices: set[str], noun: str, shown: Sequence[str]) -> str:
    """'2 right choices (4, 5)': how many, and their numbers as shown (when the order is known)."""
    text = f"{len(choices)} {noun}{'' if len(choices) == 1 else 's'}"
    numbers = sorted(shown.index(c) + 1 for c in choices if c in shown)
    if numbers and len(numbers) == len(choices):
        text += f" ({', '.join(map(str, numbers))})"
    return text


def grade_numeric(question: Question, text: str) -> Grade:
    """Raises QuantityError when the text is not a number in a known unit (the caller asks again)."""
    assert question.value is not None
    given = parse_quantity(text, question.unit)
    expected = question.value
    error = abs(given - expected) / abs(expected) if expected else abs(given)
    correct = error <= question.tolerance
    shown_expected = format_quantity(expected, question.unit)
    shown_given = format_quantity(given, question.unit)
    if correct:
        verdict = f"Correct: {shown_given} is within {question.tolerance:.0%} of {shown_expected}."
    else:
        direction = "high" if given > expected else "low"
        off = f"{given / expected:.2f}x" if expected else "off"
        verdict = f"Not quite: {shown_given} is {off} the analytic answer ({direction}); it is {shown_expected}."
    return Grade(
        correct,
        1.0 if correct else 0.0,
        verdict,
        shown_expected,
        {"text": text.strip(), "value": given},
        {"relative_error": error if math.isfinite(error) else None, "expected_value": expected},
    )


def allowed_steps(question: Question) -> list[frozenset[str]]:
    """For each place of an order question, the steps that may stand there: the right one, or any of its
    group where the question names steps that are independent of each other (`any_order`)."""
    allowed = [frozenset({step}) for step in question.steps]
    for group in question.any_order:
        places = [question.steps.index(step) for step in group]
        for place in places:
            allowed[place] = frozenset(group)
    return allowed


def grade_order(question: Question, ordered: Sequence[str]) -> Grade:
    steps = list(question.steps)
    if sorted(ordered) != sorted(steps):
        raise ValueError("an order answer must place every step exactly once")
    allowed = allowed_steps(question)
    in_place = sum(1 for step, fits in zip(ordered, allowed) if step in fits)
    correct = in_place == len(steps)
    first_wrong = next((i for i, (step, fits) in enumerate(zip(ordered, allowed)) if step not in fits), None)
    if correct:
        verdict = f"Correct: all {len(steps)} steps in order."
    else:
        should = (repr(steps[first_wrong]) if len(allowed[first_wrong]) == 1
                  else "one of " + ", ".join(repr(step) for step in steps if step in allowed[first_wrong]))
        verdict = f"Not quite: {in_place} of {len(steps)} steps in the right place; step {first_wrong + 1} should be {should}."
    return Grade(
        correct,
        in_place / len(steps),
        verdict,
        " → ".join(steps) + "".join(f" (steps {' and '.join(str(steps.index(s) + 1) for s in group)} in either order)"
                                    for group in question.any_order),
        list(ordered),
        {"in_place": in_place},
    )


@dataclass(frozen=True)
class StepReview:
    """One step of an order question as the feedback shows it: in place or not, and why it goes there."""

    number: int  # its place in the right order, from 1
    text: str
    yours: str  # the step the answer put in this place
    reason: str
    interchangeable: frozenset[str] = frozenset()  # steps that may stand here as well (`any_order`)

    @property
    def in_place(self) -> bool:
        return self.yours == self.text or self.yours in self.interchangeable


def review_steps(question: Question, grade: Grade) -> list[StepReview]:
    """The right order, each place with what the answer put there and why the right step belongs there."""
    given = list(grade.given or ())
    reasons = question.why or ("",) * len(question.steps)
    allowed = allowed_steps(question)
    return [
        StepReview(number, step, given[number - 1] if number <= len(given) else "", reason, allowed[number - 1])
        for number, (step, reason) in enumerate(zip(question.steps, reasons), start=1)
    ]


def grade_explain(question: Question, notes: str, self_grade: str) -> Grade:
    if self_grade not in SELF_GRADES:
        raise ValueError(f"self-grade must be one of {', '.join(SELF_GRADES)}")
    score = {"again": 0.0, "hard": 0.5, "good": 0.85, "easy": 1.0}[self_grade]
    correct = self_grade in ("good", "easy")
    return Grade(
        correct,
        score,
        f"Self-graded: {self_grade.capitalize()}.",
        "; ".join(question.talking_points),
        {"notes": notes},
        self_grade=self_grade,
    )
