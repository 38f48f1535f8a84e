"""The claims a 2-D run (FSDP over dp x tensor parallelism over tp) illustrates, as pure functions of
measured numbers and the analytic model's (`theory.tensor_parallel.two_d_run_theory`).

Each returns a Check whose detail states the numbers, so a test can hand it numbers that break the
claim and watch it fail. Tolerances: model state 1% of the exact per-tensor figure (FSDP's padding
is in it); collective counts exact and bytes within 1%; a block's saved activations within 5% (the
model leaves out the per-token statistics LayerNorm and attention keep); losses as `claims` states.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from ddpfsdp.demos.result.checks import Check, within
from ddpfsdp.demos.measure.lanes import collective_interval, compute_intervals, length, subtract, unit_spans
from ddpfsdp.demos.result.schema import STATE_KINDS, CommOp, RankMemory
from ddpfsdp.demos.base.units import format_bytes

# A rank's memory and one group's ops per step, typed (a DemoResult's blocks) or in their JSON form.
Ranks = Sequence[RankMemory | Mapping[str, Any]]
PerOp = Mapping[str, CommOp | Mapping[str, Any]]
STATE_REL = 0.01
COMM_REL = 0.01
ACTIVATION_REL = 0.05
EXPOSED_TP_SHARE = 0.5  # at least this share of TP's in-flight time has no compute running beside it


def _mib(n: float | None) -> str:
    return "n/a" if n is None else format_bytes(n, "MiB", digits=3)


def two_d_shards_model_state(ranks: Ranks, theory: Mapping[str, Any]) -> Check:
    """Every rank holds its TP shard of each parameter, split again over dp: the exact per-tensor
    figure, which is 1/(dp x tp) of the model apart from what TP leaves whole."""
    ranks = [RankMemory.from_json(r) for r in ranks]
    dp, tp = theory["mesh"]["dp"], theory["mesh"]["tp"]
    misses = [f"rank {r} {kind} {_mib(held.state(kind))} vs theory {_mib(theory[f'{kind}_bytes'])}"
              for r, held in enumerate(ranks) for kind in STATE_KINDS
              if not within(held.state(kind), theory[f"{kind}_bytes"], STATE_REL)]
    rank0 = ranks[0]
    share = rank0.state("params") / theory["params_bytes"] * theory["held_params"] / theory["ideal_params_per_rank"]
    detail = (
        f"rank 0 holds params {_mib(rank0.params)}, grads {_mib(rank0.grads)}, optimizer "
        f"{_mib(rank0.optimizer)} (theory {_mib(theory['params_bytes'])}, {_mib(theory['grads_bytes'])}, "
        f"{_mib(theory['optimizer_bytes'])}); that is {share:.3f} x 1/(dp {dp} x tp {tp}) of the model: "
        f"{theory['replicated_params']:,} parameters (LayerNorms, row-wise biases, position table) are whole on "
        "every TP rank and split over dp only"
    )
    if misses:
        detail += f"; off by more than 1%: {'; '.join(misses)}"
    return Check("two_d_shards_model_state", not misses, detail,
                 {"measured": [{k: held.state(k) for k in STATE_KINDS} for held in ranks],
                  "theory": {k: theory[f"{k}_bytes"] for k in STATE_KINDS}, "share_of_ideal": share})


def _ops_match(name: str, group: str, measured: PerOp, expected: Mapping[str, Mapping[str, Any]]) -> Check:
    ops = {op: CommOp.from_json(v) for op, v in measured.items()}
    misses, parts = [], []
    for op in sorted(set(ops) | set(expected)):
        got, want = ops.get(op) or CommOp(), expected.get(op, {})
        count, want_count = int(got.count or 0), int(want.get("count") or 0)
        parts.append(f"{op} {count} calls, {_mib(got.bytes or 0)} (theory {want_count}, {_mib(want.get('bytes', 0))})")
        if count != want_count or not within(got.bytes or 0, want.get("bytes", 0), COMM_REL):
            misses.append(op)
    detail = f"{group} group per step: " + "; ".join(parts)
    if misses:
        detail += f"; off: {', '.join(misses)}"
    return Check(name, not misses, detail,
                 {"measured": {op: v.to_json() for op, v in ops.items()}, "theory": dict(expected)})


def tp_comm_matches_theory(measured: PerOp, theory: Mapping[str, Any]) -> Check:
    """TP's collectives over the step, in the tp group: calls exact, bytes within 1% (tp_step_comm)."""
    return _ops_match("tp_comm_matches_theory", "tp", measured, theory["tp_comm"])


