"""The claims the `ddp`, `fsdp` and `compare` demos illustrate, as pure functions of measured numbers.

Each takes plain numbers (from a run's result and the analytic model) and returns a Check whose
detail states the numbers, so a test can hand it numbers that break the claim and watch it fail.
Tolerances: model-state bytes 1% plus an allowance for shard padding that is computed from the
model's own parameter shapes; wire bytes 5%; losses rtol 1e-4 in fp32.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ddpfsdp.demos.result.checks import Check, within
from ddpfsdp.demos.measure.blas_workspaces import HOPPER_DEFAULT_BYTES
from ddpfsdp.demos.result.schema import STATE_KINDS, CommOp, RankMemory
from ddpfsdp.demos.base.units import format_bytes

# A rank's memory and the ops of a step arrive typed (a DemoResult's blocks) or in their JSON form.
Ranks = Sequence[RankMemory | Mapping[str, Any]]
PerOp = Mapping[str, CommOp | Mapping[str, Any]]
STATE_REL = 0.01
WIRE_REL = 0.05
LOSS_RTOL_FP32 = 1e-4
LOSS_RTOL_LOW_PRECISION = 2e-2  # bf16 rounding differs with the reduction order of each strategy
MIB = 1024**2
PEAK_MARGIN_REL = 0.10  # the estimate leaves out small temporaries (the loss's casts, optimizer scratch)
# On a GPU the step's cuBLAS workspaces come from the same allocator as the tensors, and every run
# pays for them (measure/blas_workspaces.py): each rank's result says how much (`blas_workspaces`,
# from torch's own sizes), and a rank that does not say gets a Hopper's defaults, 2 x (32 + 1) MiB.
PEAK_MARGIN_CUDA_BYTES = HOPPER_DEFAULT_BYTES


def _mib(n: float | None) -> str:
    return "n/a" if n is None else format_bytes(n, "MiB", digits=3)


def _ranks(ranks: Ranks) -> list[RankMemory]:
    return [RankMemory.from_json(r) for r in ranks]


def _ops(per_op: PerOp) -> dict[str, CommOp]:
    return {op: CommOp.from_json(v) for op, v in per_op.items()}


def _op(per_op: PerOp, op: str) -> CommOp:
    return CommOp.from_json(per_op[op]) if op in per_op else CommOp()


def loss_decreases(losses: Sequence[float | None]) -> Check:
    finite = [x for x in losses if x is not None and math.isfinite(x)]
    diverged = next((step for step, x in enumerate(losses, start=1) if x is not None and not math.isfinite(x)), None)
    if diverged is not None:
        # the values travel as JSON, which writes nan and infinity as null: the detail keeps them
        return Check("loss_decreases", False, f"the loss diverged: {losses[diverged - 1]} at step {diverged} of "
                     f"{len(losses)} ({', '.join(f'{x:.4g}' for x in losses)})",
                     {"loss": list(losses), "diverged_step": diverged})
    if len(finite) != len(losses) or len(losses) < 2:
        return Check("loss_decreases", False, f"losses are missing or not finite: {list(losses)}", {"loss": list(losses)})
    first, last = losses[0], losses[-1]
    return Check(
        "loss_decreases",
        last < first,
        f"loss {first:.4f} at the first step, {last:.4f} at the last ({len(losses)} steps)",
        {"first": first, "last": last},
    )


def model_state_matches_theory(ranks: Ranks, theory: Mapping[str, Any], allowance: Mapping[str, int]) -> Check:
    """Every rank's params/grads/optimizer bytes within 1% (plus allowance) of the analytic model's."""
    ranks = _ranks(ranks)
    misses = []
    for r, held in enumerate(ranks):
        for kind in STATE_KINDS:
            expected = theory[f"{kind}_bytes"]
            if not within(held.state(kind), expected, STATE_REL, allowance.get(kind, 0)):
                misses.append(f"rank {r} {kind} {_mib(held.state(kind))} vs theory {_mib(expected)}")
    rank0 = ranks[0]
    summary = ", ".join(
        f"{kind} {_mib(rank0.state(kind))} (theory {_mib(theory[f'{kind}_bytes'])})" for kind in STATE_KINDS
    )
    detail = f"rank 0: {summary}" + (f"; off: {'; '.join(misses)}" if misses else "; every rank within 1% plus padding")
    return Check(
        "model_state_matches_theory",
        not misses,
        detail,
        {"measured": [{k: held.state(k) for k in STATE_KINDS} for held in ranks],
         "theory": {k: theory[f"{k}_bytes"] for k in STATE_KINDS}, "allowance": dict(allowance)},
    )


def comm_matches_theory(per_op: PerOp, theory_comm: Mapping[str, Mapping[str, Any]]) -> Check:
    """Each op's wire bytes per rank within 5% of theory, and no op theory does not expect."""
    per_op = _ops(per_op)
    misses = []
    parts = []
    for op in sorted(set(per_op) | set(theory_comm)):
        measured = _op(per_op, op).wire_bytes_per_rank or 0
        expected = theory_comm.get(op, {}).get("wire_bytes_per_rank", 0)
        parts.append(f"{op} {_mib(measured)} (theory {_mib(expected)})")
        if not within(measured, expected, WIRE_REL):
            misses.append(op)
    detail = "wire bytes per rank per step: " + ", ".join(parts)
    if misses:
        detail += f"; off by more than 5%: {', '.join(misses)}"
    return Check(
        "comm_matches_theory",
        not misses and bool(per_op),
        detail,
        {"measured": {op: v.wire_bytes_per_rank or 0 for op, v in per_op.items()},
         "theory": {op: v.get("wire_bytes_per_rank", 0) for op, v in theory_comm.items()}},
    )


