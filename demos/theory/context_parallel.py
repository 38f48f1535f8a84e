"""Context parallelism: one sequence split over cp ranks, attention computed by passing K/V around a ring.

All theory; nothing here is measured. Sources: Ring Attention (Liu, Zaharia and Abbeel, 2023, and its
reference JAX code, ringattention_jax.py); Striped Attention (Brandon et al., 2023) on the causal
imbalance; DeepSpeed-Ulysses (Jacobs et al., 2023); FlashAttention-2 (Dao, 2023) for the backward's
matmuls; and torch 2.13's `torch/distributed/tensor/experimental/_context_parallel/_attention.py` and
`_load_balancer.py`, which `context_parallel` runs.

- Layout. Every activation of a block is per token, so cp ranks each holding S/cp tokens hold 1/cp of
  them; attention alone needs the other ranks' keys and values, whose buffers add a few blocks during
  one layer's attention (`rotation_buffer_bytes`). The unbalanced split gives rank r the
  r-th of cp contiguous chunks. The balanced (head-tail) split cuts the sequence into 2·cp chunks
  and gives rank r chunks r and 2cp-1-r, one early and one late (torch's `_HeadTailLoadBalancer`,
  used by `context_parallel` only when S is a multiple of 2·cp; otherwise it silently runs the
  unbalanced split).
- Causal work. Counting attention in blocks of one chunk's queries against one chunk's keys, the
  diagonal block half done: chunk c of n costs c + 1/2, the whole sequence n²/2. Unbalanced
  (n = cp), the last rank does (cp - 1/2) / (cp²/2) = (2cp-1)/cp² of the work and rank 0 1/(2cp²);
  the step waits for the last, so it takes (2cp-1)/cp of the balanced step. Balanced (n = 2cp),
  rank r does (r + 1/2) + (2cp-1-r + 1/2) = 2cp of 2cp², exactly 1/cp.
- The ring. A rank's K/V block is 2·b·(S/cp)·kv_dim elements (kv_dim = d_model with full multi-head
  attention, smaller with grouped-query attention). Forward, each rank sends its block on cp-1 times
  (torch's `_templated_ring_attention`: `if i < (size - 1)`), while it computes against the block it
  holds. Backward (`_templated_ring_attention_backward`) sends the K/V blocks on cp-1 times again,
  and a dK/dV accumulator travels the same way, one hop behind: each rank adds its share for the
  block it holds and passes the sum on, cp times, the last hop bringing each block's gradient home.
  torch accumulates and sends dK/dV in fp32 (`_cp_options.convert_to_f32`). Activation
  checkpointing recomputes the forward, and with it the forward's ring. Liu et al.'s JAX code
  permutes K and V cp times forward and K, V, dK and dV cp times backward, one hop more each.
- torch's default rotation is not a ring: `_cp_options.rotate_method` is ALL_GATHER, one all-gather
  of every rank's K/V per layer and pass (the same (cp-1) blocks per rank on a ring all-gather, but
  all cp blocks held at once, and hidden only behind the first, local block's compute);
  `set_rotate_method("alltoall")` passes blocks one hop at a time. dK/dV always use the one-hop
  rotation.
- When the ring hides. One ring step computes one query block against one K/V block,
  4·b·n²·d_model FLOPs (QK^T and PV, n = S/cp), half of that under a balanced causal mask (every
  step of the head-tail split computes two chunk pairs of four), and sends one K/V block,
  2·b·n·kv_dim·c bytes. It hides when 4·b·n²·d·f / F >= 2·b·n·kv·c / B, that is when
  n >= kv·c·F / (2·d·f·B): F/B tokens per rank for full attention in 16 bits (Liu et al.'s block
  size c >= F/B), twice that causal. Backward computes 5 matmuls to forward's 2 (FlashAttention-2:
  S recomputed, dV, dP, dQ, dK) and sends K/V plus the fp32 dK/dV.
- Ulysses. DeepSpeed-Ulysses swaps the sequence split for a head split around attention: an
  all-to-all of q, k and v before it and of the output after, each rank sending (P-1)/P of its
  b·(S/P)·width slice; backward the same four in reverse. Per rank that is about 4·b·S·d/P per layer
  and pass (the paper's "4Nh/P per link"), falling with P where the ring's 2·b·S·kv_dim·(P-1)/P does
  not; but P must divide the heads, so the head count caps its degree.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.comm import op_figures
from ddpfsdp.demos.theory.arguments import read_choice, read_count, read_flag
from ddpfsdp.demos.theory.expert_parallel import all_to_all_link_shares
from ddpfsdp.demos.theory.precision import precision_for

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape

BALANCED_CHUNKS_PER_RANK = 2
"""The head-tail split: each rank holds one early and one late chunk."""

GRAD_ELEMENT_BYTES = 4
"""torch's ring attention accumulates dK/dV in fp32 and sends them so (`_cp_options.convert_to_f32`)."""

