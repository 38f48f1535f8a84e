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


async def test_demo_wrap_with_no_options_is_the_evidence_of_wrap_model_tiny(quiz_bank):
    """`ddpfsdp demo wrap` on CPU trains the tiny model, so the question linked to `wrap --model tiny`
    shows that run: the store keys a result by what was asked, defaults filled in, not by its words."""
    from conftest import run_cli

    outcome = run_cli("demo", "wrap", env={"CUDA_VISIBLE_DEVICES": ""})
    assert outcome.exit_code == 0, outcome.stdout[-2000:] + outcome.stderr[-2000:]
    assert "not saved" not in outcome.stdout + outcome.stderr

    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="fsdp-wrap")
    async with app.run_test(size=(100, 40)) as pilot:
        panel = await open_feedback(pilot, "wrap-peak-vs-units")
        shown = widget_text(panel.query_one("#evidence-saved"))
        assert "Not measured on this machine yet" not in shown
        assert "on this machine" in shown and "2 CPU processes (gloo)" in shown, shown
        assert "per_block_peak_below_root_only" in shown


# Installed in every Python process of the run below (the CLI, torchrun's agent, each rank) through
# PYTHONPATH: counts each RunSpec built and each parse of a demo's options, one file per process.
COUNTING_SITECUSTOMIZE = '''
import os

_folder = os.environ.get("DDPFSDP_COUNT_DIR")
if _folder:
    import click

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.train import spec as _spec

    def _count(what):
        with open(os.path.join(_folder, f"{os.getpid()}.txt"), "a") as out:
            out.write(what + "\\n")

    _post_init = _spec.RunSpec.__post_init__

    def _counted_post_init(self):
        _count("spec")
        _post_init(self)

    _spec.RunSpec.__post_init__ = _counted_post_init
    _parse_args = click.Command.parse_args

    def _counted_parse_args(self, ctx, args):
        if self.name in registry.DEMOS:
            _count("parse")
        return _parse_args(self, ctx, args)

    click.Command.parse_args = _counted_parse_args
'''


def test_a_demo_fsdp_run_builds_at_most_two_specs_and_parses_once_per_process(tmp_path):
    import os
    import subprocess
    import sys

    site, counts = tmp_path / "site", tmp_path / "counts"
    site.mkdir()
    counts.mkdir()
    (site / "sitecustomize.py").write_text(COUNTING_SITECUSTOMIZE)
    env = {**os.environ, "DDPFSDP_COUNT_DIR": str(counts), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    cli = [sys.executable, "-c", "from ddpfsdp.quiz.cli import main; main()"]
    done = subprocess.run([*cli, "demo", "fsdp", "--procs", "2", "--model", "tiny", "--sharding", "grad-op", "--json"],
                          capture_output=True, text=True, env=env, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]

    per_process = {path.stem: path.read_text().split() for path in counts.iterdir()}
    tally = {pid: (words.count("spec"), words.count("parse")) for pid, words in per_process.items()}
    # Three processes built a spec: the CLI, which parsed its command line once and resolved it for the
    # device it placed the run on (two), and the two ranks, which read that spec from the launcher's JSON
    # and built nothing more (the agent built none).
    assert len(tally) == 3 and sorted(parses for _, parses in tally.values()) == [0, 0, 1], tally
    assert sorted(specs for specs, _ in tally.values()) == [1, 1, 2], tally