def ddp_replicates_model_state(ranks: Ranks, unsharded_params_bytes: int) -> Check:
    """Every rank holds all the parameters and all the gradients, and the same optimizer state."""
    ranks = _ranks(ranks)
    full = all(r.params == unsharded_params_bytes and r.grads == unsharded_params_bytes for r in ranks)
    same_state = len({r.optimizer for r in ranks}) == 1
    return Check(
        "ddp_replicates_model_state",
        full and same_state,
        f"model params {_mib(unsharded_params_bytes)}; per rank params "
        f"{', '.join(_mib(r.params) for r in ranks)}, grads {', '.join(_mib(r.grads) for r in ranks)}, "
        f"optimizer {', '.join(_mib(r.optimizer) for r in ranks)}",
        {"unsharded_params": unsharded_params_bytes, "ranks": [{k: r.state(k) for k in STATE_KINDS} for r in ranks]},
    )


def _units(count: int) -> str:
    return f"{count} unit{'s' if count != 1 else ''}"


def ddp_uses_all_reduce(per_op: PerOp) -> Check:
    per_op = _ops(per_op)
    others = [op for op in ("all_gather", "reduce_scatter") if _op(per_op, op).count]
    count = _op(per_op, "all_reduce").count or 0
    return Check(
        "ddp_uses_all_reduce",
        count > 0 and not others,
        f"{count} all_reduce call{'s' if count != 1 else ''} per step"
        + (f"; also {', '.join(others)}" if others else "; no all_gather or reduce_scatter"),
        {"ops": {op: v.count or 0 for op, v in per_op.items()}},
    )


def fsdp_shards_model_state(
    ranks: Ranks, full: Mapping[str, int], shard_size: int, allowance: Mapping[str, int],
    name: str = "fsdp_shards_model_state",
) -> Check:
    """Each rank holds 1/shard_size of the full params, grads and optimizer state (1% plus padding)."""
    ranks = _ranks(ranks)
    misses = []
    for r, held in enumerate(ranks):
        for kind in STATE_KINDS:
            expected = full[kind] / shard_size
            if not within(held.state(kind), expected, STATE_REL, allowance.get(kind, 0)):
                misses.append(f"rank {r} {kind} {_mib(held.state(kind))} vs {_mib(expected)}")
    rank0 = ranks[0]
    detail = (
        f"1/{shard_size} of params {_mib(full['params'])}, grads {_mib(full['grads'])}, optimizer "
        f"{_mib(full['optimizer'])}; rank 0 holds {_mib(rank0.params)}, {_mib(rank0.grads)}, "
        f"{_mib(rank0.optimizer)}"
    )
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check(
        name,
        not misses,
        detail,
        {"full": dict(full), "shard_size": shard_size, "allowance": dict(allowance),
         "ranks": [{k: r.state(k) for k in STATE_KINDS} for r in ranks]},
    )


