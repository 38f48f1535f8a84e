"""The GPU check (tests/benchmarks/gpu_check.py) without a GPU: its dry run, its plan for one and for
several GPUs, its report from a made-up set of outcomes, the judges fed broken numbers, and the
stopping of an item that hangs. The one-rank driver runs for real on CPU in the dist test."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"
MIB = 1024 * 1024


def mark_result(result: dict, ranks_per_gpu: int, gpus: int) -> dict:
    """`result` as a run of `ranks_per_gpu` ranks on each of `gpus` GPUs has it marked where it is made."""
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.result.build import shared
    from ddpfsdp.demos.result.schema import as_result

    return shared(as_result(result), Placement("cuda", ranks_per_gpu * gpus, ranks_per_gpu)).to_json()


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", BENCHMARKS / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gc = _load()


def _outcome(stdout: str = "", stderr: str = "", returncode: int = 0, **fields) -> object:
    return gc.Outcome(returncode, stdout, stderr, fields.pop("seconds", 3.0), **fields)


def _check(name: str, passed: bool, detail: str = "") -> dict:
    return {"name": name, "passed": passed, "detail": detail or f"{name} detail"}


def _result(world: int = 2, checks: list | None = None, **fields) -> dict:
    ranks = [{"params": 10 * MIB, "grads": 10 * MIB, "optimizer": 20 * MIB, "peak": 60 * MIB,
              "blas_workspaces": 66 * MIB, "tracker_peak": 50 * MIB} for _ in range(world)]
    return {"schema": "ddpfsdp.demo/1", "demo": "fsdp", "config": {"world_size": world, "params": 124_000_000},
            "memory": {"ranks": ranks}, "env": {"device_names": ["NVIDIA H100 80GB HBM3"]},
            "throughput": {"samples_per_s": 80.0, "tokens_per_s": 81920.0, "mfu": 0.21,
                           "step_time_s": {"median": 0.05, "min": 0.05, "max": 0.06}},
            "checks": checks if checks is not None else [_check("loss_decreases", True)], **fields}


# ----------------------------------------------------------------------------- dry run and plan


def test_dry_run_lists_every_item_without_torch(tmp_path):
    code = ("import runpy, sys\n"
            f"sys.argv = ['gpu_check.py', '--dry-run', '--out', {str(tmp_path)!r}]\n"
            "try:\n"
            f"    runpy.run_path({str(BENCHMARKS / 'gpu_check.py')!r}, run_name='__main__')\n"
            "except SystemExit as exit:\n"
            "    print('exit', exit.code, 'torch' in sys.modules)\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 5, "the dry run must stay quick"
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.strip().endswith("exit 0 False")  # no torch imported, nothing failed
    for text in ("doctor --json", "demo ddp --gpus 1 --ranks-per-gpu 1 --model tiny", "gpu_rank_check.py guard",
                 "gpu_rank_check.py demo", "--precision bf16-mixed", "--trace"):
        assert text in out, text
    assert "demo checkpoint --gpus 1 --timeout-s 60 --json" in out
    for name in set(gc.CONCEPTS) - {"checkpoint"}:
        assert f"demo {name} --gpus 1 --ranks-per-gpu 2 --timeout-s 60 --json" in out, name
    assert "demo compare --gpus 1 --ranks-per-gpu 2" in out and "skip" not in out
    assert out.startswith("The GPU check on a machine with 1 GPU would run")
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["schema"] == "ddpfsdp.gpu_check/1" and report["dry_run"] is True
    statuses = {entry["key"]: entry["status"] for entry in report["items"]}
    assert statuses["doctor"] == "not run" and statuses["compare-1gpu"] == "not run"
    assert statuses["ddp-1rank"] == "not run" and statuses["mfu-1rank"] == "not run"
    assert "skip" not in statuses.values()
    assert sum(report["summary"].values()) == len(report["items"]) == len(statuses)
    markdown = (tmp_path / "gpu-check.md").read_text()
    assert "Dry run, planned for 1 GPU" in markdown and "| not run | demo compare on 2 ranks sharing 1 GPU" in markdown


def test_plan_for_one_gpu_shares_it_and_for_eight_runs_every_sharding(tmp_path):
    one = {item.key: item for item in gc.plan(1, tmp_path, tmp_path / "work", python="py")}
    assert len(one) == len(gc.plan(1, tmp_path, tmp_path / "work"))  # every key is its own
    assert list(one)[:5] == ["doctor", "refusal", "guard", "ddp-1rank", "mfu-1rank"]
    assert one["ddp-1rank"].argv[:3] == ["py", str(BENCHMARKS / "gpu_rank_check.py"), "demo"]
    assert one["ddp-1rank"].expect["trace"] == str(tmp_path / "trace-ddp-1gpu.json")
    assert one["fsdp1-grad-op-1rank"].expect["not_judged"] is gc.NOT_JUDGED_AT_ONE_RANK
    # nothing is skipped: every N-GPU item runs on ranks sharing the one GPU (hybrid and --tp 2: 4)
    assert [key for key, item in one.items() if item.skip] == []
    for key, ranks in (("ddp-1gpu", 2), ("zro-1gpu", 2), ("compare-1gpu", 2), ("fsdp2-full-1gpu", 2),
                       ("fsdp1-grad-op-1gpu", 2), ("fsdp2-hybrid-1gpu", 4), ("fsdp1-hybrid-1gpu", 4),
                       ("fsdp2-tp2-1gpu", 4), ("concept-sampler", 2), ("concept-comm", 2)):
        argv = one[key].argv
        assert argv[argv.index("--gpus") + 1] == "1" and argv[argv.index("--ranks-per-gpu") + 1] == str(ranks), key
        assert one[key].expect["world"] == ranks and "sharing 1 GPU" in one[key].title, key
    assert "--tp" in one["fsdp2-tp2-1gpu"].argv
    assert one["concept-checkpoint"].argv[-5:] == ["--gpus", "1", "--timeout-s", "60", "--json"]
    # the ring all-reduce must be refused there, saying why, never launched
    assert one["concept-allreduce"].evaluate == "refusal" and one["concept-allreduce"].expect["shared"]
    # MFU with DDP at one rank; two faults
    assert one["mfu-1rank"].argv[3:5] == [str(tmp_path / "work" / "mfu-1rank.json"), "ddp"]
    assert [key for key in one if key.startswith("fault-")] == [f"fault-{name}" for name in gc.FAULTS]
    assert len(gc.FAULTS) == 2
    # the pipeline, 1F1B and compared: two ranks sharing the one GPU, or two GPUs of several over NCCL
    for key in ("pipeline-1f1b-1gpu", "pipeline-compare-1gpu"):
        argv = one[key].argv
        assert argv[3:5] == ["demo", "pipeline"] and argv[argv.index("--ranks-per-gpu") + 1] == "2", key

    # the at-scale demos: 2 ranks sharing the GPU, the checkpoint resumed on 4 sharing it
    for key in ("straggler-1gpu", "checkpoint-resume-1gpu", "local-sgd-1gpu"):
        argv = one[key].argv
        assert argv[argv.index("--ranks-per-gpu") + 1] == "2" and one[key].group == "at scale", key
    assert one["checkpoint-resume-1gpu"].expect["world"] == 4 and "--resume-on" in one["checkpoint-resume-1gpu"].argv
    # demo cp: its ring's sends cannot cross gloo on CUDA tensors, so on one GPU it is refused, never launched
    assert one["cp-1gpu"].evaluate == "refusal" and one["cp-1gpu"].expect == {"gpus": 1, "shared": True}
    assert one["cp-1gpu"].argv[3:5] == ["demo", "cp"] and "--ranks-per-gpu" in one["cp-1gpu"].argv

    eight = {item.key: item for item in gc.plan(8, tmp_path, tmp_path / "work", python="py")}
    assert eight["cp-8gpu"].evaluate == "demo" and eight["cp-8gpu"].expect["world"] == 8
    assert [k for k, i in eight.items() if i.skip] == []
    assert not any("--ranks-per-gpu" in item.argv for item in eight.values() if item.key != "refusal")
    assert all(f"concept-{name}" in eight for name in gc.CONCEPTS)
    for api in (1, 2):
        for sharding in ("full", "grad-op", "hybrid"):
            argv = eight[f"fsdp{api}-{sharding}-8gpu"].argv
            assert argv[:5] == ["py", "-m", "ddpfsdp.quiz.cli", "demo", "fsdp"]
            assert ["--fsdp-api", str(api), "--sharding", sharding] == argv[5:9] and "--gpus" in argv
    assert eight["fsdp2-hybrid-8gpu"].argv[9:11] == ["--replicas", "2"]
    assert "--trace" in eight["fsdp2-full-8gpu"].argv and eight["fsdp2-full-8gpu"].expect["trace"]
    assert eight["mfu-8gpu"].argv[3:5] == ["demo", "fsdp"] and eight["guard"].evaluate == "guard_cli"
    assert eight["pipeline-1f1b-8gpu"].argv[5:7] == ["--gpus", "2"] and eight["pipeline-1f1b-8gpu"].expect["world"] == 2
    keys = list(eight)
    assert keys.index("concept-checkpoint") < keys.index("zro-1rank")  # the N-GPU runs cover the one-rank ones
    two = {item.key: item for item in gc.plan(2, tmp_path, tmp_path / "work", python="py")}
    assert two["fsdp1-hybrid-2gpu"].expect["world"] == 4 and "--ranks-per-gpu" in two["fsdp1-hybrid-2gpu"].argv
    argv = two["fsdp2-full-2gpu"].argv
    assert argv[argv.index("--gpus") + 1] == "2" and "--ranks-per-gpu" not in argv


def test_every_one_gpu_item_is_placed_as_planned_and_none_is_refused_but_the_refusals(tmp_path, monkeypatch):
    """Each demo command of the one-GPU plan, read by the launcher with one GPU injected: placed on the
    ranks the item expects, and accepted by the demo's own checks, except the items that test a refusal."""
    from ddpfsdp.demos.launch import launcher

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    for item in gc.plan(1, tmp_path, tmp_path / "work", python="py"):
        if item.argv[1:4] != ["-m", "ddpfsdp.quiz.cli", "demo"] or item.argv[4] == "fault":
            continue
        demo, words = item.argv[4], item.argv[5:]
        launch = {"--gpus": None, "--ranks-per-gpu": None}
        args = []
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word in launch:
                launch[word] = int(words[words.index(word) + 1])
                skip = True
            elif word == "--timeout-s":
                skip = True
            elif word != "--json":
                args.append(word)
        if item.evaluate == "refusal":
            with pytest.raises(launcher.LaunchError):
                launcher.DemoRun(demo, args, gpus=launch["--gpus"], ranks_per_gpu=launch["--ranks-per-gpu"])
            continue
        run = launcher.DemoRun(demo, args, gpus=launch["--gpus"], ranks_per_gpu=launch["--ranks-per-gpu"])
        last = run.launches[-1].placement  # the launch whose result is the run's (checkpoint-resume: the resume)
        assert last.world_size == item.expect["world"], item.key
        assert last.gpus == 1 and run.placement.gpus == 1, item.key


