"""Make a symptom comparable across runs: what differs between two runs of the same fault is masked.

A symptom quoted in the question bank is compared with the one a run prints today, after both pass
through `normalise`: absolute paths keep only their file name, a line number after a file name, a pid,
a host:port, a clock time or a duration becomes a placeholder, and runs of spaces become one. What is
left (torch's words, ops, sizes, dtypes, sequence ids, measured values) must match exactly. A quote
may wrap a long line onto the next (each part is then found on its own) and may elide with "...": the
parts either side must be found in that order within one live line.
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # /a/b/c/file.py -> <path>/file.py (torch's build paths and this machine's alike)
    (re.compile(r"(?:/[\w.+\-]+)+/([\w.+\-]+)"), r"<path>/\1"),
    # file.py:123 -> file.py:<line>
    (re.compile(r"(\.\w+):\d+\b"), r"\1:<line>"),
    # 127.0.0.1:29500, [127.0.0.1]:29500, localhost:29500, [::1]:29500 -> <host>:<port>
    (re.compile(r"\[?(?:\d{1,3}\.){3}\d{1,3}\]?:\d+\b|\blocalhost:\d+\b|\[[\w:.]*\]:\d+"), "<host>:<port>"),
    (re.compile(r"\b(pid|PID|process)[ =:]+\d+\b"), r"\1 <pid>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x<addr>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b"), "<duration>"),
    (re.compile(r"[ \t]+"), " "),
)


def normalise(text: str) -> str:
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return "\n".join(line.strip() for line in text.splitlines())


ELISION = "..."


def _found_in(line: str, live_line: str) -> bool:
    """Whether a quoted line, with its elisions, is in one live line: each part, in order."""
    at = 0
    for part in (part.strip() for part in line.split(ELISION)):
        found = live_line.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def missing_lines(quoted: str, live: str) -> list[str]:
    """The quoted lines (normalised) that the live symptom (normalised) does not contain."""
    live_lines = normalise(live).splitlines()
    return [line for line in normalise(quoted).splitlines()
            if line and not any(_found_in(line, live_line) for live_line in live_lines)]