def fsdp_reduce_scatters_grads(per_op: PerOp, grad_bytes: int, *, hybrid: bool) -> Check:
    """Gradients leave backward by reduce-scatter (all of them); all_reduce only across HSDP replicas."""
    scattered = _op(per_op, "reduce_scatter").bytes or 0
    all_reduces = _op(per_op, "all_reduce").count or 0
    # the input is every gradient, padded to a multiple of the group: never less, a little more
    enough = scattered >= grad_bytes and within(scattered, grad_bytes, WIRE_REL)
    passed = enough and (hybrid or all_reduces == 0)
    detail = (
        f"reduce_scatter input {_mib(scattered)} per step for {_mib(grad_bytes)} of gradients; "
        f"{all_reduces} all_reduce calls" + (" (HSDP: across replicas)" if hybrid else "")
    )
    return Check(
        "fsdp_reduce_scatters_grads",
        passed,
        detail,
        {"reduce_scatter_bytes": scattered, "grad_bytes": grad_bytes, "all_reduce_count": all_reduces},
    )


def expected_all_gathers(unit_params: Sequence[int], sharding: str) -> int:
    """FSDP2 all-gathers each unit with parameters before its forward, and again before its backward
    when it was resharded after forward (full and hybrid: every unit but the root)."""
    nonempty = sum(1 for count in unit_params if count > 0)
    if sharding == "grad-op":
        return nonempty
    return nonempty + sum(1 for count in unit_params[:-1] if count > 0)


def fsdp_all_gathers_params(
    per_op: PerOp, unit_params: Sequence[int], sharding: str, gather_bytes_per_param: int
) -> Check:
    measured = _op(per_op, "all_gather")
    count = measured.count or 0
    gathered = measured.bytes or 0
    expected_count = expected_all_gathers(unit_params, sharding)
    resharded = sum(unit_params[:-1]) if sharding != "grad-op" else 0
    expected_bytes = (sum(unit_params) + resharded) * gather_bytes_per_param
    passed = count == expected_count and within(gathered, expected_bytes, WIRE_REL)
    return Check(
        "fsdp_all_gathers_params",
        passed,
        f"{count} all_gather call{'s' if count != 1 else ''} per step for {_units(sum(1 for u in unit_params if u))} "
        "with parameters "
        f"(expected {expected_count} for {sharding}); {_mib(gathered)} gathered "
        f"(expected {_mib(expected_bytes)})",
        {"count": count, "expected_count": expected_count, "bytes": gathered,
         "expected_bytes": expected_bytes},
    )


# ----------------------------------------------------------------------------- compare


def losses_agree(runs: Mapping[str, Sequence[float]], rtol: float, baseline: str = "ddp") -> Check:
    base = runs[baseline]
    worst = 0.0
    disagree = []
    for name, losses in runs.items():
        if len(losses) != len(base) or any(x is None for x in losses):
            disagree.append(name)
            continue
        for a, b in zip(losses, base):
            rel = abs(a - b) / max(abs(b), 1e-12)
            worst = max(worst, rel)
            if rel > rtol:
                disagree.append(name)
                break
    return Check(
        "losses_agree",
        not disagree,
        f"largest relative difference from {baseline}'s losses over {len(base)} steps: {worst:.2e} "
        f"(rtol {rtol:g})" + (f"; disagree: {', '.join(disagree)}" if disagree else ""),
        {"worst_rel": worst, "rtol": rtol, "disagree": disagree},
    )


def zro_shards_optimizer(zro: Ranks, ddp: Ranks, allowance_bytes: int) -> Check:
    """ZeroRedundancyOptimizer's ranks hold DDP's params and grads, and between them DDP's optimizer state once."""
    zro, ddp = _ranks(zro), _ranks(ddp)
    world = len(zro)
    ddp_opt = ddp[0].state("optimizer")
    same_params = all(z.params == d.params and z.grads == d.grads for z, d in zip(zro, ddp))
    total = sum(z.state("optimizer") for z in zro)
    # Optimizer state is partitioned by whole parameters, so one rank may hold up to a tensor more.
    shares = all(within(z.state("optimizer"), ddp_opt / world, STATE_REL, allowance_bytes) for z in zro)
    passed = same_params and shares and within(total, ddp_opt, STATE_REL)
    return Check(
        "zro_shards_optimizer",
        passed,
        f"optimizer per rank {', '.join(_mib(z.optimizer) for z in zro)} vs DDP's {_mib(ddp_opt)} "
        f"(sum {_mib(total)}); params and grads {'equal' if same_params else 'differ from'} DDP's",
        {"zro": [z.optimizer for z in zro], "ddp": ddp_opt, "allowance": allowance_bytes},
    )


