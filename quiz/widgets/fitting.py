"""Fitting text into a width: cut at a word where one fits, and say so with an ellipsis.

Widgets that lay out a line themselves (home's rows, the session header) use this, so that at 80
columns a description ends with "…" after a whole word instead of in the middle of one.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

ELLIPSIS = "…"


def ellipsize(text: str, width: int) -> str:
    """`text` if it fits in `width` cells; else its longest run of whole words that fits, then "…".

    A first word longer than the width is cut inside the word (there is nothing better to show).
    """
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    room = width - cell_len(ELLIPSIS)
    words = text.split(" ")
    kept = ""
    for word in words:
        candidate = f"{kept} {word}" if kept else word
        if cell_len(candidate) > room:
            break
        kept = candidate
    if not kept:
        return _cut(text, width)
    return kept.rstrip(" ,;:·-") + ELLIPSIS


def _cut(text: str, width: int) -> str:
    """The first `width - 1` cells of `text`, then "…"."""
    line = Text(text)
    line.truncate(width, overflow="ellipsis")
    return line.plain


def ellipsize_text(text: Text, width: int) -> Text:
    """A styled line fitted the same way as `ellipsize`, keeping the styles of what is kept."""
    fitted = ellipsize(text.plain, width)
    if fitted == text.plain:
        return text.copy()
    kept = text[: len(fitted) - len(ELLIPSIS)]
    kept.append(ELLIPSIS)
    return kept
