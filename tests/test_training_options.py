"""The training demos' options: names the rest of the project relies on, and clear usage errors."""

from __future__ import annotations


import click
import pytest

from ddpfsdp.demos import registry

from ddpfsdp.demos.train import options as training
from ddpfsdp.demos.train.spec import RunSpec, canonical_sharding


def _parse(params, args):
    command = click.Command("demo", params=list(params), callback=lambda **kw: kw)
    return command.main(args, standalone_mode=False)


def test_option_names_follow_the_contract():
    common = {"arch", "model", "layers", "d_model", "heads", "seq_len", "batch_size", "steps", "warmup",
              "precision", "optimizer", "lr", "seed", "checkpoint_activations", "timeline", "trace",
              "optimizer_impl", "compile", "compile_backend"}
    names = lambda params: {p.name for p in params}  # noqa: E731
    simulate = {"simulate", "world", "params", "gpu_mem"}
    assert names(training.DDP_OPTIONS) == common | {"bucket_mb"} | simulate
    assert names(training.FSDP_OPTIONS) == common | {"sharding", "wrap", "fsdp_api", "replicas", "prefetch", "tp",
                                                     "sequence_parallel"} | simulate
    assert names(training.COMPARE_OPTIONS) >= common | {"bucket_mb"}
    assert {p.opts[0] for p in training.FSDP_OPTIONS} >= {"--d-model", "--seq-len", "--checkpoint-activations",
                                                           "--fsdp-api", "--batch-size"}


def test_defaults_leave_the_model_to_the_device():
    options = _parse(training.FSDP_OPTIONS, [])
    assert options["model"] is None
    assert options["sharding"] == "full" and options["fsdp_api"] == 2 and options["replicas"] == 2
    training.validate_fsdp(options, 2)


def test_tp_is_checked_against_the_model_of_the_device_the_run_is_placed_on():
    # Without --model a run trains its device's default: small (8 heads) on CPU, base (12 heads) on a GPU.
    options = _parse(training.FSDP_OPTIONS, ["--tp", "3"])
    training.validate_fsdp(options, None)  # before placement the model is not known yet
    training.validate_fsdp(options, 6, "cuda")
    with pytest.raises(click.UsageError, match="must divide the model's 8 heads"):
        training.validate_fsdp(options, 6, "cpu")
    with pytest.raises(click.UsageError, match="must divide the model's 12 heads"):
        training.validate_fsdp(_parse(training.FSDP_OPTIONS, ["--tp", "8"]), 16, "cuda")
    with pytest.raises(click.UsageError, match="must divide the model's 4 heads"):
        training.validate_fsdp(_parse(training.FSDP_OPTIONS, ["--tp", "3", "--model", "tiny"]), None)


def test_only_sequence_parallelism_needs_tp_to_divide_the_sequence():
    odd = ["--model", "tiny", "--tp", "2", "--seq-len", "63"]
    training.validate_fsdp(_parse(training.FSDP_OPTIONS, odd), 4, "cpu")
    with pytest.raises(click.UsageError, match=r"splits the sequence \(63\) over --tp 2"):
        training.validate_fsdp(_parse(training.FSDP_OPTIONS, [*odd, "--sequence-parallel"]), 4, "cpu")


@pytest.mark.parametrize("alias, canonical", [("FULL_SHARD", "full"), ("SHARD_GRAD_OP", "grad-op"),
                                              ("HYBRID_SHARD", "hybrid"), ("grad-op", "grad-op")])
def test_fsdp1_sharding_names_are_accepted(alias, canonical):
    options = _parse(training.FSDP_OPTIONS, ["--sharding", alias])
    assert canonical_sharding(options["sharding"]) == canonical


