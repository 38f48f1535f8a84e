"""The ddp and fsdp demos end to end: 2 gloo processes, the tiny GPT, the result a user gets.

Both read the session's shared launches (tests/demo_runs.py) of the configurations the question bank
links: `ddpfsdp demo fsdp --procs 2 --model tiny` and `ddpfsdp demo ddp --procs 2 --model tiny --bucket-mb 1`,
the worker on ranks the real launcher starts. (`--json` prints that same result: tests/test_launcher.py.)
"""

from __future__ import annotations

import pytest

from ddpfsdp.demos import registry
from ddpfsdp.demos.result.schema import GLOO_CAVEAT

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]


@pytest.fixture
def fsdp(demo_result):
    return demo_result("fsdp", "--model", "tiny")


@pytest.fixture
def ddp(demo_result):
    return demo_result("ddp", "--model", "tiny", "--bucket-mb", "1")


def test_json_follows_the_schema(fsdp):
    result = fsdp
    assert result["schema"] == "ddpfsdp.demo/1"
    assert result["demo"] == "fsdp"
    config = result["config"]
    for key in ("strategy", "sharding", "wrap", "model", "params", "world_size", "device", "backend",
                "precision", "batch_size", "seq_len", "steps", "warmup"):
        assert key in config, key
    assert config["world_size"] == 2 and config["backend"] == "gloo" and config["model"] == "tiny"
    assert set(result["env"]) >= {"torch", "python", "device_names", "cpu_count", "hostname"}
    ranks = result["memory"]["ranks"]
    assert len(ranks) == 2
    for held in ranks:
        for key in ("params", "grads", "optimizer", "peak", "peak_kind"):
            assert key in held
        assert held["peak"] > held["params"] + held["optimizer"]
    step = result["throughput"]["step_time_s"]
    assert result["throughput"]["samples_per_s"] > 0 and result["throughput"]["tokens_per_s"] > 0
    assert 0 < step["min"] <= step["median"] <= step["max"]
    assert result["throughput"]["note"] == GLOO_CAVEAT
    assert result["throughput"]["mfu"] == "n/a"
    for op in result["comm"]["per_step"].values():
        assert set(op) == {"count", "bytes", "wire_bytes_per_rank"}
    assert len(result["loss"]) == config["steps"]
    assert "comm" in result["theory"] and "params_bytes" in result["theory"]
    names = {c["name"] for c in result["checks"]}
    assert names == (set(registry.get("fsdp").checks) - registry.SIMULATED_ONLY_CHECKS - registry.TWO_D_ONLY_CHECKS
                     - registry.COMPILE_ONLY_CHECKS)
    failed = [c for c in result["checks"] if not c["passed"]]
    assert not failed, failed


def test_ddp_result_and_checks(ddp):
    names = {c["name"] for c in ddp["checks"]}
    assert names == set(registry.get("ddp").checks) - registry.SIMULATED_ONLY_CHECKS - registry.COMPILE_ONLY_CHECKS
    failed = [c for c in ddp["checks"] if not c["passed"]]
    assert not failed, failed


def test_fsdp_full_holds_a_shard_of_ddp_state(ddp, fsdp):
    row_bytes = fsdp["memory"]["shard_row_bytes"]  # one dim-0 row of every parameter: padding
    for kind in ("params", "grads"):
        for ddp_rank, fsdp_rank in zip(ddp["memory"]["ranks"], fsdp["memory"]["ranks"]):
            assert fsdp_rank[kind] == pytest.approx(ddp_rank[kind] / 2, rel=0.01, abs=row_bytes)
    for ddp_rank, fsdp_rank in zip(ddp["memory"]["ranks"], fsdp["memory"]["ranks"]):
        assert fsdp_rank["optimizer"] == pytest.approx(ddp_rank["optimizer"] / 2, rel=0.01, abs=2 * row_bytes)


def test_ddp_all_reduces_and_fsdp_gathers_and_scatters(ddp, fsdp):
    assert set(ddp["comm"]["per_step"]) == {"all_reduce"}
    assert set(fsdp["comm"]["per_step"]) == {"all_gather", "reduce_scatter"}


def test_fsdp_full_sends_one_and_a_half_times_ddp(ddp, fsdp):
    wire = lambda r: sum(op["wire_bytes_per_rank"] for op in r["comm"]["per_step"].values())  # noqa: E731
    assert wire(fsdp) / wire(ddp) == pytest.approx(1.5, rel=0.05)


def test_ddp_and_fsdp_losses_agree(ddp, fsdp):
    assert fsdp["loss"] == pytest.approx(ddp["loss"], rel=1e-4)
    assert ddp["loss"][-1] < ddp["loss"][0]