BACKWARD_MATMULS_PER_FORWARD = Fraction(5, 2)
"""FlashAttention-2's backward runs 5 matmuls (S recomputed, dV, dP, dQ, dK) to the forward's 2 (S, PV)."""

ROTATIONS = ("ring", "allgather")
"""How K/V reach the other ranks: one hop at a time (torch's "alltoall" rotate method), or torch's
default, one all-gather per layer and pass."""


# ----------------------------------------------------------------------------- degrees and layout


def check_cp(cp: Any, seq_len: Any, *, balanced: bool = True) -> int:
    """The CP degree, checked against the sequence; a ValueError says what to change."""
    degree = read_count(cp, "cp")
    tokens = read_count(seq_len, "seq len")
    if degree < 1:
        raise ValueError(f"cp must be at least 1 (got {degree})")
    chunks = degree * (BALANCED_CHUNKS_PER_RANK if balanced else 1)
    if tokens % chunks:
        fitting = ", ".join(str(c) for c in range(2, min(tokens, 64) + 1)
                            if tokens % (c * (BALANCED_CHUNKS_PER_RANK if balanced else 1)) == 0)
        split = (f"the balanced split cuts it into 2·cp = {chunks} equal chunks (one early, one late per rank)"
                 if balanced else f"each of the {degree} ranks holds S/cp tokens")
        raise ValueError(f"seq len {tokens} is not a multiple of {chunks}: {split}; choose a seq len that "
                         f"is a multiple of {chunks}, or cp from {fitting or 'none below 64'}")
    return degree


def rank_chunks(cp: int, rank: int, *, balanced: bool = True) -> tuple[int, ...]:
    """The chunks rank `rank` holds: (r, 2cp-1-r) of 2cp balanced, (r,) of cp unbalanced."""
    if not 0 <= rank < cp:
        raise ValueError(f"rank {rank} is not one of the CP ranks 0..{cp - 1}")
    return (rank, 2 * cp - 1 - rank) if balanced else (rank,)


def causal_work_shares(cp: int, *, balanced: bool = True) -> list[Fraction]:
    """Each rank's share of the causal attention work, exactly: chunk c of n costs c + 1/2 blocks of
    one chunk's queries against one chunk's keys (the diagonal block half done), n²/2 in all."""
    n = cp * (BALANCED_CHUNKS_PER_RANK if balanced else 1)
    total = Fraction(n * n, 2)
    return [sum((c + Fraction(1, 2) for c in rank_chunks(cp, r, balanced=balanced)), Fraction(0)) / total
            for r in range(cp)]


def slowest_share(cp: int, *, balanced: bool = True) -> Fraction:
    """The busiest rank's share of the causal work: (2cp-1)/cp² unbalanced, 1/cp balanced."""
    return max(causal_work_shares(cp, balanced=balanced))


def step_over_balanced(cp: int) -> Fraction:
    """How much longer the unbalanced split's attention takes than the balanced one's: (2cp-1)/cp."""
    return slowest_share(cp, balanced=False) / slowest_share(cp, balanced=True)


# ----------------------------------------------------------------------------- bytes