@pytest.mark.parametrize(
    "validate, args, world_size, message",
    [
        (training.validate_ddp, ["--steps", "0"], 2, "--steps must be at least 5 with --warmup 2"),
        (training.validate_ddp, ["--steps", "5", "--warmup", "3"], 2, "--steps must be at least 6"),
        (training.validate_ddp, [], 1, "at least 2 ranks"),
        (training.validate_ddp, ["--model", "huge"], 2, "choose one of tiny"),
        (training.validate_ddp, ["--arch", "resnet", "--heads", "4"], 2, "heads cannot be set for resnet"),
        (training.validate_ddp, ["--heads", "5", "--model", "tiny"], 2, "not divisible"),
        (training.validate_fsdp, ["--sharding", "hybrid"], 2, "--replicas 2 cannot split 2 ranks"),
        (training.validate_fsdp, ["--sharding", "hybrid", "--replicas", "3"], 4, "divide the world size"),
        (training.validate_fsdp, ["--prefetch", "off"], 2, "--prefetch off needs --fsdp-api 1"),
        (training.validate_ddp, ["--trace", "/no/such/folder/t.json"], 2, "does not exist"),
        (training.validate_ddp, ["--trace", "t.json", "--no-timeline"], 2, "--no-timeline turns off"),
        (training.validate_compare, ["--steps", "2"], 2, "--steps must be at least"),
    ],
)
def test_bad_input_is_a_usage_error_naming_what_is_allowed(validate, args, world_size, message):
    params = {training.validate_ddp: training.DDP_OPTIONS, training.validate_fsdp: training.FSDP_OPTIONS,
              training.validate_compare: training.COMPARE_OPTIONS}[validate]
    options = _parse(params, args)
    with pytest.raises(click.UsageError, match=message):
        validate(options, world_size)


@pytest.mark.parametrize("params, args, message", [
    (training.DDP_OPTIONS, ["--warmup", "0"], "0 is not in the range 1<=x<=10000"),
    (training.DDP_OPTIONS, ["--batch-size", "0"], "0 is not in the range 1<=x<=65536"),
    (training.DDP_OPTIONS, ["--lr", "0"], "0.0 is not in the range x>0"),
    (training.DDP_OPTIONS, ["--bucket-mb", "-1"], "-1.0 is not in the range 0<x<=1048576"),
    (training.DDP_OPTIONS, ["--layers", "0"], "0 is not in the range 1<=x<=1024"),
    (training.FSDP_OPTIONS, ["--replicas", "0"], "0 is not in the range 1<=x<=8192"),
    (training.FSDP_OPTIONS, ["--fsdp-api", "3"], "3 is not in the range 1<=x<=2"),
    # nan passes click's own ranges and 1e400 reads as infinity: neither may reach a rank
    (training.DDP_OPTIONS, ["--lr", "nan"], "'nan' is not a finite number"),
    (training.DDP_OPTIONS, ["--lr", "1e400"], "'1e400' is not a finite number"),
    (training.DDP_OPTIONS, ["--bucket-mb", "1e30"], "is not in the range 0<x<=1048576"),
    (training.DDP_OPTIONS, ["--seed", "-1"], "-1 is not in the range 0<=x<=9223372036854775807"),
    (training.DDP_OPTIONS, ["--steps", "1000000"], "1000000 is not in the range x<=100000"),
    (training.COMPARE_OPTIONS, ["--wrap", "unit"], "'unit' is not one of 'block', 'layer', 'model'"),
])
def test_values_out_of_bounds_are_refused_by_click_while_parsing(params, args, message):
    with pytest.raises(click.BadParameter, match=message):
        _parse(params, args)


