"""The result type (demos/result/schema.py): one envelope, one way to and from JSON, and results saved by an
earlier version of the project still load, render and show as evidence.

tests/data/saved/ holds results printed by `--json` before the result type existed, unedited: on 2 gloo
ranks a `ddp` run and a `compare` (gzipped) of the tiny model and a `wrap` concept run; a simulated
`fsdp` world of 8 and `compare` world of 4; a `fault`. Both compares are from when the demo of PyTorch's
ZeroRedundancyOptimizer was called `zero1` (its run, its strategy and its check `zero1_shards_optimizer`),
the name calc keeps for DeepSpeed's ZeRO-1; today it is `zro`.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest
from rich.console import Console

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import (FAULT_CAVEAT, GLOO_CAVEAT, SCHEMA, SIMULATED_CAVEAT, DemoResult, RankMemory,
                                  ResultError, as_result)
from saved_results import placed_result

SAVED = Path(__file__).parent / "data" / "saved"
FILES = sorted(p.name for p in SAVED.glob("*.json*"))


def _saved(name: str) -> dict:
    path = SAVED / name
    text = gzip.decompress(path.read_bytes()).decode("utf-8") if name.endswith(".gz") else path.read_text("utf-8")
    return json.loads(text)


def _today(text: str) -> str:
    """A saved result's JSON text with the names it was saved under as today's: each "zero1" in these
    files names the run of ZeroRedundancyOptimizer, now "zro"."""
    return text.replace('"zero1_shards_optimizer"', '"zro_shards_optimizer"').replace('"zero1"', '"zro"')


def _rendered(render, result) -> str:
    console = Console(width=160, record=True, force_terminal=False)
    render(result, console)
    return console.export_text()


def test_every_saved_file_is_here():
    assert FILES == ["compare_tiny_procs2.json.gz", "compare_tiny_simulated_world4.json", "ddp_tiny_procs2.json",
                     "fault_sampler_set_epoch.json", "fsdp_tiny_simulated_world8.json", "wrap_procs2.json"]


@pytest.mark.parametrize("name", FILES)
def test_a_saved_result_loads_and_goes_out_as_it_came_in(name):
    saved = _saved(name)
    result = DemoResult.from_json(saved)
    # the same JSON, key for key and in the same order: what --json printed is what the type prints, the
    # retired names (the demo of ZeroRedundancyOptimizer was `zero1`, now `zro`) read as today's, nothing else
    today = json.loads(_today(json.dumps(saved)))
    assert result.schema == SCHEMA and result.demo == today["demo"]
    assert json.dumps(result.to_json()) == json.dumps(today)
    assert [c.name for c in result.checks] == [c["name"] for c in today["checks"]]
    assert all(isinstance(c, Check) for c in result.checks)


def test_a_saved_training_result_reads_as_fields():
    result = as_result(_saved("ddp_tiny_procs2.json"))
    assert result.is_training and result.config.strategy == "ddp" and result.config.world_size == 2
    rank0 = result.memory.ranks[0]
    assert isinstance(rank0, RankMemory)
    assert rank0.model_state == rank0.params + rank0.grads + rank0.optimizer > 0
    assert list(rank0.peak_parts()) == [k for k in ("params", "unsharded_params", "grads", "optimizer", "all_gather",
                                                    "reduce_scatter", "ddp_buckets", "buffers", "inputs",
                                                    "activations", "temporaries", "transient")
                                        if rank0.peak_breakdown.get(k)]
    assert result.comm.per_step["all_reduce"].count >= 1
    assert result.comm.wire_bytes_per_rank == sum(op["wire_bytes_per_rank"] for op in
                                                  _saved("ddp_tiny_procs2.json")["comm"]["per_step"].values())
    assert result.throughput.step_time_s.min <= result.throughput.step_time_s.median
    assert result.timeline.ranks and len(result.timeline.exposed_share) == 2
    assert result.caveat == GLOO_CAVEAT


def test_saved_results_render_as_before():
    from ddpfsdp.demos.concepts.render import render_wrap
    from ddpfsdp.demos.faults.render import render_fault
    from ddpfsdp.demos.measure.report import render_compare, render_training

    ddp = _rendered(render_training, _saved("ddp_tiny_procs2.json"))
    assert "Memory per rank (measured)" in ddp and "What the peak is made of" in ddp
    assert "Collectives in one training step" in ddp and "Timeline of step" in ddp and "Run time on rank 0" in ddp
    simulated = _rendered(render_training, _saved("fsdp_tiny_simulated_world8.json"))
    assert "SIMULATED" in simulated and "Peak of one step (simulated)" in simulated
    assert "Largest FSDP unit" in simulated
    compared = _rendered(render_compare, _saved("compare_tiny_simulated_world4.json"))
    assert "SIMULATED" in compared and all(name in compared for name in ("ddp", "zro", "fsdp-grad-op", "fsdp-full"))
    assert "zero1" not in compared
    assert all(f"{n}/{n} passed" in compared for n in (6, 4, 7, 8))  # each run's own checks, counted from its fields
    real = _saved("compare_tiny_procs2.json.gz")  # 2 gloo ranks, 5 steps, the timelines included
    compared = _rendered(render_compare, real)
    agree = next(c for c in real["checks"] if c["name"] == "losses_agree")
    assert f"Losses {'agree' if agree['passed'] else 'do NOT agree'}: {agree['detail']}" in " ".join(compared.split())
    assert "Per rank, measured in one run each, as a ratio to DDP" in compared
    assert "Parameter bytes held over the recorded step" in compared
    wrap = _rendered(render_wrap, _saved("wrap_procs2.json"))
    assert "root" in wrap.lower() and GLOO_CAVEAT not in wrap  # its own note is saved with it
    fault = _rendered(render_fault, _saved("fault_sampler_set_epoch.json"))
    assert "sampler-set-epoch" in fault or "set_epoch" in fault
    # the typed value renders the same as its JSON
    assert _rendered(render_training, as_result(_saved("ddp_tiny_procs2.json"))) == ddp


def test_saved_results_show_as_evidence():
    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.quiz.widgets.evidence import result_table

    ddp = _saved("ddp_tiny_procs2.json")
    assert ev.where(ddp).startswith("2 CPU processes (gloo)")
    assert list(ev.runs(ddp)) == ["ddp"]
    held = ev.memory_by_component(ddp)
    assert held["params"] == ddp["memory"]["ranks"][0]["params"] and held["peak"] == ddp["memory"]["ranks"][0]["peak"]
    assert ev.peak_where(ddp).startswith(ddp["memory"]["ranks"][0]["peak_phase"])
    assert ev.lookup(ddp, "memory.ranks.1.optimizer") == ddp["memory"]["ranks"][1]["optimizer"]
    assert [i.name for i in ev.all_checks(ddp)] == [c["name"] for c in ddp["checks"]]
    assert result_table(ddp) is not None
    simulated = _saved("fsdp_tiny_simulated_world8.json")
    assert ev.gloo_caveat(simulated) == SIMULATED_CAVEAT
    assert ev.where(simulated).startswith("simulated: rank 0 of a world of 8 ranks")
    fault = _saved("fault_sampler_set_epoch.json")
    assert ev.gloo_caveat(fault) == FAULT_CAVEAT
    assert [side[0] for side in ev.fault_sides(fault)] == ["broken", "fixed"]
    assert ev.fault_sides(fault)[0][2] == fault["fault"]["broken"]["symptom"]
    real = _saved("compare_tiny_procs2.json.gz")
    assert list(ev.runs(real)) == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    full = real["runs"]["fsdp-full"]["memory"]["ranks"][0]
    assert ev.lookup(real, "runs.fsdp-full.memory.ranks.0.optimizer") == full["optimizer"]
    assert ev.peak_breakdown(ev.runs(real)["fsdp-full"]) == {k: float(v) for k, v in full["peak_breakdown"].items() if v}
    assert ev.comm_per_step(ev.runs(real)["fsdp-full"])["all_gather"].count >= 1
    wrap = _saved("wrap_procs2.json")
    assert ev.runs(wrap) == {} and [i.passed for i in ev.all_checks(wrap)] == [c["passed"] for c in wrap["checks"]]


def test_a_saved_result_comes_back_from_the_store_and_renders():
    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.quiz.store import Store

    saved = _saved("ddp_tiny_procs2.json")
    with Store.open() as store:
        store.save_demo_result("ddp", ["--model", "tiny", "--procs", "2"], saved)
        back = store.last_demo_result("ddp", ["--model", "tiny", "--procs", "2"])
    assert back is not None and as_result(back.result).to_json() == saved
    assert ev.where(back.result) == ev.where(saved)


def test_a_result_saved_under_the_zero1_names_reads_as_zro():
    saved = _saved("compare_tiny_procs2.json.gz")
    assert "zero1" in saved["runs"] and saved["runs"]["zero1"]["config"]["strategy"] == "zero1"
    old_check = next(c for c in saved["checks"] if c["name"] == "zero1_shards_optimizer")
    result = as_result(saved)
    assert list(result.runs) == result.config.strategies == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    assert result.runs["zro"].config.strategy == "zro" and result.runs["zro"].extra["label"] == "zro"
    check = result.check("zro_shards_optimizer")
    assert check is not None and result.check("zero1_shards_optimizer") is None
    assert (check.passed, check.detail) == (old_check["passed"], old_check["detail"])
    assert check.values["zro"] == old_check["values"]["zero1"]
    assert "zero1" not in json.dumps(result.to_json())
    assert as_result(result.to_json()).to_json() == result.to_json()  # today's names read as they are
    # a result of the demo itself, as `ddpfsdp demo zero1 --json` printed it
    run = {"schema": SCHEMA, "demo": "zero1", **saved["runs"]["zero1"], "checks": [old_check]}
    assert as_result(run).demo == "zro" and as_result(run).config.strategy == "zro"


def test_a_zero1_result_in_the_store_is_found_as_zro_and_shows_as_evidence():
    """Results the store filed under `zero1` (the demo column, and a key of the command line's words
    from before results were keyed by what was asked) are found by `demo zro` asked the same; the
    question linked to the zro check finds it in a saved compare."""
    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.quiz.loader import load_bank
    from ddpfsdp.quiz.store import Store, demo_keys
    from ddpfsdp.quiz.widgets.evidence import result_table

    compare = _saved("compare_tiny_procs2.json.gz")
    run = {"schema": SCHEMA, "demo": "zero1", "config": compare["runs"]["zero1"]["config"], "env": compare["env"],
           "memory": compare["runs"]["zero1"]["memory"], "checks": []}
    asked = ["--model", "tiny", "--precision", "bf16-mixed", "--procs", "2"]
    with Store.open() as store:
        # as the version that named the demo `zero1` filed them: its key (the same options as zro's), and
        # an older key of the command line's words
        old_key = demo_keys("zro", asked, "cpu")[0]
        with store.transaction() as db:
            for key in (old_key, json.dumps(["--model", "tiny", "--seed", "1", "--procs", "2"])):
                db.execute("INSERT INTO demo_results (demo, args_json, result_json, saved_at, fingerprint, hostname)"
                           " VALUES ('zero1', ?, ?, '2026-01-01T00:00:00+00:00', 'f', 'h')", (key, json.dumps(run)))
        store.save_demo_result("compare", ["--model", "tiny"], compare)
        found = store.last_demo_result("zro", ["--precision", "bf16-mixed", "--model", "tiny"])
        seeded = store.last_demo_result("zro", ["--seed", "1", "--model", "tiny", "--procs", "4"])
        also = store.last_demo_result("zero1", asked)
        saved_compare = store.last_demo_result("compare", ["--model", "tiny"])
    assert found is not None and seeded is not None and also is not None and also.result == found.result
    assert found.result["demo"] == "zro" and found.result["config"]["strategy"] == "zro"
    assert as_result(found.result).config.strategy == "zro" and result_table(found.result) is not None
    question = load_bank().questions["shard-zero1-redundancy-optimizer"]
    assert question.demo.name == "compare" and question.evidence == ("zro_shards_optimizer",)
    assert saved_compare is not None and list(ev.runs(saved_compare.result)) == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    [item] = ev.evidence(question, saved_compare.result)
    old_check = next(c for c in compare["checks"] if c["name"] == "zero1_shards_optimizer")
    assert (item.name, item.passed, item.detail) == ("zro_shards_optimizer", old_check["passed"], old_check["detail"])
    assert item.claim.startswith("ZeroRedundancyOptimizer (zro) holds 1/N of the optimizer state")


def test_the_envelope_is_built_in_one_place():
    check = Check("a_claim", True, "1 <= 2", {"a": 1})
    result = placed_result("allreduce", {"world_size": 2, "device": "cpu", "backend": "gloo", "buffer": 8},
                      {"torch": "2.13.0"}, [check], sent_bytes_per_rank=[6, 6])
    out = result.to_json()
    assert list(out) == ["schema", "demo", "config", "env", "sent_bytes_per_rank", "checks"]
    assert out["schema"] == SCHEMA and out["checks"] == [check.to_dict()]
    assert out["config"] == {"world_size": 2, "device": "cpu", "backend": "gloo", "buffer": 8}
    assert result.config.world_size == 2 and result.extra == {"sent_bytes_per_rank": [6, 6]}
    # checks in their JSON form are read as checks
    again = placed_result("allreduce", result.config, result.env, out["checks"])
    assert again.checks == [check]


def _strings_in_code(path: Path) -> list[str]:
    """The string constants of a module, its docstrings left out (prose may name the schema)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_schema_name_is_written_once():
    root = Path(__file__).parents[1]
    sources = [p for folder in ("demos", "quiz") for p in (root / folder).rglob("*.py")]
    written = [p.relative_to(root).as_posix() for p in sources if any(SCHEMA in s for s in _strings_in_code(p))]
    assert written == ["demos/result/schema.py"]


