"""Measurement agrees with the analytic model: per-rank model-state bytes (1%, plus shard padding)
and wire bytes per step per op (5%), for DDP, ZeRO-1, FSDP grad-op, FSDP full and HSDP.

The runs use bf16-mixed precision, so the model's precision accounting is tested too: fp32 state
is held, parameters are all-gathered in bf16 and gradients reduced in fp32.
"""

from __future__ import annotations

import pytest

from ddpfsdp.demos.train.demo import theory_of

pytestmark = [pytest.mark.dist, pytest.mark.timeout(400)]

STATE = ("params", "grads", "optimizer")


@pytest.fixture
def compare(demo_result):
    return demo_result("compare", "--model", "tiny", "--precision", "bf16-mixed", "--steps", "5")


@pytest.fixture
def hybrid(demo_result):
    return demo_result("fsdp", "--model", "tiny", "--sharding", "hybrid", "--replicas", "2", "--steps", "5", procs=4)


def _padding(run):
    """Bytes a rank may hold beyond 1/N from the model's own shapes: a row per tensor (FSDP), the
    largest tensor (ZeRO-1 partitions whole tensors), plus Adam's scalar step per tensor."""
    memory, strategy = run["memory"], run["config"]["strategy"]
    counters = 8 * memory["param_tensors"]
    if strategy == "fsdp":
        rows = memory["shard_row_bytes"]
        return {"params": rows, "grads": rows, "optimizer": 2 * rows + counters}
    if strategy == "zero1":
        return {"params": 0, "grads": 0, "optimizer": 2 * memory["largest_param_bytes"] + counters}
    return {"params": 0, "grads": 0, "optimizer": counters}


def _assert_state_agrees(run):
    theory, slack = theory_of(run), _padding(run)
    for held in run["memory"]["ranks"]:
        for kind in STATE:
            expected = theory[f"{kind}_bytes"]
            assert abs(held[kind] - expected) <= 0.01 * expected + slack[kind], (run["config"]["strategy"], kind)


def _assert_wire_agrees(run):
    theory = theory_of(run)["comm"]
    measured = run["comm"]["per_step"]
    assert set(measured) == set(theory), (measured, theory)
    for op, expected in theory.items():
        assert measured[op]["wire_bytes_per_rank"] == pytest.approx(expected["wire_bytes_per_rank"], rel=0.05), op
        if expected["count"] is not None:
            assert measured[op]["count"] == expected["count"], op


@pytest.mark.parametrize("name", ["ddp", "zero1", "fsdp-grad-op", "fsdp-full"])
def test_model_state_per_rank_matches_theory(compare, name):
    _assert_state_agrees(compare["runs"][name])


@pytest.mark.parametrize("name", ["ddp", "zero1", "fsdp-grad-op", "fsdp-full"])
def test_wire_bytes_per_op_match_theory(compare, name):
    _assert_wire_agrees(compare["runs"][name])


def test_bf16_mixed_gathers_in_bf16_and_reduces_in_fp32(compare):
    full = compare["runs"]["fsdp-full"]
    params = full["config"]["params"]
    per_step = full["comm"]["per_step"]
    assert per_step["reduce_scatter"]["bytes"] == pytest.approx(4 * params, rel=0.01)
    gathered_params = sum(full["config"]["unit_params"]) + sum(full["config"]["unit_params"][:-1])
    assert per_step["all_gather"]["bytes"] == pytest.approx(2 * gathered_params, rel=0.01)


def test_hybrid_shards_within_groups_and_all_reduces_across(hybrid):
    _assert_state_agrees(hybrid)
    _assert_wire_agrees(hybrid)
    sizes = hybrid["comm"]["group_sizes"]
    assert sizes["all_gather"] == [2] and sizes["reduce_scatter"] == [2] and sizes["all_reduce"] == [2]
    failed = [c for c in hybrid["checks"] if not c["passed"]]
    assert not failed, failed
