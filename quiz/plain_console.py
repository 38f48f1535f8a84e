"""Writing for the plain modes: a console whose lines carry no trailing padding.

rich pads some renderables (Markdown paragraphs, headings) with spaces to the console's width; a
screen reader or a pipe should get the words and nothing after them.
"""

from __future__ import annotations

import re
import sys
from typing import IO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

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


def titled_rule(console: Console, title: str | Text) -> None:
    """A rule with `title` in it where the title fits the console's width; where it does not, a plain rule
    with the title under it, wrapped (a rule cuts a long title at the width, "graded within…")."""
    from rich.rule import Rule

    title = Text.from_markup(title) if isinstance(title, str) else title
    if cell_len(title.plain) + 6 <= console.width:
        console.print(Rule(title, align="left"))
        return
    console.print(Rule())
    console.print(title)


def trimmed_console(*, stderr: bool = False) -> Console:
    """A command's console: rich's own, with no line padded to the terminal's width by trailing spaces."""
    return Console(file=TrimmedLines(sys.stderr if stderr else sys.stdout), stderr=stderr)


def no_terminal() -> str | None:
    """Why a full-screen app cannot run here (`ddpfsdp quiz </dev/null >file` would write escape codes to
    the file and wait for keys that never come), or None where standard input and output are terminals."""
    missing = [name for name, stream in (("input", sys.stdin), ("output", sys.stdout)) if not _is_terminal(stream)]
    if not missing:
        return None
    return f"standard {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} not a terminal"


def _is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


def plain_without_terminal(command: str) -> bool:
    """True, once said on standard error, where `ddpfsdp COMMAND`'s full-screen app has no terminal to run in:
    the command then runs line by line, as with --plain."""
    reason = no_terminal()
    if reason:
        print(f"No full-screen app here: {reason}. Running line by line, as `ddpfsdp {command} --plain` does.",
              file=sys.stderr, flush=True)
    return reason is not None
