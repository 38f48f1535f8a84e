"""The ddp and fsdp demos end to end: 2 gloo processes, the tiny GPT, the result a user gets.

Each configuration runs once per module (module-scoped fixtures) through the real launcher:
`ddpfsdp demo fsdp --procs 2 --model tiny --json` and the worker under torchrun.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddpfsdp.demos import registry
from ddpfsdp.demos.launch.launcher import DemoRun

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]

TINY = ["--model", "tiny", "--steps", "6", "--warmup", "2"]


def _demo(name: str, args: list[str]) -> dict:
    run = DemoRun(name, args, procs=2)
    for _ in run.events():
        pass
    assert run.error is None, run.error
    assert run.returncode == 0, "\n".join(run.stderr_tail)
    assert run.result is not None
    return run.result


@pytest.fixture(scope="module")
def fsdp_json():
    """The CLI's --json output, as a user would pipe it."""
    proc = subprocess.run(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", "fsdp", "--procs", "2", *TINY, "--json"],
        capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def ddp():
    return _demo("ddp", TINY)


def test_json_follows_the_schema(fsdp_json):
    result = fsdp_json
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
    assert "gloo on CPU does not represent NCCL" in result["throughput"]["note"]
    assert result["throughput"]["mfu"] == "n/a"
    for op in result["comm"]["per_step"].values():
        assert set(op) == {"count", "bytes", "wire_bytes_per_rank"}
    assert len(result["loss"]) == config["steps"]
    assert "comm" in result["theory"] and "params_bytes" in result["theory"]
    names = {c["name"] for c in result["checks"]}
    assert names == set(registry.get("fsdp").checks) - registry.SIMULATED_ONLY_CHECKS
    failed = [c for c in result["checks"] if not c["passed"]]
    assert not failed, failed


def test_ddp_result_and_checks(ddp):
    names = {c["name"] for c in ddp["checks"]}
    assert names == set(registry.get("ddp").checks) - registry.SIMULATED_ONLY_CHECKS
    failed = [c for c in ddp["checks"] if not c["passed"]]
    assert not failed, failed


def test_fsdp_full_holds_a_shard_of_ddp_state(ddp, fsdp_json):
    row_bytes = fsdp_json["memory"]["shard_row_bytes"]  # one dim-0 row of every parameter: padding
    for kind in ("params", "grads"):
        for ddp_rank, fsdp_rank in zip(ddp["memory"]["ranks"], fsdp_json["memory"]["ranks"]):
            assert fsdp_rank[kind] == pytest.approx(ddp_rank[kind] / 2, rel=0.01, abs=row_bytes)
    for ddp_rank, fsdp_rank in zip(ddp["memory"]["ranks"], fsdp_json["memory"]["ranks"]):
        assert fsdp_rank["optimizer"] == pytest.approx(ddp_rank["optimizer"] / 2, rel=0.01, abs=2 * row_bytes)


def test_ddp_all_reduces_and_fsdp_gathers_and_scatters(ddp, fsdp_json):
    assert set(ddp["comm"]["per_step"]) == {"all_reduce"}
    assert set(fsdp_json["comm"]["per_step"]) == {"all_gather", "reduce_scatter"}


def test_fsdp_full_sends_one_and_a_half_times_ddp(ddp, fsdp_json):
    wire = lambda r: sum(op["wire_bytes_per_rank"] for op in r["comm"]["per_step"].values())  # noqa: E731
    assert wire(fsdp_json) / wire(ddp) == pytest.approx(1.5, rel=0.05)


def test_ddp_and_fsdp_losses_agree(ddp, fsdp_json):
    assert fsdp_json["loss"] == pytest.approx(ddp["loss"], rel=1e-4)
    assert ddp["loss"][-1] < ddp["loss"][0]
