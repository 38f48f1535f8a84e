"""The rows a page leaves over, so that a scroll above can grow into them and no further.

A page of parts sized to their content (a question that scrolls, then its choices and the answer
under it) wants the scroll as tall as its content when that fits, so the parts under it follow it at
once, and never taller than the rows the other parts leave, so none is pushed off the screen. CSS has
no "as tall as the content, at most what is left"; this does it by measure. The Room sits at the
page's end and takes what is left (1fr); each time its height changes, the scroll's cap grows by it.
When a part above may have grown, `shrink()` starts over from a small cap, and the cap grows back as
the Room reports the rows it got, a frame or two later.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.events import Resize
from textual.message import Message
from textual.widget import Widget


class Room(Widget, can_focus=False):
    DEFAULT_CSS = """
    Room { height: 1fr; }
    """
    MIN_ROWS = 3

    @dataclass
    class Grown(Message):
        """The scroll's cap was set to `rows`: every row the page could give it."""

        room: Room
        rows: int

    def __init__(self, scroll: str, **kwargs):
        super().__init__(**kwargs)
        self.scroll = scroll  # a selector for the scroll, on this screen

    def render(self) -> str:
        return ""

    def shrink(self) -> None:
        """Start over from a small cap, so that a part that grew above pushes nothing off the screen."""
        scroll = self.screen.query_one(self.scroll)
        # A scroll laid out at the small cap already gains nothing from it, and the cap a Resize just set,
        # not laid out yet, would be lost with no Resize to set it again.
        if scroll.outer_size.height > self.MIN_ROWS:
            scroll.styles.max_height = self.MIN_ROWS
        scroll.styles.min_height = None

    def on_resize(self, event: Resize) -> None:
        scroll = self.screen.query_one(self.scroll)
        # Read the rows left from where the Room starts, not from its height: with nothing left, 1fr is still
        # given one row, below the page's end.
        left = self.parent.content_region.bottom - self.region.y
        rows = max(self.MIN_ROWS, scroll.outer_size.height + left)
        if scroll.styles.max_height is None or scroll.styles.max_height.value != rows:
            scroll.styles.max_height = rows
            self.post_message(self.Grown(self, rows))
        # `height: auto` can come out a row short of what the content needs (an open Collapsible first in
        # the scroll), leaving the question cut with a scrollbar above empty rows: give it those rows.
        needed = scroll.virtual_size.height + scroll.gutter.height
        if left > 0 and scroll.outer_size.height < min(needed, rows):
            scroll.styles.min_height = min(needed, rows)
