"""Named checks: a claim a demo illustrates, and whether the numbers of one run bear it out.

A check is a pure function of measured numbers, so a test can feed it numbers that break the claim
and see it fail. Its `detail` states the numbers behind the verdict. Where a run's placement cannot
bear a claim out or refute it (ranks sharing one GPU, for a claim about time on N GPUs), the check is
reported as not judged (`not_judged`): `passed` is None, and `not_judged` says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NotRequired, TypedDict


class CheckDocument(TypedDict):
    """A check in a result's JSON form."""

    name: str
    passed: bool | None
    detail: str
    values: dict[str, Any]  # the numbers behind the verdict, each check's own
    not_judged: NotRequired[str | None]


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool | None  # None: not judged on this run's placement (`not_judged` says why)
    detail: str
    values: dict[str, Any] = field(default_factory=dict)
    not_judged: str | None = None

    def to_dict(self) -> CheckDocument:
        out = CheckDocument(**asdict(self))
        if self.not_judged is None:
            del out["not_judged"]
        return out

    @property
    def verdict(self) -> str:
        """'passed', 'failed' or 'not judged'."""
        return verdict(self.to_dict())


def not_judged(check: CheckDocument, reason: str) -> CheckDocument:
    """A check's dict as not judged: neither passed nor failed, with the reason and what was measured."""
    return {**check, "passed": None, "not_judged": reason,
            "detail": f"not judged here: {reason} (measured: {check.get('detail', '')})"}


def verdict(check: CheckDocument | Check) -> str:
    """'passed', 'failed' or 'not judged': how a check (or its dict) came out."""
    if isinstance(check, Check):
        check = check.to_dict()
    if check.get("passed") is None and check.get("not_judged"):
        return "not judged"
    return "passed" if check.get("passed") else "failed"


def within(measured: float, expected: float, rel: float, slack: float = 0.0) -> bool:
    """|measured - expected| <= rel * |expected| + slack."""
    return abs(measured - expected) <= rel * abs(expected) + slack


def _sizes(by_rank: list[int]) -> str:
    """Bytes per rank as a person reads them (rank 0 first); the exact bytes stay in the check's values."""
    from ddpfsdp.demos.base.units import format_iec

    return ", ".join(format_iec(value) for value in by_rank) or "none"


def peak_lower_on_every_rank(
    name: str, higher: tuple[str, list[int]], lower: tuple[str, list[int]], saving: str
) -> Check:
    """The claim that one configuration's peak bytes sit below another's on every rank.

    `higher` and `lower` are (label, peak bytes by rank); `saving` names what lowers the peak.
    """
    (higher_label, higher_by_rank), (lower_label, lower_by_rank) = higher, lower
    saved = [high - low for high, low in zip(higher_by_rank, lower_by_rank)]
    passed = bool(saved) and len(higher_by_rank) == len(lower_by_rank) and all(s > 0 for s in saved)
    return Check(
        name,
        passed,
        f"peak per rank: {higher_label} {_sizes(higher_by_rank)}, {lower_label} {_sizes(lower_by_rank)}; "
        f"{saving} saves {_sizes(saved)}",
        {
            f"{higher_label.replace(' ', '_')}_peak_bytes": higher_by_rank,
            f"{lower_label.replace(' ', '_')}_peak_bytes": lower_by_rank,
            "saved_bytes": saved,
        },
    )
