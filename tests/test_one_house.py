"""One house: one degrees type, one Placement, one parallelize(), one launcher, one place a result is made.

Read from the source (each rule with a planted violation that the same reader finds), and from runs: a
result crosses between its typed form and JSON once at each process edge, and a pipeline run and its
analytic twin read the same spec fields.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ROOT / "demos"


def _sources(folder: Path) -> dict[str, ast.Module]:
    return {str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(folder.rglob("*.py"))}


def classes_named(trees: dict[str, ast.Module], name: str) -> list[str]:
    return [path for path, tree in trees.items() for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name == name]


def calls_of(trees: dict[str, ast.Module], function: str) -> list[str]:
    """Where `function(...)` is called, by name or as an attribute."""
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if callee == function:
                    found.append(f"{path}:{node.lineno}")
    return found


# What starts a process: a module of these, or a call of these names.
PROCESS_MODULES = ("subprocess", "multiprocessing", "torch.multiprocessing")
PROCESS_CALLS = ("fork", "forkpty", "Popen", "spawnv", "execv", "execvp", "start_processes", "elastic_launch")


def process_starts(trees: dict[str, ast.Module]) -> list[str]:
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{path}:{node.lineno} imports {n}" for n in names if n.startswith(PROCESS_MODULES)]
    return found + [f"{where} calls a process start" for name in PROCESS_CALLS for where in calls_of(trees, name)]


def test_one_class_of_each_name_the_degrees_and_the_placement():
    trees = _sources(DEMOS) | _sources(ROOT / "quiz")
    assert classes_named(trees, "ParallelDims") == ["demos/parallel/degrees.py"]
    assert classes_named(trees, "Placement") == ["demos/base/placement.py"]


def test_a_second_placement_class_is_found(tmp_path):
    planted = {"demos/train/pipeline.py": ast.parse("class Placement:\n    pp: int\n")}
    assert classes_named(_sources(DEMOS) | planted, "Placement") == ["demos/base/placement.py",
                                                                      "demos/train/pipeline.py"]


def test_only_parallelize_s_modules_call_fully_shard():
    """Training code shards through the one parallelize(); the failure lab's programs are bugs on purpose."""
    calls = [where for where in calls_of(_sources(DEMOS), "fully_shard")
             if not where.startswith(("demos/parallel/", "demos/faults/"))]
    assert calls == []
    planted = {"demos/train/pipeline.py": ast.parse("fully_shard(module, mesh=mesh)\n")}
    assert calls_of(planted, "fully_shard") == ["demos/train/pipeline.py:1"]


def test_no_process_is_started_in_demos_outside_the_launch():
    outside = {path: tree for path, tree in _sources(DEMOS).items() if not path.startswith("demos/launch/")}
    assert process_starts(outside) == []
    planted = {"demos/faults/runner.py": ast.parse("import subprocess\nsubprocess.Popen(['x'])\nos.fork()\n")}
    assert len(process_starts(planted)) == 3


def test_the_pipeline_is_a_runspec_run():
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request
    from ddpfsdp.demos.train.spec import RunSpec

    demo = registry.get("pipeline")
    asked = request.from_args(demo, ["--schedule", "interleaved", "--microbatches", "4", "--dp", "2"])
    assert demo.takes_spec and isinstance(asked, RunSpec)
    assert (asked.schedule, asked.microbatches, asked.dp, asked.stages_for("interleaved")) == ("interleaved", 4, 2, None)
    assert (asked.strategy, asked.sharding, asked.wrap) == ("fsdp", "grad-op", "model")
    # the same learning rate and optimizer as every training run: the spec's own
    assert (asked.lr, asked.optimizer) == (RunSpec(strategy="ddp").lr, RunSpec(strategy="ddp").optimizer)


# ----------------------------------------------------------------------------- a result's crossings


def _count_crossings(monkeypatch) -> dict[str, int]:
    from ddpfsdp.demos.result.schema import DemoResult

    counts = {"to_json": 0, "from_json": 0}
    to_json, from_json = DemoResult.to_json, DemoResult.from_json.__func__

    def counted_to_json(self):
        counts["to_json"] += 1
        return to_json(self)

    def counted_from_json(cls, data):
        if not isinstance(data, DemoResult):
            counts["from_json"] += 1
        return from_json(cls, data)

    monkeypatch.setattr(DemoResult, "to_json", counted_to_json)
    monkeypatch.setattr(DemoResult, "from_json", classmethod(counted_from_json))
    return counts


