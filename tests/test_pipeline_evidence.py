"""A pipeline question's evidence panel shows the saved run of `demo pipeline`: each schedule's figures per
rank and its recorded step drawn one row per rank, read from a real result saved by the demo."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, UTC
from pathlib import Path

import pytest
from conftest import widget_text
from rich.console import Console
from saved_results import CPUS, HOST

from ddpfsdp.quiz import store as store_module

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.store import Store
from ddpfsdp.quiz.widgets.evidence import result_table

SAVED = Path(__file__).parent / "data" / "pipeline_1f1b_procs2.json"  # a real 2-rank 1F1B run, as printed
ARGS = ["--schedule", "1f1b", "--microbatches", "2", "--batch-size", "4", "--steps", "2"]

TOPIC = f'''
topic = "pipeline"
title = "Pipeline parallelism"
order = 1
description = "Stages over ranks."

[[question]]
id = "pipe-evidence"
level = 2
kind = "single"
prompt = "Under 1F1B with 2 stages and 2 micro-batches, how many micro-batches does stage 0 hold at its peak?"
choices = ["Two: it runs both forwards before the first backward", "One: each backward follows its forward at once"]
answer = "Two: it runs both forwards before the first backward"
why = ["Right: its warm-up is min(m, pp - rank) = 2 forwards.", "Wrong: that is stage 1, the last."]
demo = {{ name = "pipeline", args = {json.dumps(ARGS)} }}
evidence = ["pipeline_activations_in_flight_match_theory"]
'''


def _bank(tmp_path: Path) -> tuple[Path, Path]:
    bank_dir, answers_dir = tmp_path / "bank", tmp_path / "answers"
    bank_dir.mkdir()
    answers_dir.mkdir()
    (bank_dir / "pipeline.toml").write_text(TOPIC)
    (answers_dir / "pipe-evidence.md").write_text("# pipe-evidence\n\nThe model answer.\n")
    return bank_dir, answers_dir


def _text(renderable, width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_the_figures_and_the_drawing_of_a_saved_run():
    result = json.loads(SAVED.read_text())
    shown = _text(result_table(result))
    ranks = result["runs"]["1f1b"]["pipeline"]["ranks"]
    row = next(line for line in shown.splitlines() if line.lstrip("│ ").startswith("1f1b"))
    assert " ".join(str(r["in_flight_chunks"]) for r in ranks) in row
    assert " ".join(f"{r['bubble']:.2f}" for r in ranks) in row
    drawn = [line for line in shown.splitlines() if line.lstrip().startswith("rank ")]
    assert len(drawn) == len(ranks) and all(set(line.split(None, 2)[2]) <= set("FBIWL·") for line in drawn)
    assert max(len(line) for line in shown.splitlines()) <= 80


@pytest.mark.parametrize("width, drawn_width", [(120, 64), (80, 64), (50, 50)])
def test_the_drawing_takes_the_width_it_is_given_up_to_its_own(width, drawn_width):
    """The panel's view draws 56 slices after each rank's label where there is room, fewer where not."""
    from rich.console import Group

    from ddpfsdp.demos.measure.pipeline_report import evidence_view
    from ddpfsdp.demos.result.schema import as_result

    result = as_result(json.loads(SAVED.read_text()))
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(Group(*evidence_view(result, width)))
    drawn = [line.rstrip() for line in console.file.getvalue().splitlines() if line.lstrip().startswith("rank ")]
    assert len(drawn) == 2 and {len(line) for line in drawn} == {drawn_width}


async def test_a_pipeline_question_shows_its_saved_run(tmp_path):
    bank_dir, answers_dir = _bank(tmp_path)
    Store.open().save_demo_result("pipeline", ARGS, json.loads(SAVED.read_text()))

    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="pipeline")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
        await pilot.pause()
        shown = widget_text(app.screen.query_one("#evidence").query_one("#evidence-saved"))
    assert "Not measured on this machine yet" not in shown
    assert "✔ │ pipeline_activations_in_flight_" in shown and "[2, 1]; theory [2, 1]" in shown
    assert "1f1b, the recorded step" in shown and "rank 0" in shown and "rank 1" in shown


T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_snapshot_of_a_pipeline_questions_evidence(snap_compare, tmp_path, monkeypatch, size):
    """The question's evidence opened with d: the claim checked, the schedule's figures and its drawing."""
    monkeypatch.setattr(store_module.socket, "gethostname", lambda: HOST)
    monkeypatch.setattr(store_module.os, "cpu_count", lambda: CPUS)
    bank_dir, answers_dir = _bank(tmp_path)
    with Store.open() as store:
        store.save_demo_result("pipeline", ARGS, json.loads(SAVED.read_text()), saved_at=T0 - timedelta(hours=2))

    async def evidence(pilot):
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()

    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0,
                   topic="pipeline")
    assert snap_compare(app, terminal_size=size, run_before=evidence)
