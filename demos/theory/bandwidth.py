"""Bandwidths and durations as people write them: "50GB/s", "400Gbps", "25 GiB/s"; "90s", "5min", "2h".

Networks are sold in bits per second (a 400 Gb/s InfiniBand port moves 50 GB/s), storage and NVLink in
bytes per second, so the unit's b or B decides: a lower-case b before /s or ps is bits. Torch-free.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ddpfsdp.demos.base.units import parse_bytes

RATE_EXAMPLES = "50GB/s, 400Gbps, 400Gb/s or 25GiB/s (b = bits, B = bytes)"
DURATION_EXAMPLES = "90s, 5min, 2h or 1.5d (a bare number is seconds)"

_BITS = re.compile(r"^(?P<size>.*?[0-9.]\s*[kKmMgGtT]?i?)b(?:ps|/s)$")
_BYTES = re.compile(r"^(?P<size>.+?)(?:/s|ps)$")
_DURATION = re.compile(r"^(?P<number>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?P<unit>[a-z]*)$")
_SECONDS = {"": 1, "s": 1, "sec": 1, "ms": 1e-3, "us": 1e-6, "min": 60, "m": 60, "h": 3600, "hr": 3600,
            "hours": 3600, "d": 86400, "days": 86400}


def parse_rate(text: Any) -> float:
    """Bytes per second: 50GB/s -> 5e10; 400Gbps and 400Gb/s -> 5e10 (bits / 8); a bare number is B/s."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read {text!r} as a bandwidth; write it like {RATE_EXAMPLES}")
    if isinstance(text, (int, float)):
        if not text > 0 or math.isinf(text):
            raise ValueError(f"a bandwidth must be positive, got {text!r}; write it like {RATE_EXAMPLES}")
        return float(text)
    cleaned = str(text).strip().replace(" ", "")
    bits = _BITS.match(cleaned)
    try:
        if bits:
            return parse_bytes(bits["size"] + "B") / 8
        match = _BYTES.match(cleaned)
        return float(parse_bytes(match["size"] if match else cleaned))
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a bandwidth; write it like {RATE_EXAMPLES}") from None


def parse_duration_s(text: Any) -> float:
    """Seconds: 90s, 5min, 2h, 1.5d; a bare number is seconds."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read {text!r} as a duration; write it like {DURATION_EXAMPLES}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text).strip().lower().replace(" ", ""))
        if not match or match["unit"] not in _SECONDS:
            raise ValueError(f"cannot read {text!r} as a duration; write it like {DURATION_EXAMPLES}")
        seconds = float(match["number"]) * _SECONDS[match["unit"]]
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"a duration must be more than 0, got {text!r}; write it like {DURATION_EXAMPLES}")
    return seconds


def format_rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:,.4g} GB/s"


def format_duration(seconds: float) -> str:
    """12.3 ms, 4.56 s, 24.5 min, 3.10 h, 2.05 days."""
    if seconds < 1:
        return f"{seconds * 1e3:,.3g} ms"
    if seconds < 120:
        return f"{seconds:,.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.3g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:,.3g} h"
    return f"{seconds / 86400:,.3g} days"
