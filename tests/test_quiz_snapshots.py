"""Snapshots of every screen at 80x24 and 120x40, at a fixed seed, clock and machine name.

Home, each kind of question and its feedback, the evidence of a saved training result, a drill,
the mock interview's question and its score table, help and progress. The guides in docs/ show some
of these files as they are, so their pictures of the app are always the app of this commit.

Update them only after looking at the report: pytest tests/test_quiz_snapshots.py --snapshot-update
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta, UTC

import pytest
from rich.console import Console
from saved_results import CPUS, HOST, training_run, wrap_result

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz import store as store_module
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.grading import grade_multi, grade_order, grade_single
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
KINDS = {
    "single": "ddp-grad-sync",
    "multi": "ddp-replicated-state",
    "numeric": "ddp-allreduce-wire",
    "order": "wrap-forward-order",
    "explain": "ddp-explain-buckets",
}


@pytest.fixture
def history(quiz_bank, monkeypatch):
    """A few answers an hour before T0, and saved demo results, on a machine with a fixed name."""
    # "Measured on this machine" depends on the hostname and CPU count; pin both.
    monkeypatch.setattr(store_module.socket, "gethostname", lambda: HOST)
    monkeypatch.setattr(store_module.os, "cpu_count", lambda: CPUS)
    bank = load_bank(*quiz_bank)
    with Store.open() as store:
        at = T0 - timedelta(hours=1)
        order = bank.questions["wrap-forward-order"]
        scheduler.record_answer(store, order, grade_order(order, list(order.steps)), time_s=12, now=at)
        single = bank.questions["ddp-grad-sync"]
        scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=8, now=at)
        multi = bank.questions["ddp-replicated-state"]
        scheduler.record_answer(store, multi, grade_multi(multi, ["parameters"]), time_s=30, now=at)
        store.save_demo_result("wrap", ["--model", "tiny"], wrap_result(), saved_at=T0 - timedelta(hours=3))
        store.save_demo_result("ddp", ["--model", "tiny", "--steps", "6"], training_run("ddp"),
                               saved_at=T0 - timedelta(hours=2))
    return bank


def _app(quiz_bank, **kwargs):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0,
                    monotonic=lambda: 500.0, **kwargs)


def _asking(bank, kind):
    """A run_before that opens a session of the one question of `kind`."""

    async def ask(pilot):
        await pilot.pause()
        pilot.app.start_session("practice", questions=[bank.questions[KINDS[kind]]])
        await pilot.pause()

    return ask


async def _answer_wrongly(pilot):
    """Answer the question on screen wrongly, as a person would with keys; explain: reveal it."""
    screen = pilot.app.screen
    q = screen.question
    if q.kind == "single":
        keys = [str(screen.display_choices.index(next(c for c in screen.display_choices if c != q.answer)) + 1)]
    elif q.kind == "multi":  # one right choice and the wrong one
        keys = [str(screen.display_choices.index(c) + 1) for c in ("parameters", "a 1/N shard of the parameters")]
    elif q.kind == "order":  # the forward before the gather
        keys = [str(screen.display_steps.index(s) + 1) for s in (q.steps[1], q.steps[0], q.steps[2])]
    elif q.kind == "numeric":
        keys = list("2 GB")
    else:
        keys = list("overlap with backward")
    await pilot.press(*keys, "enter")
    await pilot.pause()


def _shown(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@SIZES
def test_home(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size)


@SIZES
@pytest.mark.parametrize("kind", list(KINDS))
def test_question(snap_compare, quiz_bank, history, kind, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=_asking(history, kind))


@SIZES
@pytest.mark.parametrize("kind", list(KINDS))
def test_feedback(snap_compare, quiz_bank, history, kind, size):
    ask = _asking(history, kind)

    async def answer(pilot):
        await ask(pilot)
        await _answer_wrongly(pilot)
        feedback = pilot.app.screen
        if kind in ("single", "multi", "order"):
            detail = _shown(feedback.query_one("#answer-detail").content)
            # Every reason the bank gives is on the screen: for each choice, or each misplaced step.
            reasons = feedback.question.why if kind != "order" else feedback.question.why[:2]
            assert all(reason in detail for reason in reasons), detail

    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=answer)


@SIZES
def test_evidence_of_a_saved_training_run(snap_compare, quiz_bank, history, size):
    """A saved DDP run: its claims, its table, then rank 0's peak by category with the analytic mark."""
    ask = _asking(history, "single")

    async def evidence(pilot):
        await ask(pilot)
        await pilot.press("d")
        await pilot.pause()
        panel = pilot.app.screen.query_one("EvidencePanel")
        assert panel.has_class("-has-chart") and panel.has_class("-has-timeline")
        panel.query_one("#evidence-chart").scroll_visible(top=True, animate=False)
        await pilot.pause()

    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=evidence)


@SIZES
def test_drill_miss_shows_the_working(snap_compare, quiz_bank, history, size):
    async def miss(pilot):
        await pilot.pause()
        problem = pilot.app.screen.problem
        # a wrong answer in the problem's own unit: a count, or a size
        wrong = "3" if problem.answer != 3 else "4"
        pilot.app.screen.query_one("#drill-input").value = wrong if problem.base_unit == "count" else "1 bytes"
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(_app(quiz_bank, drill=True), terminal_size=size, run_before=miss)


@SIZES
def test_mock_question(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank, mock=True), terminal_size=size)


@SIZES
def test_leaving_a_mock_asks_first(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank, mock=True), terminal_size=size, press=["escape"])


@SIZES
def test_mock_score_by_topic(snap_compare, quiz_bank, history, size):
    async def one_right_then_skip(pilot):
        await pilot.pause()
        screen = pilot.app.screen
        q = screen.question
        assert q.kind == "single", q.id  # the seeded mock opens with a level-1 single question
        await pilot.press(str(screen.display_choices.index(q.answer) + 1), "enter")
        await pilot.pause()
        # Skip the rest: every question counts as asked. (Skipping them by keys is tested, slowly, in
        # test_quiz_app; here only the report is drawn.)
        session = pilot.app.session
        session.asked = list(session.questions)
        pilot.app.end_session()
        await pilot.pause()
        assert type(pilot.app.screen).__name__ == "MockReportScreen"

    assert snap_compare(_app(quiz_bank, mock=True), terminal_size=size, run_before=one_right_then_skip)


@SIZES
def test_help(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, press=["question_mark"])


@SIZES
def test_progress(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, press=["p"])
