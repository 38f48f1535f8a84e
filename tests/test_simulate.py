"""Simulated runs: the real strategy code on fake tensors over a fake process group, in this process.

A world of 8 on the tiny GPT checks every figure against the analytic model; the real 2-process gloo
run of the same model, scaled by theory to 8 ranks, must give the same figures; a named size at
interview scale (7B HSDP on 64 ranks, the run the question bank links) stays within 1% of `ddpfsdp calc`;
refusals say what to try. Each configuration is simulated once per session and read by every test that
needs it; every strategy at 7B on 64 ranks against calc is tests/benchmarks/bench_simulate_vs_calc.py.
"""

from __future__ import annotations

import json

import click
import pytest
from conftest import run_cli

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.estimate import estimate
from ddpfsdp.demos.theory.run import theory_for_run
from ddpfsdp.demos.base import shapes

TINY = {"world": 8, "model": "tiny", "batch_size": 4, "simulate": True}
STATE = ("params", "grads", "optimizer")


@pytest.fixture
def simulated_tiny(simulated):
    """`simulated_tiny(demo, **options)`: the session's simulated run of `demo` on the tiny world of 8 with
    `options` (conftest's `simulated`, shared with tests/test_simulate_golden.py; read, never change it)."""
    return lambda demo, **options: simulated(demo, {**TINY, **options})


def _state_bytes(rank: dict) -> int:
    return sum(rank[kind] for kind in STATE)


def _wire(per_op: dict) -> float:
    return sum(op["wire_bytes_per_rank"] for op in per_op.values())


def _failed(result: dict) -> list[str]:
    """Every failed check of a result, with those of each run inside a compare."""
    runs = result.get("runs") or {}
    failed = [f"{name}: {c['name']}: {c['detail']}" for name, run in runs.items() for c in run["checks"]
              if not c["passed"]]
    return failed + [f"{c['name']}: {c['detail']}" for c in result["checks"] if not c["passed"]]


@pytest.mark.parametrize("demo, extra", [
    ("fsdp", {}), ("fsdp", {"sharding": "grad-op"}),
    ("fsdp", {"sharding": "hybrid", "replicas": 2, "precision": "bf16-mixed"}),
    ("ddp", {}), ("zro", {}), ("fsdp", {"precision": "bf16-mixed"}), ("fsdp", {"precision": "bf16"}),
    ("ddp", {"precision": "bf16"}), ("fsdp", {"arch": "resnet"}), ("fsdp", {"checkpoint_activations": True}),
])
def test_a_simulated_world_of_8_matches_the_analytic_model(demo, extra, simulated_tiny):
    result = simulated_tiny(demo, **extra)
    config = result["config"]
    assert config["simulated"] is True and config["backend"] == "fake" and config["world_size"] == 8
    assert "throughput" not in result  # nothing ran, so there is no speed to report
    assert not _failed(result), _failed(result)
    names = {c["name"] for c in result["checks"]}
    assert {"simulated_model_state_matches_calc", "simulated_wire_matches_calc"} <= names
    from ddpfsdp.demos import registry

    assert names <= set(registry.get(demo).checks)  # the bank may cite every one of them
    rank = result["memory"]["ranks"][0]
    theory = result["theory"]
    for kind in STATE:
        # ZeRO-1 partitions whole tensors: rank 0 may hold one tensor's state beyond its share.
        whole = result["memory"]["largest_param_bytes"] * 2 if demo == "zro" and kind == "optimizer" else 0
        assert rank[kind] == pytest.approx(theory[f"{kind}_bytes"], rel=0.01, abs=whole + 1024), kind
    assert _wire(result["comm"]["per_step"]) == pytest.approx(theory["wire_bytes_per_rank"], rel=0.01)
    peak = result["memory"]["peak"]
    assert peak["bytes"] > _state_bytes(rank) and peak["phase"] in ("forward", "backward", "optimizer step")
    assert sum(peak["categories"].values()) == peak["bytes"]
    rows = {row["figure"]: row for row in result["versus_theory"]}
    assert abs(rows["model state"]["diff_percent"]) < (2 if demo == "zro" else 1)


