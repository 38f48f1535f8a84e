"""Named checks: a claim a demo illustrates, and whether the numbers of one run bear it out.

A check is a pure function of measured numbers, so a test can feed it numbers that break the claim
and see it fail. Its `detail` states the numbers behind the verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def within(measured: float, expected: float, rel: float, slack: float = 0.0) -> bool:
    """|measured - expected| <= rel * |expected| + slack."""
    return abs(measured - expected) <= rel * abs(expected) + slack