@pytest.mark.parametrize("gpus, placed, world", [
    (1, ["--gpus", "1", "--ranks-per-gpu", "2"], 2),  # gloo's all_to_all_single on CUDA tensors
    (2, ["--gpus", "2"], 2),
    (8, ["--gpus", "4", "--ep", "2"], 4),  # two ep groups: the replicas' all-reduce over NCCL too
])
def test_plan_runs_the_mixture_of_experts_on_every_machine(gpus, placed, world, tmp_path):
    item = {item.key: item for item in gc.plan(gpus, tmp_path, tmp_path / "work", python="py")}[f"moe-{gpus}gpu"]
    assert item.argv[3:5] == ["demo", "moe"] and item.argv[5:5 + len(placed)] == placed
    assert item.expect == {"world": world} and item.evaluate == "demo" and not item.skip


def test_plan_runs_ddp_eager_and_compiled_for_mfu_and_the_split_on_every_machine(tmp_path):
    for gpus, eager_key in ((1, "mfu-1rank"), (8, "mfu-ddp-eager-1rank")):
        items = {item.key: item for item in gc.plan(gpus, tmp_path, tmp_path / "work", python="py")}
        eager, compiled = items[eager_key], items["mfu-ddp-compiled-1rank"]
        assert eager.evaluate == compiled.evaluate == "mfu" and not eager.skip and not compiled.skip
        assert compiled.expect["eager"] == eager_key and compiled.expect["world"] == eager.expect["world"] == 1
        assert compiled.argv[4:] == [*eager.argv[4:], "--compile"]  # the same run, compiled, into its own file
        assert eager.argv[2:5] == ["demo", str(tmp_path / "work" / f"{eager_key}.json"), "ddp"]
        assert ["--model", "large", "--precision", "bf16-mixed", "--batch-size", "8"] == eager.argv[5:11]
    # one GPU: the MFU item is the eager run, not a second run of it
    assert "mfu-ddp-eager-1rank" not in {item.key for item in gc.plan(1, tmp_path, tmp_path / "work", python="py")}
    split = items["ddp-compiled-8gpu"]
    assert split.skip is None and {"--compile", "--bucket-mb"} <= set(split.argv) and split.evaluate == "demo"
    # One GPU: the split is checked on 2 ranks sharing it (gloo with CUDA tensors), not skipped.
    one = {item.key: item for item in gc.plan(1, tmp_path, tmp_path / "work", python="py")}["ddp-compiled-1gpu"]
    assert one.skip is None and "--ranks-per-gpu" in one.argv and one.expect["world"] == 2


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_no_run_is_planned_twice(gpus, tmp_path):
    """Items differ in what they run, not only in the file they write."""
    work = tmp_path / "work"
    runs = [tuple(word for word in item.argv if not word.startswith(str(work))) for item in gc.plan(gpus, tmp_path, work)]
    assert len(set(runs)) == len(runs)