def kv_block_bytes(batch_size: int, seq_len: int, cp: int, kv_dim: int, element_bytes: int) -> int:
    """One rank's K and V: 2·b·(S/cp)·kv_dim elements."""
    return 2 * batch_size * (seq_len // cp) * kv_dim * element_bytes


class RingSends(TypedDict):
    """What one rank sends per attention layer per step on the ring: blocks, and bytes each way."""

    forward_kv_blocks: int
    backward_kv_blocks: int
    backward_dkv_blocks: int
    forward_bytes: int
    backward_bytes: int
    bytes: int


class UlyssesSends(TypedDict):
    """What one rank sends per attention layer per step with Ulysses' all-to-alls."""

    all_to_alls: int
    forward_bytes: int
    backward_bytes: int
    bytes: int


def ring_sends(cp: int, block_bytes: int, grad_block_bytes: int, *, recompute: bool = False) -> RingSends:
    """What one rank sends per attention layer per step on the ring (torch's counts):
    forward cp-1 K/V blocks (twice with the forward recomputed), backward cp-1 K/V blocks and cp dK/dV."""
    forward_blocks = (cp - 1) * (2 if recompute else 1)
    backward_kv, backward_dkv = cp - 1, cp if cp > 1 else 0
    forward = forward_blocks * block_bytes
    backward = backward_kv * block_bytes + backward_dkv * grad_block_bytes
    return {"forward_kv_blocks": forward_blocks, "backward_kv_blocks": backward_kv,
            "backward_dkv_blocks": backward_dkv, "forward_bytes": forward, "backward_bytes": backward,
            "bytes": forward + backward}


def ring_step_comm(layers: int, ring: dict[str, int]) -> dict[str, dict[str, int | None]]:
    """The ring's point-to-point ops in one training step, all layers, as the collective counter reports
    them (`ring` is `ring_sends`' figures for one layer): every block sent is one send and, on the next
    rank, one recv of the same bytes; a send puts its bytes on the wire, a recv none."""
    count = layers * (ring["forward_kv_blocks"] + ring["backward_kv_blocks"] + ring["backward_dkv_blocks"])
    sent = layers * ring["bytes"]
    return {op: op_figures(count, sent, wire_factor(op, 2)) for op in ("send", "recv")}


def ulysses_sends(cp: int, batch_size: int, seq_len: int, d_model: int, kv_dim: int, element_bytes: int,
                  *, recompute: bool = False) -> UlyssesSends:
    """What one rank sends per attention layer per step with Ulysses' all-to-alls: q, k, v and the
    output forward, their gradients backward, each (P-1)/P of the rank's b·(S/P)·width slice."""
    width = 2 * d_model + 2 * kv_dim  # q and the output are d_model wide, k and v kv_dim
    one_pass = Fraction(batch_size * (seq_len // cp) * width * element_bytes * (cp - 1), cp)
    passes = 3 if recompute else 2
    return {"all_to_alls": 4 * passes, "forward_bytes": round(one_pass * (passes - 1)),
            "backward_bytes": round(one_pass), "bytes": round(one_pass * passes)}


def check_ulysses(cp: int, heads: int, kv_heads: int | None = None) -> None:
    """Ulysses gives each rank heads/P query heads: P must divide the heads (and the K/V heads)."""
    for count, what in ((heads, "attention heads"), (kv_heads, "key/value heads")):
        if count is not None and count % cp:
            raise ValueError(f"Ulysses splits the {count} {what} over its {cp} ranks, and {cp} does not divide "
                             f"{count}: its degree is capped by the head count; use a ring for cp {cp}")


# ----------------------------------------------------------------------------- memory


def rotation_buffer_bytes(cp: int, block_bytes: int, grad_block_bytes: int, rotation: str = "ring") -> dict[str, int]:
    """K/V (and dK/dV) one layer's attention holds beside the saved activations, as torch's rotaters
    allocate them. Ring forward: the block computed against, the copy `torch.cat` makes to send, and
    the block arriving (2 at cp 2, where the last step sends nothing); all-gather: the cp gathered
    blocks and the sent copy. Backward adds the dK/dV accumulator, its sent copy and the sum arriving,
    3 blocks in the gradient's dtype."""
    rotation = read_choice(rotation, ROTATIONS, "rotation")
    if cp == 1:
        return {"forward_bytes": 0, "backward_bytes": 0}
    blocks = (2 if cp == 2 else 3) if rotation == "ring" else cp + 1
    return {"forward_bytes": blocks * block_bytes, "backward_bytes": blocks * block_bytes + 3 * grad_block_bytes}


def activation_bytes(shape: GPTShape, batch_size: int, cp: int, precision: str, *,
                     checkpoint_activations: bool = False, rotation: str = "ring", kv_dim: int | None = None,
                     cast: str = "autocast", tp: int = 1, sequence_parallel: bool = False,
                     grad_element_bytes: int = GRAD_ELEMENT_BYTES) -> dict[str, int]:
    """Peak activations per GPU at CP degree `cp`: the model's saved activations at S/cp tokens
    (`activations`; split by tensor parallelism over `tp` as it says), plus, early in backward, the
    larger of what the model adds there (the log-softmax's gradient, or with checkpointing the
    recomputed block if larger) and the last layer's ring buffers in backward
    (`rotation_buffer_bytes`, beside its recomputed block when checkpointed). TP splits the K/V by
    heads, so a rank's block is 1/tp."""
    tokens = shape.seq_len // cp
    model = transformer_activation_bytes(
        layers=shape.layers, d_model=shape.d_model, tokens=tokens, batch_size=batch_size,
        head_outputs=shape.vocab, head_tokens=tokens, precision=precision,
        checkpoint_activations=checkpoint_activations, cast=cast, tp=tp, sequence_parallel=sequence_parallel,
    )
    width = (kv_dim or shape.d_model) // tp
    block = kv_block_bytes(batch_size, shape.seq_len, cp, width, precision_for(precision).compute_bytes)
    buffers = rotation_buffer_bytes(cp, block, kv_block_bytes(batch_size, shape.seq_len, cp, width, grad_element_bytes),
                                    rotation)
    model_extra = model["activation_bytes"] - model["saved_bytes"]
    ring_extra = buffers["backward_bytes"] + (model["block_bytes"] if checkpoint_activations else 0)
    return {"saved_bytes": model["saved_bytes"], "model_activation_bytes": model["activation_bytes"],
            "rotation_forward_bytes": buffers["forward_bytes"], "rotation_backward_bytes": buffers["backward_bytes"],
            "activation_bytes": model["saved_bytes"] + max(model_extra, ring_extra)}


# ----------------------------------------------------------------------------- when it pays


def _causal_factor(causal: bool) -> Fraction:
    # A balanced causal step computes two chunk pairs of the four a full block would.
    return Fraction(1, 2) if causal else Fraction(1)


def ring_step_flops(batch_size: int, seq_len: int, cp: int, d_model: int, *, causal: bool = True,
                    backward: bool = False) -> float:
    """One ring step's attention FLOPs: 4·b·n²·d (QK^T and PV), n = S/cp; half causal, 5/2 of it backward."""
    n = seq_len // cp
    flops = 4 * batch_size * n * n * d_model * _causal_factor(causal)
    return float(flops * (BACKWARD_MATMULS_PER_FORWARD if backward else 1))


def min_tokens_per_rank(d_model: int, kv_dim: int, element_bytes: int, peak_flops_per_s: float,
                        bytes_per_s: float, *, causal: bool = True, backward: bool = False,
                        grad_element_bytes: int = GRAD_ELEMENT_BYTES) -> float:
    """The fewest tokens per rank (S/cp) at which one ring step's compute hides its block's transfer:
    n >= kv·c·F / (2·d·f·B) forward; backward, n >= kv·(c + g)·F / (2·d·f·(5/2)·B)."""
    if peak_flops_per_s <= 0 or bytes_per_s <= 0:
        raise ValueError("a GPU's peak and a link's bandwidth must be positive")
    sent = element_bytes + (grad_element_bytes if backward else 0)
    work = _causal_factor(causal) * (BACKWARD_MATMULS_PER_FORWARD if backward else 1)
    return kv_dim * sent * peak_flops_per_s / (2 * d_model * float(work) * bytes_per_s)


class RingOverlap(TypedDict):
    """One ring step's compute and transfer (s), forward and backward, and what shows per layer."""

    forward_compute_s: float
    forward_transfer_s: float
    backward_compute_s: float
    backward_transfer_s: float
    hidden: bool
    exposed_s_per_layer: float
    min_tokens_per_rank: float


class RingPays(RingOverlap):
    """`RingOverlap` on one link, with what shows over the whole step."""

    exposed_s_per_step: float


def ring_overlap(batch_size: int, seq_len: int, cp: int, d_model: int, kv_dim: int, element_bytes: int,
                 peak_flops_per_s: float, bytes_per_s: float, *, causal: bool = True, efficiency: float = 1.0,
                 latency_s: float = 0.0, grad_element_bytes: int = GRAD_ELEMENT_BYTES,
                 recompute: bool = False) -> RingOverlap:
    """One ring step forward and backward at `efficiency` of the GPU's peak over one link: the
    compute, the transfer, and what shows per layer (cp-1 steps forward, twice when the forward is
    recomputed; backward's cp-1 K/V hops, its dK/dV's last hop shown whole)."""
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency is a share of the peak, in (0, 1]; got {efficiency}")
    block = kv_block_bytes(batch_size, seq_len, cp, kv_dim, element_bytes)
    grad_block = kv_block_bytes(batch_size, seq_len, cp, kv_dim, grad_element_bytes)
    rate = peak_flops_per_s * efficiency
    forward_compute = ring_step_flops(batch_size, seq_len, cp, d_model, causal=causal) / rate
    backward_compute = ring_step_flops(batch_size, seq_len, cp, d_model, causal=causal, backward=True) / rate
    forward_transfer = latency_s + block / bytes_per_s
    backward_transfer = latency_s + (block + grad_block) / bytes_per_s
    steps = cp - 1
    exposed = ((2 if recompute else 1) * steps * max(0.0, forward_transfer - forward_compute)
               + steps * max(0.0, backward_transfer - backward_compute)
               + (latency_s + grad_block / bytes_per_s if cp > 1 else 0.0))
    return {
        "forward_compute_s": forward_compute, "forward_transfer_s": forward_transfer,
        "backward_compute_s": backward_compute, "backward_transfer_s": backward_transfer,
        "hidden": forward_transfer <= forward_compute and backward_transfer <= backward_compute,
        "exposed_s_per_layer": exposed,
        "min_tokens_per_rank": max(
            min_tokens_per_rank(d_model, kv_dim, element_bytes, rate, bytes_per_s, causal=causal),
            min_tokens_per_rank(d_model, kv_dim, element_bytes, rate, bytes_per_s, causal=causal, backward=True,
                                grad_element_bytes=grad_element_bytes)),
    }


# ----------------------------------------------------------------------------- placement


class RingLinks(TypedDict):
    """Where a CP ring runs: the nodes it spans, its hops, those over the network, what paces it."""

    nodes: int
    hops: int
    network_hops: int
    paced_by: str


def ring_links(cp: int, tp: int, gpus_per_node: int) -> RingLinks:
    """Where the ring runs: a CP group's ranks are tp apart (tp innermost, as torchtitan lays out its
    mesh), so it spans ceil(cp·tp / gpus_per_node) nodes; a ring over k > 1 nodes crosses the network
    on k of its cp hops, and the slowest hop paces every step."""
    nodes = max(1, math.ceil(cp * tp / gpus_per_node))
    return {"nodes": nodes, "hops": cp, "network_hops": nodes if nodes > 1 else 0,
            "paced_by": "network" if nodes > 1 else "nvlink"}


# ----------------------------------------------------------------------------- calc's section


class ContextParallelSection(TypedDict):
    """The `context_parallel` section of the `ddpfsdp.calc/1` document (bytes, seconds, shares)."""

    theory: bool
    cp: int
    tp: int
    gpus: int
    seq_len: int
    tokens_per_rank: int
    batch_size: int
    chunks: int
    chunks_by_rank: list[list[int]]
    compute_share_balanced: list[float]
    compute_share_unbalanced: list[float]
    unbalanced_step_over_balanced: float
    activation_bytes: int
    activation_bytes_allgather: int
    activation_bytes_cp1: int
    kv_block_bytes: int
    dkv_block_bytes: int
    ring_per_layer: RingSends
    ring_bytes_per_step: int
    ring_links: RingLinks
    ulysses_per_layer: UlyssesSends
    ulysses_bytes_per_step: int
    ulysses_link_shares: dict[str, float]
    ulysses_refusal: str | None
    pays: dict[str, RingPays]  # by link name


def context_parallel_figures(shape: GPTShape, cp: int, *, gpus: int, batch_size: int = 1,
                             precision: str = "bf16-mixed", checkpoint_activations: bool = False, tp: int = 1,
                             sequence_parallel: bool = False, gpus_per_node: int = 8,
                             links: dict[str, tuple[float, float, float]] | None = None) -> ContextParallelSection:
    """The `context_parallel` section of `ddpfsdp calc --json`: activations per GPU against cp = 1, the
    ring's and Ulysses' bytes per rank per step, the compute shares, and when the ring hides on each
    of `links` (name -> (peak FLOP/s, bytes per second, latency per hop)); every figure theory. Under
    tensor parallelism each rank holds heads/tp of the K/V, so its blocks, sends and FLOPs are 1/tp."""
    if gpus % (cp * tp):
        raise ValueError(f"cp {cp} x tp {tp} = {cp * tp} does not divide the {gpus} GPUs; choose cp from "
                         + (", ".join(str(c) for c in range(2, gpus + 1) if gpus % (c * tp) == 0) or "none")
                         + ", or change --gpus")
    check_cp(cp, shape.seq_len)
    c = precision_for(precision).compute_bytes
    d, s, b = shape.d_model // tp, shape.seq_len, batch_size
    block = kv_block_bytes(b, s, cp, d, c)
    grad_block = kv_block_bytes(b, s, cp, d, GRAD_ELEMENT_BYTES)
    ring = ring_sends(cp, block, grad_block, recompute=checkpoint_activations)
    ulysses = ulysses_sends(cp, b, s, d, d, c, recompute=checkpoint_activations)
    try:
        check_ulysses(cp, shape.heads // tp)
        ulysses_refusal = None
    except ValueError as error:
        ulysses_refusal = str(error)
    held = {"checkpoint_activations": checkpoint_activations, "tp": tp, "sequence_parallel": sequence_parallel}
    memory = {rotation: activation_bytes(shape, b, cp, precision, rotation=rotation, **held) for rotation in ROTATIONS}
    whole = activation_bytes(shape, b, 1, precision, **held)
    pays: dict[str, RingPays] = {}
    for name, (flops, rate, latency) in (links or {}).items():
        overlap = ring_overlap(b, s, cp, d, d, c, flops, rate, latency_s=latency, recompute=checkpoint_activations)
        pays[name] = {**overlap, "exposed_s_per_step": overlap["exposed_s_per_layer"] * shape.layers}
    return {
        "theory": True,
        "cp": cp, "tp": tp, "gpus": gpus, "seq_len": s, "tokens_per_rank": s // cp, "batch_size": b,
        "chunks": 2 * cp, "chunks_by_rank": [list(rank_chunks(cp, r)) for r in range(cp)],
        "compute_share_balanced": [float(x) for x in causal_work_shares(cp, balanced=True)],
        "compute_share_unbalanced": [float(x) for x in causal_work_shares(cp, balanced=False)],
        "unbalanced_step_over_balanced": float(step_over_balanced(cp)),
        "activation_bytes": memory["ring"]["activation_bytes"],
        "activation_bytes_allgather": memory["allgather"]["activation_bytes"],
        "activation_bytes_cp1": whole["activation_bytes"],
        "kv_block_bytes": block, "dkv_block_bytes": grad_block,
        "ring_per_layer": ring,
        "ring_bytes_per_step": ring["bytes"] * shape.layers,
        "ring_links": ring_links(cp, tp, gpus_per_node),
        "ulysses_per_layer": ulysses,
        "ulysses_bytes_per_step": ulysses["bytes"] * shape.layers,
        "ulysses_link_shares": {k: float(v) for k, v in
                                all_to_all_link_shares(cp, max(1, gpus_per_node // tp)).items()},
        "ulysses_refusal": ulysses_refusal,
        "pays": pays,
    }


# ----------------------------------------------------------------------------- quiz answers
# Keywords only, as the bank's `calc = { fn, args }` and the drills call them.


def q_slowest_share(*, cp: Any, balanced: Any = True) -> float:
    """The busiest CP rank's share of causal attention: (2cp-1)/cp² unbalanced, 1/cp balanced."""
    return float(slowest_share(read_count(cp, "cp"), balanced=read_flag(balanced)))


def q_ring_bytes_per_step(*, layers: Any, batch_size: Any, seq_len: Any, cp: Any, kv_dim: Any, precision: str,
                          recompute: Any = False, grad_element_bytes: Any = GRAD_ELEMENT_BYTES) -> int:
    """Bytes one CP rank sends on the ring per step, all layers: forward (cp-1) K/V blocks, backward
    (cp-1) K/V blocks and cp dK/dV blocks (fp32 in torch), the forward's again when recomputed."""
    seq = read_count(seq_len, "seq len")
    degree = check_cp(cp, seq, balanced=False)
    b, kv = read_count(batch_size, "batch size"), read_count(kv_dim, "kv dim")
    block = kv_block_bytes(b, seq, degree, kv, precision_for(precision).compute_bytes)
    grad_block = kv_block_bytes(b, seq, degree, kv, read_count(grad_element_bytes, "grad element bytes"))
    return read_count(layers, "layers") * ring_sends(degree, block, grad_block, recompute=read_flag(recompute))["bytes"]


def q_ulysses_bytes_per_step(*, layers: Any, batch_size: Any, seq_len: Any, cp: Any, d_model: Any, kv_dim: Any,
                             precision: str, heads: Any, recompute: Any = False) -> int:
    """Bytes one rank sends per step with Ulysses' all-to-alls, all layers (P must divide the heads)."""
    seq = read_count(seq_len, "seq len")
    degree = check_cp(cp, seq, balanced=False)
    check_ulysses(degree, read_count(heads, "heads"))
    return read_count(layers, "layers") * ulysses_sends(
        degree, read_count(batch_size, "batch size"), seq, read_count(d_model, "d_model"),
        read_count(kv_dim, "kv dim"), precision_for(precision).compute_bytes, recompute=read_flag(recompute))["bytes"]


def q_min_tokens_per_rank(*, d_model: Any, kv_dim: Any, precision: str, peak_flops_per_s: float,
                          bytes_per_s: float, causal: Any = True, backward: Any = False) -> float:
    """The fewest tokens per CP rank at which a ring step's compute (at the peak) hides its transfer."""
    return min_tokens_per_rank(read_count(d_model, "d_model"), read_count(kv_dim, "kv dim"),
                               precision_for(precision).compute_bytes, float(peak_flops_per_s), float(bytes_per_s),
                               causal=read_flag(causal), backward=read_flag(backward))


def q_cp_activation_bytes(*, layers: Any, d_model: Any, heads: Any = 1, vocab: Any, seq_len: Any, batch_size: Any,
                          cp: Any, precision: str, checkpoint_activations: Any = False, rotation: str = "ring") -> int:
    """Peak activations per GPU at CP degree cp (balanced split): the model's at S/cp tokens, early in
    backward the larger of the model's own addition and the rotation's buffers (`activation_bytes`)."""
    from ddpfsdp.demos.base.shapes import GPTShape

    seq = read_count(seq_len, "seq len")
    degree = check_cp(cp, seq)
    shape = GPTShape(layers=read_count(layers, "layers"), d_model=read_count(d_model, "d_model"),
                     heads=read_count(heads, "heads"), seq_len=seq, vocab=read_count(vocab, "vocab"))
    return activation_bytes(shape, read_count(batch_size, "batch size"), degree, precision,
                            checkpoint_activations=read_flag(checkpoint_activations), rotation=rotation)["activation_bytes"]


QUIZ_FUNCTIONS = {
    "cp_slowest_share": q_slowest_share,
    "cp_ring_bytes_per_step": q_ring_bytes_per_step,
    "cp_ulysses_bytes_per_step": q_ulysses_bytes_per_step,
    "cp_min_tokens_per_rank": q_min_tokens_per_rank,
    "cp_activation_bytes": q_cp_activation_bytes,
}
