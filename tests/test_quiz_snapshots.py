"""Snapshots of the main screens at a fixed size, seed, clock and machine name.

Update them only after looking at the report: pytest tests/test_quiz_snapshots.py --snapshot-update
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest
from conftest import QUIZ_TOPIC_DDP

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


# The first question of the shared test topic alone.
DDP_ONLY_BANK = QUIZ_TOPIC_DDP[: QUIZ_TOPIC_DDP.index('[[question]]\nid = "ddp-replicated-state"')]

MIB = 2**20


def test_feedback_with_peak_breakdown(snap_compare, tmp_path, fixed_machine):
    """A saved DDP run: the evidence chart stacks rank 0's peak by category."""
    bank_dir, answers_dir = tmp_path / "bank", tmp_path / "answers"
    bank_dir.mkdir()
    answers_dir.mkdir()
    (bank_dir / "ddp.toml").write_text(DDP_ONLY_BANK)
    (answers_dir / "ddp-grad-sync.md").write_text("# ddp-grad-sync\n\nAll-reduce in buckets.\n")
    breakdown = {"params": int(3.56 * MIB), "optimizer": int(7.12 * MIB), "ddp_buckets": int(3.56 * MIB),
                 "activations": int(8.82 * MIB), "temporaries": 1 * MIB}
    rank = {"params": int(3.56 * MIB), "grads": int(3.56 * MIB), "optimizer": int(7.12 * MIB),
            "peak": int(24.07 * MIB), "peak_breakdown": breakdown, "peak_phase": "backward", "peak_module": None}
    with Store.open() as store:
        store.save_demo_result(
            "ddp",
            ["--model", "tiny", "--steps", "6"],
            {
                "schema": "ddpfsdp.demo/1",
                "demo": "ddp",
                "config": {"strategy": "ddp", "world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny"},
                "env": {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": CPUS, "hostname": HOST},
                "memory": {"ranks": [rank, rank]},
                "throughput": {"samples_per_s": 102.2},
                "comm": {"per_step": {"all_reduce": {"count": 1, "bytes": int(3.56 * MIB), "wire_bytes_per_rank": int(3.56 * MIB)}}},
                "checks": [{"name": "ddp_uses_all_reduce", "passed": True,
                            "detail": "1 all_reduce calls per step; no all_gather or reduce_scatter", "values": {}}],
            },
            saved_at=T0 - timedelta(hours=3),
        )
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0,
                   monotonic=lambda: 500.0, topic="ddp")

    async def answer(pilot):
        await pilot.pause()
        screen = pilot.app.screen
        await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 50), run_before=answer)


def test_drill_miss_shows_the_working(snap_compare, quiz_bank, fixed_machine):
    async def miss(pilot):
        await pilot.pause()
        problem = pilot.app.screen.problem
        pilot.app.screen.query_one("#drill-input").value = "3" if problem.unit == "" and problem.answer != 3 else "1 bytes"
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(_app(quiz_bank, drill=True), terminal_size=SIZE, run_before=miss)


def _recorded_step(rank: int) -> dict:
    """A small recorded DDP step: three units, two buckets, memory rising in forward and falling in backward."""
    spans, collectives, seq = [], [], 0
    t = 0.002 + 0.001 * rank
    spans.append({"name": "forward", "phase": "forward", "unit": None, "start_s": 0.001, "end_s": 0.031,
                  "seq_start": 0, "seq_end": 7})
    for unit in ("embeddings", "blocks.0", "head"):
        spans.append({"name": unit, "phase": "forward", "unit": unit, "start_s": t, "end_s": t + 0.008,
                      "seq_start": seq + 1, "seq_end": seq + 2})
        t += 0.010
        seq += 2
    spans.append({"name": "backward", "phase": "backward", "unit": None, "start_s": 0.032, "end_s": 0.070,
                  "seq_start": 8, "seq_end": 16})
    t = 0.033
    for unit in ("head", "blocks.0", "embeddings"):
        spans.append({"name": unit, "phase": "backward", "unit": unit, "start_s": t, "end_s": t + 0.011,
                      "seq_start": seq + 3, "seq_end": seq + 4})
        t += 0.012
        seq += 2
    collectives.append({"op": "all_reduce", "bytes": 1 << 20, "group_size": 2, "group": "0", "issued_s": 0.046,
                        "completed_s": 0.060, "seq": 12})
    collectives.append({"op": "all_reduce", "bytes": 3 << 20, "group_size": 2, "group": "0", "issued_s": 0.069,
                        "completed_s": 0.078, "seq": 15})
    spans.append({"name": "optimizer", "phase": "optimizer", "unit": None, "start_s": 0.080, "end_s": 0.095,
                  "seq_start": 17, "seq_end": 18})
    memory = [[i * 0.005, (20 + (i if i < 7 else 14 - i)) << 20] for i in range(20)]
    params = [[0.003 + 0.01 * i, 4 << 20, f"{u} forward"] for i, u in enumerate(("embeddings", "blocks.0", "head"))]
    return {"rank": rank, "clock": "host", "duration_s": 0.1, "spans": spans, "collectives": collectives,
            "memory": {"kind": "cpu live tensor bytes (profiler)", "samples": memory}, "params": params}


def test_feedback_with_a_recorded_step(snap_compare, quiz_bank, fixed_machine):
    """The evidence panel draws the saved result's memory over the step and each rank's lanes."""
    with Store.open() as store:
        store.save_demo_result(
            "ddp",
            ["--model", "tiny", "--steps", "6"],
            {
                "schema": "ddpfsdp.demo/1",
                "demo": "ddp",
                "config": {"world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny", "strategy": "ddp"},
                "env": {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": CPUS, "hostname": HOST},
                "memory": {"ranks": [{"params": 3 << 20, "grads": 3 << 20, "optimizer": 6 << 20, "peak": 30 << 20}] * 2},
                "comm": {"per_step": {"all_reduce": {"count": 2, "bytes": 4 << 20, "wire_bytes_per_rank": 4 << 20}}},
                "checks": [{"name": "ddp_uses_all_reduce", "passed": True, "detail": "2 all_reduce calls per step", "values": {}}],
                "timeline": {"step": 4, "units": ["embeddings", "blocks.0", "head"],
                             "ranks": [_recorded_step(0), _recorded_step(1)]},
            },
            saved_at=T0 - timedelta(hours=1),
        )
    app = _app(quiz_bank, topic="ddp")

    async def answer(pilot):
        await pilot.pause()
        screen = pilot.app.screen
        assert screen.question.id == "ddp-grad-sync"
        await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
        await pilot.pause()
        panel = pilot.app.screen.query_one("EvidencePanel")
        assert panel.has_class("-has-timeline")
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 60), run_before=answer)
