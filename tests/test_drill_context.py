"""The context-parallel drill (quiz/drill_context.py): every answer worked out again by hand, from the rules
as torch 2.13's ring attention, Liu et al. (2023) and the causal block count state them, not from the
analytic model."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from ddpfsdp.quiz import drill as drills


def _activation_peak(args: dict) -> int:
    """Pure bf16 (r = c = 2) at t = S/cp tokens: a block saves t·d·(2r + 14c); checkpointed, only its input t·d·r.
    The head keeps t·d·(r + c) and the bf16 log-softmax t·vocab·2. Early in backward add the larger of the model's
    own (the log-softmax's gradient, or checkpointed the recomputed block if larger) and the last layer's ring
    buffers: 3 bf16 K/V blocks (2 at cp 2) of 2·t·d·2 and 3 fp32 dK/dV blocks of 2·t·d·4, beside the recomputed
    block when checkpointed."""
    cp = args["cp"]
    t, d, vocab, layers = args["seq_len"] // cp, args["d_model"], args["vocab"], args["layers"]
    block = t * d * (2 * 2 + 14 * 2)
    log_softmax = t * vocab * 2
    head = t * d * 4 + log_softmax
    ring = (2 if cp == 2 else 3) * 2 * t * d * 2 + 3 * 2 * t * d * 4
    if args["checkpoint_activations"]:
        return layers * t * d * 2 + head + max(log_softmax, block, block + ring)
    return layers * block + head + max(log_softmax, ring)


def context_by_hand(fn: str, args: dict) -> float:
    if fn == "cp_ring_bytes_per_step":
        cp, t = args["cp"], args["seq_len"] // args["cp"]
        block = 2 * args["batch_size"] * t * args["kv_dim"] * 2  # K and V in bf16
        grad = 2 * block  # dK and dV in fp32
        forward = (cp - 1) * block * (2 if args["recompute"] else 1)
        return args["layers"] * (forward + (cp - 1) * block + cp * grad)
    if fn == "cp_slowest_share":
        cp = args["cp"]
        return 1 / cp if args["balanced"] else (2 * cp - 1) / cp**2
    if fn == "cp_min_tokens_per_rank":
        # 4·n²·d·f / F >= 2·n·kv·2 / B with kv = d: n >= F / (f·B), f = 1/2 causal.
        half = Fraction(1, 2) if args["causal"] else 1
        return args["peak_flops_per_s"] / float(half) / args["bytes_per_s"]
    if fn == "cp_activation_bytes":
        return _activation_peak(args)
    raise AssertionError(f"no hand computation for {fn}")


def test_every_context_problem_over_100_seeds_agrees_with_the_hand_computation():
    seen = set()
    for seed in range(100):
        for problem in drills.generate(seed, 6, ["context-parallel"]):
            assert problem.topic == "context-parallel"
            assert problem.answer == pytest.approx(context_by_hand(problem.fn, problem.args), rel=1e-12), (seed, problem.prompt)
            assert problem.answer_text in problem.working, (seed, problem.working)
            seen.add(problem.fn)
    assert seen == {"cp_ring_bytes_per_step", "cp_slowest_share", "cp_min_tokens_per_rank", "cp_activation_bytes"}


def test_hand_examples():
    # cp 4 contiguous: the last rank does 7/16 of the causal work; balanced 1/4.
    assert drills.compute("cp_slowest_share", {"cp": 4, "balanced": False}) == 7 / 16
    assert drills.compute("cp_slowest_share", {"cp": 4, "balanced": True}) == 1 / 4
    # H100 (989 TFLOP/s) over 400 Gb/s InfiniBand (50 GB/s): 19,780 tokens per rank, 39,560 causal.
    args = {"d_model": 4096, "kv_dim": 4096, "precision": "bf16", "peak_flops_per_s": 989e12, "bytes_per_s": 50e9}
    assert drills.compute("cp_min_tokens_per_rank", {**args, "causal": False}) == pytest.approx(19_780)
    assert drills.compute("cp_min_tokens_per_rank", {**args, "causal": True}) == pytest.approx(39_560)


def test_a_broken_context_problem_fails_the_recomputation():
    for problem in drills.generate(5, 12, ["context-parallel"]):
        expected = context_by_hand(problem.fn, problem.args)
        assert replace(problem, answer=problem.answer * 1.5).answer != pytest.approx(expected, rel=1e-9)
    ring = next(p for p in drills.generate(2, 30, ["context-parallel"]) if p.fn == "cp_ring_bytes_per_step")
    doubled = {**ring.args, "layers": 2 * ring.args["layers"]}
    assert context_by_hand(ring.fn, doubled) == pytest.approx(2 * ring.answer)
