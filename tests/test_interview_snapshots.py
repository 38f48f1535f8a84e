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
