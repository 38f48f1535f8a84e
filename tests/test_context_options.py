"""`demo cp`'s command line: what it is asked is refused before any rank starts when the ring cannot run
it, with a message that says what to change (and never a traceback)."""

from __future__ import annotations

import click
import pytest
from conftest import run_cli

from ddpfsdp.demos.launch.sharing import refusal
from ddpfsdp.demos.train import options
from ddpfsdp.demos.train.spec import RunSpec

CASES = [
    (["--procs", "3"], "--cp 2 must divide the world of 3 ranks"),
    (["--cp", "3", "--procs", "4", "--model", "tiny", "--seq-len", "48"], "must divide the world of 4 ranks"),
    (["--model", "tiny", "--seq-len", "62"], "or --cp-split contiguous"),
    (["--model", "tiny", "--seq-len", "63", "--cp-split", "contiguous"], "not a multiple of 2"),
    (["--model", "tiny", "--cp", "64", "--procs", "64"], "2·cp = 128 equal chunks"),
    (["--arch", "vit"], "causal decoder's sequence"),
    (["--arch", "resnet", "--model", "tiny"], "causal decoder's sequence"),
    (["--compile"], "--compile is not combined with --cp"),
    (["--tp", "2"], "--tp is not an option of `ddpfsdp demo cp`"),
    (["--sharding", "grad-op"], "--sharding"),
    (["--cp", "1"], "--cp"),
    (["--cp-split", "striped"], "--cp-split"),
    (["--simulate", "--world", "6", "--cp", "4", "--model", "tiny"], "--cp 4 must divide the world of 6 ranks"),
    (["--simulate", "--world", "8", "--seq-len", "12", "--cp", "4"], "not a multiple of 8"),
]


@pytest.mark.parametrize("args,said", CASES, ids=[" ".join(args) for args, _ in CASES])
def test_refused_before_launch(args, said):
    outcome = run_cli("demo", "cp", *args)
    assert outcome.exception is None, outcome.exception
    assert outcome.exit_code == 2, outcome.stdout + outcome.stderr
    assert said in outcome.stderr, outcome.stderr
    assert "starting ranks" not in outcome.stdout + outcome.stderr


def test_validate_with_and_without_a_placement():
    spec = RunSpec.for_demo("cp", {"model": "tiny"})
    options.validate_cp(spec)  # before placement: the world is not known yet
    options.validate_cp(spec, 2, "cpu")
    options.validate_cp(spec, 6, "cpu")  # dp 3 x cp 2
    with pytest.raises(click.UsageError, match="try --procs 2 or 4"):
        options.validate_cp(spec, 5, "cpu")
    # the device's default model is checked once the run is placed: small's 128 tokens split 4 ways at cp 2
    options.validate_cp(RunSpec.for_demo("cp", {}), 4, "cpu")


def test_ranks_sharing_a_gpu_are_refused_with_the_cpu_command():
    message = refusal("cp", ranks_per_gpu=2, world_size=4)
    assert "batch_isend_irecv" in message and message.endswith("ddpfsdp demo cp --procs 4")
    assert refusal("cp", ranks_per_gpu=1, world_size=4) is None


def test_the_guard_estimates_activations_at_s_over_cp():
    from ddpfsdp.demos.launch.guard import estimate_rank_bytes

    cp = estimate_rank_bytes("cp", {"model": "small"}, device="cpu", world_size=4)
    fsdp = estimate_rank_bytes("fsdp", {"model": "small"}, device="cpu", world_size=4)
    assert cp["parts"]["model_state"] == fsdp["parts"]["model_state"]  # FSDP over dp x cp = every rank
    assert cp["parts"]["activations"] < 0.75 * fsdp["parts"]["activations"]
