"""Counts and byte sizes as people write them ("7B", "80GB", "14.9GiB"), parsed and printed exactly.

Decimal and binary units are kept apart on purpose: GB = 1e9 bytes, GiB = 2**30 bytes. A GPU sold
as "80 GB" has about 80e9 bytes, which torch reports as about 74.5 GiB, and mixing the two is a common
source of a 7% error in napkin math.
"""

from __future__ import annotations

import math
import re

COUNT_SUFFIXES: dict[str, int] = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}

BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_BYTE_UNITS_FOLDED = {name.lower(): (name, size) for name, size in BYTE_UNITS.items()}

_NUMBER = r"(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_COUNT_RE = re.compile(rf"^{_NUMBER}\s*(?P<suffix>[a-zA-Z]*)$")

COUNT_EXAMPLES = "7B, 7.5e9, 350M, 125K or 1.3T (K=1e3, M=1e6, B=1e9, T=1e12)"
BYTES_EXAMPLES = "80GB, 14.9GiB, 512MiB or 1.5e10 (bytes); GB=1e9, GiB=2**30"


def _split(text: str, what: str, examples: str) -> tuple[float, str]:
    cleaned = text.strip().replace("_", "").replace(",", "")
    if cleaned.startswith("-"):
        raise ValueError(f"{what} must be positive, got {text!r}; write it like {examples}")
    match = _COUNT_RE.match(cleaned)
    if not match:
        raise ValueError(f"cannot read {text!r} as {what}; write it like {examples}")
    number = float(match["number"])
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {text!r}")
    return number, match["suffix"]


def parse_count(text: str | int | float) -> int:
    """A positive count such as a parameter count: 7B -> 7_000_000_000, 350M, 7.5e9, 125000."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read {text!r} as a count; write it like {COUNT_EXAMPLES}")
    if isinstance(text, (int, float)):
        number, suffix = float(text), ""
        if number <= 0 or not math.isfinite(number):
            raise ValueError(f"a count must be positive, got {text!r}; write it like {COUNT_EXAMPLES}")
    else:
        number, suffix = _split(text, "a count", COUNT_EXAMPLES)
    scale = COUNT_SUFFIXES.get(suffix.upper())
    if scale is None:
        raise ValueError(
            f"unknown suffix {suffix!r} in {text!r}; write a count like {COUNT_EXAMPLES}"
        )
    count = round(number * scale)
    if count <= 0:
        raise ValueError(f"a count must be at least 1, got {text!r}; write it like {COUNT_EXAMPLES}")
    return count


def parse_bytes(text: str | int | float) -> int:
    """A positive byte size: 80GB -> 80_000_000_000, 14.9GiB, 512MiB, 1.5e10 (a bare number is bytes).

    Unit names are matched without regard to case (80gb is 80GB), but the "i" of the binary units
    is what separates 1e9 from 2**30, so it must be written.
    """
    if isinstance(text, bool):
        raise ValueError(f"cannot read {text!r} as a size; write it like {BYTES_EXAMPLES}")
    if isinstance(text, (int, float)):
        number, unit = float(text), "B"
        if number <= 0 or not math.isfinite(number):
            raise ValueError(f"a size must be positive, got {text!r}; write it like {BYTES_EXAMPLES}")
    else:
        number, unit = _split(text, "a size", BYTES_EXAMPLES)
    folded = _BYTE_UNITS_FOLDED.get((unit or "B").lower())
    if folded is None:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r}; use one of {', '.join(BYTE_UNITS)} "
            f"(e.g. {BYTES_EXAMPLES})"
        )
    size = round(number * folded[1])
    if size <= 0:
        raise ValueError(f"a size must be at least 1 byte, got {text!r}")
    return size


def format_bytes(num_bytes: int | float, unit: str = "GB", digits: int = 2) -> str:
    """`num_bytes` in `unit` with the unit spelled out: format_bytes(1.2e11) == "120.00 GB".

    unit "auto" picks the largest decimal unit that keeps the number at or above 1, and "iec"
    the largest binary one (GiB, MiB, KiB).
    """
    if unit in ("auto", "iec"):
        choices = ("TB", "GB", "MB", "KB") if unit == "auto" else ("TiB", "GiB", "MiB", "KiB")
        unit = next((name for name in choices if abs(num_bytes) >= BYTE_UNITS[name]), "B")
    folded = _BYTE_UNITS_FOLDED.get(unit.lower())
    if folded is None:
        raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(BYTE_UNITS)}, auto or iec")
    name, size = folded
    if name == "B":
        return f"{round(num_bytes):,} B"
    return f"{num_bytes / size:,.{digits}f} {name}"


def format_iec(num_bytes: int | float | None) -> str:
    """Binary units spelled out, as a demo's tables print them (1.50 GiB, 12.30 MiB, 512 B); "n/a"
    for a figure the run does not have."""
    return "n/a" if num_bytes is None else format_bytes(num_bytes, "iec")


def format_count(count: int | float, digits: int = 2) -> str:
    """A count with a decimal suffix: 7_000_000_000 -> "7.00B"; small counts are printed whole."""
    for suffix in ("T", "B", "M", "K"):
        if abs(count) >= COUNT_SUFFIXES[suffix]:
            return f"{count / COUNT_SUFFIXES[suffix]:.{digits}f}{suffix}"
    return f"{round(count):,}"
