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
import queue
import threading
from collections.abc import Iterator
from typing import IO, Any, Required, TypedDict

from ddpfsdp.demos.result.schema import JsonObject

PREFIX = "@@ddpfsdp "


class Event(TypedDict, total=False):
    """One event of the protocol: `event` names its kind, and the kind says which other keys it carries."""

    event: Required[str]  # "start", "progress", "log", "result" or "error"
    # start: what runs, where
    demo: str
    world_size: int
    device: str
    backend: str
    config: JsonObject
    env: JsonObject
    # progress: the step of how many, and what the demo says of it
    step: int
    steps: int
    phase: str
    run: str  # compare: which of its runs
    fault: str  # the failure lab: which fault
    loss: float | None
    # log and error
    message: str
    rank: int | None  # error: the rank that raised (None: the launcher's own)
    traceback: str
    # result: the demo's result, in its JSON form
    result: JsonObject


def _finite(value: Any) -> Any:
    # JSON has no NaN or Infinity; a diverged loss is reported as null rather than breaking the stream.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode(event: Event) -> str:
    """One line, with PREFIX, without a trailing newline."""
    return PREFIX + json.dumps(_finite(event), separators=(",", ":"), allow_nan=False)


def decode(line: str) -> Event | None:
    """The event on this line, or None when the line is not an event."""
    line = line.rstrip("\r\n")
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def read_in_background(stream: IO[str], poll_s: float = 0.2) -> Iterator[Event | None]:
    """The events decoded from `stream` until it closes, read on a thread of their own; None after
    each `poll_s` without one.

    The caller's thread never blocks in a read: a signal such as Ctrl+C that the kernel hands to
    another thread of the process runs its handler only when the main thread next executes Python,
    which a read on a silent pipe would put off for as long as the pipe stays silent.
    """
    events: queue.Queue[Event | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            event = decode(line)
            if event is not None:
                events.put(event)
        events.put(_CLOSED)

    threading.Thread(target=pump, name="event-reader", daemon=True).start()
    while True:
        try:
            event = events.get(timeout=poll_s)
        except queue.Empty:
            yield None
            continue
        if event is _CLOSED:
            return
        yield event


_CLOSED: Any = object()  # the stream's end, in the queue of `read_in_background`
