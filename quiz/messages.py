"""Messages the quiz's screens, widgets and workers post: small, typed, one module.

A demo worker runs in a thread and talks to the screen only through the demo messages (post_message is
thread-safe), so no widget is touched from outside the event loop. Screens change what the app holds
(the session, the progress file, the runs it tracks) only by posting the app messages below to the app,
which handles each in an `on_...` method (quiz/app.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.result.schema import DemoResult

if TYPE_CHECKING:  # named in annotations only: home posts these before any question or drill is loaded
    from ddpfsdp.quiz.drill import Problem
    from ddpfsdp.quiz.evidence import Result
    from ddpfsdp.quiz.grading import Grade
    from ddpfsdp.quiz.interview.scenario import Scenario, Step
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
    result: Result | None  # a DemoResult from the launcher
    error: Event | None
    cancelled: bool
    elapsed_s: float


# --- to the app: what a person asked for or answered ------------------------------------------------


@dataclass
class SessionRequested(Message):
    """Ask the questions of `mode` (practice, review or mock), of one topic, or exactly `questions`."""

    mode: str
    topic: str | None = None
    questions: list[Question] | None = None


@dataclass
class DrillRequested(Message):
    """Start the sizing drill."""


@dataclass
class InterviewRequested(Message):
    """Start a design interview on a new scenario."""


@dataclass
class AnswerGiven(Message):
    """An objective answer graded on the question screen: the app saves it, then shows the feedback."""

    question: Question
    grade: Grade
    elapsed_s: float
    display_order: list[str]  # the choices or steps as they were shown


@dataclass
class ExplanationRevealed(Message):
    """An explain question answered (aloud, or in `notes`): the app shows the model answer to grade against."""

    question: Question
    notes: str
    elapsed_s: float


@dataclass
class ExplanationGraded(Message):
    """The person's own grade of an explained answer: the app saves it."""

    question: Question
    grade: Grade
    elapsed_s: float


@dataclass
class DrillAnswered(Message):
    """A sizing problem graded: the app saves it at once (a failed save is said, not retried)."""

    problem: Problem
    grade: Grade
    elapsed_s: float


@dataclass
class InterviewStepAnswered(Message):
    """An interview step graded (a skipped one as a miss): the app saves it at once."""

    scenario: Scenario
    step: Step
    grade: Grade
    elapsed_s: float


@dataclass
class NextQuestion(Message):
    """On to the session's next question, or its end; the one on screen is skipped if unanswered."""


@dataclass
class SessionEnded(Message):
    """The session is over before its last question: the mock's time ran out."""

    timed_out: bool = False


@dataclass
class SessionLeft(Message):
    """Home, leaving the session; every answer given is already saved. A mock interview asks first
    (`confirmed` once the person said yes), then shows its score so far."""

    confirmed: bool = False


# --- to the app: the demo runs it tracks (`QuizApp.demo_runner` starts and tracks each) --------------


@dataclass
class RunEnded(Message):
    """A run's worker is done with it (finished, failed or cancelled): the app stops tracking it."""

    run: Any


@dataclass
class RunStopRequested(Message):
    """Stop a run's ranks (a cancel, or its screen going away); the app does it off the UI thread."""

    run: Any


# --- to the app: levels and bookmarks -------------------------------------------------------------------


@dataclass
class LevelsChosen(Message):
    """Sessions from now on ask only questions of these levels."""

    levels: LevelRange


@dataclass
class BookmarksRequested(Message):
    """Study the bookmarked questions (of the chosen levels)."""


@dataclass
class BookmarkToggled(Message):
    """Mark the question, or unmark it if it is marked."""

    question_id: str


@dataclass
class KatasRequested(Message):
    """Open the Katas screen."""


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
    result: DemoResult | None  # the run's result, as the launcher read it
    problem: str | None
    cancelled: bool
    elapsed_s: float
