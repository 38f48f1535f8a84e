"""The context-parallel drill: the ring's bytes per step, the causal split's balance, when the ring hides
its transfer, and activations per GPU at a CP degree.

Each problem is drawn from a seeded generator and answered by the analytic model's context-parallel
functions (`demos.theory.context_parallel.QUIZ_FUNCTIONS`); nothing here types in a number. `quiz.drill`
registers `context_parallel_problem` as a kind, with the same return shape as its own kinds.

No torch or textual here.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from ddpfsdp.demos.theory import presets
from ddpfsdp.demos.theory.context_parallel import (
    GRAD_ELEMENT_BYTES,
    activation_bytes,
    kv_block_bytes,
    ring_sends,
)
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.quiz.drill_pipeline import shown

Problem = tuple[str, str, dict[str, Any], str, float, Callable[[float], str]]

SEQ_LENS = (32768, 65536, 131072, 262144)
CP_DEGREES = (2, 4, 8, 16)
KV_HEADS_SHARE = {1: "full multi-head attention (K/V as wide as d)", 4: "grouped-query attention with a quarter as "
                  "many K/V heads as query heads (K/V d/4 wide)", 8: "grouped-query attention with 1 K/V head per 8 "
                  "query heads (K/V d/8 wide)"}
RING_RULES = (
    "torch's ring attention: forward, each rank passes its K/V block (2·b·(S/cp)·kv_dim elements) on cp-1 times; "
    "backward, it passes the K/V blocks cp-1 times again and a dK/dV accumulator cp times (the last hop brings each "
    "block's gradient home), in fp32 (4 bytes)."
)


def _gb(value: float) -> str:
    return f"{shown(value / 1e9)} GB"


def ring_bytes_problem(rng: random.Random) -> Problem:
    model = rng.choice(list(presets.MODELS.values()))
    seq, cp = rng.choice(SEQ_LENS), rng.choice(CP_DEGREES)
    share = rng.choice((1, 1, 4, 8))
    precision = rng.choice(("bf16-mixed", "bf16"))
    recompute = rng.random() < 0.3
    kv = model.d_model // share
    args = {"layers": model.layers, "batch_size": 1, "seq_len": seq, "cp": cp, "kv_dim": kv, "precision": precision,
            "recompute": recompute}
    prompt = (
        f"A decoder shaped like **{model.name}** ({model.layers} layers, d = {model.d_model}, {KV_HEADS_SHARE[share]}) "
        f"trains on one sequence of **S = {seq:,} tokens** split over **cp = {cp}** ranks with ring attention, "
        f"activations in bf16 (2 bytes)"
        + (", every block checkpointed (so backward recomputes the forward, ring included)" if recompute else "")
        + f".\n\n{RING_RULES}\n\nHow many bytes does **each rank send on the ring per training step**, all layers? "
        "Answer in GB."
    )

    def working(answer: float) -> str:
        block = kv_block_bytes(1, seq, cp, kv, precision_for(precision).compute_bytes)
        grad = kv_block_bytes(1, seq, cp, kv, GRAD_ELEMENT_BYTES)
        sends = ring_sends(cp, block, grad, recompute=recompute)
        forward = f"{sends['forward_kv_blocks']}" + (f" (= 2 x {cp - 1}, recomputed)" if recompute else "")
        return (f"K/V block = 2·{seq // cp:,}·{kv}·2 = {_gb(block)}; dK/dV block in fp32 {_gb(grad)}. Per layer: "
                f"forward {forward} x {_gb(block)} + backward {cp - 1} x {_gb(block)} + {cp} x {_gb(grad)} = "
                f"{_gb(sends['bytes'])}; x {model.layers} layers = {_gb(answer)}.")

    return prompt, "cp_ring_bytes_per_step", args, "GB", 0.05, working


def balance_problem(rng: random.Random) -> Problem:
    cp = rng.choice((2, 3, 4, 6, 8, 16, 32))
    balanced = rng.random() < 0.3
    args = {"cp": cp, "balanced": balanced}
    split = (f"the **head-tail** split (the sequence cut into 2·cp = {2 * cp} chunks; rank r holds chunk r and chunk "
             f"{2 * cp - 1}-r)" if balanced else
             f"the **contiguous** split (rank r holds the r-th of {cp} consecutive chunks)")
    prompt = (
        f"Causal self-attention over one long sequence runs with ring attention on **cp = {cp}** ranks, using "
        f"{split}. Count the work in blocks of one chunk's queries against one chunk's keys, a diagonal block as "
        "half (the causal mask skips the rest).\n\n"
        "What **share of all the attention work** does the **busiest rank** do? Answer as a fraction, such as 0.25."
    )

    def working(answer: float) -> str:
        if balanced:
            return (f"Chunk c of n = {2 * cp} costs c + 1/2 blocks, n²/2 = {2 * cp * cp} in all; rank r does (r + 1/2) + "
                    f"({2 * cp - 1} - r + 1/2) = {2 * cp}: every rank {2 * cp}/{2 * cp * cp} = 1/{cp} = {shown(answer)}.")
        return (f"Chunk c of n = {cp} costs c + 1/2 blocks, n²/2 = {shown(cp * cp / 2)} in all; the last rank does "
                f"{cp} - 1/2 = {shown(cp - 0.5)}: (2cp-1)/cp² = {2 * cp - 1}/{cp * cp} = {shown(answer)}, against 1/{cp} "
                f"balanced, so the step takes {shown((2 * cp - 1) / cp)}x as long.")

    return prompt, "cp_slowest_share", args, "x", 0.02, working


def hides_problem(rng: random.Random) -> Problem:
    gpu = rng.choice([g for g in presets.GPUS.values() if g.name != "L4-24GB"])
    link = rng.choice(list(presets.LINKS.values()))
    model = rng.choice(list(presets.MODELS.values()))
    causal = rng.random() < 0.7
    args = {"d_model": model.d_model, "kv_dim": model.d_model, "precision": "bf16-mixed",
            "peak_flops_per_s": gpu.bf16_flops_per_s, "bytes_per_s": link.bytes_per_s, "causal": causal}
    prompt = (
        f"Ring attention over **{link.name}** ({link.bytes_per_s / 1e9:g} GB/s per GPU each way) on **{gpu.name}** "
        f"GPUs ({gpu.bf16_flops_per_s / 1e12:g} TFLOP/s dense bf16), a decoder of width d = {model.d_model} with full "
        f"multi-head attention, K/V in bf16, {'a causal mask balanced by the head-tail split' if causal else 'no mask'}"
        ".\n\nOne ring step computes one query block of n tokens against one K/V block: 4·n²·d FLOPs "
        f"(QK^T and PV){', half of them under the balanced causal mask' if causal else ''}; meanwhile it sends the "
        "next K/V block, 2·n·d·2 bytes. At the GPU's peak and the link's full bandwidth, what is the **fewest tokens "
        "per rank** n at which the forward's compute hides the transfer?"
    )

    def working(answer: float) -> str:
        f = "1/2" if causal else "1"
        return (f"4·n²·d·{f} / F >= 2·n·d·2 / B  <=>  n >= 2·2·F / (4·{f}·B) = "
                f"{'2' if causal else '1'} x {gpu.bf16_flops_per_s:.4g} / {link.bytes_per_s:.4g} = {shown(answer)} "
                "tokens (Liu et al.'s block size F/B, doubled by the causal half).")

    return prompt, "cp_min_tokens_per_rank", args, "", 0.05, working


def activation_problem(rng: random.Random) -> Problem:
    model = rng.choice([m for m in presets.MODELS.values() if m.params <= 13 * 10**9])
    seq, cp = rng.choice(SEQ_LENS[:3]), rng.choice((2, 4, 8))
    checkpoint = rng.random() < 0.5
    args = {"layers": model.layers, "d_model": model.d_model, "vocab": model.vocab, "seq_len": seq, "batch_size": 1,
            "cp": cp, "precision": "bf16", "checkpoint_activations": checkpoint}
    prompt = (
        f"A decoder shaped like **{model.name}** ({model.layers} layers, d = {model.d_model}, vocabulary {model.vocab}) "
        f"trains in pure bf16 on one sequence of S = {seq:,} tokens over **cp = {cp}** ranks (balanced ring attention), "
        f"**{'with' if checkpoint else 'without'} activation checkpointing** of every block.\n\n"
        "Every activation is per token, so a rank holds the model's activations at t = S/cp tokens: a block saves "
        "t·d·(2·2 + 14·2) bytes (fused attention); checkpointed, only its input, t·d·2. The head keeps t·d·4 and the "
        "log-softmax t·vocab·2. At the peak, early in backward, add the larger of what the model adds there (the "
        "log-softmax's gradient, or checkpointed the recomputed block if larger) and the last layer's ring buffers in "
        "backward: 3 bf16 K/V blocks of 2·t·d·2 bytes (2 at cp = 2) and 3 fp32 dK/dV blocks of 2·t·d·4, beside the "
        "recomputed block when checkpointed.\n\n"
        "What is the **peak activation memory per GPU**? Answer in GiB."
    )

    def working(answer: float) -> str:
        from ddpfsdp.demos.base.shapes import GPTShape

        shape = GPTShape(layers=model.layers, d_model=model.d_model, heads=1, seq_len=seq, vocab=model.vocab)
        figures = activation_bytes(shape, 1, cp, "bf16", checkpoint_activations=checkpoint)
        gib = lambda value: f"{shown(value / 2**30)} GiB"  # noqa: E731
        model_extra = figures["model_activation_bytes"] - figures["saved_bytes"]
        ring_extra = figures["activation_bytes"] - figures["saved_bytes"] if figures["activation_bytes"] > \
            figures["model_activation_bytes"] else None
        beside = " beside the recomputed block" if checkpoint else ""
        larger = (f"the ring's buffers{beside} ({gib(ring_extra)}) outweigh the model's {gib(model_extra)}" if ring_extra
                  else f"the model's {gib(model_extra)} outweighs the ring's buffers "
                       f"({gib(figures['rotation_backward_bytes'])}{' and a recomputed block' if checkpoint else ''})")
        return (f"t = {seq:,}/{cp} = {seq // cp:,} tokens: saved {gib(figures['saved_bytes'])}; early in backward "
                f"{larger}: peak {gib(answer)}. At cp 1 the saved part would be about {cp}x.")

    return prompt, "cp_activation_bytes", args, "GiB", 0.10, working


def context_parallel_problem(rng: random.Random) -> Problem:
    """One of the four, drawn in turn by weight."""
    make = rng.choices((ring_bytes_problem, balance_problem, hides_problem, activation_problem),
                       weights=(3, 2, 2, 2))[0]
    return make(rng)