def test_vit_padding_is_sent_and_allowed_for_by_the_simulated_wire_check(simulated_tiny):
    """FSDP pads dim 0 to a multiple of the group: a ViT's one-row class token travels 8 times over."""
    result = simulated_tiny("fsdp", arch="vit")
    check = next(c for c in result["checks"] if c["name"] == "simulated_wire_matches_calc")
    assert check["passed"] and check["values"]["padding"] > 0
    assert check["values"]["measured"] > check["values"]["theory"] * 1.05


def test_fsdp_full_finds_its_peak_in_a_unit_and_its_largest_unit_measured(simulated_tiny):
    result = simulated_tiny("fsdp")
    shape = shapes.shape_for("gpt", "tiny")
    unit = result["memory"]["largest_unit"]
    assert unit["name"].startswith("blocks.") and unit["params"] == shape.block_params
    assert unit["unsharded_bytes"] == shape.block_params * 4  # fp32, gathered whole
    peak = result["memory"]["peak"]
    assert peak["phase"] == "backward" and peak["unit"] in result["config"]["units"]
    assert peak["module"].startswith(peak["unit"])
    check = next(c for c in result["checks"] if c["name"] == "simulated_peak_holds_largest_unit")
    assert check["passed"] and check["values"]["above"] >= unit["unsharded_bytes"]


def test_bf16_mixed_gathers_in_bf16_and_reduces_in_fp32(simulated_tiny):
    per_op = simulated_tiny("fsdp", precision="bf16-mixed")["comm"]["per_step"]
    params = shapes.shape_for("gpt", "tiny").params
    assert per_op["all_gather"]["bytes"] == 2 * params * 2  # every unit twice, in bf16 (the root holds nothing)
    assert per_op["reduce_scatter"]["bytes"] == params * 4


def test_simulated_compare_runs_the_four_strategies_and_passes_its_checks(simulated_tiny):
    result = simulated_tiny("compare")
    assert list(result["runs"]) == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    assert result["config"]["simulated"] is True
    assert not _failed(result), _failed(result)
    from ddpfsdp.demos import registry

    assert {c["name"] for c in result["checks"]} <= set(registry.get("compare").checks)
    ddp, full = result["runs"]["ddp"], result["runs"]["fsdp-full"]
    assert _state_bytes(full["memory"]["ranks"][0]) == pytest.approx(_state_bytes(ddp["memory"]["ranks"][0]) / 8,
                                                                     rel=0.01)


@pytest.mark.dist
@pytest.mark.timeout(300)
def test_simulated_world_of_8_is_the_real_2_process_run_scaled_by_theory(demo_result, simulated_tiny):
    """Every figure of the real gloo run on 2 ranks, scaled to 8 ranks by theory, is the simulation's."""
    real = demo_result("compare", "--model", "tiny")["runs"]  # the session's shared launch
    simulated = simulated_tiny("compare")["runs"]
    for name, sim in simulated.items():
        config = sim["config"]
        scale = {}
        for kind in STATE:
            at = {world: theory_for_run(strategy=config["strategy"], sharding=config["sharding"],
                                             params=config["params"], world_size=world,
                                             precision=config["precision"], optimizer=config["optimizer"])
                  for world in (2, 8)}
            scale[kind] = at[8][f"{kind}_bytes"] / at[2][f"{kind}_bytes"]
        real_rank, sim_rank = real[name]["memory"]["ranks"][0], sim["memory"]["ranks"][0]
        for kind in STATE:
            # ZeRO-1 partitions whole tensors, so its optimizer share is uneven on a tiny model.
            slack = sim["memory"]["largest_param_bytes"] * 2 if name == "zro" and kind == "optimizer" else 0
            assert sim_rank[kind] == pytest.approx(real_rank[kind] * scale[kind], rel=0.01, abs=slack + 1024), (name, kind)
        real_ops, sim_ops = real[name]["comm"]["per_step"], sim["comm"]["per_step"]
        assert set(real_ops) == set(sim_ops), name
        for op, measured in sim_ops.items():
            factor = wire_factor(op, 8) / wire_factor(op, 2)
            if name.startswith("fsdp") or op == "all_reduce":
                # The same buffers on any world size: FSDP per unit, DDP's gradients (in buckets).
                assert measured["bytes"] == real_ops[op]["bytes"], (name, op)
                assert measured["wire_bytes_per_rank"] == pytest.approx(real_ops[op]["wire_bytes_per_rank"] * factor,
                                                                        rel=0.01), (name, op)
            if name.startswith("fsdp"):
                assert measured["count"] == real_ops[op]["count"], (name, op)
        assert sim["config"]["params"] == real[name]["config"]["params"]


