"""Ranks that share a GPU (`--ranks-per-gpu K`): where they are placed, what their results say, what the
guard adds up, and what is refused, all with the device facts injected (this machine has no GPU)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError, Placement, resolve_placement
from ddpfsdp.quiz.cli import cli


def mark_result(result: dict, ranks_per_gpu: int, gpus: int) -> dict:
    """`result` as a run of `ranks_per_gpu` ranks on each of `gpus` GPUs has it marked where it is made."""
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.result.build import shared
    from ddpfsdp.demos.result.schema import as_result

    return shared(as_result(result), Placement("cuda", ranks_per_gpu * gpus, ranks_per_gpu)).to_json()


def _gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: count)


@pytest.mark.parametrize("gpus, asked, expected", [
    # no GPU: CPU processes; --ranks-per-gpu has nothing to share (below)
    (0, {}, Placement("cpu", 2)),
    # one GPU: a demo that needs 2 ranks gets 2 sharing it; --ranks-per-gpu 1 asks for one rank
    (1, {}, Placement("cuda", 2, 2)),
    (1, {"gpus": 1}, Placement("cuda", 2, 2)),
    (1, {"ranks_per_gpu": 1}, Placement("cuda", 1, 1)),
    (1, {"ranks_per_gpu": 3}, Placement("cuda", 3, 3)),
    (1, {"gpus": 1, "ranks_per_gpu": 4}, Placement("cuda", 4, 4)),
    # two GPUs: one rank each on NCCL, unless asked to share
    (2, {}, Placement("cuda", 2, 1)),
    (2, {"ranks_per_gpu": 2}, Placement("cuda", 4, 2)),
    (2, {"gpus": 1}, Placement("cuda", 2, 2)),
    # eight GPUs: N x K ranks, K on each
    (8, {}, Placement("cuda", 8, 1)),
    (8, {"gpus": 2, "ranks_per_gpu": 3}, Placement("cuda", 6, 3)),
    (8, {"gpus": 4}, Placement("cuda", 4, 1)),
])
def test_where_ranks_go_with_the_gpus_injected(monkeypatch, gpus, asked, expected):
    _gpus(monkeypatch, gpus)
    placement = resolve_placement(demo="ddp", needed=2, **asked)
    assert placement == expected
    assert placement.backend == ("gloo" if expected.device == "cpu" or expected.ranks_per_gpu > 1 else "nccl")


def test_a_run_that_needs_four_ranks_gets_four_on_one_gpu(monkeypatch):
    """A 2-D run (--tp 2) needs two groups of two: four ranks share the one GPU; on two GPUs, two each."""
    _gpus(monkeypatch, 1)
    run = DemoRun("fsdp", ["--model", "tiny", "--tp", "2"])
    assert run.placement == Placement("cuda", 4, 4)
    assert "4 ranks, 4 sharing one GPU (gloo, CUDA tensors" in run.placement.describe()
    _gpus(monkeypatch, 2)
    assert DemoRun("fsdp", ["--model", "tiny", "--tp", "2"]).placement == Placement("cuda", 4, 2)
    # a demo that runs on one rank keeps its one rank on NCCL
    _gpus(monkeypatch, 1)
    assert DemoRun("checkpoint", []).placement == Placement("cuda", 1, 1)


def test_the_ranks_are_told_how_many_share_each_gpu(monkeypatch):
    from ddpfsdp.demos.base.placement import PLACEMENT_ENV

    _gpus(monkeypatch, 1)
    run = DemoRun("ddp", ["--model", "tiny"])
    assert Placement.from_json(run._environment()[PLACEMENT_ENV]) == Placement("cuda", 2, 2)
    assert Placement.from_json(DemoRun("ddp", ["--model", "tiny"], procs=2)._environment()[PLACEMENT_ENV]) == \
        Placement("cpu", 2)


def test_each_rank_drives_the_gpu_its_group_shares():
    from ddpfsdp.demos.base.placement import PLACEMENT_ENV

    assert [Placement("cuda", 8, 2).gpu_of(rank) for rank in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [Placement("cuda", 4, 4).gpu_of(rank) for rank in range(4)] == [0, 0, 0, 0]
    assert [Placement("cuda", 2).gpu_of(rank) for rank in range(2)] == [0, 1]
    assert Placement.of_rank({}, "cuda", 2) == Placement("cuda", 2, 1)
    sent = {PLACEMENT_ENV: Placement("cuda", 6, 3).to_json()}
    assert Placement.of_rank(sent, "cpu", 6) == Placement("cuda", 6, 3)
    with pytest.raises(ValueError, match="WORLD_SIZE is 4"):
        Placement.of_rank(sent, "cuda", 4)
    with pytest.raises(ValueError, match="at least one rank"):
        Placement("cuda", 2, 0)


@pytest.mark.parametrize("argv, expected", [
    (["--ranks-per-gpu", "0"], "--ranks-per-gpu must be at least 1"),
    (["--ranks-per-gpu", "-1"], "--ranks-per-gpu must be at least 1"),
    (["--ranks-per-gpu", "2", "--procs", "2"], "--ranks-per-gpu places ranks on GPUs and --procs runs CPU processes"),
    (["--ranks-per-gpu", "2", "--simulate", "--world", "8"], "leave out --gpus, --procs and --ranks-per-gpu"),
])
def test_bad_sharing_is_refused_before_anything_starts(monkeypatch, argv, expected):
    _gpus(monkeypatch, 1)
    started = []
    monkeypatch.setattr(DemoRun, "start", lambda self: started.append(self))
    result = CliRunner().invoke(cli, ["demo", "ddp", "--model", "tiny", *argv])
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())
    assert "Traceback" not in result.output and not started


def test_sharing_on_a_machine_without_a_gpu_names_cpu_processes(monkeypatch):
    _gpus(monkeypatch, 0)
    with pytest.raises(LaunchError, match="no CUDA GPU.*--procs 2"):
        resolve_placement(ranks_per_gpu=2, demo="ddp", needed=2)


def test_a_k_that_cannot_fit_the_gpu_is_refused(monkeypatch):
    """K ranks on one GPU each hold a CUDA context: 16 of them do not fit in 8 GiB, so nothing launches,
    for a concept demo too; 2 of them do."""
    from ddpfsdp.demos.launch import guard

    _gpus(monkeypatch, 1)
    monkeypatch.setattr(guard, "available_rank_bytes", lambda device, count: 8 * 2**30)
    started = []
    monkeypatch.setattr(DemoRun, "start", lambda self: started.append(self))
    for demo in (["ddp", "--model", "tiny"], ["sampler"]):
        result = CliRunner().invoke(cli, ["demo", *demo, "--ranks-per-gpu", "16"])
        assert result.exit_code == 1, result.output
        text = " ".join(result.output.split())
        assert "16 ranks sharing 1 GPU will not fit" in text and "16 ranks share each GPU" in text
        assert "--procs 16" in text and "Traceback" not in text
    assert not started


def test_the_guard_adds_the_k_ranks_on_one_gpu():
    """Two ranks on one GPU: each rank's estimate (its CUDA context among it) twice, against the one
    GPU's free memory; the same estimate that fits one rank per GPU does not fit two on one."""
    from ddpfsdp.demos.launch.guard import PROCESS_OVERHEAD_BYTES, check_launch

    one = check_launch("fsdp", {"model": "small"}, Placement("cuda", 2), force=False, available_bytes=80 * 2**30)
    per_rank = one.estimate_bytes
    assert per_rank > PROCESS_OVERHEAD_BYTES["cuda"]
    free = int(per_rank * 1.5 / 0.9)  # one rank fits (after the margin), two do not
    alone = check_launch("fsdp", {"model": "small"}, Placement("cuda", 2), force=False, available_bytes=free)
    shared = check_launch("fsdp", {"model": "small"}, Placement("cuda", 2, 2), force=False, available_bytes=free)
    assert alone.fits and not shared.fits
    assert shared.estimate_bytes == per_rank
    assert "2 ranks share each GPU, each with its own CUDA context: 2 x" in shared.message
    roomy = check_launch("fsdp", {"model": "small"}, Placement("cuda", 2, 2), force=False, available_bytes=free * 2)
    assert roomy.fits
    # a concept demo sharing a GPU is held to its K contexts
    concept = check_launch("sampler", {}, Placement("cuda", 8, 8), force=False, available_bytes=4 * 2**30)
    assert not concept.fits and concept.estimate_bytes == PROCESS_OVERHEAD_BYTES["cuda"]


