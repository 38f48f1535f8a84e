"""Mastery as a bar of blocks, coloured by how well a topic is known: home and progress both draw it."""

from __future__ import annotations

from rich.text import Text


def mastery_bar(mastery: float, width: int = 12) -> Text:
    filled = round(mastery * width)
    style = "green" if mastery >= 0.7 else "yellow" if mastery >= 0.35 else "red"
    return Text.assemble(("█" * filled, style), ("░" * (width - filled), "dim"), f" {mastery:>4.0%}")