# ----------------------------------------------------------------------------- interview scale


def _calc_row(strategy: str, world: int, precision: str, params: int, group_size: int | None = None) -> dict:
    return estimate(params=params, gpus=world, precision=precision, group_size=group_size)["strategies"][strategy]


# The configuration the question bank links (tests/test_bank_evidence.py runs it): one launch serves both.
HYBRID_7B = ("--simulate", "--world", "64", "--params", "7B", "--precision", "bf16-mixed", "--sharding", "hybrid",
             "--replicas", "8")


@pytest.mark.timeout(300)
def test_7b_hsdp_on_64_ranks_stays_within_1_percent_of_calc(demo_result):
    """HSDP with 8 replicas of a 7B GPT on 64 simulated ranks, against `ddpfsdp calc`'s hsdp row."""
    hybrid = demo_result("fsdp", *HYBRID_7B)
    assert hybrid["config"]["simulated"] is True and hybrid["config"]["world_size"] == 64
    params = shapes.sized_gpt_shape("7B").params
    expected = _calc_row("hsdp", 64, "bf16-mixed", params, 8)["model_state_bytes"]
    assert _state_bytes(hybrid["memory"]["ranks"][0]) == pytest.approx(expected, rel=0.01)
    assert hybrid["memory"]["peak"]["phase"] in ("forward", "backward", "optimizer step")
    assert not [c for c in hybrid["checks"] if not c["passed"]], hybrid["checks"]
    assert hybrid["comm"]["group_sizes"]["all_reduce"] == [8]  # across the 8 replicas
    assert hybrid["comm"]["group_sizes"]["reduce_scatter"] == [8]  # within a group of 64/8


@pytest.mark.timeout(300)
def test_the_cli_simulates_a_world_of_8_labelled_simulated_and_saves_it():
    """One simulated run through the CLI: its text says SIMULATED and has no throughput, and the result
    it saved is the simulated world's, with FSDP's model state at 1/8 as calc has it."""
    from ddpfsdp.quiz.store import Store

    args = ["--model", "tiny", "--precision", "bf16-mixed", "--simulate", "--world", "8"]  # the CLI's order
    outcome = run_cli("demo", "fsdp", *args)
    assert outcome.exception is None and outcome.exit_code == 0, (outcome.exception, outcome.stderr[-3000:])
    assert "SIMULATED" in outcome.stdout and "no throughput" in outcome.stdout.replace("\n", " ")
    assert "samples/s" not in outcome.stdout and "on a simulated world of 8 ranks" in outcome.stdout
    with Store.open() as store:
        result = store.last_demo_result("fsdp", args).result
    assert result["config"]["simulated"] is True and result["config"]["world_size"] == 8
    rank = result["memory"]["ranks"][0]
    expected = _calc_row("zero3", 8, "bf16-mixed", shapes.shape_for("gpt", "tiny").params)["model_state_bytes"]
    assert _state_bytes(rank) == pytest.approx(expected, rel=0.01)
    assert result["memory"]["peak"]["phase"] and result["memory"]["peak"]["categories"]



def test_a_simulated_ddp_run_reads_simulated_with_no_throughput(simulated_tiny):
    """The text the CLI prints for a simulated `ddp` run (the demo's own renderer): labelled SIMULATED,
    and no speed, since nothing ran."""
    import io

    from rich.console import Console

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.registry import load

    out = io.StringIO()
    load(registry.DEMOS["ddp"].render)(simulated_tiny("ddp"), Console(file=out, width=100))
    text = out.getvalue()
    assert "SIMULATED" in text and "no throughput" in text.replace("\n", " ")
    assert "samples/s" not in text

# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("demo, extra, words", [
    ("fsdp", {"world": None}, "--world"),
    ("fsdp", {"world": 1}, "at least 2"),
    ("fsdp", {"params": "5B", "model": None}, "1B, 7B, 13B, 70B"),
    ("fsdp", {"fsdp_api": 1}, "--fsdp-api 2"),
    ("fsdp", {"sharding": "hybrid", "replicas": 3}, "--replicas"),
    ("ddp", {"params": "7B", "model": None, "world": 64, "gpu_mem": "80GB"}, "ddpfsdp demo fsdp --simulate --world 64 --params 7B"),
    ("zro", {"params": "70B", "model": None, "world": 512, "gpu_mem": "80GB"}, "fsdp --simulate"),
    ("fsdp", {"world": 10**6}, "at most"),
    ("fsdp", {"trace": "step.json"}, "--procs 2 --trace PATH"),
    ("fsdp", {"prefetch": "forward"}, "leave it out with --simulate"),
])
def test_what_the_fake_run_cannot_handle_is_refused_with_what_to_try(demo, extra, words):
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.registry import load

    with pytest.raises(click.UsageError) as caught:
        load(registry.get(demo).validate)({**TINY, **extra}, 1)
    assert words in caught.value.format_message()


def test_ddp_that_fits_the_stated_gpu_memory_is_simulated(simulated_tiny):
    """A DDP replica whose model state fits --gpu-mem passes the check and is simulated with the limit
    held against its peak; a limit below that model state is refused before anything is built."""
    from ddpfsdp.demos.measure.simulated_report import fit_line
    from ddpfsdp.demos.train.options import validate_simulated

    validate_simulated("ddp", {**TINY, "gpu_mem": "80GB"})
    result = simulated_tiny("ddp", gpu_mem="80GB")
    assert result["config"]["gpu_mem_bytes"] == 80 * 10**9 and result["config"]["strategy"] == "ddp"
    assert not _failed(result), _failed(result)
    assert "fits in" in fit_line(result)
    state = _state_bytes(result["memory"]["ranks"][0])
    with pytest.raises(click.UsageError, match="keeps a full replica"):
        validate_simulated("ddp", {**TINY, "gpu_mem": f"{state // 2}B"})


def test_simulate_only_options_need_simulate():
    from ddpfsdp.demos.train.options import validate_fsdp

    with pytest.raises(click.UsageError, match="add --simulate"):
        validate_fsdp({"world": 64, "params": "7B"}, 2)


def test_a_refusal_on_the_command_line_has_no_traceback():
    outcome = run_cli("demo", "ddp", "--simulate", "--world", "64", "--params", "7B", "--gpu-mem", "80GB")
    assert outcome.exception is None and outcome.exit_code == 2
    assert "Traceback" not in outcome.stderr and "fsdp --simulate" in outcome.stderr


def test_named_sizes_are_within_a_fifth_of_a_percent_of_their_names():
    for name, shape in shapes.GPT_SIZES.items():
        assert shape.params == pytest.approx(float(name[:-1]) * 1e9, rel=0.002), name
        assert shape.d_model % shape.heads == 0


def test_the_evidence_panel_labels_a_simulated_result(simulated_tiny):
    from rich.console import Console

    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.quiz.widgets.evidence import result_table

    result = simulated_tiny("fsdp")
    assert ev.where(result).startswith("simulated: rank 0 of a world of 8 ranks")
    assert "Simulated" in ev.gloo_caveat(result) and "no throughput" in ev.gloo_caveat(result)
    console = Console(record=True, width=120)
    console.print(result_table(result))
    text = console.export_text()
    assert "Simulated, rank 0 of 8" in text and "Measured" not in text


def test_calc_points_at_the_simulated_run_of_the_same_configuration():
    from click.testing import CliRunner

    from ddpfsdp.quiz.commands.calc import calc as calc_command

    out = CliRunner().invoke(calc_command, ["--params", "7B", "--gpus", "64"]).output
    assert "ddpfsdp demo fsdp --simulate --world 64 --params 7B --precision bf16-mixed" in out
    out = CliRunner().invoke(calc_command, ["--params", "70B", "--gpus", "64", "--group-size", "8"]).output
    assert "--sharding hybrid --replicas 8" in out