def test_a_demo_that_needs_point_to_point_on_cuda_is_refused_with_the_alternative(monkeypatch):
    """The ring all-reduce is written with isend/irecv, which gloo cannot run on CUDA tensors."""
    _gpus(monkeypatch, 1)
    with pytest.raises(LaunchError, match="isend/irecv.*gloo cannot run on CUDA tensors.*ddpfsdp demo allreduce --procs 2"):
        DemoRun("allreduce", [])
    assert DemoRun("allreduce", [], procs=2).placement == Placement("cpu", 2)
    result = CliRunner().invoke(cli, ["demo", "allreduce", "--gpus", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    # one rank per GPU on NCCL is not refused for it
    _gpus(monkeypatch, 2)
    assert DemoRun("allreduce", []).placement == Placement("cuda", 2, 1)


def _training_result() -> dict:
    return {
        "schema": "ddpfsdp.demo/1", "demo": "ddp",
        "config": {"strategy": "ddp", "world_size": 2, "device": "cuda", "backend": "gloo"},
        "throughput": {"samples_per_s": 10.0, "mfu": 0.4, "note": None},
        "checks": [
            {"name": "ddp_uses_all_reduce", "passed": True, "detail": "2 all-reduces", "values": {}},
            {"name": "ddp_overlaps_allreduce_with_backward", "passed": False, "detail": "first issued late",
             "values": {"buckets": 2}},
        ],
    }


def test_a_shared_gpu_result_is_labelled_and_its_time_checks_not_judged():

    result = mark_result(_training_result(), ranks_per_gpu=2, gpus=1)
    config = result["config"]
    assert config["ranks_per_gpu"] == 2 and config["gpus"] == 1
    assert config["shared_gpu"].startswith("2 ranks share one GPU over gloo")
    assert "not NCCL's and not 2 GPUs'" in config["shared_gpu"] and "real CUDA memory" in config["shared_gpu"]
    assert result["throughput"]["mfu"] == "n/a" and "share one GPU" in result["throughput"]["note"]
    memory_claim, overlap = result["checks"]
    assert memory_claim["passed"] is True and "not_judged" not in memory_claim
    # a failing overlap is not a failure there, and not a pass either
    assert overlap["passed"] is None and "gloo" in overlap["not_judged"]
    assert overlap["detail"].startswith("not judged here") and "first issued late" in overlap["detail"]
    assert result["notes"][0] == config["shared_gpu"]
    # compare's runs are labelled each
    compare = mark_result({"config": {}, "runs": {"ddp": _training_result()}, "checks": []}, 2, 1)
    assert compare["runs"]["ddp"]["checks"][1]["passed"] is None
    assert compare["runs"]["ddp"]["config"]["shared_gpu"]
    # one rank per GPU, or CPU processes: untouched
    assert mark_result(_training_result(), ranks_per_gpu=1, gpus=2) == _training_result()


def test_not_judged_is_its_own_verdict_on_every_screen():
    from rich.console import Console

    from ddpfsdp.demos.result.checks import verdict
    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.demos.result.schema import as_result
    from ddpfsdp.quiz.commands.results import check_table

    result = mark_result(_training_result(), ranks_per_gpu=2, gpus=1)
    assert [verdict(c) for c in result["checks"]] == ["passed", "not judged"]
    assert verdict({"name": "x", "passed": False, "detail": ""}) == "failed"
    console = Console(record=True, width=200)
    console.print(check_table(as_result(result).checks))
    table = console.export_text()
    overlap_line = next(line for line in table.splitlines() if "ddp_overlaps" in line)
    assert "–" in overlap_line and "✘" not in overlap_line and "✔" not in overlap_line
    items = ev.all_checks(result)
    assert items[0].passed is True and items[1].passed is None and items[1].not_judged
    assert ev.gloo_caveat(result) == result["config"]["shared_gpu"]
    result["env"] = {"device_names": ["NVIDIA H200"], "torch": "2.13.0"}
    assert ev.where(result) == "2 ranks sharing one GPU (NVIDIA H200) (gloo), torch 2.13.0"
    assert ev.where(_training_result()).startswith("2 GPUs (gloo)")  # unlabelled: as before


def test_the_quiz_says_where_shared_ranks_run():
    """Before torch is imported the app cannot know a GPU is there (quiz/placement.py leaves it to the
    launcher); once the launcher has placed the run, the panel says the ranks share the GPU."""
    from ddpfsdp.quiz.widgets.evidence import describe_ranks

    assert describe_ranks(2, "cuda", ranks_per_gpu=2) == "2 ranks sharing one GPU (gloo, CUDA tensors)"
    assert describe_ranks(4, "cuda", "gloo") == "4 ranks sharing a GPU (gloo, CUDA tensors)"
    assert describe_ranks(6, "cuda", ranks_per_gpu=3) == "6 ranks sharing 2 GPUs (gloo, CUDA tensors)"
    assert describe_ranks(2, "cuda", "nccl") == "2 ranks on cuda (nccl)"
    assert describe_ranks(2, "cpu") == "2 ranks on cpu (gloo)"


def test_the_quiz_foresees_no_placement_where_a_gpu_may_be(monkeypatch):
    from ddpfsdp.quiz import placement

    monkeypatch.setattr(placement, "no_gpu_here", lambda: False)
    assert placement.foreseen_placement("ddp", ["--model", "tiny"]) is None
    monkeypatch.setattr(placement, "no_gpu_here", lambda: True)
    assert placement.foreseen_placement("ddp", ["--model", "tiny"]) == "2 ranks on cpu (gloo)"


def test_a_timeline_whose_reduce_scatters_cannot_be_stamped_is_not_judged_but_a_miscount_still_fails():
    """gloo's reduce-scatter on CUDA tensors gives no future to stamp its end: counted but unstamped
    collectives are not judged on a shared GPU; a count that is off fails there as anywhere."""
    from ddpfsdp.demos.claims.timeline import timeline_records_every_collective

    def rank(r: int, completed: float | None, count: int = 2) -> dict:
        return {"rank": r, "collectives": [{"op": "reduce_scatter", "completed_s": completed}] * count}

    per_op = {"reduce_scatter": {"count": 2}}
    unstamped = timeline_records_every_collective({"ranks": [rank(0, None), rank(1, None)]}, per_op).to_dict()
    miscounted = timeline_records_every_collective({"ranks": [rank(0, 1.0, 1), rank(1, 1.0)]}, per_op).to_dict()
    stamped = timeline_records_every_collective({"ranks": [rank(0, 1.0), rank(1, 1.0)]}, per_op).to_dict()
    assert not unstamped["passed"] and not miscounted["passed"] and stamped["passed"]
    shared = mark_result({"config": {}, "checks": [unstamped, miscounted, stamped]}, ranks_per_gpu=2, gpus=1)["checks"]
    assert shared[0]["passed"] is None and "no future" in shared[0]["not_judged"]
    assert shared[1]["passed"] is False and shared[2]["passed"] is True
    # on separate GPUs the unstamped timeline fails as before
    assert mark_result({"config": {}, "checks": [unstamped]}, 1, 2)["checks"][0]["passed"] is False


def test_a_two_rank_demo_asked_for_one_gpu_says_in_its_first_line_that_the_ranks_share_it(monkeypatch):
    """`--gpus 1`, or no flag on a one-GPU machine: two ranks on the GPU, said before anything runs."""
    from ddpfsdp.demos.launch import guard

    _gpus(monkeypatch, 1)
    monkeypatch.setattr(guard, "available_rank_bytes", lambda device, count: 80 * 2**30)
    placed = []

    def events(self):
        placed.append(self.placement)
        return iter(())

    monkeypatch.setattr(DemoRun, "events", events)
    for flags in ([], ["--gpus", "1"]):
        result = CliRunner().invoke(cli, ["demo", "ddp", "--model", "tiny", *flags])
        first = result.output.splitlines()[0]
        assert first.startswith("ddp on 2 ranks, 2 sharing one GPU (gloo, CUDA tensors"), result.output
    assert placed == [Placement("cuda", 2, 2)] * 2


def test_hybrid_sharding_gets_its_replicas_of_two_ranks_on_one_gpu_and_on_cpu(monkeypatch):
    """--sharding hybrid with 2 replicas runs on 2 shard groups of 2: four ranks where no count is given."""
    _gpus(monkeypatch, 1)
    assert DemoRun("fsdp", ["--model", "tiny", "--sharding", "hybrid"]).placement == Placement("cuda", 4, 4)
    assert DemoRun("fsdp", ["--model", "tiny", "--sharding", "hybrid", "--replicas", "3"]).placement == \
        Placement("cuda", 6, 6)
    _gpus(monkeypatch, 0)
    assert DemoRun("fsdp", ["--model", "tiny", "--sharding", "hybrid"]).placement == Placement("cpu", 4)


def test_a_shared_gpu_result_keeps_its_label_and_not_judged_checks_when_typed():
    import json

    from ddpfsdp.demos.measure.report import _headline
    from ddpfsdp.demos.result.schema import GLOO_CAVEAT, as_result

    marked = mark_result(_training_result(), ranks_per_gpu=2, gpus=1)
    typed = as_result(marked)
    # the wire form goes out exactly as it came in, not-judged check included
    assert json.dumps(typed.to_json()) == json.dumps(marked)
    judged, overlap = typed.checks
    assert judged.passed is True and judged.not_judged is None and judged.verdict == "passed"
    assert overlap.passed is None and "gloo" in overlap.not_judged and overlap.verdict == "not judged"
    assert "not_judged" not in judged.to_dict() and overlap.to_dict() == marked["checks"][1]
    # the placement stays in the config's extra keys, read through properties
    config = typed.config
    assert (config.ranks_per_gpu, config.gpus, config.shared_gpu) == (2, 1, marked["config"]["shared_gpu"])
    assert typed.caveat == config.shared_gpu
    assert config.shared_gpu in _headline(typed)
    plain = as_result(_training_result())
    assert (plain.config.ranks_per_gpu, plain.config.gpus, plain.config.shared_gpu) == (None, None, None)
    assert plain.caveat == GLOO_CAVEAT and "ranks_per_gpu" not in plain.to_json()["config"]


def test_compare_of_shared_ranks_counts_not_judged_apart_and_shows_the_label():
    import gzip
    import json
    from pathlib import Path

    from rich.console import Console

    from ddpfsdp.demos.measure.report import render_compare

    saved = Path(__file__).parent / "data" / "saved" / "compare_tiny_procs2.json.gz"
    marked = mark_result(json.loads(gzip.decompress(saved.read_bytes())), ranks_per_gpu=2, gpus=1)
    ddp_checks = marked["runs"]["ddp"]["checks"]
    unjudged = sum(1 for c in ddp_checks if c["passed"] is None)
    assert unjudged, "the saved compare's DDP run carries a check sharing a GPU leaves unjudged"
    console = Console(width=200, record=True, force_terminal=False)
    render_compare(marked, console)
    shown = console.export_text()
    assert marked["config"]["shared_gpu"] in " ".join(shown.split())
    passed = sum(1 for c in ddp_checks if c["passed"])
    assert f"{passed}/{len(ddp_checks) - unjudged} passed, {unjudged} not judged" in shown
    assert not any(f"{c['name']} failed" in shown for c in ddp_checks if c["passed"] is None)
