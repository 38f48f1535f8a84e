"""Reading and grading what a person types at a step, and saving it the moment it is graded.

Sizes are read as the quiz reads them (grading.parse_quantity: "33 GB", "14.9GiB", 1.5e10 bytes);
times take s, ms or µs ("1.2", "1.2 s", "850ms"); shares take a percentage ("29" or "29%"); choices
take the option's number. Anything else raises QuantityError with a hint for this step, and nothing
is graded or saved.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime

from ddpfsdp.quiz import grading, scheduler
from ddpfsdp.quiz.grading import Grade, QuantityError
from ddpfsdp.quiz.interview.scenario import Scenario, Step, show
from ddpfsdp.quiz.store import Store

_NUMBER = re.compile(r"^\s*([-+]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%]*)\s*$")
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3,
            "us": 1e-6, "µs": 1e-6, "min": 60.0}


def hint(step: Step) -> str:
    if step.unit in ("GB", "GiB"):
        other = "40 GB" if step.unit == "GiB" else "14.9GiB"
        return f"type a size such as 12.5 {step.unit}, {other} or 1.5e10 (bytes); a bare small number is read in {step.unit}"
    if step.unit == "s":
        return "type a time such as 1.2 (seconds), 1.2 s or 850 ms"
    if step.unit == "%":
        return "type a percentage such as 29 or 29%"
    if step.unit == "choice":
        return f"type the number of an option, 1 to {len(step.options)}"
    if step.unit == "count":
        return "type a whole number, such as 12"
    return "say it aloud or type notes, then Enter to see the talking points"


PLACEHOLDERS = {"GB": "a size, e.g. 12.5 GB", "GiB": "a size, e.g. 14.9 GiB", "s": "a time, e.g. 1.2 s or 850 ms",
                "%": "a percentage, e.g. 29%", "choice": "the option's number", "count": "a whole number",
                "explain": "notes (optional), then Enter for the talking points"}


def _split(text: str, step: Step) -> tuple[float, str]:
    match = _NUMBER.match(text)
    if not match:
        raise QuantityError(f"{text.strip()!r} is not a number; {hint(step)}")
    number = grading.finite(float(match.group(1).replace("_", "").replace(",", "")), text, hint(step))
    return number, match.group(2)


def read(step: Step, text: str) -> float:
    """The typed answer in the step's base unit: bytes, seconds, a share, a count or an option number."""
    if step.unit in ("GB", "GiB"):
        try:
            return grading.parse_quantity(text, step.unit)
        except QuantityError as error:
            reason = f"{text.strip()!r} is not a number" if "is not a number" in str(error) else str(error)
            raise QuantityError(f"{reason}; {hint(step)}") from None
    number, suffix = _split(text, step)
    if step.unit == "s":
        scale = _SECONDS.get(suffix, _SECONDS.get(suffix.lower()))
        if scale is None:
            raise QuantityError(f"{suffix!r} is not a unit of time; {hint(step)}")
        return number * scale
    if step.unit == "%" and suffix in ("", "%"):
        return number / 100
    if suffix:
        raise QuantityError(f"{text.strip()!r} has a unit this step does not take; {hint(step)}")
    if step.unit == "choice" and not (number.is_integer() and 1 <= number <= len(step.options)):
        raise QuantityError(f"there is no option {text.strip()}; {hint(step)}")
    return number


def grade(step: Step, text: str) -> Grade:
    """Grade a typed answer against the analytic model's; QuantityError when it cannot be read."""
    given = read(step, text)
    expected = float(step.answer)
    if step.unit in ("choice", "count"):
        error, correct = (0.0 if given == expected else math.inf), given == expected
    elif step.unit == "%":
        # Relative to the share, with an absolute floor: a 3% key is not passed by 0%, a 0% key takes 1 point.
        error = abs(given - expected)
        correct = error <= max(step.tolerance * abs(expected), step.floor) + 1e-12
    else:
        error = abs(given - expected) / abs(expected) if expected else abs(given)
        correct = error <= step.tolerance
    shown = _shown(step, given)
    if correct:
        verdict = f"Correct: {shown}" + ("." if step.unit in ("choice", "count") else f" is {step.tolerance_text} of {step.answer_text}.")
    else:
        verdict = f"Not quite: you said {shown}; the analytic model says {step.answer_text} ({step.tolerance_text})."
    return Grade(correct, 1.0 if correct else 0.0, verdict, step.answer_text, {"text": text.strip(), "value": given},
                 {"error": error if math.isfinite(error) else None, "expected_value": expected})


def _shown(step: Step, value: float) -> str:
    if step.unit == "choice":
        return f"option {int(value)}"
    return show(value, step.unit)


def grade_explain(step: Step, notes: str, self_grade: str) -> Grade:
    """The person's own grade against the talking points, scored as an explain question is."""
    return grading.grade_explain(step, notes, self_grade)


def skipped(step: Step) -> Grade:
    return Grade(False, 0.0, "Skipped.", step.answer_text, {"text": "", "value": None, "skipped": True})


def record(store: Store, scenario: Scenario, step: Step, graded: Grade, *, time_s: float, now: datetime) -> int:
    """Commit one step's answer at once, as an attempt at its kind's card (it counts toward the step's
    topic), with the scenario and step it answered."""
    given = {**(graded.given if isinstance(graded.given, dict) else {"value": graded.given}),
             "scenario": scenario.id, "seed": scenario.seed, "family": scenario.family, "step": step.id,
             "skill": step.skill}
    attempt_id, _, _ = scheduler.record_answer(store, scheduler.interview_card(step.kind, step.topic),
                                               replace(graded, given=given), time_s=time_s, now=now, mode="interview")
    return attempt_id