def test_the_compiled_run_is_set_beside_its_eager_run(tmp_path):
    items = {item.key: item for item in gc.plan(1, tmp_path, tmp_path / "work", python="py")}
    eager, compiled, other = items["mfu-1rank"], items["mfu-ddp-compiled-1rank"], items["ddp-1rank"]
    rows = [(eager, gc.Verdict("pass", {"mfu": 0.28, "step_ms": 66.9}, "MFU 28.0%"), None),
            (compiled, gc.Verdict("pass", {"mfu": 0.4, "step_ms": 46.8}, "MFU 40.0%"), None),
            (other, gc.Verdict("pass", {"step_ms": 10.0}, "fine"), None)]
    beside = gc.compare_compiled(rows)
    numbers = beside[1][1].numbers
    assert numbers["eager_mfu"] == 0.28 and numbers["eager_step_ms"] == 66.9 and numbers["speedup_vs_eager"] == 1.429
    assert "46.8 ms against eager 66.9 ms: 1.43x" in beside[1][1].detail and beside[1][1].status == "pass"
    assert beside[0][1] is rows[0][1] and beside[2][1] is rows[2][1]
    # the eager run did not report a step (it failed, or was not run): nothing is set beside it
    rows[0] = (eager, gc.Verdict("not run", {}, "the budget was spent"), None)
    assert "eager_mfu" not in gc.compare_compiled(rows)[1][1].numbers


