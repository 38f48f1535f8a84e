"""What one recorded pipeline step shows, per rank, beside the analytic model; and the named checks.

Figures, from the recorded step alone (`measure.pipeline_timeline`'s record per rank):
  window       from the first compute of any rank to the last compute of any rank: the step as the
               whiteboard draws it, fill to drain (the barrier before it and the optimizer after it
               are outside)
  bubble       per rank, the share of the window it computes nothing: 1 - busy / window, busy the
               sum of its F, B, I, W and loss spans
  in flight    per rank, the most micro-batches (in chunks: one micro-batch through one stage) it has
               run forward and not yet finished backward (the whole backward, or its W part when
               zero bubble splits it off): whose activations it holds
  p2p          per rank, the sends' and recvs' tensor bytes, activations forward and gradients back
The theory for each is `theory.pipeline` (bubble_fraction, in_flight, p2p_sends); checks are pure
functions of these numbers. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.measure.pipeline_timeline import PlacedStep
from ddpfsdp.demos.theory.pipeline import Pipeline, boundary_bytes, bubble, in_flight, p2p_sends
from ddpfsdp.demos.base.units import format_iec

if TYPE_CHECKING:
    from ddpfsdp.demos.measure.comm import PerOp
    from ddpfsdp.demos.base.shapes import GPTShape

LOSS_RTOL = 1e-4  # fp32, as the 2-D demo's reference (claims/training.LOSS_RTOL_FP32)
BUBBLE_TOLERANCE = 0.10  # absolute, in bubble fraction: see check_bubble


class P2PCount(TypedDict):
    count: int
    bytes: int


class P2PByWhat(TypedDict):
    """A rank's sends (or recvs) of one step: activations forward, gradients back."""

    activation: P2PCount
    gradient: P2PCount


class BubbleTheory(TypedDict):
    """`theory.pipeline.bubble` for the run, in units of t, with where it comes from."""

    source: str
    useful_t: float
    bubble_t: float
    bubble_ratio: float
    bubble_fraction: float


class RankRow(TypedDict):
    """One rank of a schedule's run: each figure measured in the recorded step, beside its theory."""

    rank: int
    pp_rank: int
    dp_rank: int
    stages: list[int]
    busy_s: float
    bubble: float
    bubble_theory: float
    in_flight_chunks: int
    in_flight_chunks_theory: float
    sent: P2PByWhat
    received: P2PByWhat
    sent_theory: dict[str, int]  # theory.pipeline.p2p_sends: forward/backward sends and bytes, bytes in all
    comm: dict[str, PerOp]  # the step before the recorded one, per group ("pp", "dp"), op by op


class ScheduleRun(TypedDict):
    """One schedule's measured run: the pipeline, per-rank rows beside theory, the step's window, the losses
    (the `pipeline` block of a run in the result)."""

    schedule: str
    torch_schedule: str
    pp: int
    dp: int
    microbatches: int
    stages_per_rank: int
    batch_size: int
    microbatch_size: int
    boundary_bytes: int
    window_s: float
    wall_s: float
    losses: list[float | None]
    ranks: list[RankRow]
    theory: BubbleTheory


class StageTimeline(TypedDict):
    """A schedule's recorded step, one record per rank (a run's `timeline` in the result)."""

    ranks: list[PlacedStep]


def busy_s(spans: Sequence[Mapping[str, Any]]) -> float:
    return sum(s["end_s"] - s["start_s"] for s in spans)


