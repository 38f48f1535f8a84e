"""Every concept demo on real CPU processes: it finishes, streams a step-by-step view, and every
named check in the registry passes with the numbers behind it.

Each configuration is the session's shared launch (tests/demo_runs.py), spelled as the question bank
links it where the bank links one, and several tests read that one run.
"""

from __future__ import annotations

import pytest

from ddpfsdp.demos import registry
from ddpfsdp.demos.result.schema import GLOO_CAVEAT

CONCEPTS = [name for name, demo in registry.DEMOS.items() if demo.kind == "concept"]

# (demo, args, procs): the default run of each demo, plus the ring on 3 ranks with a buffer that
# does not divide evenly into chunks.
MICRO_BATCHES = 4  # no-sync's default
RUNS = {
    "sampler": ("sampler", [], 2),
    "allreduce": ("allreduce", [], 2),
    "allreduce-3": ("allreduce", ["--numel", "13"], 3),
    "reduce-scatter": ("reduce-scatter", [], 2),
    "wrap": ("wrap", ["--model", "tiny"], 2),
    "reshard": ("reshard", ["--model", "tiny"], 2),
    "comm": ("comm", ["--model", "tiny"], 2),
    "no-sync": ("no-sync", ["--model", "tiny"], 2),
    "equivalence": ("equivalence", ["--model", "tiny"], 2),
    "checkpoint": ("checkpoint", ["--model", "tiny"], 2),
}


@pytest.fixture
def concept_run(demo_run):
    """`concept_run(key)`: (result, events) of RUNS[key], after asserting it ended well and left nothing."""

    def finished(key: str) -> tuple[dict, list[dict]]:
        demo, args, procs = RUNS[key]
        run = demo_run(demo, *args, procs=procs)
        return run.assert_ok(), run.events

    return finished


def _logs(events: list[dict]) -> list[str]:
    return [event["message"] for event in events if event["event"] == "log"]


def _check(result: dict, name: str) -> dict:
    return next(check for check in result["checks"] if check["name"] == name)


def test_every_concept_demo_has_a_run():
    assert set(CONCEPTS) <= {demo for demo, _, _ in RUNS.values()}


@pytest.mark.parametrize("name", CONCEPTS)
def test_options_have_defaults_and_help(name):
    from ddpfsdp.demos.launch.request import parse as parse_demo_options

    demo = registry.DEMOS[name]
    options = parse_demo_options(demo, [])
    # --model is left unset so the run picks it: tiny on CPU, small on GPU
    assert all(value is not None for key, value in options.items() if key != "model"), options
    from ddpfsdp.demos.registry import load

    for option in load(demo.options):
        assert option.help, f"{name} {option.name} has no help"


@pytest.mark.dist
@pytest.mark.parametrize("key", list(RUNS))
def test_demo_runs_and_every_check_passes(concept_run, key):
    result, events = concept_run(key)
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


def _table_rows(text: str) -> list[list[str]]:
    """The body rows of every table drawn in `text`, as lists of stripped cell texts."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")]
            for line in text.splitlines() if line.strip().startswith("│")]


def _ops(comm: dict, *ops: str) -> list[str]:
    return [str((comm.get(op) or {}).get("count", 0)) for op in ops]


ANY = None  # a cell whose text is not checked (a size in MiB, a time)
# key -> the rows (their first cells) each demo's table must show, read from the run's own measurements
EXPECTED_ROWS = {
    "allreduce": lambda r: [[str(rank), f"{sent} B", f"{r['intercepted_send_bytes_per_rank'][rank]} B"]
                            for rank, sent in enumerate(r["sent_bytes_per_rank"])],
    "reduce-scatter": lambda r: [[source, *(f"{b:g}" for b in per_rank)]
                                 for source, per_rank in r["sent_bytes_per_rank"].items()],
    "wrap": lambda r: [[c["label"], str(c["units_with_params"]), *_ops(c["comm"], "all_gather", "reduce_scatter")]
                       for c in r["configs"]],
    "reshard": lambda r: [[c["sharding"], str(c["units_with_params"]), *_ops(c["comm"], "all_gather", "reduce_scatter")]
                          for c in r["configs"]],
    "comm": lambda r: [[strategy, op, str(entry["count"])] for strategy, run in r["runs"].items()
                       for op, entry in run["comm"].items()],
    "no-sync": lambda r: [[strategy, mode, *_ops(entry["comm"], "all_reduce", "reduce_scatter", "all_gather")]
                          for strategy, modes in r["runs"].items() for mode, entry in modes.items()],
    "equivalence": lambda r: [[str(step), *(f"{r[run]['losses'][step]:.7f}" for run in ("single_process", "ddp", "fsdp"))]
                              for step in range(len(r["single_process"]["losses"]))],
    "checkpoint": lambda r: [[c["label"], ANY, str(c["matmuls"]["forward"]), str(c["matmuls"]["backward"]),
                              str(c["block_matmuls"]["backward"])] for c in r["configs"]],
}
EXPECTED_ROWS["allreduce-3"] = EXPECTED_ROWS["allreduce"]


@pytest.mark.dist
@pytest.mark.parametrize("key", [key for key, (demo, _, _) in RUNS.items() if registry.DEMOS[demo].render])
def test_result_renders_as_a_table(concept_run, key):
    """The table shows this run's measured figures, row by row, and says what CPU figures mean."""
    import io

    from rich.console import Console

    from ddpfsdp.demos.registry import load

    result, _ = concept_run(key)
    out = io.StringIO()
    load(registry.DEMOS[RUNS[key][0]].render)(result, Console(file=out, width=140))
    text = out.getvalue()
    rows = _table_rows(text)
    expected = EXPECTED_ROWS[key](result)
    shown = [[cell if want is not ANY else ANY for cell, want in zip(row, wanted)] for row, wanted in zip(rows, expected)]
    assert shown == expected and len(rows) == len(expected), text
    # gloo's times say nothing of NCCL's, and the note says so (the demo's own, or the renderer's)
    words = " ".join(text.split())
    assert GLOO_CAVEAT in words, text
