"""Writing for the plain modes: a console whose lines carry no trailing padding.

rich pads some renderables (Markdown paragraphs, headings) with spaces to the console's width; a
screen reader or a pipe should get the words and nothing after them.
"""

from __future__ import annotations

import re
import sys
from typing import IO

from rich.console import Console

_ESCAPE_AT_END = re.compile(r"(?:\x1b\[[0-9;]*m)+$")


def trim_line(line: str) -> str:
    """A line without trailing spaces, keeping any style codes that close it."""
    codes = ""
    while True:
        match = _ESCAPE_AT_END.search(line)
        if match:
            codes = match.group(0) + codes
            line = line[: match.start()]
        stripped = line.rstrip(" ")
        if stripped == line and not match:
            return line + codes
        line = stripped


class TrimmedLines:
    """A text stream that drops the spaces at the end of every complete line written to it.

    rich writes each print's complete lines in one call, so a line is never split between writes;
    a prompt (no newline yet) passes through unchanged.
    """

    def __init__(self, stream: IO[str]):
        self._stream = stream

    def write(self, text: str) -> int:
        lines = text.split("\n")
        trimmed = [trim_line(line) for line in lines[:-1]] + lines[-1:]
        self._stream.write("\n".join(trimmed))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")


def plain_console(stream: IO[str] | None = None) -> Console:
    """The plain modes' console: no highlighting guesses, no trailing padding."""
    return Console(file=TrimmedLines(stream or sys.stdout), highlight=False)
