"""The claims a simulated run checks against the analytic model, as pure functions of its numbers.

A simulated run measures rank 0's shards, the collectives it issues and its allocations on fake
tensors; these checks hold those figures against `ddpfsdp.demos.theory.run` for the same
configuration, and a test feeds each one numbers that break it.
"""

from __future__ import annotations

from typing import Any, Mapping

from ddpfsdp.demos.result.checks import Check, within
from ddpfsdp.demos.result.schema import CommOp, RankMemory, VersusRow
from ddpfsdp.demos.base.units import format_bytes

# Rank 0's memory and the step's ops, typed (a DemoResult's blocks) or in their JSON form.
Rank = RankMemory | Mapping[str, Any]
PerOp = Mapping[str, CommOp | Mapping[str, Any]]
SIMULATED_REL = 0.01


def _wire(per_op: PerOp) -> float:
    return sum(CommOp.from_json(v).wire_bytes_per_rank or 0 for v in per_op.values())


def _bytes(n: float | None) -> str:
    return "n/a" if n is None else format_bytes(n, "iec")


def diff_percent(measured: float | None, theory: float | None) -> float | None:
    """(measured - theory) / theory in percent; None where theory is 0 or either is missing."""
    if measured is None or not theory:
        return None
    return 100.0 * (measured - theory) / theory


def simulated_model_state_matches_calc(rank: Rank, theory: Mapping[str, Any],
                                       allowance: Mapping[str, int] | None = None) -> Check:
    """Rank 0's params + grads + optimizer state within 1% of the analytic model's model state.

    `allowance`: bytes by kind a rank may hold beyond its exact share, from the model's own shapes
    (shard padding; zro partitions whole tensors), as the real demos allow.
    """
    measured = RankMemory.from_json(rank).model_state
    expected = theory["model_state_bytes"]
    slack = sum((allowance or {}).values())
    diff = diff_percent(measured, expected)
    return Check(
        "simulated_model_state_matches_calc",
        within(measured, expected, SIMULATED_REL, slack),
        f"model state per rank, simulated {_bytes(measured)} vs calc {_bytes(expected)}"
        + (f" ({diff:+.2f}%; 1% allowed" if diff is not None else " (1% allowed")
        + (f" plus {_bytes(slack)} for whole tensors and shard padding)" if slack else ")"),
        {"measured": measured, "theory": expected, "diff_percent": diff, "allowance": slack},
    )


def simulated_wire_matches_calc(per_op: PerOp,
                                theory_comm: Mapping[str, Mapping[str, Any]], padding_bytes: int = 0) -> Check:
    """Wire bytes per rank per step, over all ops, within 1% of the analytic model's, and some sent.

    `padding_bytes`: what FSDP sends for padding each parameter's dim 0 to a multiple of its shard
    group (the analytic model leaves padding out); allowed above theory, never below it.
    """
    measured = _wire(per_op)
    expected = sum(v.get("wire_bytes_per_rank", 0) for v in theory_comm.values())
    diff = diff_percent(measured, expected)
    close = within(measured, expected, SIMULATED_REL) or (
        padding_bytes > 0 and within(measured, expected + padding_bytes, SIMULATED_REL))
    return Check(
        "simulated_wire_matches_calc",
        measured > 0 and close,
        f"wire bytes per rank per step, simulated {_bytes(measured)} vs calc {_bytes(expected)}"
        + (f" ({diff:+.2f}%, 1% allowed" if diff is not None else " (1% allowed")
        + (f"; FSDP's dim-0 padding adds {_bytes(padding_bytes)})" if padding_bytes else ")"),
        {"measured": measured, "theory": expected, "diff_percent": diff, "padding": padding_bytes},
    )


def simulated_peak_holds_largest_unit(peak_bytes: int | None, model_state_bytes: int,
                                      unit_bytes: int | None, unit: str | None = None) -> Check:
    """FSDP full: the step's peak sits above the model state by at least one unsharded unit.

    Between steps a rank holds only shards; at some point in the step it must also hold a whole
    unit's gathered parameters, so the peak cannot be less than both together.
    """
    above = None if peak_bytes is None else peak_bytes - model_state_bytes
    passed = bool(unit_bytes) and above is not None and above >= unit_bytes
    return Check(
        "simulated_peak_holds_largest_unit",
        passed,
        f"peak {_bytes(peak_bytes)} is {_bytes(above)} above the model state {_bytes(model_state_bytes)}; "
        f"the largest unit ({unit or 'unknown'}) unsharded is {_bytes(unit_bytes)}",
        {"peak": peak_bytes, "model_state": model_state_bytes, "above": above, "unit_bytes": unit_bytes},
    )


def versus_theory(rank: Rank, per_op: PerOp, theory: Mapping[str, Any]) -> list[VersusRow]:
    """Rows of simulated vs analytic figures, with the difference in percent."""
    held = RankMemory.from_json(rank)
    ops = {op: CommOp.from_json(v) for op, v in per_op.items()}
    rows = []
    for kind, label in (("params", "params"), ("grads", "grads"), ("optimizer", "optimizer state")):
        rows.append((label, held.state(kind), theory[f"{kind}_bytes"]))
    rows.append(("model state", held.model_state, theory["model_state_bytes"]))
    theory_comm = theory.get("comm", {})
    for op in sorted(set(ops) | set(theory_comm)):
        rows.append((f"{op} wire bytes", (ops.get(op) or CommOp(wire_bytes_per_rank=0)).wire_bytes_per_rank,
                     theory_comm.get(op, {}).get("wire_bytes_per_rank", 0)))
    rows.append(("wire bytes per step", _wire(ops), sum(v.get("wire_bytes_per_rank", 0) for v in theory_comm.values())))
    return [VersusRow(figure=label, simulated=measured, theory=expected, diff_percent=diff_percent(measured, expected))
            for label, measured, expected in rows]
