"""Arguments as people give them to the analytic model: counts written "7B" or "350M", flags
written "yes" or "false", names in any case (a question bank's TOML and the CLI pass them as strings)."""

from __future__ import annotations

from typing import Any, Iterable

from ddpfsdp.demos.base.units import parse_count


def read_count(value: Any, what: str) -> int:
    """`value` as a whole count ("7B", "7.5e9", 8); an error names `what` was being read."""
    try:
        return parse_count(value)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from None


def read_choice(value: Any, choices: Iterable[str], what: str) -> str:
    """`value` in lower case, when it is one of `choices`; else an error that lists them."""
    key = str(value).strip().lower()
    if key not in choices:
        raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")
    return key


def read_flag(value: Any) -> bool:
    """`value` as true or false: a bool, a number, or one of 1/true/yes/on, 0/false/no/off/""."""
    if isinstance(value, str):
        folded = value.strip().lower()
        if folded in ("1", "true", "yes", "on"):
            return True
        if folded in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"cannot read {value!r} as true/false")
    return bool(value)
