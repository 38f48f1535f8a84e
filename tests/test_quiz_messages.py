"""Messages go up: what a person answered leaves the screen as a typed message carrying no screen, the app
saves it and shows what comes next; an answer that cannot be saved waits in the app as a PendingAttempt
and is saved with the next one, and a save that fails is said."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, UTC

from textual.widget import Widget

from ddpfsdp.quiz import messages, scheduler
from ddpfsdp.quiz.app import PendingAttempt, make_app
from ddpfsdp.quiz.screens.feedback import FeedbackScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.store import Store, StoreError

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZE = (100, 40)
BUSY = "the progress file is busy (database is locked); try again in a moment"


def _app(quiz_bank, **kwargs):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, clock=lambda: T0, monotonic=lambda: 1000.0,
                    **kwargs)


def _posted(seen: list, kind: type) -> list:
    return [message for message in seen if isinstance(message, kind)]


def _carries_no_widget(message) -> bool:
    return not any(isinstance(getattr(message, f.name), Widget) for f in dataclasses.fields(message))


def _busy_once(monkeypatch) -> None:
    """The progress file is busy for the next answer saved, and free again after."""
    record_answer = scheduler.record_answer
    busy = [True]

    def record_unless_busy(*args, **kwargs):
        if busy:
            busy.pop()
            raise StoreError(BUSY)
        return record_answer(*args, **kwargs)

    monkeypatch.setattr(scheduler, "record_answer", record_unless_busy)


async def test_an_answer_goes_up_as_a_message_once_and_the_feedback_comes_back(quiz_bank):
    app = _app(quiz_bank)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        app.start_session("practice", questions=[app.bank.questions["ddp-grad-sync"]])
        await pilot.pause()
        screen = app.screen
        screen.query_one("#answer-input").press(screen.display_choices.index(screen.question.answer))
        screen.action_submit()
        screen.action_submit()  # a second Enter before the feedback is up: not a second answer
        await pilot.pause()
        assert isinstance(app.screen, FeedbackScreen) and app.screen.grade.correct
        [given] = _posted(seen, messages.AnswerGiven)
        assert given.question is screen.question and given.display_order == screen.display_choices
        assert given.grade is app.screen.grade and _carries_no_widget(given)
        await pilot.press("n")
        await pilot.pause()
        assert _posted(seen, messages.NextQuestion) and isinstance(app.screen, HomeScreen)
    with Store.open() as store:
        assert [a.question_id for a in store.attempts()] == ["ddp-grad-sync"]


async def test_an_explanation_is_revealed_then_graded_by_messages(quiz_bank):
    app = _app(quiz_bank)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        question = app.bank.questions["ddp-explain-buckets"]
        app.start_session("practice", questions=[question])
        await pilot.pause()
        await pilot.press(*"overlap", "enter")
        await pilot.pause()
        [revealed] = _posted(seen, messages.ExplanationRevealed)
        assert (revealed.question, revealed.notes) == (question, "overlap") and _carries_no_widget(revealed)
        assert isinstance(app.screen, FeedbackScreen) and app.screen.awaiting_self_grade
        await pilot.press("3")
        await pilot.pause()
        [graded] = _posted(seen, messages.ExplanationGraded)
        assert graded.question is question and graded.grade.self_grade == "good" and _carries_no_widget(graded)
        assert not app.screen.awaiting_self_grade
    with Store.open() as store:
        assert [(a.question_id, a.rating, a.answer) for a in store.attempts()] == [
            ("ddp-explain-buckets", 3, {"notes": "overlap"})]


async def test_an_answer_that_cannot_be_saved_waits_and_is_saved_with_the_next(quiz_bank, monkeypatch):
    _busy_once(monkeypatch)
    app = _app(quiz_bank)
    first, second = (app.bank.questions[q] for q in ("ddp-grad-sync", "ddp-replicated-state"))
    async with app.run_test(size=SIZE) as pilot:
        app.start_session("practice", questions=[first, second])
        await pilot.pause()
        screen = app.screen
        await pilot.press(str(screen.display_choices.index(first.answer) + 1), "enter")
        await pilot.pause()
        assert app.unsaved == [PendingAttempt(first, app.screen.grade, 0.0, T0, "practice")]
        assert f"could not be saved yet ({BUSY})" in app.screen.save_error and "(1 waiting)" in app.screen.save_error
        assert any("could not be saved yet" in n.message for n in app._notifications)
        await pilot.press("n")
        await pilot.pause()
        screen = app.screen
        for choice in second.answer:
            await pilot.press(str(screen.display_choices.index(choice) + 1))
        await pilot.press("enter")
        await pilot.pause()
        assert app.unsaved == [] and app.screen.save_error is None
    with Store.open() as store:
        assert [a.question_id for a in store.attempts()] == ["ddp-grad-sync", "ddp-replicated-state"]


async def test_a_self_grade_that_cannot_be_saved_is_said_and_kept(quiz_bank, monkeypatch):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        question = app.bank.questions["ddp-explain-buckets"]
        app.start_session("practice", questions=[question])
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        _busy_once(monkeypatch)
        await pilot.press("2")
        await pilot.pause()
        assert [(p.question, p.grade.self_grade) for p in app.unsaved] == [(question, "hard")]
        assert any("could not be saved yet" in n.message for n in app._notifications)
    # Quitting saves what waits.
    with Store.open() as store:
        assert [(a.question_id, a.rating) for a in store.attempts()] == [("ddp-explain-buckets", 2)]


class HeldRun:
    """Stands in for the launcher: a run whose event stream waits until it is cancelled."""

    def __init__(self):
        self.stopped = threading.Event()
        self.cancelled = False
        self.result = self.error = None

    def events(self):
        self.stopped.wait(10.0)
        yield from ()

    def cancel(self):
        self.cancelled = True
        self.stopped.set()


async def test_the_app_tracks_a_run_from_its_start_and_stops_it_when_asked(quiz_bank):
    run = HeldRun()
    seen: list = []
    app = _app(quiz_bank, topic="fsdp-wrap", demo_runner=lambda demo, args: run)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.pause()
        await pilot.press("n", "d", "r")  # the wrap question's evidence, and its demo run
        for _ in range(100):
            if app._runs:
                break
            await pilot.pause(0.02)
        assert app._runs == {run} and not run.cancelled  # tracked before its stream has said anything
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert [m.run for m in _posted(seen, messages.RunStopRequested)] == [run] and run.cancelled
        assert [m.run for m in _posted(seen, messages.RunEnded)] == [run] and app._runs == set()
