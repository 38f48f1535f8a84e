"""Each of `demo cp`'s own checks (demos/claims/context_parallel.py) passes on numbers that bear its claim
out and fails on numbers that break it. Numbers only: no ranks."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.claims import context_parallel as cc
from ddpfsdp.demos.registry import CONTEXT_PARALLEL_CHECKS
from ddpfsdp.demos.theory.context_parallel import kv_block_bytes, ring_sends


def _probe(error: float = 2e-6, pairs: int = 100) -> cc.SplitProbe:
    return cc.SplitProbe(errors=cc.AttentionErrors(out=error, dq=error, dk=error, dv=error), forward_pairs=pairs,
                         backward_pairs=pairs)


def test_ring_matches_full_attention():
    probes = {"head-tail": [_probe(), _probe()], "contiguous": [_probe(), _probe()]}
    good = cc.ring_matches_full_attention(probes, [6.2, 5.1], [6.2, 5.1 * (1 + 1e-6)], 1e-4)
    assert good.passed and "head-tail 2.0e-06" in good.detail
    wrong_rows = {**probes, "contiguous": [_probe(), _probe(0.3)]}  # one rank's block merged wrong
    assert not cc.ring_matches_full_attention(wrong_rows, [6.2, 5.1], [6.2, 5.1], 1e-4).passed
    assert not cc.ring_matches_full_attention(probes, [6.2, 5.3], [6.2, 5.1], 1e-4).passed  # the model drifts
    assert not cc.ring_matches_full_attention(probes, [], [], 1e-4).passed
    assert not cc.ring_matches_full_attention({}, [6.2], [6.2], 1e-4).passed


def _theory(cp: int = 4, layers: int = 2, recompute: bool = False) -> dict:
    block = kv_block_bytes(2, 64, cp, 32, 4)
    return {**ring_sends(cp, block, block, recompute=recompute), "layers": layers, "cp": cp}


def _sends(theory: dict, **changed: float) -> cc.RankSends:
    sends = cc.RankSends(**{key: float(theory[key]) for key in (*cc.SEND_KEYS, "bytes")})
    sends.update(changed)
    return sends


def test_ring_kv_sends_match_theory():
    theory = _theory()
    assert (theory["forward_kv_blocks"], theory["backward_kv_blocks"], theory["backward_dkv_blocks"]) == (3, 3, 4)
    per_step = theory["bytes"] * theory["layers"]
    good = cc.ring_kv_sends_match_theory([_sends(theory)] * 4, theory, [per_step] * 4)
    assert good.passed, good.detail
    # a rank that sends its block home once more forward, as Liu et al.'s JAX code does
    extra = _sends(theory, forward_kv_blocks=4, forward_bytes=theory["forward_bytes"] * 4 / 3)
    assert not cc.ring_kv_sends_match_theory([_sends(theory), extra], theory, [per_step] * 2).passed
    # dK/dV sent in bf16 rather than fp32: the backward's bytes fall short
    short = _sends(theory, backward_bytes=theory["backward_bytes"] - 4 * theory["backward_dkv_blocks"])
    assert not cc.ring_kv_sends_match_theory([short], theory, [per_step]).passed
    # the counter saw other bytes than the ring handed over
    assert not cc.ring_kv_sends_match_theory([_sends(theory)], theory, [per_step / 2]).passed
    assert not cc.ring_kv_sends_match_theory([], theory, []).passed


def test_ring_kv_sends_with_the_forward_recomputed():
    theory = _theory(cp=2, recompute=True)
    assert theory["forward_kv_blocks"] == 2
    assert cc.ring_kv_sends_match_theory([_sends(theory)], theory, [theory["bytes"] * 2]).passed
    assert not cc.ring_kv_sends_match_theory([_sends(theory, forward_kv_blocks=1)], theory,
                                             [theory["bytes"] * 2]).passed


def test_cp_activations_fall_as_1_over_cp():
    assert cc.cp_activations_fall_as_1_over_cp([1_050_000, 1_050_000], 2_100_000, 2).passed
    assert cc.cp_activations_fall_as_1_over_cp([525_000] * 4, 2_100_000, 4).passed
    # a ring that keeps copies of K and V beside the views attention keeps: 0.53 of the whole
    assert not cc.cp_activations_fall_as_1_over_cp([1_113_000, 1_113_000], 2_100_000, 2).passed
    # nothing split: every rank saves the whole sequence's
    assert not cc.cp_activations_fall_as_1_over_cp([2_100_000, 2_100_000], 2_100_000, 2).passed
    assert not cc.cp_activations_fall_as_1_over_cp([None, 1_050_000], 2_100_000, 2).passed
    assert not cc.cp_activations_fall_as_1_over_cp([], 2_100_000, 2).passed


def _pairs(cp: int, chunk: int, balanced: bool) -> list[int]:
    """Query-key pairs each rank scores (per batch x head), counted as the ring counts them."""
    if balanced:
        return [(2 * cp - 1) * chunk * chunk + chunk * (chunk + 1) for _ in range(cp)]
    return [r * chunk * chunk + chunk * (chunk + 1) // 2 for r in range(cp)]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_the_split_checks_on_counts_the_ring_makes(cp):
    contiguous = cc.contiguous_split_busiest_rank_matches_theory(_pairs(cp, 32, False), cp, 32)
    balanced = cc.head_tail_split_evens_compute(_pairs(cp, 16, True), cp, 16)
    assert contiguous.passed, contiguous.detail
    assert balanced.passed, balanced.detail


def test_contiguous_split_check_fails_on_an_even_or_misplaced_load():
    assert not cc.contiguous_split_busiest_rank_matches_theory([100, 100], 2, 32).passed  # no imbalance at all
    assert not cc.contiguous_split_busiest_rank_matches_theory(list(reversed(_pairs(2, 32, False))), 2, 32).passed
    assert not cc.contiguous_split_busiest_rank_matches_theory(_pairs(4, 32, False)[:3], 4, 32).passed
    # half the diagonal counted as a full block: the busiest share drifts beyond 1/n
    skewed = [r * 32 * 32 + 32 * 32 for r in range(2)]
    assert not cc.contiguous_split_busiest_rank_matches_theory(skewed, 2, 32).passed


def test_head_tail_check_fails_on_an_uneven_load():
    assert not cc.head_tail_split_evens_compute(_pairs(2, 32, False), 2, 32).passed
    assert not cc.head_tail_split_evens_compute([100, 100, 100], 4, 16).passed
    assert not cc.head_tail_split_evens_compute([0, 0], 2, 16).passed


def test_cp_gradients_reduced_across_cp():
    assert cc.cp_gradients_reduced_across_cp([7e-7] * 4, [4], 2, 2, cc.grad_rtol("fp32")).passed
    assert cc.cp_gradients_reduced_across_cp([1.7e-2] * 2, [2], 1, 2, cc.grad_rtol("bf16-mixed")).passed
    # reduced over dp only: each cp rank keeps its own tokens' gradient, 0.72 off on the tiny GPT
    assert not cc.cp_gradients_reduced_across_cp([0.72] * 4, [2], 2, 2, cc.grad_rtol("fp32")).passed
    assert not cc.cp_gradients_reduced_across_cp([7e-7] * 4, [2], 2, 2, cc.grad_rtol("fp32")).passed
    assert not cc.cp_gradients_reduced_across_cp([0.72] * 4, [4], 2, 2, cc.grad_rtol("fp32")).passed
    assert not cc.cp_gradients_reduced_across_cp([], [4], 2, 2, cc.grad_rtol("fp32")).passed


def test_every_check_here_is_the_registrys():
    names = {name for name in dir(cc) if name in CONTEXT_PARALLEL_CHECKS}
    assert names == {"ring_matches_full_attention", "ring_kv_sends_match_theory", "cp_activations_fall_as_1_over_cp",
                     "contiguous_split_busiest_rank_matches_theory", "head_tail_split_evens_compute",
                     "cp_gradients_reduced_across_cp"}