@pytest.mark.dist
def test_sampler_shows_what_each_rank_loads(concept_run):
    result, events = concept_run("sampler")
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
def test_ring_all_reduce_counts_its_own_sends(concept_run):
    result, events = concept_run("allreduce")
    # 12 float32 on 2 ranks: each rank sends one 24-byte chunk per phase.
    assert result["buffer_bytes"] == 48
    assert result["sent_bytes_per_rank"] == [48, 48]
    assert result["intercepted_send_bytes_per_rank"] == [48, 48]
    assert result["buffers"]["result"][0] == result["buffers"]["result"][1]
    assert [m["phase"] for m in result["moves"]].count("reduce-scatter") == 2
    assert any("rank 0 -> rank 1: chunk" in line for line in _logs(events))


@pytest.mark.dist
def test_ring_all_reduce_on_three_ranks_with_uneven_chunks(concept_run):
    result, _ = concept_run("allreduce-3")
    assert result["buffer_bytes"] == 52
    # chunks of 5, 4, 4 elements (20, 16, 16 B); 2 x (3 - 1) = 4 sends per rank, one chunk each, and
    # at every send the 3 ranks' chunks make the whole buffer: 4 x 52 B over the ranks exactly
    assert sum(result["sent_bytes_per_rank"]) == 4 * 52
    assert sorted(result["sent_bytes_per_rank"]) == [68, 68, 72]
    assert len(result["moves"]) == 3 * 4


@pytest.mark.dist
def test_reduce_scatter_shows_inputs_and_outputs(concept_run):
    result, events = concept_run("reduce-scatter")
    tensors = result["tensors"]
    inputs = tensors["input"]
    summed = [a + b for a, b in zip(*inputs)]
    assert tensors["shard"][0] == summed[:3] and tensors["shard"][1] == summed[3:]
    assert tensors["full"] == [summed, summed]
    assert result["comm"]["reduce_scatter"][0]["count"] == 1
    assert result["comm"]["all_gather"][1]["wire_bytes_per_rank"] == 12


@pytest.mark.dist
def test_wrap_units_and_largest_unit(concept_run):
    result, events = concept_run("wrap")
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
def test_reshard_all_gather_bytes_double(concept_run):
    result, _ = concept_run("reshard")
    full, grad_op = result["configs"]
    assert full["reshard_after_forward"] and not grad_op["reshard_after_forward"]
    assert full["comm"]["all_gather"]["bytes"] == 2 * grad_op["comm"]["all_gather"]["bytes"]
    assert full["comm"]["reduce_scatter"] == grad_op["comm"]["reduce_scatter"]


@pytest.mark.dist
def test_comm_measures_beside_theory(concept_run):
    result, events = concept_run("comm")
    assert result["fsdp_to_ddp_wire_ratio"] == pytest.approx(1.5, rel=0.05)
    ddp = result["runs"]["ddp"]
    assert set(ddp["comm"]) == {"all_reduce"}
    assert ddp["comm"]["all_reduce"]["bytes"] == result["param_bytes"]
    assert set(result["runs"]["fsdp"]["comm"]) == {"all_gather", "reduce_scatter"}
    assert "theory" in " ".join(_logs(events))


@pytest.mark.dist
def test_no_sync_counts_per_optimizer_step(concept_run):
    result, _ = concept_run("no-sync")
    counts = result["syncs_per_optimizer_step"]
    assert result["config"]["micro_batches"] == MICRO_BATCHES
    assert counts["ddp"]["sync every micro-batch"] == MICRO_BATCHES * counts["ddp"]["skip sync until the last"]
    fsdp = result["runs"]["fsdp"]
    # skipping the reduce-scatter does not skip the parameter all-gathers
    assert (fsdp["sync every micro-batch"]["comm"]["all_gather"]["count"]
            == fsdp["skip sync until the last"]["comm"]["all_gather"]["count"])


@pytest.mark.dist
def test_equivalence_losses_match_step_by_step(concept_run):
    result, _ = concept_run("equivalence")
    reference = result["single_process"]["losses"]
    assert len(reference) == result["config"]["steps"]
    assert reference[-1] < reference[0]
    for strategy in ("ddp", "fsdp"):
        assert result[strategy]["losses"] == pytest.approx(reference, rel=1e-5)


@pytest.mark.dist
def test_checkpoint_reports_time_and_recomputation(concept_run):
    result, events = concept_run("checkpoint")
    off, on = result["configs"]
    assert not off["checkpoint_activations"] and on["checkpoint_activations"]
    assert on["block_forward_calls"]["backward"] == result["config"]["blocks"]
    assert all(t["median"] > 0 for c in result["configs"] for t in c["step_time_s_by_rank"])
    assert result["step_time_ratio"] > 0
    assert any("reported, not checked" in line for line in _logs(events))
