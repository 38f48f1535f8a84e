"""The launch guard: both verdicts on fake availability, a suggestion that really fits, and runs it
cannot size let through."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.launch import guard

GIB = 2**30


def options(**changes):
    base = dict(
        arch="gpt", model="xl", layers=None, d_model=None, heads=None, seq_len=None, batch_size=16,
        steps=10, warmup=2, precision="fp32", optimizer="adamw", lr=1e-3, seed=0,
        checkpoint_activations=False, sharding="full", wrap="block", fsdp_api=2, replicas=2, bucket_mb=25,
    )
    return base | changes


def test_fits_when_the_device_has_room():
    verdict = guard.check_launch("fsdp", options(model="tiny", batch_size=4), Placement("cuda", 2),
                                 force=False, available_bytes=80 * GIB)
    assert verdict.fits and verdict.proceed
    assert verdict.available_bytes == 80 * GIB
    assert 0 < verdict.estimate_bytes < 2 * GIB
    assert "fits" in verdict.message
    assert verdict.suggestion is None


def test_refuses_when_it_does_not_fit_and_suggests_what_would():
    verdict = guard.check_launch("ddp", options(), Placement("cuda", 2), force=False, available_bytes=40 * GIB)
    assert not verdict.fits and not verdict.proceed
    assert verdict.estimate_bytes > 40 * GIB
    assert "will not fit" in verdict.message and "40.00 GiB" in verdict.message
    assert "--force" in verdict.message
    assert verdict.suggestion and verdict.suggestion in verdict.message
    assert verdict.suggestion.startswith("ddpfsdp demo fsdp")
    assert "--sharding full" in verdict.suggestion


def test_the_suggestion_fits_when_checked_again():
    verdict = guard.check_launch("ddp", options(), Placement("cuda", 2), force=False, available_bytes=40 * GIB)
    words = verdict.suggestion.split()[2:]
    demo, flags = words[0], words[1:]
    changed, index = {}, 0
    while index < len(flags):
        key = flags[index][2:].replace("-", "_")
        if index + 1 < len(flags) and not flags[index + 1].startswith("--"):
            changed[key] = flags[index + 1]
            index += 2
        else:
            changed[key] = True
            index += 1
    if "batch_size" in changed:
        changed["batch_size"] = int(changed["batch_size"])
    again = guard.check_launch(demo, options(**changed), Placement("cuda", 2), force=False,
                               available_bytes=40 * GIB)
    assert again.fits, again.message


def test_force_overrides_but_keeps_the_truth():
    verdict = guard.check_launch("ddp", options(), Placement("cuda", 2), force=True, available_bytes=4 * GIB)
    assert not verdict.fits
    assert verdict.proceed
    assert "--force" in verdict.message


def test_the_margin_is_kept_back():
    estimate = guard.check_launch("fsdp", options(model="base", batch_size=2), Placement("cuda", 2),
                                  force=False, available_bytes=80 * GIB).estimate_bytes
    just_enough = int(estimate / (1 - guard.SAFETY_MARGIN)) + 1
    tight = guard.check_launch("fsdp", options(model="base", batch_size=2), Placement("cuda", 2),
                               force=False, available_bytes=just_enough)
    squeezed = guard.check_launch("fsdp", options(model="base", batch_size=2), Placement("cuda", 2),
                                  force=False, available_bytes=estimate)
    assert tight.fits and not squeezed.fits


def test_sharding_lowers_the_estimate():
    per = lambda demo, **kw: guard.estimate_rank_bytes(demo, options(model="large", **kw), device="cuda", world_size=8)  # noqa: E731
    ddp = per("ddp")["parts"]["model_state"]
    full = per("fsdp", sharding="full")["parts"]["model_state"]
    assert full == pytest.approx(ddp / 8, rel=0.01)
    compare = per("compare")
    assert compare["strategy"] == "ddp"  # the heaviest of the four it trains


def test_cpu_ram_is_shared_by_the_processes(monkeypatch):
    from ddpfsdp.demos.base import host

    monkeypatch.setattr(host, "ram_bytes", lambda: (64 * GIB, 8 * GIB))
    assert guard.available_rank_bytes("cpu", 4) == 2 * GIB
    small = guard.check_launch("fsdp", options(model="tiny", batch_size=4), Placement("cpu", 4), force=False)
    assert small.fits and small.available_bytes == 2 * GIB
    big = guard.check_launch("ddp", options(model="large", batch_size=8), Placement("cpu", 4), force=False)
    assert not big.fits
    # More CPU processes never help (they share the RAM), so the advice must not be "--procs".
    assert big.suggestion is None or "--procs" not in big.suggestion


def test_more_gpus_are_suggested_when_nothing_else_is_enough():
    verdict = guard.check_launch("fsdp", options(model="xl", batch_size=1, checkpoint_activations=True),
                                 Placement("cuda", 2), force=False, available_bytes=11 * GIB)
    assert not verdict.fits
    assert verdict.suggestion and "--gpus" in verdict.suggestion


def test_unknown_availability_lets_the_run_go(monkeypatch):
    monkeypatch.setattr(guard, "available_rank_bytes", lambda device, world_size: None)
    verdict = guard.check_launch("ddp", options(), Placement("cuda", 2), force=False)
    assert verdict.fits and verdict.available_bytes is None
    assert "unknown" in verdict.message


def test_what_cannot_be_sized_is_let_through():
    verdict = guard.check_launch("ddp", options(arch="mamba"), Placement("cuda", 2), force=False,
                                 available_bytes=GIB)
    assert verdict.fits and verdict.estimate_bytes is None
    assert "cannot estimate" in verdict.message


def test_concept_demos_are_not_checked():
    verdict = guard.check_launch("sampler", {}, Placement("cpu", 2), force=False, available_bytes=1)
    assert verdict.fits and verdict.estimate_bytes is None


def test_default_model_depends_on_the_device():
    on_cpu = guard.estimate_rank_bytes("ddp", options(model=None), device="cpu", world_size=2)
    on_gpu = guard.estimate_rank_bytes("ddp", options(model=None), device="cuda", world_size=2)
    assert on_cpu["model"] == "small" and on_gpu["model"] == "base"


def test_fewer_cpu_processes_are_suggested_before_a_smaller_model():
    # 9.6 GiB of RAM: 2.4 GiB for each of 4 processes is too little for large sharded 4 ways,
    # while 4.8 GiB for each of 2 is enough for it sharded 2 ways.
    verdict = guard.check_launch("fsdp", options(model="large", batch_size=1, checkpoint_activations=True),
                                 Placement("cpu", 4), force=False, available_bytes=int(2.4 * GIB))
    assert not verdict.fits
    assert verdict.suggestion.endswith("--procs 2")
    assert "--model large" in verdict.suggestion


def test_on_cpu_the_same_demo_on_fewer_processes_is_suggested_first():
    # DDP's estimate per rank does not depend on the world size; the host's RAM is shared, so each
    # of 16 processes gets 4 times what each of 64 gets, and 32 still get too little.
    run = options(model="small", batch_size=8)
    per_rank = guard.estimate_rank_bytes("ddp", run, device="cpu", world_size=64)["total_bytes"]
    available = int(per_rank / (1 - guard.SAFETY_MARGIN) / 3)  # per rank, at 64 processes
    verdict = guard.check_launch("ddp", run, Placement("cpu", 64), force=False, available_bytes=available)
    assert not verdict.fits
    assert verdict.suggestion == "ddpfsdp demo ddp --model small --batch-size 8 --steps 10 --procs 16"
    # None fits: another strategy is suggested.
    none = guard.check_launch("ddp", run, Placement("cpu", 4), force=False, available_bytes=available // 8)
    assert none.suggestion is None or not none.suggestion.startswith("ddpfsdp demo ddp ")


@pytest.mark.parametrize(("arch", "model"), [("vit", "large"), ("resnet", "34")])
def test_vision_models_are_sized_too(arch, model):
    from ddpfsdp.demos.base import shapes

    if arch not in getattr(shapes, "PRESETS", {}):
        pytest.skip(f"no {arch} presets")
    estimate = guard.estimate_rank_bytes("ddp", options(arch=arch, model=model, batch_size=32), device="cuda", world_size=2)
    assert estimate["params"] == shapes.model_params(arch, model)
    assert estimate["parts"]["activations"] > 0
    refused = guard.check_launch("ddp", options(arch=arch, model=model, batch_size=32), Placement("cuda", 2),
                                 force=False, available_bytes=estimate["total_bytes"] // 2)
    assert not refused.fits and refused.suggestion


def test_cpu_processes_together_must_fit_the_host_ram(monkeypatch):
    # Each DDP rank of the small model needs under 1 GiB, far below the host's 4 GiB; eight of them
    # together need about 7 GiB, so the run is refused before launch, with the sum in the message.
    from ddpfsdp.demos.base import host

    monkeypatch.setattr(host, "ram_bytes", lambda: (64 * GIB, 4 * GIB))
    run = options(model="small", batch_size=8)
    per_rank = guard.estimate_rank_bytes("ddp", run, device="cpu", world_size=8)["total_bytes"]
    assert per_rank < GIB < 8 * per_rank
    few = guard.check_launch("ddp", run, Placement("cpu", 2), force=False)
    assert few.fits
    many = guard.check_launch("ddp", run, Placement("cpu", 8), force=False)
    assert not many.fits and not many.proceed
    assert many.estimate_bytes == per_rank and many.available_bytes == 4 * GIB // 8
    together = guard.format_bytes(8 * per_rank, "GiB")
    assert f"8 processes x {guard.format_bytes(per_rank, 'GiB')} = {together} together" in many.message
    assert "4.00 GiB of available host RAM" in many.message
    assert "will not fit" in many.message and "--force" in many.message


def _as_typed(suggestion: str) -> tuple[str, dict, int | None]:
    """A suggested command read as the CLI reads it: (demo, its parsed options, --gpus or None)."""
    import click

    from ddpfsdp.demos.train import options as training

    words = suggestion.split()
    assert words[:2] == ["ddpfsdp", "demo"], suggestion
    demo, flags, gpus = words[2], words[3:], None
    if "--gpus" in flags:
        at = flags.index("--gpus")
        gpus, flags = int(flags[at + 1]), flags[:at] + flags[at + 2:]
    params = {"ddp": training.DDP_OPTIONS, "fsdp": training.FSDP_OPTIONS}[demo]
    command = click.Command(demo, params=list(params), callback=lambda **kw: kw)
    return demo, command.main(flags, standalone_mode=False), gpus


def test_a_tp_run_is_sized_as_one_tp_rank_of_the_2d_mesh():
    # base (12 layers, d 768, vocab 24,576, seq 1,024) on dp 2 x tp 2: TP rank 0 holds half of each
    # split tensor (vocabulary rows, qkv and MLP outputs, row-wise inputs), FSDP then halves its rows:
    # embeddings 6,144 x 768 + 512 x 768, each block 1,773,120, the head's LayerNorm 768 and its
    # 6,144 x 768 rows: 31,108,608 parameters at 16 bytes each (fp32 weights and grads, AdamW's two).
    two_d = guard.estimate_rank_bytes("fsdp", options(model="base", batch_size=4, tp=2), device="cuda", world_size=4)
    plain = guard.estimate_rank_bytes("fsdp", options(model="base", batch_size=4), device="cuda", world_size=4)
    assert two_d["strategy"] == "2d"
    assert two_d["parts"]["model_state"] == 31_108_608 * 16
    # Each TP rank computes half the heads and half the MLP on the same batch.
    assert two_d["parts"]["activations"] < 0.7 * plain["parts"]["activations"]


def test_a_suggestion_keeps_what_was_given_and_the_demo_accepts_it():
    from ddpfsdp.demos.train.options import validate

    given = options(model="xl", batch_size=16, tp=2, precision="bf16-mixed", timeline=False, sequence_parallel=False)
    verdict = guard.check_launch("fsdp", given, Placement("cuda", 4), force=False, available_bytes=8 * GIB)
    assert not verdict.fits and verdict.suggestion
    demo, typed, gpus = _as_typed(verdict.suggestion)
    assert (typed["model"], typed["tp"], typed["precision"], typed["timeline"]) == ("xl", 2, "bf16-mixed", False)
    assert not typed["checkpoint_activations"]  # the 2-D demo refuses it
    validate(demo, typed, gpus or 4, "cuda")
    again = guard.check_launch(demo, typed, Placement("cuda", gpus or 4), force=False, available_bytes=8 * GIB)
    assert again.fits, again.message


@pytest.mark.parametrize(("demo", "sharding", "cast"), [("ddp", "full", "autocast"), ("zro", "full", "autocast"),
                                                        ("fsdp", "full", "param-dtype"),
                                                        ("fsdp", "grad-op", "param-dtype")])
@pytest.mark.parametrize("arch", ["gpt", "vit"])
def test_activations_follow_how_the_strategy_applies_bf16_mixed(demo, sharding, cast, arch):
    """Under bf16-mixed DDP's autocast keeps the residual stream in fp32, FSDP2's param_dtype casts it to
    bf16: the guard sizes each run's activations as the analytic model does for that strategy."""
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.theory.activations import model_activation_bytes

    spec = options(arch=arch, model="large", batch_size=8, precision="bf16-mixed", sharding=sharding)
    estimate = guard.estimate_rank_bytes(demo, spec, device="cuda", world_size=2)
    expected = model_activation_bytes(arch, shape_for(arch, "large"), 8, False, "bf16-mixed", cast=cast)
    assert estimate["parts"]["activations"] == expected
    fp32_residual = model_activation_bytes(arch, shape_for(arch, "large"), 8, False, "bf16-mixed")
    assert (expected < fp32_residual) == (cast == "param-dtype")
