"""Labels in narrow table columns: broken after a space, "_", "-" or "/", never inside a word.

Rich wraps a cell at spaces only, so at 80 columns a check name such as
`ddp_overlaps_allreduce_with_backward` or a word such as "reduce-scatter" used to end in the middle
("…_with_backw…", "reduce-scatt…"). `Label` wraps at those boundaries instead and tells the table the
widest piece it cannot break, so the column keeps room for it; `Fitted` narrows a table that is too wide
for the terminal no further than the widest word of each column. Rich only, no torch.
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len

# A piece is a run of characters up to and including the boundaries after it.
_PIECE = re.compile(r"[^ _\-/]+[ _\-/]*|[ _\-/]+")


def pieces(text: str) -> list[str]:
    """`text` split after each boundary: "ddp_uses_all" -> ["ddp_", "uses_", "all"]."""
    return _PIECE.findall(text)


def widest_piece(text: str) -> int:
    """The cells of the widest part of `text` that has no boundary inside it."""
    return max((cell_len(p.rstrip(" ")) for line in text.split("\n") for p in pieces(line)), default=0)


def wrap_label(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells, each broken after a boundary; a piece wider than
    `width` (one long word) is folded, so nothing of it is lost."""
    width = max(1, width)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for piece in pieces(paragraph):
            if line and cell_len((line + piece).rstrip(" ")) > width:
                lines.append(line.rstrip(" "))
                line = piece.lstrip(" ")
            else:
                line += piece
            while cell_len(line.rstrip(" ")) > width:
                lines.append(line[:width])
                line = line[width:]
        lines.append(line.rstrip(" "))
    return lines


class Label:
    """A table cell that wraps at word, "_", "-" and "/" boundaries (see the module's doc)."""

    def __init__(self, text: str, style: str = "") -> None:
        self.text = text
        self.style = style

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        widest = max((cell_len(line) for line in self.text.split("\n")), default=0)
        return Measurement(min(widest_piece(self.text), options.max_width), min(widest, options.max_width))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield Text("\n".join(wrap_label(self.text, options.max_width)), style=self.style)


def _widest_word(cell: Any) -> int:
    """The cells of the widest part of `cell` that its wrapping cannot break."""
    if isinstance(cell, Label):
        return widest_piece(cell.text)
    text = getattr(cell, "plain", cell)
    return max((cell_len(word) for word in str(text).split()), default=0) if isinstance(text, str) else 0


def _widest_line(cell: Any) -> int:
    text = cell.text if isinstance(cell, Label) else getattr(cell, "plain", cell)
    return max((cell_len(line) for line in str(text).split("\n")), default=0)


def _padding_width(table: Any, index: int) -> int:
    """The cells of padding beside column `index`, from the table's public settings (as Rich lays it out)."""
    _, right, _, left = table.padding
    if table.collapse_padding:
        left, right = 0, abs(left - right)
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == len(table.columns) - 1 else right
    return left + right


def _rule_width(table: Any) -> int:
    """The cells the table's box takes beside its columns: the edges and one rule between columns."""
    if not table.box:
        return 0
    return (2 if table.show_edge else 0) + len(table.columns) - 1


class Fitted:
    """A Rich table that, when too wide for the terminal, narrows its columns no further than the widest
    word (or `Label` piece) in each, so no word is cut; Rich shrinks the widest columns without
    regard to the words in them, which is what cut "checkpointing" to "checkpoin…" at 80 columns.
    Where even the words do not fit, the table is left to Rich."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def __rich_console__(self, console: Any, options: Any) -> Any:
        table = self.table
        columns = table.columns
        if any(column.width is not None for column in columns):
            yield table
            return
        padding = [_padding_width(table, index) for index in range(len(columns))]
        lows = [max([_widest_word(column.header), *map(_widest_word, column.cells)]) + pad
                for column, pad in zip(columns, padding)]
        highs = [max([_widest_line(column.header), *map(_widest_line, column.cells), low - pad]) + pad
                 for column, pad, low in zip(columns, padding, lows)]
        room = options.max_width - _rule_width(table)
        if sum(highs) <= room or sum(lows) > room:
            yield table
            return
        spare, slack = room - sum(lows), sum(highs) - sum(lows)
        widths = [low + (high - low) * spare // slack for low, high in zip(lows, highs)]
        for index in sorted(range(len(widths)), key=lambda i: widths[i] - highs[i])[: room - sum(widths)]:
            widths[index] += 1
        saved = [column.width for column in columns]
        try:
            for column, width, pad in zip(columns, widths, padding):
                column.width = width - pad
            yield from console.render(table, options)
        finally:
            for column, width in zip(columns, saved):
                column.width = width
