"""The sizing drill in the app, driven with a pilot: opened from home and from the CLI's entry, graded
with units, the working shown on a miss, every answer saved and counted in progress."""

from __future__ import annotations

from datetime import datetime, UTC

from ddpfsdp.quiz import drill as drills
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.loader import UNITS
from ddpfsdp.quiz.screens.drill import DrillScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZE = (100, 40)


def _plain_text(widget) -> str:
    import io

    from rich.console import Console

    console = Console(width=96, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(widget.content)
    return " ".join(console.file.getvalue().split())


def _typed(problem: drills.Problem, right: bool) -> str:
    if problem.base_unit == "bytes":
        return f"{problem.answer / UNITS[problem.unit] * (1 if right else 3):.6g} {problem.unit}"
    return str(int(problem.answer) * (1 if right else 2) + (0 if right else 1))


async def _submit(pilot, text: str) -> None:
    pilot.app.screen.query_one("#drill-input").value = text
    await pilot.press("enter")
    await pilot.pause()


async def test_drill_grades_shows_the_working_on_a_miss_and_saves(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    store = Store.open()
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, store=store, drill=True, seed=8, clock=lambda: T0)
    expected = drills.generate(8, 3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DrillScreen)
        assert screen.problem.prompt == expected[0].prompt
        assert "Sizing drill" in screen.query_one("#drill-header").render().plain

        await _submit(pilot, "about a dozen")
        assert "is not a number" in _plain_text(screen.query_one("#drill-error"))
        assert screen.grade is None  # asked again, nothing saved

        await _submit(pilot, _typed(expected[0], right=False))
        shown = _plain_text(screen.query_one("#drill-result"))
        assert "✘ Not quite" in shown and expected[0].answer_text in shown
        assert "Working" in shown and " ".join(expected[0].working.split())[:60] in shown

        await pilot.press("n")
        await pilot.pause()
        assert screen.problem.prompt == expected[1].prompt
        assert _plain_text(screen.query_one("#drill-result")) == ""
        await _submit(pilot, _typed(expected[1], right=True))
        shown = _plain_text(screen.query_one("#drill-result"))
        assert "✔ Correct" in shown and "Working" not in shown

        await pilot.press("enter")  # Enter after grading moves on, as n does
        await pilot.pause()
        assert screen.problem.prompt == expected[2].prompt
        await pilot.press("ctrl+n")  # skipped from the answer box: not saved
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("p")
        await pilot.pause()
        assert "Sizing drills: 2 answered, 50% right, over 2 kinds" in _plain_text(app.screen.query_one("#progress-summary"))

    attempts = store.attempts()
    assert [(a.question_id, a.correct, a.mode) for a in attempts] == [
        (f"drill:{expected[0].kind}", False, "drill"),
        (f"drill:{expected[1].kind}", True, "drill"),
    ]
    by_kind = {d.kind: d for d in scheduler.drill_progress(store, T0)}
    assert by_kind[expected[1].kind].correct == 1


async def test_home_opens_the_drill_with_s_and_from_its_menu(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=1, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "Sizing drill" in app.screen.row_text("item-drill")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, DrillScreen)
        await pilot.press("escape")
        await pilot.pause()
        app.screen.query_one("Menu").highlighted = 2
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DrillScreen)


def _longest_fit_stage_prompts() -> dict[str, int]:
    """For each precision, the seed whose first fit-stage problem has the longest prompt (of 300 seeds)."""
    longest: dict[str, tuple[int, int]] = {}
    for seed in range(300):
        problem = next(drills.Drill(seed, ("fit-stage",)))
        precision = problem.args["precision"]
        longest[precision] = max(longest.get(precision, (0, 0)), (len(problem.prompt), seed))
    return {precision: seed for precision, (_, seed) in sorted(longest.items())}


async def _fits(quiz_bank, seed: int, size: tuple[int, int]) -> bool:
    """Whether the whole problem and its answer box are in view, with nothing to scroll."""
    bank_dir, answers_dir = quiz_bank
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, drill=True, drill_kinds=("fit-stage",), seed=seed,
                   clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        body = screen.query_one("#drill-body")
        return body.max_scroll_y == 0 and screen.region.contains_region(screen.query_one("#drill-input").region)


async def test_every_fit_stage_prompt_and_its_answer_box_fit_at_80x24(quiz_bank):
    seeds = _longest_fit_stage_prompts()
    assert set(seeds) == {"fp32", "bf16-mixed", "bf16-master", "bf16"}
    for precision, seed in seeds.items():
        problem = next(drills.Drill(seed, ("fit-stage",)))
        # Each stage on its own line, with the implementation graded.
        assert problem.prompt.count("\n- **") == 4, problem.prompt
        assert await _fits(quiz_bank, seed, (80, 24)), (precision, seed)


async def test_the_fit_check_sees_a_prompt_that_needs_scrolling(quiz_bank):
    seed = _longest_fit_stage_prompts()["bf16-master"]
    assert not await _fits(quiz_bank, seed, (80, 18))