def dp_comm_matches_theory(measured: PerOp, theory: Mapping[str, Any]) -> Check:
    """FSDP's collectives in the dp group: each unit's TP shard all-gathered (twice) and reduce-scattered."""
    return _ops_match("dp_comm_matches_theory", "dp", measured, theory["dp_comm"])


def _block_counts(rank: Mapping[str, Any], tp_group: str, bytes_each: int) -> dict[tuple[str, str], Counter]:
    """{(block, phase): Counter(op)} of the TP collectives of b*s*d activations issued inside each
    block's compute span, by the order the host reached the edges (`seq`)."""
    found: dict[tuple[str, str], Counter] = {}
    for span in unit_spans(rank):
        if not span["unit"].startswith("blocks."):
            continue
        found[(span["unit"], span["phase"])] = Counter(
            c["op"] for c in rank.get("collectives", [])
            if c["group"] == tp_group and c["bytes"] == bytes_each and span["seq_start"] < c["seq"] < span["seq_end"])
    return found


def tp_collectives_per_block(timeline_ranks: Sequence[Mapping[str, Any]], tp_groups: Sequence[str],
                             theory: Mapping[str, Any]) -> Check:
    """Each block issues Megatron-LM's TP collectives inside its own compute, on every rank: without
    sequence parallelism 2 all-reduces in forward and 2 in backward, with it 2 all-gathers and 2
    reduce-scatters in each."""
    expected: dict[str, Counter] = {"forward": Counter(), "backward": Counter()}
    for term in theory["block_terms"]:
        expected["backward" if "backward" in term["where"] else "forward"][term["op"]] += term["count"]
    bytes_each = theory["block_terms"][0]["bytes_each"]
    misses, blocks = [], 0
    for rank, (timeline, group) in enumerate(zip(timeline_ranks, tp_groups)):
        for (unit, phase), seen in sorted(_block_counts(timeline, group, bytes_each).items()):
            blocks += rank == 0 and phase == "forward"
            if seen != expected[phase]:
                misses.append(f"rank {rank} {unit} {phase}: {dict(seen)}")
    want = "; ".join(f"{phase} {dict(ops)}" for phase, ops in expected.items())
    passed = blocks > 0 and not misses and len(timeline_ranks) == len(tp_groups) > 0
    detail = (f"per block and step, TP collectives of {_mib(bytes_each)} (b*s*d) inside its compute: expected {want}; "
              f"{blocks} blocks on {len(timeline_ranks)} ranks" + (f"; off: {'; '.join(misses[:6])}" if misses else
                                                                  ", every one as expected"))
    return Check("tp_collectives_per_block", passed, detail, {"expected": {k: dict(v) for k, v in expected.items()},
                                                             "misses": misses, "blocks": blocks})


