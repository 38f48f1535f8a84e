"""`compare`: DDP, ZeRO-1, FSDP grad-op and FSDP full on one model, data and seed (2 gloo processes).

The run is the session's shared launch of `compare --model tiny` (tests/demo_runs.py), as the question
bank links it: the CPU default of 8 steps per strategy.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ddpfsdp.demos import registry
from ddpfsdp.demos.measure.report import render_compare, render_training

pytestmark = [pytest.mark.dist, pytest.mark.timeout(400)]


STEPS = 8  # --steps left unset: the CPU default


@pytest.fixture
def compare(demo_run):
    run = demo_run("compare", "--model", "tiny")
    run.assert_ok()
    return {**run.result, "_progress": [event for event in run.events if event["event"] == "progress"]}


def test_every_strategy_ran_and_every_claim_holds(compare):
    assert compare["schema"] == "ddpfsdp.demo/1" and compare["demo"] == "compare"
    assert list(compare["runs"]) == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    # An eager run makes every claim compare lists except those of a --compile run.
    listed, made = set(registry.get("compare").checks), {c["name"] for c in compare["checks"]}
    assert made <= listed and listed - made == registry.COMPILE_ONLY_CHECKS
    failed = [c for c in compare["checks"] if not c["passed"]]
    assert not failed, failed
    for name, run in compare["runs"].items():
        own_failures = [c for c in run["checks"] if not c["passed"]]
        assert not own_failures, (name, own_failures)


def test_losses_agree_across_strategies(compare):
    base = compare["runs"]["ddp"]["loss"]
    for run in compare["runs"].values():
        assert run["loss"] == pytest.approx(base, rel=1e-4)


def test_grad_op_holds_more_params_at_peak_than_full(compare):
    grad_op = compare["runs"]["fsdp-grad-op"]["memory"]["ranks"]
    full = compare["runs"]["fsdp-full"]["memory"]["ranks"]
    for g, f in zip(grad_op, full):
        # between forward and backward grad-op holds every unit unsharded, full only its shards
        assert g["params_after_forward"] > 1.9 * f["params_after_forward"]
        assert g["peak"] > f["peak"]


def test_zro_shards_only_the_optimizer(compare):
    ddp = compare["runs"]["ddp"]["memory"]["ranks"]
    zro = compare["runs"]["zro"]["memory"]["ranks"]
    for d, z in zip(ddp, zro):
        assert z["params"] == d["params"] and z["grads"] == d["grads"]
        assert z["optimizer"] < 0.6 * d["optimizer"]
    assert set(compare["runs"]["zro"]["comm"]["per_step"]) == {"all_reduce", "broadcast"}


def test_progress_covers_every_run_in_order(compare):
    assert compare["config"]["steps"] == STEPS
    steps = [event["step"] for event in compare["_progress"]]
    assert steps == list(range(4 * STEPS))
    assert {event["run"] for event in compare["_progress"]} == {"ddp", "zro", "fsdp-grad-op", "fsdp-full"}


def test_reports_render(compare):
    out = io.StringIO()
    console = Console(file=out, width=160)
    render_compare(compare, console)
    render_training({**compare["runs"]["fsdp-full"], "demo": "fsdp"}, console)
    text = out.getvalue()
    assert "fsdp-grad-op" in text and "ratio to DDP" in text and "Losses agree" in text
    assert "MiB" in text and "theory" in text and "reduce_scatter" in text
