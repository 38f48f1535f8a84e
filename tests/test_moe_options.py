"""`ddpfsdp demo moe`'s options: one RunSpec, its degrees, and what is refused before any rank starts.

Torch-free and in-process (the CLI through `run_cli`): nothing here launches a rank.
"""

from __future__ import annotations

import click
import pytest
from conftest import run_cli

from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.train import moe_options
from ddpfsdp.demos.train.spec import RunSpec

# The defaults as `ddpfsdp demo moe --help` states them, written out by hand.
MOE_DOCUMENTED = {"model": None, "batch_size": None, "steps": None, "seed": 0, "trace": None, "simulate": False,
                  "ep": None, "experts": 4, "top_k": 2, "capacity_factor": 1.0}


def _parse(args: list[str]) -> dict:
    return click.Command("moe", params=list(moe_options.MOE_OPTIONS), callback=lambda **kw: kw).main(
        args, standalone_mode=False)


def test_the_command_line_defaults_are_the_spec_s():
    parsed = _parse([])
    assert parsed == MOE_DOCUMENTED
    spec = RunSpec.for_demo("moe", parsed)
    assert spec == RunSpec.for_demo("moe", {}) and spec.is_moe and not spec.is_pipeline
    assert (spec.strategy, spec.sharding, spec.wrap) == ("fsdp", "full", "block")
    resolved = spec.resolved("cpu")
    assert (resolved.model, resolved.steps, resolved.batch_size) == ("tiny", 4, 4)
    # the other demos do not take the MoE options, and their configs do not report them
    assert not RunSpec.for_demo("fsdp", {}).is_moe
    assert not {"ep", "experts", "top_k", "capacity_factor"} & set(RunSpec.for_demo("fsdp", {}).reported())


def test_the_degrees_borrow_ep_from_data_parallelism():
    every = ParallelDims.of(RunSpec.for_demo("moe", {}), 4)
    assert (every.dp_shard, every.ep, every.mesh_shape) == (4, 4, {"dp_shard": 4})
    half = ParallelDims.of(RunSpec.for_demo("moe", {"ep": 2}), 4)
    assert (half.dp_shard, half.ep, half.dp) == (4, 2, 4)
    assert ParallelDims.fewest_ranks(RunSpec.for_demo("moe", {})) == 2
    assert ParallelDims.fewest_ranks(RunSpec.for_demo("moe", {"ep": 4, "experts": 8})) == 8  # two ep groups
    with pytest.raises(ValueError, match="--ep 4 must divide the world of 6 ranks.*give --ep 2, or --procs 4 or 8"):
        ParallelDims.of(RunSpec.for_demo("moe", {"ep": 4, "experts": 8}), 6)


BAD = [
    (["--experts", "3", "--ep", "2"], "3 experts do not split evenly over --ep 2"),
    (["--top-k", "5"], "top-k 5 must be from 1 to the 4 experts"),
    (["--capacity-factor", "0"], "--capacity-factor"),
    (["--capacity-factor", "-1"], "--capacity-factor"),
    (["--procs", "3"], "4 experts do not split evenly over the 3 ranks"),
    (["--procs", "3", "--ep", "2"], "--ep 2 must divide the world of 3 ranks"),
    (["--procs", "4", "--experts", "6"], "give --ep 2, or --experts a multiple of 4"),
    (["--ep", "1"], "--ep"),
    (["--steps", "1"], "--steps must be at least 2"),
    (["--procs", "1"], "--procs 2"),
    (["--model", "nope"], "--model nope"),
]


@pytest.mark.parametrize("args, says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_refused_before_launch_with_what_to_do(args, says):
    outcome = run_cli("demo", "moe", *args, stdin="")
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 2
    said = " ".join(outcome.stderr.split())
    assert "Traceback" not in outcome.stdout + said
    assert says in said, said
    assert "moe on" not in outcome.stdout  # the launch's first line: nothing was launched


@pytest.mark.parametrize("options, says", [
    ({"capacity_factor": 0}, "--capacity-factor must be positive, got 0"),
    ({"top_k": 0}, "--top-k must be at least 1"),
    ({"experts": 6, "ep": 4}, "6 experts do not split evenly over --ep 4"),
])
def test_options_given_in_code_get_the_same_checks(options, says):
    """A question bank's link or the app hands options as a dict, not a command line."""
    with pytest.raises(click.UsageError, match=says):
        moe_options.validate_moe(options, 2, "cpu")


def test_simulate_is_refused_with_the_analytic_model_s_figures_for_the_run():
    """Fake tensors hold no split sizes to read, so the refusal shows what theory says of the same run."""
    outcome = run_cli("demo", "moe", "--simulate", "--ep", "4", "--experts", "8", stdin="")
    said = " ".join(outcome.stderr.split())
    assert outcome.exit_code == 2 and "DataDependentOutputException" in said and "not a measurement" in said, said
    # tiny: 4 layers, d 128; 4 x 64 tokens per rank top-2 over 8 experts at factor 1.0: ceil(512 / 8) = 64 slots;
    # 4 all-to-alls per layer, each T·k·d·4 bytes x 3/4 off-rank = 256 x 2 x 128 x 4 x 3/4 = 192 KiB, x 16 = 3 MiB
    assert "2 experts per rank and layer" in said and "capacity 64 slots per expert" in said
    assert "16 all-to-alls per step sending 3.00 MiB per rank routed evenly" in said
    assert ("ddpfsdp calc --model tiny --gpus 4 --ep 4 --experts 8 --top-k 2 --capacity-factor 1 --batch-size 4 "
            "--precision fp32") in said


def test_the_simulate_refusal_s_calc_line_runs():
    outcome = run_cli("calc", "--model", "tiny", "--gpus", "4", "--ep", "4", "--experts", "8", "--top-k", "2",
                      "--capacity-factor", "1", "--batch-size", "4", "--precision", "fp32")
    assert outcome.exit_code == 0 and outcome.exception is None, outcome.stderr