def tp_collectives_on_critical_path(timeline_ranks: Sequence[Mapping[str, Any]], tp_groups: Sequence[str],
                                    theory: Mapping[str, Any]) -> Check:
    """TP's activation collectives (b*s*d each) sit inside the units' compute and the step waits for
    them: over all ranks together at least half of their in-flight time has no compute running (the
    next operation needs the result). Pooled, not rank by rank: on a CPU shared by more processes
    than cores, a rank the scheduler sets aside in the middle of an operation shows that time as
    compute beside a collective that had already finished. With sequence parallelism the LayerNorm
    gradients' all-reduces are not among them: FSDP2 issues them in its post-backward, when it reads
    each gradient (`_fsdp_param.py`, `_get_grad_inner_tensor` redistributes the tp dimension's Partial)."""
    bytes_each = theory["block_terms"][0]["bytes_each"]
    shares, outside, waiting, in_flight = [], [], 0.0, 0.0
    for timeline, group in zip(timeline_ranks, tp_groups):
        tp = [collective_interval(c) for c in timeline.get("collectives", [])
              if c["group"] == group and c["bytes"] == bytes_each]
        blocks = [(s["start_s"], s["end_s"]) for s in unit_spans(timeline) if s["unit"].startswith("blocks.")]
        outside.append(length(subtract(tp, blocks + _ends(timeline))))
        idle = length(subtract(tp, compute_intervals(timeline)))
        shares.append(idle / length(tp) if length(tp) > 0 else 0.0)
        waiting, in_flight = waiting + idle, in_flight + length(tp)
    pooled = waiting / in_flight if in_flight > 0 else 0.0
    step_share = [(timeline.get("exposed_share") or 0.0) for timeline in timeline_ranks]
    passed = bool(shares) and pooled >= EXPOSED_TP_SHARE and not any(outside)
    detail = (f"share of the in-flight time of TP's activation collectives ({_mib(bytes_each)} each) with no "
              f"compute running: {pooled:.3f} over all ranks, by rank {[round(s, 3) for s in shares]} (at least "
              f"{EXPOSED_TP_SHARE:.0%} over all ranks: the block waits for each one); their time outside any "
              f"unit's compute: {[round(o, 6) for o in outside]} s")
    if any(step_share):
        detail += f"; exposed communication over the whole step: {[round(s, 3) for s in step_share]}"
    return Check("tp_collectives_on_critical_path", passed, detail,
                 {"exposed_tp_share": shares, "pooled_share": pooled, "outside_s": outside})


def _ends(timeline: Mapping[str, Any]) -> list[tuple[float, float]]:
    """The embeddings' and the head's compute, where the plan's other TP collectives run, and the
    loss between forward and backward (`loss_parallel`'s all-reduces)."""
    spans = [(s["start_s"], s["end_s"]) for s in unit_spans(timeline) if not s["unit"].startswith("blocks.")]
    forward = next((s for s in timeline.get("spans", []) if s["name"] == "forward" and not s.get("unit")), None)
    backward = next((s for s in timeline.get("spans", []) if s["name"] == "backward" and not s.get("unit")), None)
    if forward is not None and backward is not None:
        spans.append((forward["start_s"], backward["start_s"]))
    return spans


def tp_activations_match_theory(measured_block_bytes: int, theory: Mapping[str, Any]) -> Check:
    """One block saves for backward what the analytic model says one TP rank saves (5%)."""
    expected = theory["block_activation_bytes"]
    passed = measured_block_bytes > 0 and within(measured_block_bytes, expected, ACTIVATION_REL)
    return Check("tp_activations_match_theory", passed,
                 f"one block saves {_mib(measured_block_bytes)} of activations for backward on rank 0 (theory "
                 f"{_mib(expected)}: q, k, v, the attention output and the MLP's hidden layer 1/tp, the LayerNorm "
                 "inputs and outputs whole, or the residual stream 1/tp with sequence parallelism; 5%)",
                 {"measured": measured_block_bytes, "theory": expected})


def loss_matches_reference(losses: Sequence[float], reference: Sequence[float], rtol: float) -> Check:
    """The 2-D run's loss per step equals one process's on the same global batch (within `rtol`)."""
    pairs = list(zip(losses, reference))
    worst = max((abs(a - b) / max(abs(b), 1e-12) for a, b in pairs), default=float("inf"))
    passed = len(losses) == len(reference) > 0 and worst <= rtol
    return Check("loss_matches_reference", passed,
                 f"loss per step, 2-D vs one process on the global batch: largest relative difference {worst:.2e} "
                 f"(tolerance {rtol:g}) over {len(pairs)} steps; first {pairs[0] if pairs else None}",
                 {"losses": list(losses), "reference": list(reference), "worst_rel": worst})