@pytest.mark.parametrize("options, message", [
    ({"warmup": 0}, "--warmup must be at least 1, got 0"),
    ({"batch_size": 0}, "--batch-size must be at least 1, got 0"),
    ({"lr": 0.0}, "--lr must be positive, got 0.0"),
    ({"bucket_mb": -1.0}, "--bucket-mb must be positive, got -1.0"),
    ({"lr": float("nan")}, "--lr must be a finite number, got nan"),
    ({"lr": float("inf")}, "--lr must be a finite number, got inf"),
    ({"bucket_mb": 1e30}, "--bucket-mb must be at most 1,048,576, got 1e\\+30"),
    ({"layers": 10**30}, "--layers must be at most 1,024"),
    ({"precision": "fp16"}, "unknown precision 'fp16'; choose one of fp32, bf16-mixed, bf16"),
    ({"steps": 4, "warmup": 3}, "--steps must be at least 6 with --warmup 3"),
    ({"batch": 4}, "unknown option\\(s\\) batch"),
])
def test_options_given_in_code_get_the_same_checks(options, message):
    with pytest.raises(click.UsageError, match=message):
        training.validate_ddp(options, 2)


def test_hybrid_that_splits_is_accepted():
    """2 replicas divide 4 ranks: the check lets the run through, and FSDP shards it over groups of 2;
    the same options on 6 ranks (3 per replica, fine) pass, and on 2 ranks (one per replica) do not."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims

    options = _parse(training.FSDP_OPTIONS, ["--sharding", "hybrid", "--replicas", "2"])
    for world in (4, 6):
        training.validate_fsdp(options, world)
    run = RunSpec.from_options(options, "fsdp")
    four, six = ParallelDims.of(run, 4), ParallelDims.of(run, 6)
    assert (run.sharding, run.replicas, four.fsdp_size, six.fsdp_size) == ("hybrid", 2, 2, 3)
    assert (four.dp_replicate, four.hybrid, four.mesh_shape) == (2, True, {"dp_replicate": 2, "dp_shard": 2})
    for world in (2, 5):
        with pytest.raises(click.UsageError, match=f"--replicas 2 cannot split {world} ranks"):
            training.validate_fsdp(options, world)


def test_unknown_sharding_is_refused_by_click():
    with pytest.raises(click.BadParameter, match="full"):
        _parse(training.FSDP_OPTIONS, ["--sharding", "zero3"])


def test_registry_points_at_these_options_and_hooks():
    for name in ("ddp", "zro", "fsdp", "compare"):
        demo = registry.get(name)
        module, attr = demo.options.split(":")
        assert module == "ddpfsdp.demos.train.options" and hasattr(training, attr)
        assert hasattr(training, demo.validate.split(":")[1])
        assert demo.module.startswith("ddpfsdp.demos.train.demo:")


def test_default_steps_depend_on_the_device_and_cover_the_warmup():
    steps = lambda device, **options: RunSpec.from_options(options, "ddp").resolved(device).steps  # noqa: E731
    assert steps("cpu") == 8
    assert steps("cuda") == 20
    assert steps("cpu", warmup=9) == 12  # 9 warm-up, 1 timed, 2 measured
    assert steps("cpu", steps=5) == 5
    training.validate_ddp(_parse(training.DDP_OPTIONS, ["--warmup", "9"]), 2)


def test_the_launcher_checks_tp_against_the_model_of_its_placement():
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch.launcher import LaunchError, Placement, check_placement

    fsdp = registry.get("fsdp")
    with pytest.raises(LaunchError, match="must divide the model's 12 heads"):
        check_placement(fsdp, RunSpec.for_demo("fsdp", {"tp": 8}), Placement("cuda", 16))
    check_placement(fsdp, RunSpec.for_demo("fsdp", {"tp": 3}), Placement("cuda", 6))
    with pytest.raises(LaunchError, match="must divide the model's 8 heads"):
        check_placement(fsdp, RunSpec.for_demo("fsdp", {"tp": 3}), Placement("cpu", 6))


def test_a_training_demo_and_a_concept_demo_take_the_same_seeds():
    """RunSpec stays click-free, so it states the seed's ceiling itself; it is the concept demos' one."""
    from ddpfsdp.demos.base.bounds import SEED_MAX
    from ddpfsdp.demos.train.spec import MAX_SEED

    assert MAX_SEED == SEED_MAX
