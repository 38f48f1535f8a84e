"""The quiz app: `make_app(...)` builds it for the CLI and for the tests alike.

The app owns the session (which questions, in which mode), saves each answer the moment it is
graded, and keeps track of running demos so none outlives it. Screens do the showing.

Messages go up, methods go down: a screen or widget never calls the app to change what it holds. It posts
a message of quiz/messages.py to the app (`self.app.post_message(AnswerGiven(...))`); a small `on_<message>`
here records, starts or ends, and answers down: with the next screen it shows, or a notification. Screens
read the app's shared data (`bank`, `store`, `now()`, `monotonic()`) and start a run with `demo_runner`.
"""

from __future__ import annotations

import time

# Taken before Textual is imported, so the startup figure includes it.
STARTED_AT_S = time.perf_counter()

import logging  # noqa: E402
import random  # noqa: E402
import sqlite3  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from textual.app import App  # noqa: E402
from textual.binding import Binding  # noqa: E402
from textual.screen import ModalScreen, Screen  # noqa: E402

from ddpfsdp.quiz import scheduler  # noqa: E402
from ddpfsdp.quiz.bank_cache import load_bank_cached  # noqa: E402
from ddpfsdp.quiz.levels import LevelRange  # noqa: E402
from ddpfsdp.quiz.loader import Bank, BankError, Question  # noqa: E402
from ddpfsdp.quiz.messages import (AnswerGiven, BookmarksRequested, BookmarkToggled, DrillAnswered,  # noqa: E402
                                   DrillRequested, ExplanationGraded, ExplanationRevealed, InterviewRequested,
                                   InterviewStepAnswered, KataChecked, KataHintAsked, KataOpened,
                                   KatasRequested, LevelsChosen, NextQuestion, RunEnded,
                                   RunStopRequested, SessionEnded, SessionLeft, SessionRequested)
from ddpfsdp.quiz.store import Store, StoreError, utc_now  # noqa: E402

if TYPE_CHECKING:  # grading is imported with the first question, not for home
    from ddpfsdp.quiz.grading import Grade

log = logging.getLogger("ddpfsdp.quiz")


@dataclass
class Session:
    mode: str  # "practice", "review" or "mock"
    questions: list[Question]
    topic: str | None = None
    index: int = 0
    started_s: float = 0.0
    deadline_s: float | None = None
    results: list[tuple[Question, Grade]] = field(default_factory=list)
    asked: list[Question] = field(default_factory=list)  # every question shown, answered or skipped

    @property
    def current(self) -> Question:
        return self.questions[self.index]

    @property
    def position(self) -> str:
        return f"{self.index + 1} of {len(self.questions)}"


@dataclass(frozen=True)
class PendingAttempt:
    """A graded answer not yet in the progress file (it was busy or unwritable): saved before the next one."""

    question: Question
    grade: Grade
    elapsed_s: float
    at: datetime  # when it was answered, which is when its card was reviewed
    mode: str


def _default_kata_runner(kata: str, path: Path) -> Any:
    from ddpfsdp.quiz.katas import check_run

    return check_run(kata, path)


def default_demo_runner(demo: str, args: list[str]) -> Any:
    # Imported here: the launcher is cheap, but nothing demo-related loads until a demo runs.
    from ddpfsdp.demos.launch.launcher import DemoRun
    from ddpfsdp.demos.registry import DEMOS
    from ddpfsdp.demos.registry import load

    entry = DEMOS.get(demo)
    if entry is not None and entry.runner:  # a demo that starts its own ranks (the failure lab)
        return load(entry.runner)(args)
    return DemoRun(demo, args)


class QuizApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "ddpfsdp quiz"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True, show=False)]

    def __init__(
        self,
        *,
        bank: Bank | None,
        store: Store | None,
        problem: tuple[str, str, str] | None = None,
        start: str | None = None,
        topic: str | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        demo_runner: Callable[[str, list[str]], Any] = default_demo_runner,
        kata_runner: Callable[[str, Path], Any] | None = None,
        drill_seed: int | None = None,
        drill_kinds: tuple[str, ...] | None = None,
        interview: Any = None,
        levels: LevelRange | None = None,
    ):
        super().__init__()
        self.levels = levels or LevelRange()  # the levels a session asks; the home screen changes them
        self.interview = interview  # the scenario to start on, from `ddpfsdp interview`
        self.drill_seed = drill_seed
        self.drill_kinds = drill_kinds
        self.bank = bank
        self.store = store
        self.problem = problem
        self.start_mode = start
        self.start_topic = topic
        self.rng = rng or random.Random()
        self._clock = clock
        self._monotonic = monotonic
        self._start_run = demo_runner
        self._start_kata = kata_runner or _default_kata_runner
        self.session: Session | None = None
        self.startup_ms: float | None = None
        # Answers that could not be written (the file was busy or unwritable); retried before the next.
        self.unsaved: list[PendingAttempt] = []
        self._runs: set[Any] = set()
        self._stoppers: list[threading.Thread] = []
        self._runs_lock = threading.Lock()

    # --- clock -------------------------------------------------------------------------------------

    def now(self) -> datetime:
        return self._clock()

    def monotonic(self) -> float:
        return self._monotonic()

    # --- start-up ----------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        # The first screen is the bottom of the stack itself, not pushed over an empty one: one
        # screen fewer to build and draw at start-up.
        if self.problem is not None:
            from ddpfsdp.quiz.screens.message import ProblemScreen

            return ProblemScreen(*self.problem)
        from ddpfsdp.quiz.screens.home import HomeScreen

        return HomeScreen()

    def on_mount(self) -> None:
        if self.problem is None:
            if self.interview is not None:
                self.start_interview(self.interview)
            elif self.start_mode == "drill":
                self.start_drill()
            elif self.start_mode == "bookmarked":
                self.study_bookmarks()
            elif self.start_mode is not None:
                self.start_session(self.start_mode, topic=self.start_topic)
            if self.store is not None and self.store.warning:
                from ddpfsdp.quiz.screens.message import NoticeScreen

                # Over whatever screen comes first, so it is read before anything else.
                self.push_screen(NoticeScreen("The progress file was damaged", self.store.warning))
        self.call_after_refresh(self._first_screen_up)

    def _first_screen_up(self) -> None:
        self.startup_ms = (time.perf_counter() - STARTED_AT_S) * 1000
        self.log.info(f"started in {self.startup_ms:.0f} ms")
        log.info("started in %.0f ms", self.startup_ms)

    def action_help(self) -> None:
        from ddpfsdp.quiz.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # --- sessions ----------------------------------------------------------------------------------

    def start_session(self, mode: str, topic: str | None = None, questions: list[Question] | None = None) -> None:
        """Ask the questions of `mode` (practice, review or mock), or exactly `questions` when given."""
        assert self.bank is not None and self.store is not None
        if questions is None:
            questions = self._questions_for(mode, topic)
        if not questions:
            return
        self.session = Session(mode, questions, topic, started_s=self.monotonic())
        if mode == "mock":
            self.session.deadline_s = self.session.started_s + scheduler.MOCK_MINUTES * 60
        self._show_question(push=True)

    def bookmarked_questions(self) -> list[Question]:
        """The bookmarked questions still in the bank, oldest mark first."""
        return self.levels.keep([self.bank.questions[q] for q in self.store.bookmarks() if q in self.bank.questions])

    def study_bookmarks(self) -> None:
        questions = self.bookmarked_questions()
        if not questions:
            said = "" if self.levels.everything else f" at {self.levels.label()}"
            self.notify(f"No bookmarked questions{said} yet: press b on a question to mark it.", title="Bookmarks")
            return
        self.start_session("practice", questions=questions)

    def _questions_for(self, mode: str, topic: str | None) -> list[Question]:
        """What a session of `mode` asks; empty (and said why) when there is nothing."""
        now = self.now()
        bank = self.levels.restrict(self.bank)
        at = "" if self.levels.everything else f" at {self.levels.label()}"
        if mode == "review":
            questions = scheduler.due_questions(bank, self.store, now, topic)
            if not questions:
                self.notify(f"Nothing is due for review{at} now. Pick a topic to learn something new.", title="Review")
                return []
        elif mode == "mock":
            questions = scheduler.mock_interview(bank, self.rng)
        else:
            questions = scheduler.practice_queue(bank, self.store, now, topic)
        if not questions:
            self.notify(f"No questions here{at} yet." if at else "No questions here yet.")
        return questions

    def start_drill(self) -> None:
        from ddpfsdp.quiz.screens.drill import DrillScreen

        seed = self.drill_seed if self.drill_seed is not None else self.rng.randrange(2**31)
        self.push_screen(DrillScreen(seed=seed, kinds=self.drill_kinds))

    def start_interview(self, scenario: Any = None) -> None:
        """A design interview: the scenario given, or a new one drawn from this app's random source."""
        from ddpfsdp.quiz.interview.generate import generate
        from ddpfsdp.quiz.screens.interview import InterviewScreen

        self.push_screen(InterviewScreen(scenario or generate(self.rng.randrange(2**31))))

    def session_remaining_s(self) -> float | None:
        if self.session is None or self.session.deadline_s is None:
            return None
        return max(0.0, self.session.deadline_s - self.monotonic())

    def _position(self) -> str:
        return self.session.position if self.session else ""

    def _show_question(self, push: bool) -> None:
        from ddpfsdp.quiz.screens.question import QuestionScreen

        session = self.session
        screen = QuestionScreen(session.current, rng=self.rng, position=session.position)
        session.asked.append(session.current)
        if push:
            self.push_screen(screen)
        else:
            self.switch_screen(screen)

    def _record(self, question: Question, grade: Grade, elapsed_s: float) -> str | None:
        """Commit the attempt and its card; on failure keep it and say so (it is retried next time)."""
        mode = self.session.mode if self.session else "practice"
        if self.session is not None:
            self.session.results.append((question, grade))
        self.unsaved.append(PendingAttempt(question, grade, elapsed_s, self.now(), mode))
        return self.flush_unsaved()

    def flush_unsaved(self) -> str | None:
        while self.unsaved:
            pending = self.unsaved[0]
            try:
                scheduler.record_answer(self.store, pending.question, pending.grade, time_s=pending.elapsed_s,
                                        now=pending.at, mode=pending.mode)
            except (StoreError, sqlite3.Error, OSError) as error:
                count = len(self.unsaved)
                return (
                    f"Your answer could not be saved yet ({error}). It is kept and will be saved with the next "
                    f"answer or when you quit ({count} waiting)."
                )
            self.unsaved.pop(0)
        return None

    def end_session(self, timed_out: bool = False, left: bool = False) -> None:
        session = self.session
        if session is None:
            return
        self.session = None
        if session.mode == "mock":
            from ddpfsdp.quiz.screens.message import ConfirmScreen
            from ddpfsdp.quiz.screens.report import MockReportScreen

            while isinstance(self.screen, ConfirmScreen):  # the time ran out while it asked to leave
                self.pop_screen()

            elapsed_s = self.monotonic() - session.started_s
            self.switch_screen(MockReportScreen(session.results, session.asked, len(session.questions), elapsed_s, timed_out,
                                                left=left))
            return
        right = sum(1 for _, g in session.results if g.correct)
        self._back_home()
        if session.results:
            self.notify(f"Done: {right} of {len(session.results)} right. Every answer is saved.", title="Session")

    def _back_home(self) -> None:
        from ddpfsdp.quiz.screens.home import HomeScreen

        while len(self.screen_stack) > 1 and not isinstance(self.screen, HomeScreen):
            self.pop_screen()

    # --- what screens ask for (messages up) ----------------------------------------------------------

    def on_session_requested(self, message: SessionRequested) -> None:
        self.start_session(message.mode, topic=message.topic, questions=message.questions)

    def on_drill_requested(self, message: DrillRequested) -> None:
        self.start_drill()

    def on_interview_requested(self, message: InterviewRequested) -> None:
        self.start_interview()

    def on_answer_given(self, message: AnswerGiven) -> None:
        """A graded objective answer: save it at once, then show the feedback."""
        from ddpfsdp.quiz.screens.feedback import FeedbackScreen

        error = self._record(message.question, message.grade, message.elapsed_s)
        self.switch_screen(FeedbackScreen(message.question, message.grade, display_order=message.display_order,
                                          position=self._position(), save_error=error))

    def on_explanation_revealed(self, message: ExplanationRevealed) -> None:
        from ddpfsdp.quiz.screens.feedback import FeedbackScreen

        self.switch_screen(FeedbackScreen(message.question, None, notes=message.notes, elapsed_s=message.elapsed_s,
                                          position=self._position()))

    def on_explanation_graded(self, message: ExplanationGraded) -> None:
        error = self._record(message.question, message.grade, message.elapsed_s)
        if error:
            self.notify(error, severity="error", timeout=10)

    def on_drill_answered(self, message: DrillAnswered) -> None:
        """Commit a drill answer at once; on failure say so (a drill answer is not retried)."""
        problem = message.problem
        try:
            scheduler.record_answer(self.store, scheduler.drill_card(problem.kind, problem.topic), message.grade,
                                    time_s=message.elapsed_s, now=self.now(), mode="drill")
        except (StoreError, sqlite3.Error, OSError) as error:
            self.notify(f"This drill answer could not be saved ({error}).", severity="error", timeout=10)

    def on_interview_step_answered(self, message: InterviewStepAnswered) -> None:
        """Commit an interview step at once; on failure say so."""
        from ddpfsdp.quiz.interview import answers

        try:
            answers.record(self.store, message.scenario, message.step, message.grade, time_s=message.elapsed_s,
                           now=self.now())
        except (StoreError, sqlite3.Error, OSError) as error:
            self.notify(f"This step could not be saved ({error}).", severity="error", timeout=10)

    def on_next_question(self, message: NextQuestion) -> None:
        session = self.session
        if session is None:
            self._back_home()
            return
        session.index += 1
        if session.index < len(session.questions) and (session.deadline_s is None or self.session_remaining_s() > 0):
            self._show_question(push=False)
        else:
            self.end_session(timed_out=session.index < len(session.questions))

    def on_session_ended(self, message: SessionEnded) -> None:
        self.end_session(timed_out=message.timed_out)

    def on_session_left(self, message: SessionLeft) -> None:
        session = self.session
        if session is not None and session.mode == "mock":
            if not message.confirmed:
                from ddpfsdp.quiz.screens.message import ConfirmScreen

                answered = len(session.results)
                self.push_screen(ConfirmScreen(
                    "Leave the mock interview?",
                    (f"{answered} of {len(session.questions)} questions answered, each already saved. " if answered
                     else "No question answered yet. ")
                    + "Leaving ends the interview here: its score counts every question not answered as zero.",
                    SessionLeft(confirmed=True)))
                return
            self.end_session(left=True)  # the score so far, not home at once
            return
        self.session = None
        self._back_home()

    def on_bookmarks_requested(self, message: BookmarksRequested) -> None:
        self.study_bookmarks()

    def on_levels_chosen(self, message: LevelsChosen) -> None:
        self.levels = message.levels
        self.notify(f"Sessions now ask {message.levels.label()}.", title="Levels")
        self._refresh_home()

    def on_bookmark_toggled(self, message: BookmarkToggled) -> None:
        qid = message.question_id
        try:
            if self.store.remove_bookmark(qid):
                said = "Bookmark removed."
            else:
                self.store.add_bookmark(qid, self.now())
                said = "Bookmarked: study the marked questions with b on home, or ddpfsdp quiz --bookmarked."
        except (StoreError, sqlite3.Error, OSError) as error:
            self.notify(f"The bookmark could not be saved ({error}).", severity="error", timeout=10)
            return
        self.notify(said, title="Bookmarks")
        self._refresh_home()

    def _refresh_home(self) -> None:
        from ddpfsdp.quiz.screens.home import HomeScreen

        home = self.screen_stack[0] if self.screen_stack else None
        if isinstance(home, HomeScreen) and home.is_mounted:
            home.refresh_menu()

    # --- screens -----------------------------------------------------------------------------------

    # A toast speaks of the screen it was raised on; a new screen clears what is left of it. A modal
    # (help) sits over the screen, so it leaves them.
    def push_screen(self, screen, *args, **kwargs):
        if not isinstance(screen, ModalScreen):
            self.clear_notifications()
        return super().push_screen(screen, *args, **kwargs)

    def switch_screen(self, screen):
        self.clear_notifications()
        return super().switch_screen(screen)

    def pop_screen(self):
        if not isinstance(self.screen, ModalScreen):
            self.clear_notifications()
        return super().pop_screen()

    # --- katas: the Katas screen posts, the app records ----------------------------------------------

    def on_katas_requested(self, message: KatasRequested) -> None:
        from ddpfsdp.quiz.screens.katas import KatasScreen

        self.push_screen(KatasScreen())

    def kata_runner(self, kata: str, path: Path) -> Any:
        """Start a check of a learner's file (a screen's worker thread calls this) and track it from that
        moment, as `demo_runner` does a demo's run; its worker posts RunEnded when done with it."""
        run = self._start_kata(kata, path)
        with self._runs_lock:
            self._runs.add(run)
        return run

    def _kata_store(self, what: str, record: Callable[[], Any]) -> Any:
        try:
            return record()
        except (StoreError, sqlite3.Error, OSError) as error:
            self.notify(f"{what} could not be saved ({error}).", severity="error", timeout=10)
            return None

    def on_kata_opened(self, message: KataOpened) -> None:
        if message.started:
            from ddpfsdp.demos.katas.catalog import KATAS

            def record() -> None:
                self.store.set_kata_file(message.kata, Path(message.path).resolve(), at=self.now())
                self.store.record_kata_event(message.kata, "start", detail={"path": message.path}, at=self.now())

            self._kata_store("Where the kata's file is", record)
            self.notify(f"Wrote the starter of {KATAS[message.kata].title}: {message.path}", timeout=6)
            self._kata_statuses_changed()

    def on_kata_hint_asked(self, message: KataHintAsked) -> None:
        from ddpfsdp.demos.katas.catalog import KATAS
        from ddpfsdp.quiz import katas

        hint = self._kata_store("The hint taken", lambda: katas.next_hint(KATAS[message.kata], self.store, self.now()))
        if hint is not None and hasattr(self.screen, "show_hint"):
            self.screen.show_hint(message.kata, *hint)

    def on_kata_checked(self, message: KataChecked) -> None:
        if message.result is None or message.cancelled:
            return
        from ddpfsdp.demos.katas.catalog import KATAS
        from ddpfsdp.demos.katas.render import summary
        from ddpfsdp.demos.result.schema import as_result
        from ddpfsdp.quiz import katas

        checks = as_result(message.result).checks
        passed, _ = summary(checks)
        failed = [check.name for check in checks if check.passed is False]
        note = self._kata_store("This check", lambda: katas.record_check(KATAS[message.kata], self.store, passed, failed,
                                                                         self.now(), message.elapsed_s))
        if note:
            self.notify(f"Card: {note}.", title=message.kata, timeout=8)
        self._kata_statuses_changed()

    def _kata_statuses_changed(self) -> None:
        if hasattr(self.screen, "refresh_table"):
            self.screen.refresh_table()

    # --- demo runs ---------------------------------------------------------------------------------

    def demo_runner(self, demo: str, args: list[str]) -> Any:
        """Start a demo's run (a screen's worker thread calls this) and track it from that moment, so that
        quitting stops its ranks however soon after. Its worker posts RunEnded when done with it."""
        run = self._start_run(demo, args)
        with self._runs_lock:
            self._runs.add(run)
        return run

    def on_run_ended(self, message: RunEnded) -> None:
        with self._runs_lock:
            self._runs.discard(message.run)

    def on_run_stop_requested(self, message: RunStopRequested) -> None:
        """Stop a run's processes off the UI thread (it can take a few seconds)."""
        # Not a daemon: the interpreter waits for it at exit, so no rank is orphaned by quitting.
        stopper = threading.Thread(target=message.run.cancel, name="demo-cancel", daemon=False)
        stopper.start()
        self._stoppers.append(stopper)

    def stop_all_runs(self) -> None:
        """Synchronously stop every run still going (called on exit)."""
        with self._runs_lock:
            runs = list(self._runs)
        for run in runs:
            run.cancel()
        for stopper in self._stoppers:
            stopper.join()

    async def action_quit(self) -> None:
        import asyncio

        await asyncio.to_thread(self.stop_all_runs)
        self.exit()

    async def on_unmount(self) -> None:
        import asyncio

        await asyncio.to_thread(self.stop_all_runs)
        if self.unsaved and self.store is not None:
            self.flush_unsaved()


