"""compare's claim that FSDP shards the model state but not the activations, fed numbers that break it."""

from __future__ import annotations

from ddpfsdp.demos.claims import training as claims


def _rank(activations: int | None, peak: int) -> dict:
    breakdown = {"params": 1_000} if activations is None else {"params": 1_000, "activations": activations}
    return {"peak": peak, "peak_breakdown": breakdown}


# What `demo compare --model tiny` measured on 2 gloo ranks (torch 2.13, fp32): DDP's peak holds
# 9,247,752 bytes of activations, FSDP full's 8,459,272 of its 16,984,832-byte peak.
DDP = [_rank(9_247_752, 25_242_872)] * 2
FULL = [_rank(8_459_272, 16_984_832)] * 2


def test_activations_held_whole_pass():
    check = claims.fsdp_leaves_activations_whole(DDP, FULL)
    assert check.passed, check.detail
    assert "0.91, 0.91" in check.detail and "50%" in check.detail


def test_activations_sharded_like_the_model_state_fail():
    sharded = [_rank(9_247_752 // 2, 12_000_000)] * 2
    check = claims.fsdp_leaves_activations_whole(DDP, sharded)
    assert not check.passed, check.detail


def test_just_below_the_midpoint_of_sharded_and_whole_fails():
    # On 2 ranks the midpoint of 1/2 and 1 is 0.75.
    assert not claims.fsdp_leaves_activations_whole(DDP, [_rank(int(9_247_752 * 0.74), 16_000_000)] * 2).passed
    assert claims.fsdp_leaves_activations_whole(DDP, [_rank(int(9_247_752 * 0.76), 16_000_000)] * 2).passed


def test_one_rank_off_fails():
    check = claims.fsdp_leaves_activations_whole(DDP, [FULL[0], _rank(1_000_000, 10_000_000)])
    assert not check.passed


def test_missing_activation_figures_fail_and_say_so():
    check = claims.fsdp_leaves_activations_whole(DDP, [_rank(None, 16_000_000)] * 2)
    assert not check.passed and "n/a" in check.detail
    assert not claims.fsdp_leaves_activations_whole([_rank(0, 1)] * 2, FULL).passed


def test_one_rank_proves_nothing():
    assert not claims.fsdp_leaves_activations_whole(DDP[:1], FULL[:1]).passed


def test_left_out_under_bf16_mixed_only():
    assert claims.activations_comparable("fp32") and claims.activations_comparable("bf16")
    assert not claims.activations_comparable("bf16-mixed")
