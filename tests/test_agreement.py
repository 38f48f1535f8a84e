"""Measurement agrees with the analytic model: per-rank model-state bytes (1%, plus shard padding)
and wire bytes per step per op (5%), for DDP, ZeRO-1, FSDP grad-op, FSDP full and HSDP.

The four strategies of `compare` run in fp32 (the question bank's run); the precision accounting is
held against DDP under bf16-mixed (autocast: fp32 state, gradients all-reduced in fp32; the bank's run
too) and HSDP under bf16-mixed (FSDP's MixedPrecisionPolicy: fp32 shards, parameters all-gathered in
bf16, gradients reduce-scattered and all-reduced in fp32). The simulated worlds of
tests/test_simulate_golden.py hold ZeRO-1 and grad-op under bf16-mixed against the same model.
"""

from __future__ import annotations

import pytest

from ddpfsdp.demos.result.schema import STATE_KINDS
from ddpfsdp.demos.train.demo import allowance, theory_of
from ddpfsdp.demos.parallel.strategies import ROOT_UNIT

pytestmark = [pytest.mark.dist, pytest.mark.timeout(400)]



@pytest.fixture
def compare(demo_result):
    return demo_result("compare", "--model", "tiny")


@pytest.fixture
def ddp_bf16_mixed(demo_result):
    return demo_result("ddp", "--model", "tiny", "--precision", "bf16-mixed")


@pytest.fixture
def hybrid(demo_result):
    return demo_result("fsdp", "--model", "tiny", "--sharding", "hybrid", "--replicas", "2",
                       "--precision", "bf16-mixed", "--steps", "5", procs=4)


def _assert_state_agrees(run):
    # the allowance the demo's own checks grant: shard padding, whole tensors, step counters
    theory, slack = theory_of(run), allowance(run)
    for held in run["memory"]["ranks"]:
        for kind in STATE_KINDS:
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


@pytest.mark.parametrize("name", ["ddp", "zro", "fsdp-grad-op", "fsdp-full"])
def test_model_state_per_rank_matches_theory(compare, name):
    _assert_state_agrees(compare["runs"][name])


@pytest.mark.parametrize("name", ["ddp", "zro", "fsdp-grad-op", "fsdp-full"])
def test_wire_bytes_per_op_match_theory(compare, name):
    _assert_wire_agrees(compare["runs"][name])


def test_ddp_under_bf16_mixed_holds_and_sends_fp32(ddp_bf16_mixed):
    assert ddp_bf16_mixed["config"]["precision"] == "bf16-mixed"
    _assert_state_agrees(ddp_bf16_mixed)
    _assert_wire_agrees(ddp_bf16_mixed)
    params = ddp_bf16_mixed["config"]["params"]
    assert ddp_bf16_mixed["comm"]["per_step"]["all_reduce"]["bytes"] == pytest.approx(4 * params, rel=0.01)


def test_hybrid_shards_within_groups_and_all_reduces_across(hybrid):
    assert hybrid["config"]["precision"] == "bf16-mixed"
    _assert_state_agrees(hybrid)
    _assert_wire_agrees(hybrid)
    sizes = hybrid["comm"]["group_sizes"]
    assert sizes["all_gather"] == [2] and sizes["reduce_scatter"] == [2] and sizes["all_reduce"] == [2]
    failed = [c for c in hybrid["checks"] if not c["passed"]]
    assert not failed, failed
    # Each unit's bf16 gathered copy weighs what its fp32 shard does in a group of 2: the shards held
    # during the unit's forward must be counted for the fall after it to show.
    config = hybrid["config"]
    resharding = [u for u, n in zip(config["units"], config["unit_params"]) if n > 0 and u != ROOT_UNIT]
    reshard = next(c for c in hybrid["checks"] if c["name"] == "fsdp_reshards_after_forward")
    assert reshard["values"]["drops_per_rank"] == [len(resharding)] * 4


def test_bf16_mixed_gathers_in_bf16_and_reduces_in_fp32(hybrid):
    params = hybrid["config"]["params"]
    per_step = hybrid["comm"]["per_step"]
    assert per_step["reduce_scatter"]["bytes"] == pytest.approx(4 * params, rel=0.01)
    gathered_params = sum(hybrid["config"]["unit_params"]) + sum(hybrid["config"]["unit_params"][:-1])
    assert per_step["all_gather"]["bytes"] == pytest.approx(2 * gathered_params, rel=0.01)
    # Across the replicas: each rank's fp32 gradient shard, half of every gradient.
    assert per_step["all_reduce"]["bytes"] == pytest.approx(4 * params / 2, rel=0.01)
