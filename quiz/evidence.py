"""What a demo's result says about a question: its evidence checks, the measured quantity, and the
figures worth showing (memory by component, throughput, traffic) in a form any front end can draw.

Pure functions over a result (demos/result/schema.py), typed or as saved; no torch or textual here, so viewing
saved evidence never imports either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Mapping

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import PEAK_CATEGORY_NAMES, STATE_KINDS, CommOp, DemoResult, Memory, RankMemory, as_result
from ddpfsdp.quiz.loader import Question

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.comm import OpFigures

# A result as the store, the launcher or a test hands it over (its JSON form), or already typed.
Result = DemoResult | Mapping[str, Any]

COMPONENTS = STATE_KINDS
PEAK_CATEGORIES = PEAK_CATEGORY_NAMES


@dataclass(frozen=True)
class EvidenceItem:
    name: str
    claim: str
    passed: bool | None  # None: this result does not carry the check, or does not judge it (not_judged)
    detail: str
    values: dict[str, Any]
    not_judged: str = ""  # why the run's placement cannot bear the claim out or refute it


def _item(name: str, claim: str, check: Check) -> EvidenceItem:
    reason = check.not_judged or ""
    passed = None if reason and check.passed is None else bool(check.passed)
    return EvidenceItem(name, claim, passed, check.detail, dict(check.values), reason)


def evidence(question: Question, result: Result) -> list[EvidenceItem]:
    """Each check the question names, as this result found it."""
    from ddpfsdp.demos.registry import DEMOS

    claims = DEMOS[question.demo.name].checks if question.demo and question.demo.name in DEMOS else {}
    result = as_result(result)
    items = []
    for name in question.evidence:
        check = result.check(name)
        if check is None:
            items.append(EvidenceItem(name, claims.get(name, ""), None, "this result does not include the check", {}))
        else:
            items.append(_item(name, claims.get(name, ""), check))
    return items


def all_checks(result: Result) -> list[EvidenceItem]:
    return [_item(c.name, "", c) for c in as_result(result).checks]


def lookup(result: Result, path: str) -> Any:
    """Follow a dotted path through the result's JSON ("runs.fsdp-full.memory.ranks.0.optimizer"), as a
    question's `measure` names it; None where it leads nowhere."""
    node: Any = as_result(result).to_json()
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            return None
        if node is None:
            return None
    return node


def measured_value(question: Question, result: Result | None) -> float | None:
    if not question.measure or result is None:
        return None
    value = lookup(result, question.measure)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- where and when --------------------------------------------------------------------------------


def where(result: Result) -> str:
    result = as_result(result)
    config, env = result.config, result.env
    world, device, backend = config.world_size, config.device, config.backend
    version = env.torch if env else None
    if config.simulated:
        return (f"simulated: rank 0 of a world of {world} ranks on fake tensors over a fake process group, "
                f"in one process" + (f", torch {version}" if version else ""))
    names = (env.device_names if env else None) or []
    sharing = config.ranks_per_gpu or 1
    if device == "cuda" and sharing > 1:
        gpus = config.gpus or 1
        placed = f"{world} ranks sharing {'one GPU' if gpus == 1 else f'{gpus} GPUs'}" + (f" ({names[0]})" if names else "")
    elif device == "cuda":
        gpu = f" × {names[0]}" if names else ""
        placed = f"{world} GPUs{gpu}" if world else "GPUs"
    elif world:
        placed = f"{world} CPU processes"
    else:
        placed = "unknown devices"
    parts = [placed + (f" ({backend})" if backend else "")]
    if env and env.hostname:
        parts.append(f"on {env.hostname}")
    if version:
        parts.append(f"torch {version}")
    return ", ".join(parts)


def age(then: datetime, now: datetime) -> str:
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 90:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def gloo_caveat(result: Result) -> str | None:
    """What the result's figures do not say (gloo's, a simulation's, a fault's on CPU); None on GPUs."""
    return as_result(result).caveat


# --- figures to show ---------------------------------------------------------------------------


def fault_sides(result: Result) -> list[tuple[str, str, list[str]]]:
    """A failure-lab result's two runs, broken then fixed: (phase, program, symptom lines) each; [] otherwise."""
    block = as_result(result).fault
    if block is None:
        return []
    sides = []
    for phase, run in (("broken", block.broken), ("fixed", block.fixed)):
        sides.append((phase, str(run.program or "") if run else "", [str(line) for line in run.symptom] if run else []))
    return sides


def runs(result: Result) -> dict[str, DemoResult]:
    """Strategy -> training result: the runs of `compare`, or the one run of ddp/fsdp (none of a concept
    or pipeline demo)."""
    from ddpfsdp.demos.measure.report import training_runs

    return training_runs(result)


def _rank(run: Result, rank: int) -> RankMemory | None:
    return (as_result(run).memory or Memory()).rank(rank)


def memory_by_component(run: Result, rank: int = 0) -> dict[str, float]:
    """Bytes rank `rank` holds per component, and its peak."""
    held = _rank(run, rank)
    if held is None:
        return {}
    figures = {"params": held.params, "grads": held.grads, "optimizer": held.optimizer, "peak": held.peak}
    return {k: float(v) for k, v in figures.items() if isinstance(v, (int, float))}


def peak_breakdown(run: Result, rank: int = 0) -> dict[str, float]:
    """Bytes of each category at rank `rank`'s peak, in the fixed order; empty when not measured."""
    held = _rank(run, rank)
    return held.peak_parts() if held else {}


def peak_where(run: Result, rank: int = 0) -> str | None:
    """'backward, in blocks.3.mlp': the phase and module of rank `rank`'s peak; None when not measured."""
    held = _rank(run, rank)
    return held.peak_where() if held else None


def throughput(run: Result) -> dict[str, float]:
    block = as_result(run).throughput
    if block is None:
        return {}
    figures = {"samples_per_s": block.samples_per_s, "tokens_per_s": block.tokens_per_s}
    step = block.step_time_s
    if step is not None:
        figures["step_time_s"] = step.median
    return {k: float(v) for k, v in figures.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def comm_per_step(run: Result) -> dict[str, CommOp]:
    comm = as_result(run).comm
    return {op: v for op, v in comm.per_step.items() if isinstance(v, CommOp)} if comm else {}


def theory_comm(run: Result) -> dict[str, OpFigures]:
    """The analytic model's traffic per op for the run's configuration (its JSON form); empty when none."""
    return (as_result(run).theory or {}).get("comm") or {}