def test_a_stated_gpu_memory_is_held_against_the_simulated_peak(simulated_tiny):
    from ddpfsdp.demos.measure.simulated_report import fit_line

    result = simulated_tiny("fsdp", gpu_mem="1GB")
    assert result["config"]["gpu_mem_bytes"] == 10**9
    assert "fits in" in fit_line(result)
    assert "does NOT fit" in fit_line({**result, "config": {**result["config"], "gpu_mem_bytes": 10**6}})


# The 2-D run simulated: dp 4 x tp 2 on the tiny GPT. Per TP rank 472,064 parameters (worked out in
# tests/test_two_d_run.py); every tensor's rows divide by dp 4, so rank 0 holds 118,016.
TWO_D_HELD = 472_064 // 4


@pytest.mark.parametrize("sequence_parallel, tp_calls", [
    (False, {"all_reduce": 21}),
    (True, {"all_gather": 18, "reduce_scatter": 17, "all_reduce": 22}),
])
def test_a_simulated_2d_world_runs_the_real_plan(sequence_parallel, tp_calls, simulated_tiny):
    result = simulated_tiny("fsdp", tp=2, sequence_parallel=sequence_parallel)
    assert not _failed(result), _failed(result)
    from ddpfsdp.demos import registry

    assert {c["name"] for c in result["checks"]} <= set(registry.get("fsdp").checks)
    assert result["config"]["tp"] == 2
    rank = result["memory"]["ranks"][0]
    assert (rank["params"], rank["grads"]) == (TWO_D_HELD * 4, TWO_D_HELD * 4)
    per_group = result["comm"]["per_group"]
    assert {op: figures["count"] for op, figures in per_group["tp"].items()} == tp_calls
    assert (per_group["dp"]["all_gather"]["count"], per_group["dp"]["reduce_scatter"]["count"]) == (12, 6)


def test_a_simulated_2d_world_pads_each_tp_shard_over_dp(simulated_tiny):
    # dp 6 x tp 2 on the tiny GPT (4 layers, d 128, vocab 512, seq 64): FSDP pads the rows of each TP
    # rank's local tensor up to a multiple of 6. Token embedding 256 x 128: 2 rows of 128; position
    # table 64 x 128: 2 rows; a block: LayerNorms 4 x 4, qkv 192 rows none, proj 128 x 64: 4 rows of
    # 64 and its bias 4, fc 256 x 128: 2 rows of 128 and its bias 2, fc2 128 x 256: 4 rows of 256 and
    # its bias 4, 1,562 in all; the head's LayerNorm 8 and its 256 x 128 weight 256. 7,024 elements,
    # and one local row of every tensor is 2,722 fp32 elements.
    result = simulated_tiny("fsdp", tp=2, world=12)
    assert not _failed(result), _failed(result)
    assert result["memory"]["fsdp_padding_elements"] == 256 + 256 + 4 * 1_562 + 8 + 256
    assert result["memory"]["shard_row_bytes"] == 2_722 * 4


def test_the_simulated_2d_world_is_what_calc_says(simulated_tiny):
    """The same configuration through `ddpfsdp calc --json`: model state and every op within 1%."""
    result = simulated_tiny("fsdp", tp=2)
    outcome = run_cli("calc", "--model", "tiny", "--gpus", "8", "--tp", "2", "--batch-size", "4",
                      "--precision", "fp32", "--json")
    assert outcome.exit_code == 0, outcome.stderr
    row = json.loads(outcome.stdout)["strategies"]["2d"]
    assert _state_bytes(result["memory"]["ranks"][0]) == pytest.approx(row["model_state_bytes"], rel=0.01)
    per_group = result["comm"]["per_group"]
    for group, ops in (("dp", row["comm"]), ("tp", row["tp_comm"])):
        assert set(per_group[group]) == set(ops)
        for op, figures in ops.items():
            assert per_group[group][op]["count"] == figures["count"]
            assert per_group[group][op]["bytes"] == pytest.approx(figures["bytes"], rel=0.01)
