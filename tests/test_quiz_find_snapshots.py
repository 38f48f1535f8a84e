"""Snapshots of the screens that find and explain: search, the level picker, the numbers page and the
glossary, at 80x24 and 120x40, on the fixture bank with a fixed clock and seed.

Update them only after looking at the report: pytest tests/test_quiz_find_snapshots.py --snapshot-update
"""

from __future__ import annotations

from datetime import datetime, UTC

import pytest

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


def _app(quiz_bank, **kwargs):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0,
                    **kwargs)


@SIZES
def test_search_results(snap_compare, quiz_bank, size):
    with Store.open() as store:
        store.add_bookmark("ddp-grad-sync", T0)

    async def search(pilot):
        await pilot.pause()
        await pilot.press("slash", *"all-reduce bucket")
        await pilot.pause()
        assert pilot.app.screen.hits

    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=search)


@SIZES
def test_level_picker(snap_compare, quiz_bank, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, press=["l", "down"])


@SIZES
def test_numbers_page(snap_compare, quiz_bank, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, press=["n"])


@SIZES
def test_glossary(snap_compare, quiz_bank, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, press=["g", "down", "down", "down", "down", "down", "down"])
