"""The header of a session's screens: what is being asked on the left, where you are and the time left
on the right.

The right-hand part (the position, such as "3 of 8", and a timer when the session has a deadline) is
always shown whole; the left-hand part gives way, cut after a whole word with an ellipsis. The same
header sits on the question and on the feedback screen, so the timer never disappears while it runs.
Any timed mode can use it: pass what to show, the position, and a function that says the seconds left
(a countdown, such as the mock interview's) or the seconds taken (a clock that counts up, such as an
interview's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widget import Widget

from ddpfsdp.quiz.widgets.fitting import ellipsize_text


def clock_text(remaining_s: float) -> Text:
    """'⏱ 04:59 left', or 'time is up' once it has run out."""
    if remaining_s <= 0:
        return Text("⏱ time is up", style="bold red")
    return Text(f"⏱ {clock(remaining_s)} left", style="bold yellow")


def clock(seconds: float) -> str:
    """Whole minutes and seconds: '04:59'."""
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"


class SessionHeader(Widget):
    """One line: `title` (cut to fit), then `position` and the time left (never cut)."""

    DEFAULT_CSS = """
    SessionHeader { height: 1; padding: 0 1; background: $boost; }
    """

    @dataclass
    class TimeUp(Message):
        """The deadline has passed (posted once)."""

        header: SessionHeader

    def __init__(self, title: Text, *, position: str | Text = "", remaining_s: Callable[[], float | None] | None = None,
                 elapsed_s: Callable[[], float] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.title = title
        self.position = position
        self.remaining_s = remaining_s or (lambda: None)
        self.elapsed_s = elapsed_s
        self._time_up_posted = False

    def on_mount(self) -> None:
        if self.remaining_s() is not None or self.elapsed_s is not None:
            self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.refresh()
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0 and not self._time_up_posted:
            self._time_up_posted = True
            self.post_message(self.TimeUp(self))

    def right_part(self) -> Text:
        right = self.position.copy() if isinstance(self.position, Text) else Text(self.position, style="bold")
        remaining = self.remaining_s()
        timer = clock_text(remaining) if remaining is not None else None
        if timer is None and self.elapsed_s is not None:
            timer = Text(f"⏱ {clock(self.elapsed_s())}", style="bold yellow")
        if timer is not None:
            if right:
                right.append("  ")
            right.append_text(timer)
        return right

    def render(self) -> Text:
        width = self.size.width
        right = self.right_part()
        room = width - right.cell_len - (2 if right else 0)
        line = ellipsize_text(self.title, room) if room > 0 else Text()
        line.append(" " * max(0, width - line.cell_len - right.cell_len))
        line.append_text(right)
        return line