def test_a_schema_name_written_in_code_is_found_and_one_in_prose_is_not(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(f'"""Returns {SCHEMA}."""\n\n\ndef f():\n    """{SCHEMA}"""\n    return {{"schema": "{SCHEMA}"}}\n')
    assert _strings_in_code(planted).count(SCHEMA) == 1


@pytest.mark.parametrize("runs", [
    {"ddp": {"comm": {"all_reduce": {"count": 1, "bytes": 4, "wire_bytes_per_rank": 4.0}}, "wire_bytes_per_rank": 4.0}},
    {"ddp": {"no_sync": {"comm": {"all_reduce": {"count": 1, "bytes": 4, "wire_bytes_per_rank": 4.0}}}}},
])
def test_a_concept_demo_keeps_its_own_shape_where_its_names_meet_the_types(runs):
    """`comm` and `no-sync` keep runs of their own shape under `runs`: read as training runs, they still
    go out exactly as they came in (no field a run lacked is written back)."""
    out = placed_result("comm", {"world_size": 2}, {}, [], runs=runs).to_json()
    assert out["runs"] == runs
    assert as_result(out).to_json() == out


def test_caveat_follows_where_the_run_happened():
    def caveat(config, demo="ddp"):
        return placed_result(demo, config, {}, []).caveat

    assert caveat({"device": "cpu", "backend": "gloo"}) == GLOO_CAVEAT
    assert caveat({"device": "cuda", "backend": "nccl"}) is None
    assert caveat({"device": "cpu", "backend": "fake", "simulated": True}) == SIMULATED_CAVEAT
    assert caveat({"device": "cpu", "backend": "gloo"}, demo="fault") == FAULT_CAVEAT


def test_peak_where_says_the_phase_and_module():
    assert RankMemory(peak_phase="backward", peak_module="blocks.3.mlp").peak_where() == "backward, in blocks.3.mlp"
    assert RankMemory(peak_phase="optimizer").peak_where() == "optimizer, outside the model's modules"
    assert RankMemory().peak_where() is None


@pytest.mark.parametrize("bad, said", [
    ([1, 2], "expected a JSON object"),
    ({"schema": "ddpfsdp.demo/0", "demo": "ddp"}, "is not ddpfsdp.demo/1"),
])
def test_what_is_not_a_result_is_refused_with_a_reason(bad, said):
    with pytest.raises(ResultError, match=said):
        DemoResult.from_json(bad)


def test_a_model_state_kind_is_checked():
    with pytest.raises(ResultError, match="choose one of params, grads, optimizer"):
        RankMemory(params=1).state("activations")


def _diverged_on_the_wire(losses: list[float]) -> dict:
    """The saved ddp run with these losses, as its rank 0 builds it and the launcher reads it back: through
    the events protocol, which writes nan and infinity as null."""
    from ddpfsdp.demos.claims.training import loss_decreases
    from ddpfsdp.demos.launch import events
    from ddpfsdp.demos.result.schema import Diverged

    result = as_result(_saved("ddp_tiny_procs2.json"))
    result.loss, result.diverged = losses, Diverged.of(losses)
    result.checks = [loss_decreases(losses), *result.checks[1:]]
    event = events.decode(events.encode({"event": "result", "result": result.to_json()}))
    return event["result"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_diverged_run_is_a_result_that_says_where_it_diverged(value):
    """`demo ddp --lr 1e30` turns the loss to nan at its second step: the run renders (the loss line once
    raised formatting None), says which value at which step, and its check says so too."""
    from ddpfsdp.demos.measure.report import render_training
    from ddpfsdp.quiz.commands.results import check_table

    wire = _diverged_on_the_wire([6.2693, value, float("nan"), float("nan")])
    assert wire["loss"] == [6.2693, None, None, None]
    assert wire["diverged"] == {"step": 2, "loss": str(value)}
    result = as_result(wire)
    shown = " ".join(_rendered(render_training, result).split())
    assert f"Loss (mean over ranks): 6.2693 at step 1 -> {value} at step 2: the run diverged" in shown
    assert "try a smaller --lr than this run's 0.001" in shown
    console = Console(width=160, record=True, force_terminal=False)
    console.print(check_table(result.checks))
    assert f"the loss diverged: {value} at step 2 of 4" in console.export_text()
    assert result.check("loss_decreases").values["diverged_step"] == 2


def test_a_result_saved_with_null_losses_and_no_diverged_block_still_renders():
    from ddpfsdp.demos.measure.report import loss_line

    saved = {**_saved("ddp_tiny_procs2.json"), "loss": [None, None]}
    assert loss_line(saved) == "Loss (mean over ranks): [bold red]not a number at step 1[/]: the run diverged"
    assert as_result(_saved("ddp_tiny_procs2.json")).diverged is None  # a finite run carries no block


def test_compare_names_the_run_that_diverged():
    from ddpfsdp.demos.measure.report import render_compare

    compare = _saved("compare_tiny_procs2.json.gz")
    compare["runs"]["fsdp-full"]["loss"] = [6.1, None, None, None, None]
    shown = " ".join(_rendered(render_compare, compare).split())
    assert "fsdp-full: loss not a number at step 2: the run diverged" in shown