# ----------------------------------------------------------------------------- the report


def test_report_from_made_up_outcomes(tmp_path):
    items = gc.plan(2, tmp_path, tmp_path / "work", python="py")
    by_key = {item.key: item for item in items}
    rows = [
        (by_key["doctor"], gc.Verdict("pass", {"gpus": ["NVIDIA H100 80GB HBM3, 79 GiB, cc 9.0"] * 2}, "2 CUDA GPU(s)"),
         _outcome(seconds=2.0)),
        (by_key["ddp-2gpu"], gc.Verdict("fail", {"peak_mib": [812.5, 812.5]}, "failed: peak_within_bounds: rank 0 peak | above"),
         _outcome(stderr="line 1\nTraceback: boom\n", returncode=1, seconds=41.0)),
        (by_key["fsdp2-hybrid-2gpu"], gc.Verdict("skip", {}, by_key["fsdp2-hybrid-2gpu"].skip), None),
        (by_key["concept-wrap"], gc.Verdict("not run", {}, "the budget was spent (12 s left)"), None),
    ]
    header = {"dry_run": False, "gpus": 2, "budget_s": 540.0, "wall_s": 530.2,
              "machine": {"torch": "2.13.0+cu128", "build": "CUDA 12.8", "gpus": rows[0][1].numbers["gpus"], "nccl": True}}
    md_path, json_path = gc.write_report(tmp_path / "out", rows, header)
    report = json.loads(json_path.read_text())
    assert report["summary"] == {"pass": 1, "fail": 1, "skip": 1, "not run": 1}
    failed = report["items"][1]
    assert failed["status"] == "fail" and failed["seconds"] == 41.0 and "boom" in failed["stderr_tail"]
    assert failed["command"].startswith("py -m ddpfsdp.quiz.cli demo ddp --bucket-mb 1 --gpus 2")
    text = md_path.read_text()
    assert "2 GPUs used of: NVIDIA H100 80GB HBM3" in text and "Wall time 530 s of a 540 s budget" in text
    assert "| fail | demo ddp on 2 GPUs (1 MiB buckets) | 41 | peak_mib [812.5, 812.5] |" in text
    assert "## fail" in text and "rank 0 peak / above" not in text.split("## fail")[0]
    assert "## not run" in text and "the budget was spent" in text and "## skip" in text