def grad_op_holds_more_params_at_peak(grad_op: Ranks, full: Ranks) -> Check:
    """Grad-op keeps every unit's unsharded parameters from forward until its backward; full frees them.

    The claim is about the parameters held in the peak region, between forward and backward, which
    is measured directly. The whole-step peak is reported beside it but not judged: on a small model
    the logits and their gradient dominate it, and on CPU it can sit above the truth by the frees
    the tracker could not see (`untracked_free`).
    """
    grad_op, full = _ranks(grad_op), _ranks(full)
    held_grad_op = [r.params_after_forward for r in grad_op]
    held_full = [r.params_after_forward for r in full]
    peaks_grad_op = [r.peak for r in grad_op]
    peaks_full = [r.peak for r in full]
    passed = bool(held_grad_op) and len(held_grad_op) == len(held_full) and all(
        g is not None and f is not None and g > f for g, f in zip(held_grad_op, held_full)
    )
    return Check(
        "grad_op_holds_more_params_at_peak",
        passed,
        f"parameters held between forward and backward per rank: grad-op "
        f"{', '.join(_mib(p) for p in held_grad_op)} vs full {', '.join(_mib(p) for p in held_full)}; "
        f"whole-step peak grad-op {', '.join(_mib(p) for p in peaks_grad_op)} vs full "
        f"{', '.join(_mib(p) for p in peaks_full)}",
        {"grad_op_params_after_forward": held_grad_op, "full_params_after_forward": held_full,
         "grad_op_peak": peaks_grad_op, "full_peak": peaks_full},
    )


def activations_comparable(precision: str) -> bool:
    """Whether DDP's and FSDP's activations can be compared byte for byte: only where both keep them in
    one dtype. Under bf16-mixed DDP runs under autocast (fp32 residual stream) while FSDP2's
    MixedPrecisionPolicy casts the parameters (bf16 residual stream), so their activations differ in
    dtype, not in sharding, and the claim is left out there rather than failed."""
    return precision != "bf16-mixed"


def fsdp_leaves_activations_whole(ddp: Ranks, full: Ranks) -> Check:
    """FSDP shards the model state, not the activations: each rank's batch saves the same tensors.

    Per rank, the activations at FSDP full's peak (torch's FSDPMemTracker) are set beside those at
    DDP's (MemTracker). Had FSDP sharded them they would be 1/N of DDP's; held whole they are about
    DDP's (a little less where the peak falls after backward has freed the last block's). The claim
    passes where every rank's ratio is above the midpoint of 1/N and 1, and the model state is 1/N,
    which `fsdp_full_shards_everything` checks. The share of FSDP's peak the activations take is shown.
    """
    ddp, full = _ranks(ddp), _ranks(full)
    world = len(full)
    ratios: list[float | None] = []
    shares: list[float | None] = []
    for d, f in zip(ddp, full):
        a_ddp = (d.peak_breakdown or {}).get("activations")
        a_full = (f.peak_breakdown or {}).get("activations")
        ratios.append(a_full / a_ddp if a_ddp and a_full is not None else None)
        shares.append(a_full / f.peak if a_full is not None and f.peak else None)
    floor = (1 + 1 / world) / 2 if world else 1.0
    passed = world >= 2 and len(ddp) == world and all(r is not None and r > floor for r in ratios)
    shown = ", ".join("n/a" if r is None else f"{r:.2f}" for r in ratios)
    share = ", ".join("n/a" if s is None else f"{s:.0%}" for s in shares)
    return Check(
        "fsdp_leaves_activations_whole",
        passed,
        f"activations at the peak, FSDP full over DDP, per rank: {shown} (sharded would be {1 / max(world, 1):.2f}; "
        f"whole needs above {floor:.2f}); they are {share} of FSDP full's peak",
        {"ratios": ratios, "floor": floor, "activation_share_of_fsdp_peak": shares,
         "ddp_activations": [(d.peak_breakdown or {}).get("activations") for d in ddp],
         "fsdp_activations": [(f.peak_breakdown or {}).get("activations") for f in full]},
    )