def make_app(
    *,
    bank_dir: Path | str | None = None,
    answers_dir: Path | str | None = None,
    bank: Bank | None = None,
    store: Store | None = None,
    topic: str | None = None,
    review: bool = False,
    mock: bool = False,
    seed: int | None = None,
    clock: Callable[[], datetime] | None = None,
    monotonic: Callable[[], float] | None = None,
    demo_runner: Callable[[str, list[str]], Any] | None = None,
    drill: bool = False,
    drill_kinds: tuple[str, ...] | None = None,
    interview: Any = None,
    bookmarked: bool = False,
    levels: LevelRange | None = None,
) -> QuizApp:
    """The app as the CLI runs it; tests pass a fixture bank, a fixed clock and a seed."""
    problem = None
    if bank is None:
        try:
            bank = load_bank_cached(bank_dir, answers_dir)
        except BankError as error:
            problem = (
                "The question bank has a problem",
                str(error),
                "Fix that file, then check the whole bank with: ddpfsdp quiz --check",
            )
    if store is None and problem is None:
        try:
            store = Store.open()
        except (StoreError, OSError, sqlite3.Error) as error:
            problem = (
                "The progress file cannot be opened",
                str(error),
                "Nothing was changed. Close other programs using it, or point DDPFSDP_HOME at a writable folder.",
            )
    start = ("drill" if drill else "mock" if mock else "review" if review else "bookmarked" if bookmarked
             else "practice" if topic else None)
    return QuizApp(
        bank=bank,
        store=store,
        problem=problem,
        start=start,
        topic=topic,
        rng=random.Random(seed) if seed is not None else None,
        clock=clock or utc_now,
        monotonic=monotonic or time.monotonic,
        demo_runner=demo_runner or default_demo_runner,
        drill_seed=seed if drill else None,
        drill_kinds=drill_kinds,
        interview=interview,
        levels=levels,
    )