# ----------------------------------------------------------------------------- judges


def test_demo_judge_passes_only_when_every_check_passes():
    item = gc.Item("x", "x", "N GPUs", ["py"], 10, "demo", {"world": 2})
    good = gc.judge_demo(item, _outcome(json.dumps(_result())))
    assert good.status == "pass" and good.numbers["peak_mib"] == [60.0, 60.0]
    assert good.numbers["cublas_workspaces_mib"] == 66.0
    broken = _result(checks=[_check("loss_decreases", True), _check("peak_within_bounds", False, "rank 1 peak above")])
    verdict = gc.judge_demo(item, _outcome(json.dumps(broken)))
    assert verdict.status == "fail" and "peak_within_bounds: rank 1 peak above" in verdict.detail
    assert gc.judge_demo(item, _outcome(json.dumps(_result(world=1)))).status == "fail"  # not the world asked for
    assert gc.judge_demo(item, _outcome("", "Traceback ...\nRuntimeError: NCCL error", returncode=1)).status == "fail"
    assert gc.judge_demo(item, _outcome(json.dumps(_result()), timed_out=True)).status == "fail"
    assert gc.judge_demo(item, _outcome(json.dumps(_result()), left_running=2)).status == "fail"


def test_compare_checks_count_per_strategy_and_one_rank_fsdp_claims_are_not_judged():
    item = gc.Item("x", "x", "N GPUs", ["py"], 10, "demo", {"world": 2})
    compare = _result(runs={"ddp": _result(checks=[_check("loss_decreases", True)]),
                            "fsdp-full": _result(checks=[_check("model_state_matches_theory", False)])})
    verdict = gc.judge_demo(item, _outcome(json.dumps(compare)))
    assert verdict.status == "fail" and "fsdp-full: model_state_matches_theory" in verdict.detail
    one_rank = gc.Item("y", "y", "1 GPU", ["py"], 10, "demo", {"world": 1, "not_judged": gc.NOT_JUDGED_AT_ONE_RANK})
    fsdp = _result(world=1, checks=[_check("loss_decreases", True), _check("fsdp_all_gathers_params", False)])
    judged = gc.judge_demo(one_rank, _outcome(data={"result": fsdp}))
    assert judged.status == "pass" and "not judged: fsdp_all_gathers_params (no all-gather at one rank)" in judged.detail
    fsdp["checks"].append(_check("loss_decreases", False))
    assert gc.judge_demo(one_rank, _outcome(data={"result": fsdp})).status == "fail"


def test_trace_must_hold_every_rank_and_a_collective(tmp_path):
    trace = tmp_path / "t.json"
    item = gc.Item("x", "x", "N GPUs", ["py"], 10, "demo", {"world": 2, "trace": str(trace)})
    assert "no trace" in gc.judge_demo(item, _outcome(json.dumps(_result()))).detail
    spans = [{"ph": "X", "pid": pid, "cat": cat} for pid in (1, 2) for cat in ("forward", "collective")]
    trace.write_text(json.dumps({"traceEvents": spans}))
    assert gc.judge_demo(item, _outcome(json.dumps(_result()))).status == "pass"
    trace.write_text(json.dumps({"traceEvents": spans[:2]}))
    assert "spans of 1 ranks, not 2" in gc.judge_demo(item, _outcome(json.dumps(_result()))).detail


