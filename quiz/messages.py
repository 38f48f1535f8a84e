"""Messages the quiz's widgets and workers post: small, typed, one module.

A demo worker runs in a thread and talks to the screen only through these (post_message is
thread-safe), so no widget is touched from outside the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

from ddpfsdp.demos.launch.events import Event

if TYPE_CHECKING:  # named in annotations only
    from ddpfsdp.quiz.levels import LevelRange
    from ddpfsdp.quiz.loader import Question


@dataclass
class DemoLaunching(Message):
    """The launcher has decided where the run goes; its ranks are being started."""

    demo: str
    world_size: int
    device: str  # "cuda", "cpu", or "fake" (a simulated world)
    ranks_per_gpu: int = 1  # on CUDA: above 1, the ranks share each GPU over gloo


@dataclass
class DemoStarted(Message):
    demo: str
    world_size: int | None
    device: str | None
    backend: str | None


@dataclass
class DemoProgress(Message):
    step: int
    steps: int
    metrics: dict[str, str | float | None] = field(default_factory=dict)  # what a progress event says of its step


@dataclass
class DemoLog(Message):
    line: str


@dataclass
class DemoFinished(Message):
    """The run ended: a result, an error event, or a cancellation (exactly one of them is set)."""

    demo: str
    args: tuple[str, ...]
    result: dict[str, Any] | None
    error: Event | None
    cancelled: bool
    elapsed_s: float



# --- to the app: what a person asked for ------------------------------------------------------------


@dataclass
class SessionRequested(Message):
    """Ask the questions of `mode` (practice, review or mock), of one topic, or exactly `questions`."""

    mode: str
    topic: str | None = None
    questions: list[Question] | None = None


# --- to the app: levels and bookmarks -------------------------------------------------------------------


@dataclass
class LevelsChosen(Message):
    """Sessions from now on ask only questions of these levels."""

    levels: LevelRange


@dataclass
class BookmarkToggled(Message):
    """Mark the question, or unmark it if it is marked."""

    question_id: str
