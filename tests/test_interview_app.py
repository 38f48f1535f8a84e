"""The interview in the app, driven with a pilot: from home, every kind of answer, a follow-up, the
explanation, the debrief and `r`; leaving and Ctrl+C keep every finished step; and in plain mode a
killed process or Ctrl+C loses none. The simulation itself is fed from a stored result here, except
in the one test that runs it for real."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, UTC
from pathlib import Path

import pytest
from conftest import sigint_as_a_terminal_sends_it
from rich.console import Console

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.interview import debrief
from ddpfsdp.quiz.interview.generate import generate
from ddpfsdp.quiz.screens.debrief import DebriefScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.screens.interview import InterviewScreen
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZE = (100, 40)
STORED = json.loads((Path(__file__).parent / "data" / "interview_sim_13b_world8.json").read_text())


def scenario_13b():
    """13B on one node of 8 A100-40GB: ZeRO-3, the configuration of the stored simulation."""
    return generate(0, family="scale", model="Llama-2-13B-like", cluster="DGX A100 40GB")


class StoredRun:
    """Stands in for the launcher: one log line, then the stored simulated result (or a wait until cancelled)."""

    def __init__(self, demo: str, args: list[str], result: dict | None = STORED, block: bool = False):
        self.demo, self.args, self.result, self.error = demo, args, result, None
        self.cancelled = False
        self._stop = threading.Event()
        self._block = block

    def events(self):
        yield {"event": "log", "message": f"{self.demo} on a simulated world"}
        if self._block:
            self._stop.wait(10)

    def cancel(self):
        self.cancelled = True
        self._stop.set()


def right_text(step) -> str:
    value = step.answer
    return {"GB": f"{value / 1e9:.6g} GB", "GiB": f"{value / 2**30:.6g} GiB", "s": f"{value:.6g} s",
            "%": f"{value * 100:.4g}%", "choice": str(int(value or 0)), "count": str(int(value or 0))}[step.unit]


def plain(renderable) -> str:
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return " ".join(console.file.getvalue().split())


def _app(quiz_bank, scenario=None, runs: list | None = None, **kwargs):
    bank_dir, answers_dir = quiz_bank

    def runner(demo, args):
        run = StoredRun(demo, args, **kwargs)
        if runs is not None:
            runs.append(run)
        return run

    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0,
                    interview=scenario, demo_runner=runner)


async def _type(pilot, text: str) -> None:
    pilot.app.screen.query_one("#interview-input").value = text
    await pilot.press("enter")
    await pilot.pause()


async def test_a_whole_interview_then_the_debrief_and_r(quiz_bank):
    scenario = scenario_13b()
    runs: list[StoredRun] = []
    app = _app(quiz_bank, scenario, runs)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, InterviewScreen)
        await _type(pilot, "lots")
        assert "'lots' is not a number" in plain(screen.query_one("#interview-error").content)
        assert screen.grade is None and app.store.attempts() == []
        for step in scenario.steps:
            assert screen.step is step
            if step.change:
                assert step.change in plain(screen.query_one("#interview-change").content)
            if step.unit == "explain":
                await pilot.press("enter")  # reveal the talking points
                await pilot.pause()
                assert step.talking_points[0][:40] in plain(screen.query_one("#interview-result").content)
                await pilot.press("3")  # good
            else:
                await _type(pilot, "3" if step.kind == "fit-strategy" and step.change is None else right_text(step))
            await pilot.pause()
            shown = plain(screen.query_one("#interview-result").content)
            assert ("✘ Not quite" in shown) == (step.kind == "fit-strategy" and step.change is None), (step.id, shown)
            await pilot.press("enter")
            await pilot.pause()
        assert isinstance(app.screen, DebriefScreen)
        skills = plain(app.screen.query_one("#debrief-skills").content)
        assert "Strategy │ 1 │ 1 │ 0%" in skills and "Step time │ 5 │ 5 │ 100%" in skills
        assert debrief.simulation(scenario).command in plain(app.screen.query_one("#debrief-simulation").content)
        assert "Not simulated yet" in plain(app.screen.query_one("#debrief-status").content)
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        measured = plain(app.screen.query_one("#debrief-measured").content)
        assert "bytes sent per rank per step" in measured and "91.03 GB" in measured  # 7/8 of 104.04 GB, simulated
        assert "saved" in plain(app.screen.query_one("#debrief-status").content)
    assert [(run.demo, run.args) for run in runs] == [("fsdp", list(debrief.simulation(scenario).args))]
    attempts = app.store.attempts()
    assert len(attempts) == len(scenario.steps) and {a.mode for a in attempts} == {"interview"}
    assert app.store.last_demo_result("fsdp", list(debrief.simulation(scenario).args)) is not None


# --- at 80x24 -------------------------------------------------------------------------------------


def _rendered_lines(renderable, width: int) -> int:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue().count("\n")


def _tallest_choice_steps() -> list[tuple[int, int]]:
    """(seed, step index) of the choice step of each kind (fit, checkpoint, HSDP group) whose change, prompt
    and options take the most lines at 80 columns (74 for the text), among the first 120 seeds."""
    from ddpfsdp.quiz.interview import render

    tallest: dict[str, tuple[int, int, int]] = {}
    for seed in range(120):
        for index, step in enumerate(generate(seed).steps):
            if step.options:
                lines = _rendered_lines(render.prompt(step), 74)
                tallest[step.kind] = max(tallest.get(step.kind, (0, 0, 0)), (lines, seed, index))
    return [(seed, index) for _, seed, index in sorted(tallest.values(), reverse=True)]


async def _at_step(quiz_bank, seed: int, index: int, size: tuple[int, int]) -> dict:
    """What of a step is in view when it is asked, and what is once it is graded wrong."""
    scenario = generate(seed)
    app = _app(quiz_bank, scenario)
    seen = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = InterviewScreen(scenario)
        screen.index = index
        app.switch_screen(screen)
        await pilot.pause()
        await pilot.pause()
        body = screen.query_one("#interview-body").scrollable_content_region
        seen["question"] = all(body.contains_region(screen.query_one(part).region)
                               for part in ("#interview-title", "#interview-prompt"))
        seen["choices"] = all(screen.region.contains_region(screen.query_one(part).region)
                              for part in ("#interview-choices", "#interview-input", "#interview-hint"))
        seen["gap"] = screen.query_one("#interview-choices").region.y - screen.query_one("#interview-prompt").region.bottom
        seen["header"] = screen.query_one("#interview-header").render().plain
        wrong = next(n for n in range(1, len(screen.step.options) + 1) if n != screen.step.answer)
        await _type(pilot, str(wrong))
        seen["graded header"] = screen.query_one("#interview-header").render().plain
        seen["marks"] = plain(screen.query_one("#interview-choices").content)
    return seen


@pytest.mark.parametrize("seed, index", _tallest_choice_steps())
async def test_a_choice_step_keeps_its_question_and_every_choice_in_view_at_80x24(quiz_bank, seed, index):
    seen = await _at_step(quiz_bank, seed, index, (80, 24))
    assert seen["question"] and seen["choices"], seen
    for header in (seen["header"], seen["graded header"]):
        assert f"step {index + 1} of " in header and "⏱ 00:00" in header, header
    assert "✔" in seen["marks"] and "← yours" in seen["marks"]


async def test_on_a_tall_screen_the_choices_follow_their_question(quiz_bank):
    seed, index = _tallest_choice_steps()[0]
    seen = await _at_step(quiz_bank, seed, index, (120, 40))
    assert seen["question"] and seen["choices"] and seen["gap"] == 1, seen  # one blank line, not the rest of the screen


async def test_the_view_check_sees_a_question_pushed_out_of_view(quiz_bank):
    seed, index = _tallest_choice_steps()[0]
    seen = await _at_step(quiz_bank, seed, index, (80, 19))
    assert not seen["question"]


@pytest.mark.parametrize("width", [60, 80, 120])
async def test_the_header_keeps_the_position_and_the_clock_at_every_width(quiz_bank, width):
    scenario = scenario_13b()
    clock = iter(range(500, 10_000, 75))
    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0,
                   monotonic=lambda: float(next(clock)), interview=scenario)
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        await _type(pilot, right_text(screen.step))
        header = screen.query_one("#interview-header").render().plain
        assert header.rstrip().endswith("step 1 of 11 · 1/1 right  ⏱ " + header.split("⏱ ")[-1].strip()), header
        assert "⏱ 0" in header and len(header) == width - 2 - 4  # padding 1 each side, the page 2 each side
        await pilot.press("enter")
        await pilot.pause()
        assert "step 2 of 11 · 1/1 right" in screen.query_one("#interview-header").render().plain


async def test_home_opens_an_interview_and_leaving_keeps_what_was_answered(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("i")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, InterviewScreen)
        await _type(pilot, right_text(screen.step))
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert isinstance(app.screen, InterviewScreen)  # Ctrl+C explains, it does not throw anything away
        assert any("already saved (1 so far)" in n.message for n in app._notifications)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert any("1 answered step is saved" in n.message for n in app._notifications)
    assert [a.correct for a in app.store.attempts()] == [True]


async def test_escape_cancels_a_running_simulation(quiz_bank):
    scenario = scenario_13b()
    runs: list[StoredRun] = []
    app = _app(quiz_bank, None, runs, block=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.push_screen(DebriefScreen(scenario, {}))
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause(0.2)
        assert app.screen.running
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "Cancelled" in plain(app.screen.query_one("#debrief-status").content)
        assert isinstance(app.screen, DebriefScreen)
    assert runs[0].cancelled


def test_a_plain_interview_skipped_to_its_debrief_saves_every_step_as_a_miss(monkeypatch, ddpfsdp_home):
    # Plain mode renders what the app renders; that neither imports torch is proved in a fresh
    # interpreter by tests/test_import_hygiene.py.
    import io

    from rich.console import Console

    from ddpfsdp.quiz.interview.plain import run_interview_plain

    monkeypatch.setattr(sys, "stdin", io.StringIO("s\n" * 11 + "\n"))
    run_interview_plain(generate(5), console=Console(file=io.StringIO()), runner=lambda demo, args: None)
    with Store.open(ddpfsdp_home / "ddpfsdp.sqlite3") as store:
        assert len(store.attempts()) == 11  # skipped steps are saved as misses


def _plain_interview(tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", "interview", "--plain", "--seed", "0", "--family", "scale",
         "--model", "Llama-2-13B-like", "--cluster", "DGX A100 40GB"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
        env={**os.environ, "DDPFSDP_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1", "COLUMNS": "100"},
        preexec_fn=sigint_as_a_terminal_sends_it,
    )


def _read_until(proc: subprocess.Popen, marker: str, timeout_s: float = 60) -> str:
    seen = ""
    deadline = time.monotonic() + timeout_s
    while marker not in seen:
        assert time.monotonic() < deadline, seen[-2000:]
        char = proc.stdout.read(1)
        assert char, seen[-2000:]
        seen += char
    return seen


@pytest.mark.parametrize("how", ["kill -9", "ctrl+c"])
def test_a_killed_or_interrupted_plain_interview_loses_no_finished_step(tmp_path, how):
    proc = _plain_interview(tmp_path)
    try:
        _read_until(proc, "Your answer")
        for text in ("208 GB", "4", "1 GB"):
            proc.stdin.write(text + "\n")
            proc.stdin.flush()
        _read_until(proc, "Step 4 of 11")
        _read_until(proc, "Your answer")
        if how == "kill -9":
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        else:
            proc.send_signal(signal.SIGINT)
            rest = proc.communicate(timeout=30)[0]
            assert proc.returncode == 0
            assert "Stopped at step 4 of 11. 3 answered steps are saved" in " ".join(rest.split())
    finally:
        if proc.poll() is None:
            proc.kill()
    with Store.open(tmp_path / "ddpfsdp.sqlite3") as store:
        assert [(a.question_id, a.correct) for a in store.attempts()] == [
            ("interview:model-state", True), ("interview:fit-strategy", True), ("interview:wire-bytes", False)]


@pytest.mark.dist
async def test_r_runs_the_real_simulation(quiz_bank):
    """The one real simulated run: 1B DDP on a fake world of 8, launched from the debrief."""
    bank_dir, answers_dir = quiz_bank
    scenario = generate(2, family="scale", model="GPT-3-XL-like", cluster="DGX H100")
    sim = debrief.simulation(scenario)
    assert sim.command.startswith("ddpfsdp demo ddp --simulate --world 8 --params 1B")
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.push_screen(DebriefScreen(scenario, {}))
        await pilot.pause()
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = plain(app.screen.query_one("#debrief-status").content)
        assert "Ran just now" in status, status
        measured = plain(app.screen.query_one("#debrief-measured").content)
        assert "model state per GPU (ddp)" in measured and "15.91 GB" in measured  # 16 B x 994.5M params of the 1B shape at seq 2048
    saved = app.store.last_demo_result("ddp", list(sim.args))
    assert saved.result["config"]["simulated"] is True and saved.result["config"]["world_size"] == 8


async def test_at_80x24_a_graded_choice_step_shows_its_whole_working(quiz_bank):
    """Graded wrong, step 2's choices (nine rows with their details) once left the working three lines; the
    graded list keeps the right choice and the pick, and the working is all in view."""
    scenario = scenario_13b()
    app = _app(quiz_bank, scenario)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        await _type(pilot, right_text(screen.step))
        await pilot.press("enter")
        await pilot.pause()
        step = screen.step
        assert step.options and step.id == "2"
        await _type(pilot, str(next(n for n in range(1, len(step.options) + 1) if n != step.answer)))
        body = screen.query_one("#interview-body")
        result = screen.query_one("#interview-result")
        assert body.scrollable_content_region.contains_region(result.region), (body.region, result.region)
        assert step.working.split()[-1] in plain(result.render())
        marks = plain(screen.query_one("#interview-choices").content)
        assert marks.count("✔") == 1 and marks.count("✘") == 1 and "as PyTorch DDP" not in marks


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_job_s_summary_line_keeps_each_item_whole(width):
    """At 80 columns the summary once ended "seq 8,192 ×…": it now leaves out whole items, then "…"."""
    for seed in range(40):
        setup = generate(seed).setup
        full = setup.summary()
        line = setup.summary(width)
        assert len(line) <= width or " · " not in line
        kept = line.removesuffix(" · …").split(" · ")
        assert full.split(" · ")[:len(kept)] == kept
        assert line == full or line.endswith(" · …")
