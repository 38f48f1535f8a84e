"""Every concept demo on real CPU processes: it finishes, streams a step-by-step view, and every
named check in the registry passes with the numbers behind it.

Each demo runs once per module (cached), and several tests read that one run.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

from ddpfsdp.demos import registry
from ddpfsdp.demos.launcher import DemoRun

CONCEPTS = [name for name, demo in registry.DEMOS.items() if demo.kind == "concept"]

# (demo, args, procs): the default run of each demo, plus the collectives on 4 ranks with a buffer
# that does not divide evenly into chunks.
RUNS = {
    "sampler": ("sampler", [], 2),
    "allreduce": ("allreduce", [], 2),
    "allreduce-4": ("allreduce", ["--numel", "13"], 4),
    "reduce-scatter": ("reduce-scatter", [], 2),
    "reduce-scatter-4": ("reduce-scatter", ["--chunk-numel", "2"], 4),
    "sampler-4": ("sampler", ["--dataset-size", "10"], 4),
}


@functools.cache
def _run(key: str) -> tuple[dict, list[dict]]:
    demo, args, procs = RUNS[key]
    run = DemoRun(demo, args, procs=procs, timeout_s=60)
    events = list(run.events())
    assert run.error is None, run.error
    assert run.ok, (run.returncode, list(run.stderr_tail)[-20:])
    assert run.leftover_pids() == []
    return run.result, events


def _logs(events: list[dict]) -> list[str]:
    return [event["message"] for event in events if event["event"] == "log"]


def _check(result: dict, name: str) -> dict:
    return next(check for check in result["checks"] if check["name"] == name)


def test_every_concept_module_imports_without_torch():
    modules = [registry.DEMOS[name].module.split(":")[0] for name in CONCEPTS]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        "    assert callable(module.run) and isinstance(module.OPTIONS, list), name\n"
        "print('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize("name", CONCEPTS)
def test_options_have_defaults_and_help(name):
    from ddpfsdp.demos.worker import parse_demo_options

    demo = registry.DEMOS[name]
    options = parse_demo_options(demo, [])
    assert all(value is not None for value in options.values()), options
    from ddpfsdp.demos.worker import load

    for option in load(demo.options):
        assert option.help, f"{name} {option.name} has no help"


@pytest.mark.dist
@pytest.mark.parametrize("key", list(RUNS))
def test_demo_runs_and_every_check_passes(key):
    result, events = _run(key)
    demo = RUNS[key][0]
    assert result["schema"] == "ddpfsdp.demo/1"
    assert result["demo"] == demo
    assert result["config"]["world_size"] == RUNS[key][2]
    assert {"torch", "python", "cpu_count", "hostname"} <= set(result["env"])
    names = [check["name"] for check in result["checks"]]
    assert sorted(names) == sorted(registry.DEMOS[demo].checks)
    for check in result["checks"]:
        assert check["passed"], check
        assert check["detail"] and check["values"]
    assert len(_logs(events)) >= 5
    assert any(event["event"] == "progress" for event in events)


@pytest.mark.dist
def test_sampler_shows_what_each_rank_loads():
    result, events = _run("sampler")
    indices = result["indices"]
    epochs = indices["with_set_epoch"]
    assert len(epochs) == result["config"]["epochs"]
    rank0, rank1 = epochs[0]
    assert not set(rank0) & set(rank1)
    assert sorted(rank0 + rank1) == list(range(10))
    assert indices["without_set_epoch"][0] == indices["without_set_epoch"][1]
    assert indices["no_sampler"][0] == indices["no_sampler"][1]
    assert result["samples_per_rank_per_epoch"] == {"with_sampler": 5, "without_sampler": 10}
    assert any("rank 1 loads" in line for line in _logs(events))


@pytest.mark.dist
def test_sampler_on_four_ranks_pads_the_uneven_dataset():
    result, _ = _run("sampler-4")
    # 10 samples on 4 ranks: the demo's uneven case is the dataset itself, 3 per rank, 2 repeated.
    pads = _check(result, "sampler_pads_or_drops")["values"]
    assert pads["dataset_size"] == 10 and pads["padded_counts"] == [3, 3, 3, 3]
    assert pads["repeated"] == 2 and pads["left_out"] == 2


@pytest.mark.dist
def test_ring_all_reduce_counts_its_own_sends():
    result, events = _run("allreduce")
    # 12 float32 on 2 ranks: each rank sends one 24-byte chunk per phase.
    assert result["buffer_bytes"] == 48
    assert result["sent_bytes_per_rank"] == [48, 48]
    assert result["intercepted_send_bytes_per_rank"] == [48, 48]
    assert result["buffers"]["result"][0] == result["buffers"]["result"][1]
    assert [m["phase"] for m in result["moves"]].count("reduce-scatter") == 2
    assert any("rank 0 -> rank 1: chunk" in line for line in _logs(events))


@pytest.mark.dist
def test_ring_all_reduce_on_four_ranks_with_uneven_chunks():
    result, _ = _run("allreduce-4")
    assert result["buffer_bytes"] == 52
    # chunks of 4, 3, 3, 3 elements; 6 sends per rank; the total over ranks is 6 x 52 B exactly
    assert sum(result["sent_bytes_per_rank"]) == 6 * 52
    assert len(result["moves"]) == 4 * 6


@pytest.mark.dist
def test_reduce_scatter_shows_inputs_and_outputs():
    result, events = _run("reduce-scatter")
    tensors = result["tensors"]
    inputs = tensors["input"]
    summed = [a + b for a, b in zip(*inputs)]
    assert tensors["shard"][0] == summed[:3] and tensors["shard"][1] == summed[3:]
    assert tensors["full"] == [summed, summed]
    assert result["comm"]["reduce_scatter"][0]["count"] == 1
    assert result["comm"]["all_gather"][1]["wire_bytes_per_rank"] == 12


@pytest.mark.dist
def test_reduce_scatter_on_four_ranks():
    result, _ = _run("reduce-scatter-4")
    assert result["buffer_bytes"] == 4 * 2 * 4
    sent = result["sent_bytes_per_rank"]
    assert all(value == 24 for per_rank in sent.values() for value in per_rank)
