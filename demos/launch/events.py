"""The JSON-lines protocol between the ranks and whoever launched them.

Rank 0 writes one event per line on stdout, each line starting with PREFIX so that anything else
torch or a library prints is never mistaken for an event. Any rank may write an `error` event before
it dies. The CLI and the app render the same events.

Events:
  {"event": "start", "demo": str, "world_size": int, "device": str, "backend": str, "config": {...}}
  {"event": "progress", "step": int, "steps": int, ...metrics such as "loss", "phase"}
  {"event": "log", "message": str}
  {"event": "result", "result": {...}}            # exactly one, at the end, gathered on rank 0
  {"event": "error", "rank": int, "message": str, "traceback": str}
"""

from __future__ import annotations

import json
import math
from typing import Any

PREFIX = "@@ddpfsdp "


def _finite(value: Any) -> Any:
    # JSON has no NaN or Infinity; a diverged loss is reported as null rather than breaking the stream.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode(event: dict[str, Any]) -> str:
    """One line, with PREFIX, without a trailing newline."""
    return PREFIX + json.dumps(_finite(event), separators=(",", ":"), allow_nan=False)


def decode(line: str) -> dict[str, Any] | None:
    """The event on this line, or None when the line is not an event."""
    line = line.rstrip("\r\n")
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None
