"""Snapshots of a whole interview at 120x40 and 80x24: an answer that is not a number, a wrong answer with
its working, a follow-up answered right, and the debrief after `r` (fed the stored simulated result).

Update them only after looking at the report: pytest tests/test_interview_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from test_interview_app import T0, StoredRun, right_text, scenario_13b

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.interview import answers
from ddpfsdp.quiz.screens.debrief import DebriefScreen
from ddpfsdp.quiz.screens.interview import InterviewScreen

SIZES = {"wide": (120, 40), "small": (80, 24)}


def _app(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, interview=scenario_13b(),
                    clock=lambda: T0, monotonic=lambda: 500.0,
                    demo_runner=lambda demo, args: StoredRun(demo, args))


async def _answer(pilot, text: str) -> None:
    pilot.app.screen.query_one("#interview-input").value = text
    await pilot.press("enter")
    await pilot.pause()


def _graded(scenario, upto: int, wrong: tuple[str, ...] = ()) -> dict:
    """Grades of the first `upto` steps, right except those named, as the screens would have them."""
    grades = {}
    for step in scenario.steps[:upto]:
        if step.unit == "explain":
            grades[step.id] = answers.grade_explain(step, "", "good")
        else:
            grades[step.id] = answers.grade(step, "1" if step.id in wrong else right_text(step))
    return grades


async def not_a_number(pilot) -> None:
    await _answer(pilot, "about two hundred")


async def wrong_with_working(pilot) -> None:
    await _answer(pilot, "208 GB")
    await pilot.press("enter")
    await pilot.pause()
    await _answer(pilot, "3")


async def follow_up_right(pilot) -> None:
    scenario = pilot.app.screen.scenario
    resumed = InterviewScreen(scenario)
    resumed.index, resumed.grades = 8, _graded(scenario, 8, wrong=("2",))
    pilot.app.switch_screen(resumed)
    await pilot.pause()
    assert resumed.step.change
    await _answer(pilot, right_text(resumed.step))


async def debrief_after_r(pilot) -> None:
    scenario = pilot.app.screen.scenario
    pilot.app.switch_screen(DebriefScreen(scenario, _graded(scenario, 11, wrong=("1", "5"))))
    await pilot.pause()
    await pilot.press("r")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


STATES = {"not-a-number": not_a_number, "wrong": wrong_with_working, "follow-up": follow_up_right,
          "debrief-r": debrief_after_r}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("state", STATES)
def test_the_interview(snap_compare, quiz_bank, state, size):
    async def run(pilot):
        await pilot.pause()
        await STATES[state](pilot)

    assert snap_compare(_app(quiz_bank), terminal_size=SIZES[size], run_before=run)


def _first_step_app(quiz_bank):
    """`ddpfsdp interview --seed 5` at its first step: the job open above the question."""
    from ddpfsdp.quiz.interview.generate import generate

    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, interview=generate(5),
                    clock=lambda: T0, monotonic=lambda: 500.0)


@pytest.mark.parametrize("size", SIZES)
def test_the_first_step_shows_the_whole_question(snap_compare, quiz_bank, size):
    """120x40: the job open and the whole question under it; 80x24: the job folded to its summary line."""
    async def run(pilot):
        await pilot.pause()

    assert snap_compare(_first_step_app(quiz_bank), terminal_size=SIZES[size], run_before=run)


@pytest.mark.parametrize("size", SIZES)
async def test_the_first_question_is_never_cut_above_empty_rows(quiz_bank, size):
    """The question's scroll takes the rows its content needs while the page has them: no scrollbar over
    a cut question with empty rows below (seed 5 at 120x40 showed one line of the question, 19 rows free)."""
    from ddpfsdp.quiz.widgets.room import Room

    app = _first_step_app(quiz_bank)
    async with app.run_test(size=SIZES[size]) as pilot:
        for _ in range(4):
            await pilot.pause(0.05)
        body = app.screen.query_one("#interview-body")
        room = app.screen.query_one(Room)
        prompt = app.screen.query_one("#interview-prompt")
        if size == "wide":
            assert not app.screen.query_one("#interview-job").collapsed
        assert body.virtual_size.height <= body.size.height or room.region.height <= 1, (
            body.virtual_size, body.size, room.region)
        assert prompt.region.bottom <= body.region.bottom
