"""Messages the quiz's widgets and workers post: small, typed, one module.

A demo worker runs in a thread and talks to the screen only through these (post_message is
thread-safe), so no widget is touched from outside the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.result.schema import JsonObject


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



@dataclass
class KataOpened(Message):
    """The Katas screen opened a kata's file; `started` when it wrote the starter there first."""

    kata: str
    path: str
    started: bool


@dataclass
class KataHintAsked(Message):
    """The learner asked for the next hint of a kata."""

    kata: str


@dataclass
class KataChecked(Message):
    """A check of the learner's file ended: a result, a refusal before launch (`problem`), or a cancellation."""

    kata: str
    result: JsonObject | None  # the run's result, JSON as the ranks sent it
    problem: str | None
    cancelled: bool
    elapsed_s: float
