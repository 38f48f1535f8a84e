"""Snapshots of the main screens at a fixed size, seed, clock and machine name.

Update them only after looking at the report: pytest tests/test_quiz_snapshots.py --snapshot-update
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz import store as store_module
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.grading import grade_multi, grade_order, grade_single
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
SIZE = (100, 40)
HOST = "study-box"
CPUS = 8


@pytest.fixture
def fixed_machine(monkeypatch):
    # "Measured on this machine" depends on the hostname and CPU count; pin both.
    monkeypatch.setattr(store_module.socket, "gethostname", lambda: HOST)
    monkeypatch.setattr(store_module.os, "cpu_count", lambda: CPUS)


def _history(quiz_bank):
    """A few answers an hour before T0, and a saved wrap result measured three hours before."""
    bank = load_bank(*quiz_bank)
    with Store.open() as store:
        at = T0 - timedelta(hours=1)
        order = bank.questions["wrap-forward-order"]
        scheduler.record_answer(store, order, grade_order(order, list(order.steps)), time_s=12, now=at)
        single = bank.questions["ddp-grad-sync"]
        scheduler.record_answer(store, single, grade_single(single, single.answer), time_s=8, now=at)
        multi = bank.questions["ddp-replicated-state"]
        scheduler.record_answer(store, multi, grade_multi(multi, ["parameters"]), time_s=30, now=at)
        store.save_demo_result(
            "wrap",
            ["--model", "tiny"],
            {
                "schema": "ddpfsdp.demo/1",
                "demo": "wrap",
                "config": {"world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny"},
                "env": {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": CPUS, "hostname": HOST},
                "checks": [
                    {"name": "per_block_peak_below_root_only", "passed": True, "detail": "peak 1.20 MiB with per-block units vs 2.50 MiB root only", "values": {}},
                    {"name": "collectives_scale_with_units", "passed": True, "detail": "all_gather per step: 2 with 1 unit, 8 with 4 units", "values": {}},
                ],
                "peak_bytes": {"root_only": 2621440, "per_block": 1258291},
            },
            saved_at=T0 - timedelta(hours=3),
        )


def _app(quiz_bank, **kwargs):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0, **kwargs)


def test_home(snap_compare, quiz_bank, fixed_machine):
    _history(quiz_bank)
    assert snap_compare(_app(quiz_bank), terminal_size=SIZE)


def test_question(snap_compare, quiz_bank, fixed_machine):
    _history(quiz_bank)
    assert snap_compare(_app(quiz_bank, topic="fsdp-wrap"), terminal_size=SIZE, press=["n", "2"])


def test_feedback_with_saved_evidence(snap_compare, quiz_bank, fixed_machine):
    _history(quiz_bank)
    app = _app(quiz_bank, topic="fsdp-wrap")

    async def answer(pilot):
        await pilot.pause()
        screen = pilot.app.screen
        await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=answer)


def test_progress(snap_compare, quiz_bank, fixed_machine):
    _history(quiz_bank)
    assert snap_compare(_app(quiz_bank), terminal_size=SIZE, press=["p"])


def test_explain_reveal(snap_compare, quiz_bank, fixed_machine):
    app = _app(quiz_bank, topic="ddp")

    async def reveal(pilot):
        await pilot.pause()
        while pilot.app.screen.question.kind != "explain":
            await pilot.press("ctrl+n")
            await pilot.pause()
        await pilot.press(*"overlap with backward", "enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=reveal)


def test_feedback_reasons_for_a_wrong_pick(snap_compare, quiz_bank, fixed_machine):
    app = _app(quiz_bank, topic="ddp")

    async def answer_wrongly(pilot):
        await pilot.pause()
        screen = pilot.app.screen
        assert screen.question.id == "ddp-grad-sync"
        wrong = next(c for c in screen.display_choices if c != screen.question.answer)
        await pilot.press(str(screen.display_choices.index(wrong) + 1), "enter")
        await pilot.pause()
        from rich.console import Console

        console = Console(width=200, record=True, file=io.StringIO())
        console.print(pilot.app.screen.query_one("#answer-detail").content)
        detail = console.export_text()
        for reason in screen.question.why:
            assert reason in detail

    assert snap_compare(app, terminal_size=SIZE, run_before=answer_wrongly)


def test_drill_miss_shows_the_working(snap_compare, quiz_bank, fixed_machine):
    async def miss(pilot):
        await pilot.pause()
        problem = pilot.app.screen.problem
        pilot.app.screen.query_one("#drill-input").value = "3" if problem.unit == "" and problem.answer != 3 else "1 bytes"
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(_app(quiz_bank, drill=True), terminal_size=SIZE, run_before=miss)
