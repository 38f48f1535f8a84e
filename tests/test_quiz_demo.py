"""Real demo runs started from the app: 2 CPU processes on gloo, a tiny model; and a cancel that leaves
no process behind."""

from __future__ import annotations

import asyncio

import pytest
from conftest import open_feedback, widget_text

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.screens.feedback import FeedbackScreen
from ddpfsdp.quiz.store import Store

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]


async def test_run_a_demo_from_the_app_and_see_its_table(quiz_bank):
    from ddpfsdp.demos.launch.launcher import DemoRun

    runs = []

    def runner(demo, args):
        runs.append(DemoRun(demo, args, procs=2))
        return runs[-1]

    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="ddp", demo_runner=runner)
    async with app.run_test(size=(100, 40)) as pilot:
        panel = await open_feedback(pilot, "ddp-grad-sync")
        assert "Not measured on this machine yet" in widget_text(panel.query_one("#evidence-saved"))
        await pilot.press("r")
        await pilot.pause()
        assert panel.running
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = widget_text(panel.query_one("#evidence-status"))
        assert "Finished" in status and "saved" in status, status
        shown = widget_text(panel.query_one("#evidence-saved"))
        assert "Measured just now" in shown and "2 CPU processes (gloo)" in shown
        assert "ddp_uses_all_reduce" in shown and "✔" in shown
        assert "Measured, rank 0" in shown and "samples/s" in shown
        assert panel.has_class("-has-chart")
    assert runs[0].ok and runs[0].leftover_pids() == []
    saved = Store.open().last_demo_result("ddp", ["--model", "tiny", "--steps", "6"])
    assert saved is not None and saved.here
    assert saved.result["demo"] == "ddp" and saved.result["config"]["world_size"] == 2


async def test_cancel_a_running_demo_leaves_no_process(quiz_bank):
    from ddpfsdp.demos.launch.launcher import DemoRun

    runs = []

    def runner(demo, args):
        # Long enough that it is surely still running when Escape is pressed.
        runs.append(DemoRun(demo, [*args, "--steps", "100000"], procs=2))
        return runs[-1]

    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="ddp", demo_runner=runner)
    async with app.run_test(size=(100, 40)) as pilot:
        panel = await open_feedback(pilot, "ddp-grad-sync")
        await pilot.press("r")
        for _ in range(600):  # until the ranks report their first step
            await asyncio.sleep(0.1)
            if "step" in widget_text(panel.query_one("#evidence-status")):
                break
        else:
            pytest.fail("the demo never reported progress: " + widget_text(panel.query_one("#evidence-status")))
        await pilot.press("escape")
        for _ in range(300):
            await asyncio.sleep(0.1)
            if not panel.running:
                break
        await pilot.pause()
        status = widget_text(panel.query_one("#evidence-status"))
        assert "Cancelled" in status and "every rank was stopped" in status
        assert isinstance(app.screen, FeedbackScreen)  # Escape cancelled the run, it did not leave
    run = runs[0]
    assert run.cancelled
    assert run.leftover_pids() == []
    assert Store.open().last_demo_result("ddp", ["--model", "tiny", "--steps", "6"]) is None
