"""The keys a screen offers are the keys that work there: the hint line and the footer name only those.

A text box takes letters, so `d` cannot open the evidence from a numeric or explain question (ctrl+o
does); Escape is named "Cancel demo" only while a demo runs, and "Home" (or "Back") otherwise.
"""

from __future__ import annotations

import pytest
from test_quiz_snapshots import KINDS, T0, _answer_wrongly

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.screens.evidence import EvidenceScreen
from ddpfsdp.quiz.widgets.key_bar import KeyBar


def _app(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0)


async def _ask(pilot, quiz_bank, kind: str) -> None:
    await pilot.pause()
    pilot.app.start_session("practice", questions=[load_bank(*quiz_bank).questions[KINDS[kind]]])
    await pilot.pause()


def _footer(app) -> dict[str, str]:
    return {key: description for key, _, description in app.screen.query_one(KeyBar).keys()}


@pytest.mark.parametrize(("kind", "key"), [("numeric", "ctrl+o"), ("single", "d")])  # the two with a demo
async def test_the_evidence_key_is_one_that_works_from_the_answer(quiz_bank, kind, key):
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ask(pilot, quiz_bank, kind)
        screen = app.screen
        hint = str(screen.query_one("#question-hint").render())
        footer = _footer(app)
        assert footer.get(key) == "Evidence", footer
        other = "d" if key == "ctrl+o" else "ctrl+o"
        assert other not in footer, footer
        assert f"{key} evidence" in hint and f"{other} evidence" not in hint.replace(f"{key} evidence", "")
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)


@pytest.mark.parametrize("kind", ["multi", "order", "explain"])  # no demo is linked to these
async def test_a_question_with_no_evidence_offers_none(quiz_bank, kind):
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ask(pilot, quiz_bank, kind)
        assert app.screen.question.demo is None
        footer = _footer(app)
        assert "Evidence" not in footer.values(), footer
        assert "evidence" not in str(app.screen.query_one("#question-hint").render())


async def test_d_in_a_text_box_is_a_letter(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ask(pilot, quiz_bank, "explain")
        await pilot.press("d")
        await pilot.pause()
        assert app.screen.query_one("#answer-input").value == "d"
        assert not isinstance(app.screen, EvidenceScreen)


@pytest.mark.parametrize("kind", ["numeric", "single"])
async def test_escape_is_named_for_what_it_does(quiz_bank, kind):
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ask(pilot, quiz_bank, kind)
        await _answer_wrongly(pilot)
        assert _footer(app).get("escape") == "Home", _footer(app)  # no demo is running
        await pilot.press("d")
        await pilot.pause()
        await pilot.pause()
        if isinstance(app.screen, EvidenceScreen):
            assert _footer(app).get("escape") == "Back", _footer(app)


async def test_escape_says_cancel_demo_while_one_runs(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 30)) as pilot:
        await _ask(pilot, quiz_bank, "single")
        await _answer_wrongly(pilot)
        screen = app.screen
        panel = screen.query_one("#evidence")
        panel.running = True  # as start() sets it while the ranks run
        screen.refresh_bindings()
        await pilot.pause()
        assert _footer(app).get("escape") == "Cancel demo", _footer(app)
        panel.running = False
        screen.refresh_bindings()
        await pilot.pause()
        assert _footer(app).get("escape") == "Home", _footer(app)