def _peak_inputs():
    rank = {"params": 100 * MIB, "grads": 100 * MIB, "optimizer": 200 * MIB, "peak": 900 * MIB, "tracker_peak": 830 * MIB}
    stats = {"allocated_bytes.all.peak": 905 * MIB, "reserved_bytes.all.peak": 1024 * MIB,
             "num_alloc_retries": 0, "num_ooms": 0}
    probe = {"clear_available": True, "held_bytes": 64 * MIB, "freed_bytes": 64 * MIB, "bound_bytes": 66 * MIB}
    return gc.Verdict("pass", {}, "8 of 8 checks passed"), rank, stats, 5 * MIB, probe


def test_peak_judge_holds_the_peak_to_memory_stats_and_the_workspaces_to_their_bound():
    verdict = gc.judge_peak_numbers(*_peak_inputs())
    assert verdict.status == "pass" and verdict.numbers["allocator_peak_mib"] == 900.0
    assert verdict.numbers["probe_workspaces_mib"] == 64.0 and verdict.numbers["model_state_mib"] == 400.0
    demo, rank, stats, baseline, probe = _peak_inputs()
    assert gc.judge_peak_numbers(demo, rank, stats, 0, probe).status == "fail"  # the baseline was not taken off
    assert gc.judge_peak_numbers(demo, {**rank, "peak": 300 * MIB}, {**stats, "allocated_bytes.all.peak": 305 * MIB},
                                 baseline, probe).status == "fail"  # below the model state
    assert gc.judge_peak_numbers(demo, rank, {**stats, "num_ooms": 1}, baseline, probe).status == "fail"
    assert gc.judge_peak_numbers(demo, rank, stats, baseline, {**probe, "freed_bytes": 0, "held_bytes": 0}).status == "fail"
    over = {**probe, "held_bytes": 130 * MIB, "freed_bytes": 130 * MIB}
    assert "the bound is 66.0 MiB" in gc.judge_peak_numbers(demo, rank, stats, baseline, over).detail
    leftover = {**probe, "held_bytes": 70 * MIB}  # something other than workspaces outlived the step
    assert gc.judge_peak_numbers(demo, rank, stats, baseline, leftover).status == "fail"


def test_mfu_judge_wants_torchtitans_order_of_magnitude():
    ran = gc.Verdict("pass", {}, "8 of 8 checks passed")
    h100 = "NVIDIA H100 80GB HBM3"
    good = gc.judge_mfu_numbers(ran, {"mfu": 0.21, "tokens_per_s": 90_000.4}, h100, 354_000_000)
    assert good.status == "pass" and good.numbers["torchtitan_mfu"] == 0.33 and good.numbers["tokens_per_s"] == 90_000
    assert "torchtitan 33%" in good.detail
    assert gc.judge_mfu_numbers(ran, {"mfu": 1.4}, h100, 1).status == "fail"  # a wrong peak table
    assert gc.judge_mfu_numbers(ran, {"mfu": 0.02}, h100, 1).status == "fail"  # under a tenth of 33%
    assert gc.judge_mfu_numbers(ran, {"mfu": 0.04}, "NVIDIA A100-SXM4-80GB", 1).status == "fail"  # a tenth of 56%
    assert gc.judge_mfu_numbers(ran, {"mfu": "n/a"}, "NVIDIA L4", 1).status == "fail"
    assert gc.judge_mfu_numbers(ran, {"mfu": 0.3}, "NVIDIA H200", 1).status == "pass"


