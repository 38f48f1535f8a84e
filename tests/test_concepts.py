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
from ddpfsdp.demos.launch.launcher import DemoRun

CONCEPTS = [name for name, demo in registry.DEMOS.items() if demo.kind == "concept"]

# (demo, args, procs): the default run of each demo, plus the ring on 4 ranks with a buffer that
# does not divide evenly into chunks.
RUNS = {
    "sampler": ("sampler", [], 2),
    "allreduce": ("allreduce", [], 2),
    "allreduce-4": ("allreduce", ["--numel", "13"], 4),
    "reduce-scatter": ("reduce-scatter", [], 2),
    "wrap": ("wrap", ["--model", "tiny"], 2),
    "reshard": ("reshard", ["--model", "tiny"], 2),
    "comm": ("comm", ["--model", "tiny"], 2),
    "no-sync": ("no-sync", ["--model", "tiny", "--micro-batches", "3"], 2),
    "equivalence": ("equivalence", ["--model", "tiny"], 2),
    "checkpoint": ("checkpoint", ["--model", "tiny", "--steps", "1"], 2),
}


@functools.cache
def _run(key: str) -> tuple[dict, list[dict]]:
    demo, args, procs = RUNS[key]
    run = DemoRun(demo, args, procs=procs, timeout_s=60)
    events = list(run.events())
    stderr = "\n".join(list(run.stderr_tail)[-60:])
    assert run.error is None, f"{run.error}\n{stderr}"
    assert run.ok, (run.returncode, stderr)
    assert run.leftover_pids() == []
    return run.result, events


def _logs(events: list[dict]) -> list[str]:
    return [event["message"] for event in events if event["event"] == "log"]


def _check(result: dict, name: str) -> dict:
    return next(check for check in result["checks"] if check["name"] == name)


def test_every_concept_demo_has_a_run():
    assert set(CONCEPTS) <= {demo for demo, _, _ in RUNS.values()}


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
    # --model is left unset so the run picks it: tiny on CPU, small on GPU
    assert all(value is not None for key, value in options.items() if key != "model"), options
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
@pytest.mark.parametrize("key", [key for key, (demo, _, _) in RUNS.items() if registry.DEMOS[demo].render])
def test_result_renders_as_a_table(key):
    import io

    from rich.console import Console

    from ddpfsdp.demos.worker import load

    result, _ = _run(key)
    out = io.StringIO()
    load(registry.DEMOS[RUNS[key][0]].render)(result, Console(file=out, width=140))
    text = out.getvalue()
    assert "┃" in text  # a table was drawn
    assert "gloo" in text  # and it says what CPU figures mean


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
def test_wrap_units_and_largest_unit():
    result, events = _run("wrap")
    configs = {c["wrap"]: c for c in result["configs"]}
    params = result["config"]["params"]
    # root only: one unit holding the whole model; per block: the largest unit is a fraction of it
    assert configs["model"]["largest_unit_params"] == params
    assert configs["block"]["largest_unit_params"] < params / 2
    assert configs["layer"]["largest_unit_params"] < configs["block"]["largest_unit_params"]
    assert sum(configs["block"]["unit_params"]) == params
    # resharded units gather the whole model twice per step however finely it is cut; only the
    # number of calls changes (a root-only unit is gathered once or twice, as FSDP keeps the root)
    gathered = {w: c["comm"]["all_gather"]["bytes"] for w, c in configs.items()}
    assert gathered["block"] == gathered["layer"] == 2 * result["config"]["params"] * 4, gathered
    assert gathered["model"] in (params * 4, 2 * params * 4), gathered
    assert any("per block" in line for line in _logs(events))


@pytest.mark.dist
def test_reshard_all_gather_bytes_double():
    result, _ = _run("reshard")
    full, grad_op = result["configs"]
    assert full["reshard_after_forward"] and not grad_op["reshard_after_forward"]
    assert full["comm"]["all_gather"]["bytes"] == 2 * grad_op["comm"]["all_gather"]["bytes"]
    assert full["comm"]["reduce_scatter"] == grad_op["comm"]["reduce_scatter"]


@pytest.mark.dist
def test_comm_measures_beside_theory():
    result, events = _run("comm")
    assert result["fsdp_to_ddp_wire_ratio"] == pytest.approx(1.5, rel=0.05)
    ddp = result["runs"]["ddp"]
    assert set(ddp["comm"]) == {"all_reduce"}
    assert ddp["comm"]["all_reduce"]["bytes"] == result["param_bytes"]
    assert set(result["runs"]["fsdp"]["comm"]) == {"all_gather", "reduce_scatter"}
    assert "theory" in " ".join(_logs(events))


@pytest.mark.dist
def test_no_sync_counts_per_optimizer_step():
    result, _ = _run("no-sync")
    counts = result["syncs_per_optimizer_step"]
    assert counts["ddp"]["sync every micro-batch"] == 3 * counts["ddp"]["skip sync until the last"]
    fsdp = result["runs"]["fsdp"]
    # skipping the reduce-scatter does not skip the parameter all-gathers
    assert (fsdp["sync every micro-batch"]["comm"]["all_gather"]["count"]
            == fsdp["skip sync until the last"]["comm"]["all_gather"]["count"])


@pytest.mark.dist
def test_equivalence_losses_match_step_by_step():
    result, _ = _run("equivalence")
    reference = result["single_process"]["losses"]
    assert len(reference) == result["config"]["steps"]
    assert reference[-1] < reference[0]
    for strategy in ("ddp", "fsdp"):
        assert result[strategy]["losses"] == pytest.approx(reference, rel=1e-5)


@pytest.mark.dist
def test_checkpoint_reports_time_and_recomputation():
    result, events = _run("checkpoint")
    off, on = result["configs"]
    assert not off["checkpoint_activations"] and on["checkpoint_activations"]
    assert on["block_forward_calls"]["backward"] == result["config"]["blocks"]
    assert all(t["median"] > 0 for c in result["configs"] for t in c["step_time_s_by_rank"])
    assert result["step_time_ratio"] > 0
    assert any("reported, not checked" in line for line in _logs(events))