def total_wire(per_op: PerOp) -> float:
    return sum(op.wire_bytes_per_rank or 0 for op in _ops(per_op).values())


def wire_ratio_holds(precision: str) -> bool:
    """Whether FSDP full sends 1.5x DDP's bytes at this precision: only where its gathers and its
    reduces move elements of one size, as DDP's all-reduce does. Under bf16-mixed FSDP gathers bf16
    and reduce-scatters fp32 while DDP all-reduces fp32: 2 + 2 + 4 against 4 + 4 bytes per parameter
    of ring traffic, the same bytes (1.0x), so the claim is left out there rather than failed."""
    return precision != "bf16-mixed"


def fsdp_wire_1_5x_ddp(fsdp_per_op: PerOp, ddp_per_op: PerOp) -> Check:
    fsdp_wire, ddp_wire = total_wire(fsdp_per_op), total_wire(ddp_per_op)
    ratio = fsdp_wire / ddp_wire if ddp_wire else float("inf")
    return Check(
        "fsdp_wire_1_5x_ddp",
        within(ratio, 1.5, WIRE_REL),
        f"FSDP full sends {_mib(fsdp_wire)} per rank per step, DDP {_mib(ddp_wire)}: {ratio:.3f}x (theory 1.5x, 5%)",
        {"fsdp_wire": fsdp_wire, "ddp_wire": ddp_wire, "ratio": ratio},
    )


def _fixed_margin(held: RankMemory, device: str) -> int:
    if device != "cuda":
        return 0
    measured = held.blas_workspaces
    return int(measured) if measured is not None else PEAK_MARGIN_CUDA_BYTES


def peak_within_bounds(
    ranks: Ranks, *, working_set_bytes: int, activation_bytes: int | None, device: str = "cpu",
) -> Check:
    """Every rank's measured peak is at least its model state and at most model state + the
    analytic working set + the analytic activations, plus a stated margin.

    Lower bound: between the end of backward and the optimizer step, params, grads and optimizer
    state all exist at once, so no honest peak is below them. Upper bound: only where the analytic
    model estimates activations (`activation_bytes` None: judged from below only, and said so).
    On a GPU the upper bound adds the rank's cuBLAS workspaces (`blas_workspaces`).
    """
    ranks = _ranks(ranks)
    margins = [_fixed_margin(held, device) for held in ranks]
    margin_fixed = max(margins, default=0)
    misses, parts = [], []
    for r, held in enumerate(ranks):
        state = held.model_state
        peak = held.peak
        if peak is None:
            misses.append(f"rank {r} has no peak")
            continue
        if peak < state:
            misses.append(f"rank {r} peak {_mib(peak)} below its model state {_mib(state)}")
        if activation_bytes is not None:
            upper = int((state + working_set_bytes + activation_bytes) * (1 + PEAK_MARGIN_REL)) + margins[r]
            if peak > upper:
                misses.append(f"rank {r} peak {_mib(peak)} above {_mib(upper)}")
            parts.append(f"rank {r}: {_mib(state)} <= {_mib(peak)} <= {_mib(upper)}")
        else:
            parts.append(f"rank {r}: {_mib(state)} <= {_mib(peak)}")
    margin = f"{PEAK_MARGIN_REL:.0%}" + (f" + cuBLAS workspaces {_mib(margin_fixed)}" if margin_fixed else "")
    detail = (f"model state <= peak <= model state + working set {_mib(working_set_bytes)} + activations "
              f"{_mib(activation_bytes)} + {margin}: " + "; ".join(parts))
    if activation_bytes is None:
        detail += " (no activation estimate for this model: the upper bound is not judged)"
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check(
        "peak_within_bounds",
        bool(ranks) and not misses,
        detail,
        {"peaks": [r.peak for r in ranks], "working_set": working_set_bytes,
         "activations": activation_bytes, "margin_rel": PEAK_MARGIN_REL, "margin_bytes": margin_fixed},
    )