def test_refusal_judge_wants_only_commands_that_run_here():
    from ddpfsdp.demos.launch.placement import Placement, too_few_ranks

    one = gc.Item("refusal", "r", "refusal", ["py"], 10, "refusal", {"gpus": 1})
    said = ("Usage: ddpfsdp demo ddp [OPTIONS]\nTry 'ddpfsdp demo ddp --help' for help.\n\nError: "
            + too_few_ranks("ddp", 2, Placement("cuda", 1), gpus=1, simulates=True))
    assert gc.judge_refusal(one, _outcome(stderr=said, returncode=2)).status == "pass"
    old = "Error: data parallelism needs at least 2 ranks, got 1; run with --procs 2 or --gpus 2"
    assert "offers a second GPU" in gc.judge_refusal(one, _outcome(stderr=old, returncode=2)).detail
    no_sharing = "Error: ddp needs at least 2 ranks. Run: ddpfsdp demo ddp --procs 2"
    assert gc.judge_refusal(one, _outcome(stderr=no_sharing, returncode=2)).status == "fail"
    # the ring all-reduce on ranks sharing the GPU: refused for gloo's want of CUDA sends
    shared = gc.Item("concept-allreduce", "r", "concepts", ["py"], 10, "refusal", {"gpus": 1, "shared": True})
    from ddpfsdp.demos.launch.sharing import refusal

    assert gc.judge_refusal(shared, _outcome(stderr="Error: " + refusal("allreduce", 2, 2), returncode=2)).status == "pass"
    assert gc.judge_refusal(shared, _outcome(stderr=said, returncode=2)).status == "fail"
    assert gc.judge_refusal(one, _outcome(stderr=said, returncode=0)).status == "fail"
    eight = gc.Item("refusal", "r", "refusal", ["py"], 10, "refusal", {"gpus": 8})
    assert gc.judge_refusal(eight, _outcome(stderr=said, returncode=2)).status == "fail"  # --gpus 2 runs there
    assert gc.judge_refusal(eight, _outcome(stderr=too_few_ranks("ddp", 2, Placement("cuda", 1), gpus=8),
                                            returncode=2)).status == "pass"


def test_guard_and_doctor_judges():
    cli = gc.Item("guard", "g", "guard", ["py"], 10, "guard_cli")
    refused = ("Error: ddp with xl (1,313,000,000 params) on 8 GPUs will not fit: estimate 412.0 GiB per rank ... "
               "Try: ... --force launches it anyway.")
    assert gc.judge_guard_cli(cli, _outcome(stderr=refused, returncode=1)).status == "pass"
    assert gc.judge_guard_cli(cli, _outcome(stdout='{"schema": "ddpfsdp.demo/1"}', returncode=0)).status == "fail"
    rank = gc.Item("guard", "g", "guard", ["py"], 10, "guard_rank")
    verdicts = {"refused": {"fits": False, "estimate_bytes": 400 * 2**30, "available_bytes": 79 * 2**30, "message": "will not fit"},
                "control": {"fits": True, "estimate_bytes": 2**30, "available_bytes": 79 * 2**30, "message": "fits"}}
    assert gc.judge_guard_rank(rank, _outcome(data=verdicts)).status == "pass"
    let_through = {**verdicts, "refused": {**verdicts["refused"], "fits": True}}
    assert gc.judge_guard_rank(rank, _outcome(data=let_through)).status == "fail"
    blind = {**verdicts, "refused": {**verdicts["refused"], "available_bytes": None}}
    assert gc.judge_guard_rank(rank, _outcome(data=blind)).status == "fail"  # free memory unknown: no real test

    doctor = gc.Item("doctor", "d", "machine", ["py"], 10, "doctor")
    report = {"torch_version": "2.13.0+cu128", "torch_build": "CUDA 12.8", "cuda_available": True, "nccl_available": True,
              "gpus": [{"name": "NVIDIA H100 80GB HBM3", "total_memory_bytes": 85 * 10**9, "capability": "9.0"}]}
    verdict = gc.judge_doctor(doctor, _outcome(json.dumps(report)))
    assert verdict.status == "pass" and verdict.numbers["gpus"] == ["NVIDIA H100 80GB HBM3, 79 GiB, cc 9.0"]
    assert gc.judge_doctor(doctor, _outcome(json.dumps({**report, "gpus": [], "cuda_available": False}))).status == "fail"
    assert gc.judge_doctor(doctor, _outcome(json.dumps({**report, "nccl_available": False}))).status == "fail"


