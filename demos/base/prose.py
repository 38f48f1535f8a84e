"""Prose with commands in it, wrapped to the terminal with every command on one line.

    console.print(Prose("... then run `ddpfsdp demo fsdp --simulate --world 8` to ..."), crop=False)
    table.add_row("training demos", Prose(text))     # in a table cell, wrapped to the cell

Rich wraps at any space, so at 80 columns "ddpfsdp quiz --topic sampler" could end one line at "--topic"
and a person copying it got half a command. Here a command (in backticks, or from "ddpfsdp" to the
last word that can belong to it) is one unbreakable piece: it moves whole to the next line, and one
longer than the width keeps its line rather than breaking. The lines carry no trailing spaces.
Rich only, no torch.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

# A space inside a command while the text is wrapped: one cell wide, not whitespace to rich, in no text.
_KEPT_SPACE = "\ue000"
COMMAND = re.compile(r"`ddpfsdp [^`\n]*`|\bddpfsdp(?: [\w./:=+\-<>]+)+")


def command_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each command in `text`."""
    return [match.span() for match in COMMAND.finditer(text)]


def keep_commands(text: Text | str, width: int) -> Text:
    """`text` (markup in a str is read) wrapped to `width` cells, each command whole on its line."""
    text = Text.from_markup(text) if isinstance(text, str) else text.copy()
    plain = text.plain
    for start, end in command_spans(plain):
        plain = plain[:start] + plain[start:end].replace(" ", _KEPT_SPACE) + plain[end:]
    text.plain = plain  # the same length: every style stays where it was
    lines = [piece for line in text.split(allow_blank=True) for piece in line.divide(_breaks(line.plain, width))]
    for line in lines:
        line.rstrip()
    wrapped = Text("\n").join(lines)
    wrapped.plain = wrapped.plain.replace(_KEPT_SPACE, " ")
    return wrapped


def _breaks(line: str, width: int) -> list[int]:
    """Where `line` breaks: before each word that would end past `width`, never inside a word."""
    breaks, used = [], 0
    for word in re.finditer(r"\S+\s*", line):
        cells = cell_len(word.group().rstrip())
        if used and used + cells > width:
            breaks.append(word.start())
            used = 0
        used += cell_len(word.group())
    return breaks


class Prose:
    """A renderable of `keep_commands`: wrapped to the width it is given (the console's, or a table cell's)."""

    def __init__(self, text: Text | str):
        self.text = Text.from_markup(text) if isinstance(text, str) else text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wrapped = keep_commands(self.text, options.max_width)
        wrapped.no_wrap, wrapped.overflow = True, "ignore"  # wrapped already; a long command keeps its line
        yield wrapped

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        for start, end in command_spans(plain):
            plain = plain[:start] + plain[start:end].replace(" ", _KEPT_SPACE) + plain[end:]
        words = [cell_len(word) for word in plain.split()] or [0]
        return Measurement(max(words), max(cell_len(line) for line in self.text.plain.split("\n"))).with_maximum(
            options.max_width)
