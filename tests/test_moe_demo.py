"""`ddpfsdp demo moe` on real gloo ranks: 4 ranks in two ep groups of 2, so each group exchanges its own
tokens and each expert sits on two ranks, its gradients all-reduced between them (expert parallelism
beside data parallelism; within each group it is expert parallelism alone).

One launch, kept short (two steps of two samples), shared by every test here and by
tests/test_bank_evidence.py, which runs the question bank's link to it (tests/demo_runs.py).
"""

from __future__ import annotations

import io
import json

import pytest

from ddpfsdp.demos.registry import DEMOS

RUN = ("moe", "--model", "tiny", "--ep", "2", "--steps", "2", "--batch-size", "2")  # 4 ranks: two groups of --ep 2
LAYERS = 4  # the tiny GPT's blocks, each an MoE layer


@pytest.fixture(scope="module")
def result(demo_result):
    return demo_result(*RUN, procs=4)


def _checks(result: dict) -> dict:
    return {check["name"]: check for check in result["checks"]}


@pytest.mark.dist
def test_every_check_of_the_registry_passes(result):
    checks = _checks(result)
    assert set(checks) == set(DEMOS["moe"].checks)
    failed = {name: check["detail"] for name, check in checks.items() if not check["passed"]}
    assert not failed, failed


@pytest.mark.dist
def test_each_rank_holds_its_experts_and_sends_five_all_to_alls_per_layer(result):
    moe = result["moe"]
    assert [(r["ep_group"], r["ep_rank"], r["experts"]) for r in moe["ranks"]] == [
        (0, 0, [0, 1]), (0, 1, [2, 3]), (1, 0, [0, 1]), (1, 1, [2, 3])]
    for rank in moe["ranks"]:
        assert len(rank["all_to_all_bytes"]) == 5 * LAYERS
        # the counts all-to-all: 4 experts' int64 counts, first of each layer's three forward calls
        assert rank["all_to_all_bytes"][0:3 * LAYERS:3] == [4 * 8] * LAYERS
    config = result["config"]
    assert (config["ep"], config["experts"], config["top_k"], config["capacity_factor"]) == (2, 4, 2, 1.0)
    assert result["theory"]["theory"] is True and result["theory"]["experts_per_rank"] == 2


@pytest.mark.dist
def test_each_rank_s_model_state_is_its_experts_and_its_dense_shard(result):
    """Measured after the recorded step's update: the parameters are the experts whole and the FSDP shard,
    the gradients as many bytes, AdamW's two moments twice that (plus a step counter per tensor)."""
    for memory, rank in zip(result["memory"]["ranks"], result["moe"]["ranks"]):
        assert memory["params"] == memory["grads"] == rank["expert_param_bytes"] + rank["dense_param_bytes"]
        assert 2 * memory["params"] <= memory["optimizer"] <= 2 * memory["params"] + 8 * 64


@pytest.mark.dist
def test_the_recorded_step_shows_the_all_to_alls_on_every_rank(result):
    for rank in result["timeline"]["ranks"]:
        all_to_alls = [c for c in rank["collectives"] if c["op"] == "all_to_all"]
        assert len(all_to_alls) == 5 * LAYERS and all(c["completed_s"] is not None for c in all_to_alls)
    assert result["comm"]["per_step"]["all_to_all"]["count"] == 5 * LAYERS


@pytest.mark.dist
def test_beside_data_parallelism_each_expert_is_on_two_ranks_and_its_gradients_meet(result):
    # the experts' gradients: one all-reduce over the two ranks holding the same experts, after backward
    assert result["comm"]["per_step"]["all_reduce"]["count"] == 1
    # each group routes and exchanges its own tokens: a rank's experts compute only its own group's slots
    for rank in result["moe"]["ranks"]:
        assert all(sum(layer["received"]) == layer["computed"] for layer in rank["layers"])


@pytest.mark.dist
def test_the_result_reads_back_and_renders_at_80_columns(result):
    from rich.console import Console

    from ddpfsdp.demos.measure import moe_report
    from ddpfsdp.demos.result.schema import DemoResult

    typed = DemoResult.from_json(result)
    assert typed.to_json() == result and typed.moe is not None and typed.moe.reference is not None
    console = Console(width=80, file=io.StringIO(), color_system=None)
    moe_report.render(typed, console)
    printed = console.file.getvalue()
    assert "Load in the recorded step" in printed and "A all_to_all" in printed
    assert max(len(line) for line in printed.splitlines()) <= 80
    panel = Console(width=60, file=io.StringIO(), color_system=None)
    for part in moe_report.evidence_view(typed, 60):
        panel.print(part)
    assert max(len(line) for line in panel.file.getvalue().splitlines()) <= 60


@pytest.mark.dist
def test_the_recorded_step_writes_a_trace(result, tmp_path):
    from ddpfsdp.demos.measure import trace

    events = json.loads(trace.write(result, tmp_path / "moe.json").read_text())["traceEvents"]
    assert any("all_to_all" in str(event.get("name", "")) for event in events)


TOPIC = f'''
topic = "expert-parallel"
title = "Expert parallelism"
order = 1
description = "Experts over ranks."

[[question]]
id = "ep-evidence"
level = 2
kind = "single"
prompt = "Where does a token routed to an expert on another rank go?"
choices = ["To that rank by an all-to-all, and its output back by another", "Nowhere: the expert is all-gathered"]
answer = "To that rank by an all-to-all, and its output back by another"
why = ["Right: dispatch and combine.", "Wrong: that is FSDP."]
demo = {{ name = "moe", args = {json.dumps(list(RUN[1:]))} }}
evidence = ["all_to_all_bytes_match_routed_tokens", "dropped_tokens_match_router"]
'''


@pytest.mark.dist
async def test_an_expert_parallel_question_shows_its_saved_run(result, tmp_path):
    """The quiz's evidence panel draws the run by the registry's view (the load per layer, each rank's
    experts), with the memory and timeline charts every training result gets."""
    from conftest import widget_text

    from ddpfsdp.quiz.app import make_app
    from ddpfsdp.quiz.store import Store

    bank_dir, answers_dir = tmp_path / "bank", tmp_path / "answers"
    bank_dir.mkdir()
    answers_dir.mkdir()
    (bank_dir / "expert-parallel.toml").write_text(TOPIC)
    (answers_dir / "ep-evidence.md").write_text("# ep-evidence\n\nThe model answer.\n")
    with Store.open() as store:
        store.save_demo_result("moe", list(RUN[1:]), result)
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="expert-parallel")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
        await pilot.pause()
        panel = app.screen.query_one("#evidence")
        shown = widget_text(panel.query_one("#evidence-saved"))
        classes = set(panel.classes)
    assert "Not measured on this machine yet" not in shown
    assert "✔ │ all_to_all_bytes_match_routed" in shown and "✔ │ dropped_tokens_match_router" in shown
    assert "Load in the recorded step" in shown and "ep group.rank" in shown
    assert {"-has-chart", "-has-timeline"} <= classes
