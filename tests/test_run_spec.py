"""A training run's one configuration: the CLI, RunSpec and the launch guard read the same defaults, and
a bad demo option is refused by the command line before the run is placed (placing imports torch)."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from ddpfsdp.demos.launch import guard
from ddpfsdp.demos.train import options as cli_options
from ddpfsdp.demos.train.spec import DEFAULTS, RunSpec, command_flags, option_fields

TRAINING = {"ddp": cli_options.DDP_OPTIONS, "zro": cli_options.DDP_OPTIONS, "fsdp": cli_options.FSDP_OPTIONS,
            "compare": cli_options.COMPARE_OPTIONS}

# The defaults as `--help` states them, written out by hand.
DOCUMENTED = {
    "arch": "gpt", "model": None, "layers": None, "d_model": None, "heads": None, "seq_len": None,
    "batch_size": None, "steps": None, "warmup": 2, "precision": "fp32", "optimizer": "adamw", "lr": 1e-3,
    "seed": 0, "checkpoint_activations": False, "timeline": True, "trace": None, "bucket_mb": 25.0,
    "sharding": "full", "wrap": "block", "fsdp_api": 2, "replicas": 2, "prefetch": "default", "tp": None,
    "sequence_parallel": False, "optimizer_impl": "auto", "compile": False, "compile_backend": "auto",
    "simulate": False, "world": None, "params": None, "gpu_mem": None,
    # a pipeline's (their defaults on `demo pipeline`'s command line are its own: PIPELINE_DOCUMENTED)
    "schedule": None, "microbatches": None, "stages_per_rank": None, "pp": None, "dp": 1, "compare": False,
    # an MoE run's (on `demo moe`'s command line its own: tests/test_moe_options.py)
    "ep": None, "experts": None, "top_k": None, "capacity_factor": None,
    # the at-scale demos' (their defaults on their own command lines: AT_SCALE_DOCUMENTED)
    "strategy": "ddp", "slow_rank": None, "delay_ms": None, "timed_steps_each": None, "save_after": None,
    "resume_on": None, "dir": None, "period": None, "local_sgd_warmup": None,
    # context parallelism's (`demo cp`'s own defaults: cp 2, the head-tail split)
    "cp": None, "cp_split": None,
}
AT_SCALE_DOCUMENTED = {
    "straggler": {"strategy": "ddp", "model": None, "batch_size": None, "seed": 0, "trace": None, "slow_rank": 1,
                  "delay_ms": 500.0, "timed_steps_each": 3},
    "checkpoint-resume": {"strategy": "fsdp", "model": None, "batch_size": None, "seed": 0, "save_after": 2,
                          "resume_on": None, "dir": None},
    # local SGD averages DDP replicas: no --strategy
    "local-sgd": {"model": None, "batch_size": None, "seed": 0, "period": 4, "local_sgd_warmup": 2},
}
PIPELINE_DOCUMENTED = {"model": None, "batch_size": None, "steps": None, "seed": 0, "trace": None, "schedule": "1f1b",
                       "microbatches": 4, "stages_per_rank": None, "pp": None, "dp": 1, "compare": False,
                       "simulate": False}


def _parse(params: list[click.Parameter], args: list[str]) -> dict:
    return click.Command("demo", params=list(params), callback=lambda **kw: kw).main(args, standalone_mode=False)


def test_the_spec_holds_the_documented_defaults():
    assert DEFAULTS == DOCUMENTED


def test_the_pipeline_s_command_line_defaults_are_its_spec_s():
    parsed = _parse(cli_options.PIPELINE_OPTIONS, [])
    assert parsed == PIPELINE_DOCUMENTED
    spec = RunSpec.for_demo("pipeline", parsed)
    assert spec == RunSpec.for_demo("pipeline", {}) and spec.is_pipeline and spec.schedules() == ("1f1b",)
    # resolved on CPU: the pipeline's own model, steps and batch (16 samples per micro-batch)
    resolved = spec.resolved("cpu")
    assert (resolved.model, resolved.steps, resolved.batch_size) == ("tiny", 3, 64)
    assert RunSpec.for_demo("ddp", {}).resolved("cpu").batch_size == 4


@pytest.mark.parametrize("demo", list(AT_SCALE_DOCUMENTED))
def test_the_at_scale_command_lines_defaults_are_their_specs(demo):
    from ddpfsdp.demos.train import at_scale_options

    options = {"straggler": at_scale_options.STRAGGLER_OPTIONS, "checkpoint-resume": at_scale_options.RESUME_OPTIONS,
               "local-sgd": at_scale_options.LOCAL_SGD_OPTIONS}
    parsed = _parse(options[demo], [])
    assert parsed == AT_SCALE_DOCUMENTED[demo]
    spec = RunSpec.for_demo(demo, parsed)
    assert spec == RunSpec.for_demo(demo, {}) and spec.strategy == parsed.get("strategy", "ddp")
    assert (spec.is_straggler, spec.is_resume, spec.is_local_sgd) == (
        demo == "straggler", demo == "checkpoint-resume", demo == "local-sgd")
    resolved = spec.resolved("cpu")
    # the tiny GPT on CPU; a straggler's steps: 2 warm-up, 3 + 3 timed in turn, 1 recorded; a resume's 2 + 2;
    # local SGD's 2 synchronous, then three periods of 4 and the averaging that ends them
    assert (resolved.model, resolved.steps) == ("tiny", {"straggler": 9, "checkpoint-resume": 4, "local-sgd": 15}[demo])
    # what they add is reported only on their own runs, and the key leaves the folder out
    assert "slow_rank" not in RunSpec.for_demo("ddp", {}).resolved("cpu").reported()
    assert RunSpec.for_demo("checkpoint-resume", {"dir": "/tmp/x"}).key("checkpoint-resume", "cpu") == {"model": "tiny"}
    if demo != "local-sgd":
        assert RunSpec.for_demo(demo, {"strategy": "zro" if demo == "straggler" else "ddp"}).key(demo) == {
            "strategy": "zro" if demo == "straggler" else "ddp"}


def test_the_cp_demo_s_command_line_defaults_are_its_spec_s():
    parsed = _parse(cli_options.CP_OPTIONS, [])
    own = {"cp": 2, "cp_split": "head-tail"}
    assert parsed == {name: own.get(name, DOCUMENTED[name]) for name in parsed}
    spec = RunSpec.for_demo("cp", parsed)
    assert spec == RunSpec.for_demo("cp", {}) and spec.is_context_parallel and spec.strategy == "fsdp"
    assert not {"tp", "sharding", "wrap", "bucket_mb", "schedule"} & set(parsed)
    assert spec.reported()["cp"] == 2 and "cp" not in RunSpec.for_demo("fsdp", {}).reported()


@pytest.mark.parametrize("demo", list(TRAINING))
def test_the_command_line_defaults_are_the_specs(demo):
    parsed = _parse(TRAINING[demo], [])
    assert set(parsed) == {item.name for item in option_fields(demo)}
    assert parsed == {name: DOCUMENTED[name] for name in parsed}
    # The run the CLI's defaults make is the run RunSpec makes with nothing given.
    for run in RunSpec.for_demo(demo, parsed).runs(demo):
        assert run == RunSpec.from_options({}, run.strategy, run.sharding)


@pytest.mark.parametrize("demo", list(TRAINING))
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_guard_sizes_a_run_from_the_same_defaults(demo, device):
    cli_defaults = _parse(TRAINING[demo], [])
    left_out = guard.estimate_rank_bytes(demo, {}, device=device, world_size=4)
    assert left_out == guard.estimate_rank_bytes(demo, cli_defaults, device=device, world_size=4)
    # Defaults that drifted from the CLI's would change the estimate: a batch of 8 does.
    assert left_out != guard.estimate_rank_bytes(demo, {"batch_size": 8}, device=device, world_size=4)
    assert left_out["model"] == {"cpu": "small", "cuda": "base"}[device]


def test_every_option_is_one_field_with_its_flag():
    flags = {opt.opts[0] for opt in cli_options.FSDP_OPTIONS}
    assert {"--d-model", "--fsdp-api", "--checkpoint-activations", "--gpu-mem"} <= flags
    assert "--bucket-mb" not in flags and "--sharding" not in {o.opts[0] for o in cli_options.DDP_OPTIONS}
    assert [o.opts[0] for o in cli_options.COMPARE_OPTIONS if o.name in ("bucket_mb", "wrap")] == ["--bucket-mb",
                                                                                                   "--wrap"]


def test_options_left_none_take_their_defaults_and_numbers_given_as_text_are_read():
    run = RunSpec.from_options({"wrap": None, "precision": None, "fsdp_api": "1", "lr": "0.5"}, "fsdp")
    assert (run.wrap, run.precision, run.fsdp_api, run.lr) == ("block", "fp32", 1, 0.5)


def test_only_fsdp_reports_a_sharding_and_fsdp1_names_are_read():
    assert RunSpec.from_options({"sharding": "hybrid"}, "ddp").sharding is None
    assert RunSpec.from_options({"sharding": "SHARD_GRAD_OP"}, "fsdp").sharding == "grad-op"


def test_a_result_reports_the_options_of_the_run_and_the_overrides_given():
    config = RunSpec.from_options({"layers": 3, "model": "tiny"}, "ddp").resolved("cpu").reported()
    assert config["layers"] == 3 and "heads" not in config and "d_model" not in config
    assert {"trace", "simulate", "world", "params", "gpu_mem"}.isdisjoint(config)
    assert config["steps"] == 8 and config["strategy"] == "ddp"


def test_a_simulated_size_takes_overrides_on_top():
    arch, name, overrides, shape = RunSpec.from_options({"params": "7b", "layers": 2}, "fsdp").simulated_model()
    assert (arch, name) == ("gpt", "7B")
    # 7B is 32 layers of d_model 4096 with 32 heads (presets.GPT_SIZES); --layers 2 replaces the layers only.
    assert (shape.layers, shape.d_model, shape.heads) == (2, 4096, 32)
    assert overrides["layers"] == 2


# ----------------------------------------------------------------------------- bad input before placement


@pytest.fixture
def never_placed(monkeypatch):
    """Fail the test if the CLI gets as far as placing the run (which imports torch)."""
    from ddpfsdp.demos.launch import launcher

    def placed(*args, **kwargs):
        raise AssertionError("the run was placed: the bad option was not refused first")

    monkeypatch.setattr(launcher, "resolve_placement", placed)


@pytest.mark.parametrize("args, message", [
    (["ddp", "--bucket-mb", "-1"], "Invalid value for '--bucket-mb': -1.0 is not in the range 0<x<=1048576"),
    (["ddp", "--batch-size", "0"], "Invalid value for '--batch-size': 0 is not in the range 1<=x<=65536"),
    (["fsdp", "--fsdp-api", "3"], "Invalid value for '--fsdp-api': 3 is not in the range 1<=x<=2"),
    (["ddp", "--steps", "3"], "--steps must be at least 5 with --warmup 2"),
    (["ddp", "--model", "huge"], "unknown model preset 'huge'"),
    (["fsdp", "--prefetch", "off"], "--prefetch off needs --fsdp-api 1"),
    (["compare", "--world", "8"], "--world only applies to a simulated run: add --simulate"),
    (["compare", "--world", "8", "--params", "7B"], "--world, --params only apply to a simulated run: add --simulate"),
    (["fsdp", "--simulate"], "--simulate needs --world N, the ranks to simulate, at least 2 (e.g. --world 64)\n"),
    (["fsdp", "--simulate", "--world", "1"], "at least 2 (e.g. --world 64); got 1"),
    (["fsdp", "--simulate", "--world", "8", "--sharding", "hybrid", "--replicas", "3"], "cannot split 8 ranks"),
])
def test_a_bad_demo_option_is_refused_before_the_run_is_placed(never_placed, args, message):
    from ddpfsdp.quiz.commands.demo import demo

    result = CliRunner().invoke(demo, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("demo, args", [
    ("fsdp", ["--model", "xl", "--precision", "bf16-mixed", "--no-timeline", "--tp", "2", "--sequence-parallel"]),
    ("fsdp", ["--sharding", "hybrid", "--replicas", "4", "--checkpoint-activations", "--lr", "0.5"]),
    ("ddp", ["--bucket-mb", "1", "--arch", "vit", "--batch-size", "2", "--trace", "my runs/t.json"]),
    ("ddp", []),
])
def test_command_flags_give_back_the_options_they_were_made_from(demo, args):
    typed = _parse(TRAINING[demo], args)
    flags = shlex.split(" ".join(command_flags(demo, typed)))
    assert _parse(TRAINING[demo], flags) == typed
    assert len(flags) == len(args)  # only what differs from the defaults


def test_command_flags_name_the_first_options_first_even_at_their_defaults():
    typed = _parse(TRAINING["fsdp"], ["--model", "tiny", "--batch-size", "1"])
    assert command_flags("fsdp", typed, first=["sharding", "batch_size"]) == [
        "--sharding full", "--batch-size 1", "--model tiny"]


# ----------------------------------------------------------------------------- the spec the ranks get


def test_the_ranks_get_the_spec_the_cli_read_and_parse_no_command_line(monkeypatch):
    from ddpfsdp.demos import registry, worker
    from ddpfsdp.demos.launch import request
    from ddpfsdp.demos.launch.launcher import DemoRun

    fsdp = registry.get("fsdp")
    spec = request.from_args(fsdp, ["--model", "tiny", "--sharding", "SHARD_GRAD_OP", "--lr", "0.5"])
    assert spec == RunSpec.for_demo("fsdp", {"model": "tiny", "sharding": "grad-op", "lr": 0.5})
    run = DemoRun("fsdp", asked=spec, procs=2)
    assert run.command[-3:] == ["--on-failure", "stop", "fsdp"]  # no option of the run's on the command line
    sent = run._environment()[request.SPEC_ENV]
    # resolved once, by the launcher, for the device it placed the run on
    assert request.from_json(fsdp, sent) == spec.resolved("cpu") == run.asked
    with pytest.raises(ValueError, match="not of 'ddp'"):
        request.from_json(registry.get("ddp"), sent)

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv(request.SPEC_ENV, sent)
    assert worker.asked_of(fsdp, []) == run.asked
    with pytest.raises(click.UsageError, match="come from it"):
        worker.asked_of(fsdp, ["--model", "small"])
    # A bare torchrun or srun launch: the rank parses and checks its own command line (and resolves it
    # once it knows its device, in run_rank).
    monkeypatch.delenv(request.SPEC_ENV)
    assert worker.asked_of(fsdp, ["--model", "tiny", "--sharding", "grad-op", "--lr", "0.5"]) == spec
    with pytest.raises(click.UsageError, match="cannot split 2 ranks"):
        worker.asked_of(fsdp, ["--sharding", "hybrid"])


def test_a_concept_demo_gets_its_options_as_they_were_parsed():
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request

    wrap = registry.get("wrap")
    options = request.from_args(wrap, ["--batch-size", "2"])
    assert options == {"model": None, "batch_size": 2, "seed": 0}
    assert request.from_json(wrap, request.to_json(wrap, options)) == options
    assert request.key(wrap, options, "cpu") == {"batch_size": 2, "model": "tiny"}
    assert request.key(wrap, options, "cuda") == {"batch_size": 2, "model": "small"}


def test_resolving_a_spec_with_nothing_left_to_fill_gives_it_back():
    given = RunSpec.for_demo("ddp", {"model": "tiny", "steps": 6, "batch_size": 4})
    assert given.resolved("cpu") is given
    left = RunSpec.for_demo("ddp", {})
    assert left.resolved("cpu") == RunSpec.for_demo("ddp", {"model": "small", "steps": 8, "batch_size": 4})
    assert [run.strategy for run in left.runs("compare")] == ["ddp", "zro", "fsdp", "fsdp"]
    assert [run.sharding for run in left.runs("compare")] == [None, None, "grad-op", "full"]


def test_the_first_line_says_how_the_ranks_split_when_the_run_chose_their_number(monkeypatch):
    """`demo fsdp --tp 2` starts 4 processes: the first line says so and why (dp 2 x tp 2)."""
    from ddpfsdp.demos.launch import launcher
    from ddpfsdp.quiz.cli import cli

    def stop(run):
        raise SystemExit(0)

    monkeypatch.setattr(launcher.DemoRun, "start", stop)
    said = CliRunner().invoke(cli, ["demo", "fsdp", "--tp", "2", "--model", "tiny", "--procs", "4"]).output
    assert " ".join(said.split()).startswith("fsdp on 4 CPU processes (gloo) as dp_shard 2 x tp 2: real FSDP2")
    plain = CliRunner().invoke(cli, ["demo", "fsdp", "--model", "tiny", "--procs", "2"]).output
    assert plain.startswith("fsdp on 2 CPU processes (gloo): real FSDP2")


def test_a_run_s_description_names_its_mesh_by_degree():
    """FSDP's own mesh is the data-parallel part: a dp 2 x tp 2 run once read "mesh (2,)"."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.parallel.strategies import Prepared

    two_d = Prepared(None, None, strategy="fsdp", device=None, world_size=4, precision="fp32", optimizer_name="adamw",
                     lr=1e-3, sharding="full", wrap="block", fsdp_api=2, units=["blocks.0", "root"],
                     dims=ParallelDims(4, dp_shard=2, tp=2))
    assert "wrap block: 2 units, mesh dp_shard 2 x tp 2;" in two_d.describe()
    one = Prepared(None, None, strategy="fsdp", device=None, world_size=8, precision="fp32", optimizer_name="adamw",
                   lr=1e-3, sharding="full", wrap="model", fsdp_api=2, units=["root"], dims=ParallelDims(8, dp_shard=8))
    assert "wrap model: 1 unit, mesh dp_shard 8;" in one.describe()