def _rank(rank: int, world: int, port: str, placement: str, spec: str, out: str) -> None:
    """One rank of `sampler`, run by the worker as the agent runs it, its result's crossings counted."""
    import pytest as _pytest

    from ddpfsdp.demos import worker
    from ddpfsdp.demos.base.placement import PLACEMENT_ENV
    from ddpfsdp.demos.launch.request import SPEC_ENV

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": port, PLACEMENT_ENV: placement, SPEC_ENV: spec})
    with _pytest.MonkeyPatch.context() as monkeypatch:
        counts = _count_crossings(monkeypatch)
        code = worker.run_rank("sampler", [])
    Path(out, f"rank{rank}.json").write_text(json.dumps({"code": code, **counts}))


@pytest.mark.dist
def test_a_result_crosses_to_json_once_on_the_rank_and_back_once_at_the_launcher(tmp_path, monkeypatch):
    """Rank 0 makes its result typed and the worker writes it as JSON once; the launcher reads it back once,
    and the command line writes it once more only for --json (the terminal's edge)."""
    from conftest import fork_ranks

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.launch import request
    from ddpfsdp.demos.launch.hardware import free_port
    from ddpfsdp.demos.launch.launcher import DemoRun

    demo = registry.get("sampler")
    spec = request.to_json(demo, request.from_args(demo, []))
    fork_ranks(_rank, 2, (2, str(free_port()), Placement("cpu", 2).to_json(), spec, str(tmp_path)), timeout_s=120)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks == [{"code": 0, "to_json": 1, "from_json": 0}, {"code": 0, "to_json": 0, "from_json": 0}]

    counts = _count_crossings(monkeypatch)
    run = DemoRun("sampler", [], procs=2)
    events = list(run.events())
    assert run.ok and [e["event"] for e in events].count("result") == 1
    assert counts == {"to_json": 0, "from_json": 1}
    assert run.result.demo == "sampler" and run.result is run.result  # held typed, not read again


def test_a_planted_second_crossing_is_counted(monkeypatch):
    from ddpfsdp.demos.result.schema import DemoResult, as_result

    counts = _count_crossings(monkeypatch)
    typed = DemoResult.from_json({"schema": "ddpfsdp.demo/1", "demo": "sampler", "config": {}, "checks": []})
    as_result(as_result(typed.to_json()))
    assert counts == {"to_json": 1, "from_json": 2}


# ----------------------------------------------------------------------------- a pipeline and its twin


@pytest.mark.dist
def test_a_pipeline_run_and_its_analytic_twin_read_the_same_spec_fields(demo_result):
    """The run's spec gives both: the run's own theory beside its measurements, and what `--simulate` (which
    torch's pipelining cannot run on fake tensors) shows instead for the same spec. Both are read from
    the spec's fields (schedule, micro-batches, stages per rank, pp, batch), so they agree."""
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.theory.pipeline import check_pipeline, pipeline_figures
    from ddpfsdp.demos.base.shapes import gpt_shape

    args = ("--schedule", "1f1b", "--microbatches", "8")
    result = demo_result("pipeline", *args, procs=4)
    spec = request.from_args(registry.get("pipeline"), list(args)).resolved("cpu")
    dims = ParallelDims.of(spec, result["config"]["world_size"])
    run = result["runs"]["1f1b"]["pipeline"]
    assert (run["pp"], run["dp"], run["microbatches"], run["batch_size"]) == (dims.pp, dims.dp, spec.microbatches,
                                                                             spec.batch_size)
    twin = pipeline_figures(gpt_shape(spec.model), check_pipeline(dims.pp, spec.microbatches, spec.schedule,
                                                                  spec.stages_for(spec.schedule)),
                            gpus=dims.pp, batch_size=spec.batch_size // spec.microbatches, precision=spec.precision)
    assert [row["bubble_theory"] for row in run["ranks"]] == [pytest.approx(twin["bubble_fraction"])] * dims.pp
    assert [row["in_flight_chunks_theory"] for row in run["ranks"]] == [r["in_flight_chunks"] for r in twin["ranks"]]
    assert [row["sent_theory"]["bytes"] for row in run["ranks"]] == [r["p2p"]["bytes"] for r in twin["ranks"]]
    # the config reports the spec's own fields, under their names
    assert {k: result["config"][k] for k in ("schedule", "microbatches", "dp", "batch_size", "steps", "model")} == \
        {"schedule": "1f1b", "microbatches": 8, "dp": 1, "batch_size": spec.batch_size, "steps": spec.steps,
         "model": spec.model}