# ----------------------------------------------------------------------------- running


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds processes through /proc")
def test_a_hung_item_is_stopped_and_nothing_it_started_is_left(tmp_path):
    """A command that starts a process in a session of its own (as the launcher starts the ranks'
    agent) and then hangs: stopped at its budget, the detached process found by its marker and ended."""
    child = tmp_path / "child.pid"
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
            f"open({str(child)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(60)\n")
    item = gc.Item("hang", "hang", "N GPUs", [sys.executable, "-c", code], 2, "demo", {"world": 2})
    started = time.monotonic()
    outcome = gc.run_item(item, 2.0, dict(os.environ))
    assert outcome.timed_out and time.monotonic() - started < 20
    assert _gone(int(child.read_text()))
    verdict = gc.EVALUATORS[item.evaluate](item, outcome)
    assert verdict.status == "fail" and "time budget" in verdict.detail

    leaves = code.rsplit("time.sleep(60)", 1)[0]  # starts the detached process, writes its pid, exits
    quick = gc.Item("leak", "leak", "N GPUs", [sys.executable, "-c", leaves], 20, "demo", {"world": 2})
    outcome = gc.run_item(quick, 20.0, dict(os.environ))
    assert not outcome.timed_out and outcome.left_running == 1 and _gone(int(child.read_text()))
    assert "left 1 processes running" in gc.judge_demo(quick, outcome).detail


@pytest.mark.dist
def test_one_rank_driver_on_cpu_is_judged_end_to_end(tmp_path):
    """The one-rank driver runs the ddp demo's own entry point as a world of one (gloo here), writes
    its trace, and the judge reads what it wrote: every check passes, and the trace holds the rank."""
    data, trace = tmp_path / "ddp.json", tmp_path / "trace.json"
    item = gc.Item("ddp-1rank", "ddp", "1 GPU",
                   [sys.executable, str(BENCHMARKS / "gpu_rank_check.py"), "--device", "cpu", "demo", str(data), "ddp",
                    "--model", "tiny", "--steps", "5", "--trace", str(trace)],
                   300, "peak", {"world": 1, "data": str(data), "trace": str(trace)})
    env = {**os.environ, "DDPFSDP_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    outcome = gc.run_item(item, 300.0, env)
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    verdict = gc.judge_peak(item, outcome)
    assert verdict.status == "pass", verdict.detail
    assert verdict.numbers["world"] == 1 and verdict.numbers["peak_mib"][0] > 0
    assert outcome.data["result"]["config"]["backend"] == "gloo" and "memory_stats" not in outcome.data


def test_a_check_the_shared_gpu_does_not_judge_is_neither_failed_nor_passed():

    overlap = _check("ddp_overlaps_allreduce_with_backward", False, "first all-reduce issued late")
    shared = mark_result(_result(checks=[_check("loss_decreases", True), overlap]), ranks_per_gpu=2, gpus=1)
    verdict = gc.judge_result(shared, {"world": 2})
    assert verdict.status == "pass" and "1 of 2 checks passed" in verdict.detail
    assert "not judged: ddp_overlaps_allreduce_with_backward (the ranks share one GPU" in verdict.detail
    # the same numbers on separate GPUs are a failure
    alone = gc.judge_result(_result(checks=[_check("loss_decreases", True), overlap]), {"world": 2})
    assert alone.status == "fail" and "first all-reduce issued late" in alone.detail


def test_the_katas_item_passes_only_when_every_kata_does_as_expected(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_kata_check", BENCHMARKS / "gpu_kata_check.py")
    gpu_kata_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_kata_check)
    item = next(item for item in gc.plan(1, tmp_path, tmp_path / "work", python="py") if item.key == "katas")
    assert "point-to-point katas refused" in item.title and item.argv[-2:] == ["--gpus", "1"]
    assert gpu_kata_check.expected(p2p=True, gpus=1) == "refused" and gpu_kata_check.expected(True, 2) == "pass"
    good = {"katas": {"ring-allreduce": {"expected": "refused", "ok": True, "seconds": 1.2},
                      "memory-estimate": {"expected": "pass", "ok": True, "seconds": 6.0, "not_passed": []}}}
    verdict = gc.judge_katas(item, gc.Outcome(0, "", "", 7.2, data=good))
    assert verdict.status == "pass" and "1 katas passed every check, 1 refused" in verdict.detail
    bad = {"katas": {**good["katas"], "fsdp-unit": {"expected": "pass", "ok": False, "seconds": 5.0,
                                                    "not_passed": ["grads_equal_ddp"]}}}
    verdict = gc.judge_katas(item, gc.Outcome(1, "", "", 12.2, data=bad))
    assert verdict.status == "fail" and verdict.detail == "fsdp-unit: grads_equal_ddp"
    assert gc.judge_katas(item, gc.Outcome(1, "", "boom", 1.0)).status == "fail"