def window_s(ranks: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    spans = [s for rank in ranks for s in rank["spans"]]
    if not spans:
        return 0.0, 0.0
    return min(s["start_s"] for s in spans), max(s["end_s"] for s in spans)


def bubble_by_rank(ranks: Sequence[Mapping[str, Any]]) -> list[float]:
    start, end = window_s(ranks)
    total = end - start
    return [1.0 - busy_s(rank["spans"]) / total if total > 0 else 0.0 for rank in ranks]


def in_flight_chunks(spans: Sequence[Mapping[str, Any]]) -> int:
    """The most (stage, micro-batch) pairs forwarded and not yet done backward, over the step."""
    split = {(s["stage"], s["mb"]) for s in spans if s["kind"] == "W"}
    edges = []
    for s in spans:
        key = (s["stage"], s["mb"])
        if s["kind"] == "F":
            edges.append((s["end_s"], 1))
        elif s["kind"] == ("W" if key in split else "B"):
            edges.append((s["end_s"], -1))
    held = peak = 0
    for _, change in sorted(edges, key=lambda e: (e[0], e[1])):
        held += change
        peak = max(peak, held)
    return peak


def p2p_by_what(collectives: Sequence[Mapping[str, Any]], op: str) -> P2PByWhat:
    out = P2PByWhat(activation=P2PCount(count=0, bytes=0), gradient=P2PCount(count=0, bytes=0))
    for c in collectives:
        if c["op"] == op:
            out[c["what"]]["count"] += 1
            out[c["what"]]["bytes"] += c["bytes"]
    return out


def measure(pipeline: Pipeline, shape: GPTShape, ranks: list[PlacedStep], losses: list[float | None], *,
            batch_size: int, wall_s: float) -> ScheduleRun:
    """One schedule's run: per rank, measured beside theory; the losses. (Its timeline is `ranks`.)"""
    micro = batch_size // pipeline.microbatches
    boundary = boundary_bytes(micro, shape.seq_len, shape.d_model, "fp32")
    theory_bubble = bubble(pipeline.pp, pipeline.microbatches, pipeline.schedule, pipeline.stages_per_rank)
    start, end = window_s(ranks)
    rows = []
    for rank, measured_bubble in zip(ranks, bubble_by_rank(ranks)):
        pp_rank = rank["pp_rank"]
        flight = in_flight(pipeline.pp, pipeline.microbatches, pipeline.schedule, pipeline.stages_per_rank, pp_rank)
        rows.append(RankRow(
            rank=rank["rank"], pp_rank=pp_rank, dp_rank=rank["dp_rank"],
            stages=sorted({s["stage"] for s in rank["spans"]}),
            busy_s=busy_s(rank["spans"]),
            bubble=measured_bubble,
            bubble_theory=theory_bubble["bubble_fraction"],
            in_flight_chunks=in_flight_chunks(rank["spans"]),
            in_flight_chunks_theory=flight["chunks"],
            sent=p2p_by_what(rank["collectives"], "send"),
            received=p2p_by_what(rank["collectives"], "recv"),
            sent_theory=p2p_sends(pipeline, pp_rank, boundary),
            comm=rank["comm"],
        ))
    return ScheduleRun(
        schedule=pipeline.schedule, torch_schedule=pipeline.torch_schedule, pp=pipeline.pp,
        dp=max((rank["dp"] for rank in ranks), default=1),
        microbatches=pipeline.microbatches, stages_per_rank=pipeline.stages_per_rank,
        batch_size=batch_size, microbatch_size=micro, boundary_bytes=boundary,
        window_s=end - start, wall_s=wall_s, losses=losses, ranks=rows,
        theory=BubbleTheory(source="theory: demos/theory/pipeline.py", useful_t=theory_bubble["useful_t"],
                            bubble_t=theory_bubble["bubble_t"], bubble_ratio=theory_bubble["bubble_ratio"],
                            bubble_fraction=theory_bubble["bubble_fraction"]),
    )


# ----------------------------------------------------------------------------- checks


def pace_rank(busy: Sequence[float]) -> int:
    """The rank that sets the pipeline's pace: the one with the most compute in the step."""
    return max(range(len(busy)), key=lambda r: busy[r]) if busy else 0


def check_bubble(schedule: str, measured: Sequence[float], busy: Sequence[float], theory: float,
                 tolerance: float = BUBBLE_TOLERANCE) -> Check:
    """The rank that sets the pace idles for the schedule's fill and drain only: its idle share is within
    `tolerance` (absolute) of theory, which assumes equal stages. A lighter stage also waits for the
    heavier one, so its share is above theory by the imbalance (shown, not judged)."""
    pace = pace_rank(busy)
    passed = bool(measured) and len(measured) == len(busy) and abs(measured[pace] - theory) <= tolerance
    shown = ", ".join(f"{b:.3f}" for b in measured)
    return Check("pipeline_bubble_matches_theory", passed,
                 f"{schedule}: idle share of the step per rank {shown}; rank {pace}, the most compute "
                 f"({busy[pace] * 1e3 if busy else 0:.0f} ms), sets the pace: {measured[pace] if measured else 0:.3f} vs "
                 f"theory {theory:.3f} (equal stages), within {tolerance:g} absolute (CPU scheduling noise and the "
                 "sends' latency on gloo; the other ranks also wait for the heaviest stage)",
                 {"measured": list(measured), "busy_s": list(busy), "pace_rank": pace, "theory": theory,
                  "tolerance": tolerance})


IN_FLIGHT_THEORY = {
    "gpipe": "GPipe: all m",
    "1f1b": "1F1B: min(m, pp - rank), torch's warm-up forwards",
    "interleaved": "interleaved, in micro-batch x stage chunks: torch's warm-up (V-1)·m/rounds + 2(pp-1-rank), "
                   "then one forward more",
    "zero-bubble": "zero bubble: the paper's claim for ZB-H1, no more than 1F1B's peak, min(m, pp)",
}


def check_in_flight(schedule: str, measured: Sequence[int], theory: Sequence[float]) -> Check:
    passed = bool(measured) and list(measured) == [round(t) for t in theory]
    return Check("pipeline_activations_in_flight_match_theory", passed,
                 f"{schedule}: most micro-batches (x stages) each rank held forwarded but not yet backward "
                 f"{list(measured)}; theory {[round(t) for t in theory]} ({IN_FLIGHT_THEORY.get(schedule, schedule)})",
                 {"measured": list(measured), "theory": list(theory)})


def check_loss(losses: Sequence[float | None], reference: Sequence[float], rtol: float = LOSS_RTOL) -> Check:
    pairs = [(a, b) for a, b in zip(losses, reference)]
    worst = max((abs(a - b) / max(abs(b), 1e-12) if a is not None else float("inf") for a, b in pairs),
                default=float("inf"))
    passed = len(losses) == len(reference) > 0 and worst <= rtol
    return Check("pipeline_loss_matches_reference", passed,
                 f"loss per step, pipeline vs one process on the same batches: largest relative difference "
                 f"{worst:.2e} (tolerance {rtol:g}, fp32) over {len(pairs)} steps",
                 {"losses": list(losses), "reference": list(reference), "worst_rel": worst, "rtol": rtol})


def check_p2p(schedule: str, rows: Sequence[Mapping[str, Any]]) -> Check:
    """Each rank's sends, activations and gradients, in count and bytes, are the theory's exactly."""
    wrong = []
    for row in rows:
        sent, theory = row["sent"], row["sent_theory"]
        got = (sent["activation"]["count"], sent["activation"]["bytes"], sent["gradient"]["count"],
               sent["gradient"]["bytes"])
        want = (theory["forward_sends"], theory["forward_bytes"], theory["backward_sends"], theory["backward_bytes"])
        if got != want:
            wrong.append(f"rank {row['rank']}: sent {got}, theory {want}")
    totals = [r["sent"]["activation"]["bytes"] + r["sent"]["gradient"]["bytes"] for r in rows]
    return Check("pipeline_p2p_matches_theory", bool(rows) and not wrong,
                 f"{schedule}: sent per rank per step {', '.join(map(format_iec, totals))} (activations forward, "
                 "gradients back, "
                 "one micro-batch's b·s·d each); " + ("; ".join(wrong) if wrong else "every count and byte as theory"),
                 {"sent_bytes": totals, "mismatches": wrong})


FSDP_OPS = ("all_gather", "reduce_scatter")
P2P_OPS = ("send", "recv")


def check_dp_comm(rows: Sequence[Mapping[str, Any]]) -> Check:
    """With --dp: on every rank the dp group carries FSDP's all-gather and reduce-scatter and nothing else,
    and the pipeline's own group only sends and recvs."""
    wrong = []
    for row in rows:
        dp_ops, pp_ops = set(row["comm"].get("dp", {})), set(row["comm"].get("pp", {}))
        if dp_ops != set(FSDP_OPS) or not pp_ops or not pp_ops <= set(P2P_OPS):
            wrong.append(f"rank {row['rank']}: dp {sorted(dp_ops)}, pp {sorted(pp_ops)}")
    counts = {row["rank"]: {dim: {op: c["count"] for op, c in ops.items()} for dim, ops in row["comm"].items()}
              for row in rows}
    return Check("pipeline_dp_comm_is_fsdp", bool(rows) and not wrong,
                 "collectives of the step before the recorded one, per rank and group: "
                 + "; ".join(f"rank {r}: {c}" for r, c in counts.items())
                 + (" | " + "; ".join(wrong) if wrong else " (dp: FSDP's all-gather and reduce-scatter only; "
                                                             "pp: send and recv only)"),
                 {"counts": counts, "mismatches": wrong})


def check_gpipe_holds_more(gpipe: Sequence[int], one_f_one_b: Sequence[int]) -> Check:
    passed = bool(gpipe) and len(gpipe) == len(one_f_one_b) and max(gpipe) > max(one_f_one_b)
    return Check("gpipe_holds_more_activations_than_1f1b", passed,
                 f"micro-batches in flight per rank at its peak: GPipe {list(gpipe)}, 1F1B {list(one_f_one_b)}",
                 {"gpipe": list(gpipe), "1f1b": list(one_f_one_b)})


def check_interleaved_smaller(interleaved: Sequence[float], one_f_one_b: Sequence[float]) -> Check:
    mean = (lambda xs: sum(xs) / len(xs)) if interleaved and one_f_one_b else None
    passed = mean is not None and mean(interleaved) < mean(one_f_one_b)
    shown = "no runs" if mean is None else f"interleaved {mean(interleaved):.3f}, 1F1B {mean(one_f_one_b):.3f}"
    return Check("interleaved_has_smaller_bubble", passed,
                 f"idle share of the step, mean over ranks: {shown}",
                 {"interleaved": list(interleaved), "1f1b": list(one_f_one_b)})


def run_checks(run: ScheduleRun, reference: Sequence[float]) -> list[Check]:
    rows = run["ranks"]
    return [
        check_bubble(run["schedule"], [r["bubble"] for r in rows], [r["busy_s"] for r in rows],
                     run["theory"]["bubble_fraction"]),
        check_in_flight(run["schedule"], [r["in_flight_chunks"] for r in rows],
                        [r["in_flight_chunks_theory"] for r in rows]),
        check_loss(run["losses"], reference),
        check_p2p(run["schedule"], rows),
        *([check_dp_comm(rows)] if run["dp"] > 1 else []),
    ]


def compare_checks(runs: Mapping[str, ScheduleRun]) -> list[Check]:
    def flights(name: str) -> list[int]:
        return [r["in_flight_chunks"] for r in runs[name]["ranks"]]

    def bubbles(name: str) -> list[float]:
        return [r["bubble"] for r in runs[name]["ranks"]]

    return [check_gpipe_holds_more(flights("gpipe"), flights("1f1b")),
            check_interleaved_smaller(bubbles("interleaved"), bubbles("1f1b"))]


def combined(per_run: Mapping[str, Sequence[Check]]) -> list[Check]:
    """One check per name over several runs (--compare): passed where every run's passed, details joined."""
    names = [c.name for c in next(iter(per_run.values()), [])]
    out = []
    for name in names:
        found = [c for checks in per_run.values() for c in checks if c.name == name]
        out.append(Check(name, all(c.passed for c in found), " | ".join(c.detail for c in found),
                         {run: c.values for run, c in zip(per_run, found)}))
    return out
