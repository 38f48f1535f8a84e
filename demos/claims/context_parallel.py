"""The claims a context-parallel run (`demo cp`: ring attention over cp ranks, FSDP over dp x cp)
illustrates, as pure functions of measured numbers and the analytic model's
(`theory.context_parallel`).

Tolerances, and why:
  attention on a fixed input   fp32, |ring - one process| <= 1e-4 (the ring adds each block's
                               output in another order than one kernel does; seen 1e-6)
  the loss per step            rtol 1e-4 in fp32, 2e-2 in bf16 (`training.LOSS_RTOL_*`)
  one step's gradients         |g - g1| / |g1| per tensor, the largest: 1e-4 in fp32 (seen 1e-6), 5e-2
                               in bf16 (seen 1.7e-2 on the tiny GPT: bf16's 8-bit significand rounds
                               every op, against an fp32 process); a rank's gradient left unreduced
                               over cp, its own tokens' alone, is off by 0.72 there
  sends                        exact: counts and bytes are the tensors handed to the wire
  activations                  1%: everything a block saves is per token, so a cp rank's block saves
                               exactly 1/cp of the whole sequence's (seen 0.0%); the 1% leaves room
                               for a per-tensor constant a later torch may add
  compute shares               relative 1/n, n the tokens of one chunk: a diagonal block of n tokens
                               scores n(n+1)/2 query-key pairs where the theory counts n²/2, so a
                               rank's share sits above the continuum's by less than 1/n of a block
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.result.checks import Check, within
from ddpfsdp.demos.theory.context_parallel import causal_work_shares, slowest_share

ATTENTION_ATOL_FP32 = 1e-4
GRAD_RTOL = {"fp32": 1e-4, "low": 5e-2}
ACTIVATION_REL = 0.01
SEND_KEYS = ("forward_kv_blocks", "backward_kv_blocks", "backward_dkv_blocks", "forward_bytes", "backward_bytes")


class AttentionErrors(TypedDict):
    """One rank's largest absolute differences from one process's attention on the same fixed input."""

    out: float
    dq: float
    dk: float
    dv: float


class SplitProbe(TypedDict):
    """One split of the fixed input on one rank: its errors, and the query-key pairs its kernels scored."""

    errors: AttentionErrors
    forward_pairs: int
    backward_pairs: int


class RankSends(TypedDict):
    """What one rank sent on the ring per attention layer per training step, counted where it was sent."""

    forward_kv_blocks: float
    backward_kv_blocks: float
    backward_dkv_blocks: float
    forward_bytes: float
    backward_bytes: float
    bytes: float


def _worst(errors: Mapping[str, float]) -> float:
    return max(errors.values(), default=float("inf"))


def ring_matches_full_attention(probes: Mapping[str, Sequence[SplitProbe]], losses: Sequence[float],
                                reference: Sequence[float], loss_rtol: float,
                                atol: float = ATTENTION_ATOL_FP32) -> Check:
    """The ring gives what attention on one process gives: on a fixed fp32 input its output and its q, k, v
    gradients on every rank and with each split (within `atol`), and the model's loss at every step
    against one process training on the same global batches (within `loss_rtol`)."""
    worst = {split: max((_worst(p["errors"]) for p in ranks), default=float("inf")) for split, ranks in probes.items()}
    pairs = list(zip(losses, reference))
    loss_rel = max((abs(a - b) / max(abs(b), 1e-12) for a, b in pairs), default=float("inf"))
    attention_ok = bool(worst) and all(w <= atol for w in worst.values())
    losses_ok = len(losses) == len(reference) > 0 and loss_rel <= loss_rtol
    split_text = ", ".join(f"{split} {w:.1e}" for split, w in worst.items())
    detail = (f"fixed input (fp32): largest |ring - one process| over the output and dQ, dK, dV of every rank: "
              f"{split_text} (tolerance {atol:g}); the loss per step against one process on the same global "
              f"batches: largest relative difference {loss_rel:.2e} over {len(pairs)} steps (tolerance {loss_rtol:g})")
    return Check("ring_matches_full_attention", attention_ok and losses_ok, detail,
                 {"attention_worst": worst, "atol": atol, "losses": list(losses), "reference": list(reference),
                  "loss_worst_rel": loss_rel, "loss_rtol": loss_rtol})


def ring_kv_sends_match_theory(sends: Sequence[RankSends], theory: Mapping[str, Any],
                               wire_sent: Sequence[float]) -> Check:
    """Each rank sends per layer and step what torch's ring attention sends (`theory.context_parallel.
    ring_sends`): forward cp-1 K/V blocks, backward cp-1 K/V blocks and cp fp32 dK/dV blocks, exactly;
    and the sends the collective counter saw on the cp group in the recorded step (`wire_sent`, all
    layers) are those bytes."""
    layers = theory["layers"]
    wrong = [f"rank {r}: " + ", ".join(f"{key} {rank[key]:g} vs {theory[key]:g}" for key in SEND_KEYS
                                      if rank[key] != theory[key])
             for r, rank in enumerate(sends) if any(rank[key] != theory[key] for key in SEND_KEYS)]
    unseen = [f"rank {r}: the counter saw {format_iec(seen)}, the ring sent {format_iec(rank['bytes'] * layers)}"
              for r, (rank, seen) in enumerate(zip(sends, wire_sent)) if seen != rank["bytes"] * layers]
    passed = bool(sends) and len(wire_sent) == len(sends) and not wrong and not unseen
    first = sends[0] if sends else None
    detail = (f"per layer and step, theory (cp {theory['cp']}): forward {theory['forward_kv_blocks']} K/V blocks "
              f"({format_iec(theory['forward_bytes'])}), backward {theory['backward_kv_blocks']} K/V blocks and "
              f"{theory['backward_dkv_blocks']} dK/dV blocks ({format_iec(theory['backward_bytes'])}); ")
    detail += ("rank 0 sent " + (f"{first['forward_kv_blocks']:g} + {first['backward_kv_blocks']:g} K/V and "
                                 f"{first['backward_dkv_blocks']:g} dK/dV blocks, {format_iec(first['bytes'])}"
                                 if first else "nothing"))
    detail += f"; the counter's sends on the cp group over {layers} layers: {', '.join(format_iec(b) for b in wire_sent)}"
    if wrong or unseen:
        detail += "; off: " + "; ".join(wrong + unseen)
    return Check("ring_kv_sends_match_theory", passed, detail,
                 {"measured": list(sends), "theory": {k: theory[k] for k in (*SEND_KEYS, "bytes")},
                  "wire_sent": list(wire_sent), "layers": layers})


def cp_activations_fall_as_1_over_cp(saved_by_rank: Sequence[int | None], whole_sequence: int, cp: int,
                                     rel: float = ACTIVATION_REL) -> Check:
    """What one block saves for backward on each cp rank is 1/cp of what it saves for the whole sequence
    on one process (both measured, `measure.saved`)."""
    expected = whole_sequence / cp if cp else 0
    ratios = [(saved or 0) / whole_sequence if whole_sequence else float("inf") for saved in saved_by_rank]
    passed = (bool(saved_by_rank) and whole_sequence > 0 and all(s is not None for s in saved_by_rank)
              and all(within(saved or 0, expected, rel) for saved in saved_by_rank))
    shown = ", ".join(format_iec(s) for s in saved_by_rank)
    return Check("cp_activations_fall_as_1_over_cp", passed,
                 f"the first block saves {shown} per cp rank against {format_iec(whole_sequence)} for the whole "
                 f"sequence on one process: {', '.join(f'{x:.3f}' for x in ratios)} of it (1/cp = {1 / cp:.3f}, "
                 f"within {rel:.0%})",
                 {"saved_by_rank": list(saved_by_rank), "whole_sequence": whole_sequence, "cp": cp,
                  "ratios": ratios})


def compute_shares(pairs_by_rank: Sequence[int]) -> list[float]:
    total = sum(pairs_by_rank)
    return [p / total if total else 0.0 for p in pairs_by_rank]


def contiguous_split_busiest_rank_matches_theory(pairs_by_rank: Sequence[int], cp: int, chunk_tokens: int) -> Check:
    """With each rank holding one contiguous chunk, the busiest rank (the last) scores (2cp-1)/cp² of the
    causal attention's query-key pairs, the step waiting on it: (2cp-1)/cp of the balanced step."""
    shares = compute_shares(pairs_by_rank)
    theory = float(slowest_share(cp, balanced=False))
    busiest = max(shares, default=0.0)
    rel = 1 / chunk_tokens if chunk_tokens else 0.0
    passed = len(shares) == cp and within(busiest, theory, rel) and shares.index(busiest) == cp - 1
    return Check("contiguous_split_busiest_rank_matches_theory", passed,
                 f"contiguous split, query-key pairs each rank's kernels scored: shares "
                 f"{', '.join(f'{s:.3f}' for s in shares)}; the busiest, rank {shares.index(busiest) if shares else '-'}, "
                 f"{busiest:.4f} against theory (2cp-1)/cp² = {theory:.4f} (within {rel:.1%}: the diagonal blocks' "
                 f"n(n+1)/2 pairs at n = {chunk_tokens}); the step waits {busiest * cp:.2f}x a balanced rank's share",
                 {"pairs": list(pairs_by_rank), "shares": shares, "theory_busiest": theory, "rel": rel,
                  "theory_shares": [float(x) for x in causal_work_shares(cp, balanced=False)]})


def head_tail_split_evens_compute(pairs_by_rank: Sequence[int], cp: int, chunk_tokens: int) -> Check:
    """With rank r holding chunks r and 2cp-1-r of 2cp, every rank scores 1/cp of the pairs."""
    shares = compute_shares(pairs_by_rank)
    rel = 1 / chunk_tokens if chunk_tokens else 0.0
    passed = len(shares) == cp and all(within(s, 1 / cp, rel) for s in shares)
    spread = (max(shares) / min(shares)) if shares and min(shares) > 0 else float("inf")
    return Check("head_tail_split_evens_compute", passed,
                 f"head-tail split, query-key pairs each rank's kernels scored: shares "
                 f"{', '.join(f'{s:.4f}' for s in shares)} against 1/cp = {1 / cp:.4f} (within {rel:.1%}); "
                 f"busiest over idlest {spread:.3f}",
                 {"pairs": list(pairs_by_rank), "shares": shares, "theory_share": 1 / cp, "rel": rel})


def grad_rtol(precision: str) -> float:
    return GRAD_RTOL["fp32" if precision == "fp32" else "low"]


def cp_gradients_reduced_across_cp(grad_errors: Sequence[float], reduce_scatter_groups: Sequence[int], dp: int,
                                   cp: int, rtol: float) -> Check:
    """The cp ranks of one sequence hold the same weights and each computes a partial gradient from its
    own tokens: FSDP reduces over dp x cp (its reduce-scatter's group), and one step's gradients on every
    rank equal one process's on the same global batch (largest relative difference per tensor <= rtol)."""
    worst = max(grad_errors, default=float("inf"))
    groups_ok = list(reduce_scatter_groups) == [dp * cp]
    passed = bool(grad_errors) and groups_ok and worst <= rtol
    return Check("cp_gradients_reduced_across_cp", passed,
                 f"FSDP reduce-scatters the gradients over groups of {', '.join(map(str, reduce_scatter_groups)) or 'none'} "
                 f"ranks (dp {dp} x cp {cp} = {dp * cp}); one step's gradients against one process's on the same "
                 f"global batch: largest relative difference {worst:.2e} over the ranks (tolerance {rtol:g})",
                 {"grad_errors": list(grad_errors), "reduce_scatter_groups": list(reduce_scatter_groups), "dp": dp,
                  "cp": cp, "rtol": rtol})
