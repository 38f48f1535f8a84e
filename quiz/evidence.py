"""What a demo's result says about a question: its evidence checks, the measured quantity, and the
figures worth showing (memory by component, throughput, traffic) in a form any front end can draw.

Pure functions over the result dict (schema ddpfsdp.demo/1); no torch or textual here, so viewing
saved evidence never imports either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ddpfsdp.quiz.loader import Question

COMPONENTS = ("params", "grads", "optimizer")
STRATEGY_ORDER = ("ddp", "zero1", "fsdp-grad-op", "fsdp-full")


@dataclass(frozen=True)
class EvidenceItem:
    name: str
    claim: str
    passed: bool | None  # None: this result does not carry the check, or does not judge it (not_judged)
    detail: str
    values: dict[str, Any]
    not_judged: str = ""  # why the run's placement cannot bear the claim out or refute it


def _item(name: str, claim: str, check: dict[str, Any]) -> EvidenceItem:
    reason = str(check.get("not_judged") or "")
    passed = None if reason and check.get("passed") is None else bool(check.get("passed"))
    return EvidenceItem(name, claim, passed, str(check.get("detail", "")), dict(check.get("values") or {}), reason)


def evidence(question: Question, result: dict[str, Any]) -> list[EvidenceItem]:
    """Each check the question names, as this result found it."""
    from ddpfsdp.demos.registry import DEMOS

    claims = DEMOS[question.demo.name].checks if question.demo and question.demo.name in DEMOS else {}
    found = {c.get("name"): c for c in _checks(result)}
    items = []
    for name in question.evidence:
        check = found.get(name)
        if check is None:
            items.append(EvidenceItem(name, claims.get(name, ""), None, "this result does not include the check", {}))
        else:
            items.append(_item(name, claims.get(name, ""), check))
    return items


def _checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    checks = result.get("checks")
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def all_checks(result: dict[str, Any]) -> list[EvidenceItem]:
    return [_item(str(c.get("name")), "", c) for c in _checks(result)]


def lookup(result: dict[str, Any], path: str) -> Any:
    """Follow a dotted path ("runs.fsdp-full.memory.ranks.0.optimizer"); None where it leads nowhere."""
    node: Any = result
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


def measured_value(question: Question, result: dict[str, Any] | None) -> float | None:
    if not question.measure or result is None:
        return None
    value = lookup(result, question.measure)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- where and when --------------------------------------------------------------------------------


def where(result: dict[str, Any]) -> str:
    config = result.get("config") or {}
    env = result.get("env") or {}
    world = config.get("world_size")
    device = config.get("device")
    backend = config.get("backend")
    if config.get("simulated"):
        return (f"simulated: rank 0 of a world of {world} ranks on fake tensors over a fake process group, "
                f"in one process" + (f", torch {env['torch']}" if env.get("torch") else ""))
    sharing = int(config.get("ranks_per_gpu") or 1)
    if device == "cuda" and sharing > 1:
        names = env.get("device_names") or []
        gpus = int(config.get("gpus") or 1)
        placed = f"{world} ranks sharing {'one GPU' if gpus == 1 else f'{gpus} GPUs'}" + (f" ({names[0]})" if names else "")
    elif device == "cuda":
        names = env.get("device_names") or []
        gpu = f" × {names[0]}" if names else ""
        placed = f"{world} GPUs{gpu}" if world else "GPUs"
    elif world:
        placed = f"{world} CPU processes"
    else:
        placed = "unknown devices"
    parts = [placed + (f" ({backend})" if backend else "")]
    if env.get("hostname"):
        parts.append(f"on {env['hostname']}")
    if env.get("torch"):
        parts.append(f"torch {env['torch']}")
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


def gloo_caveat(result: dict[str, Any]) -> str | None:
    config = result.get("config") or {}
    if result.get("demo") == "fault":
        return ("Run on CPU processes with gloo, the fixed program first: the error texts are gloo's; NCCL reports "
                "the same bugs in its own words.")
    if config.get("simulated"):
        return ("Simulated, not measured on hardware: real sharding, real collectives issued and the real "
                "allocation pattern of one step; no time, no NCCL, no fragmentation, so no throughput.")
    if config.get("shared_gpu"):
        return str(config["shared_gpu"])
    if config.get("backend") == "gloo" or config.get("device") == "cpu":
        return "Measured on CPU processes with gloo: memory and traffic carry over to GPUs, throughput does not represent NCCL on GPUs."
    return None


# --- figures to show ---------------------------------------------------------------------------


def fault_sides(result: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """A failure-lab result's two runs, broken then fixed: (phase, program, symptom lines) each; [] otherwise."""
    block = result.get("fault")
    if not isinstance(block, dict):
        return []
    sides = []
    for phase in ("broken", "fixed"):
        run = block.get(phase) if isinstance(block.get(phase), dict) else {}
        sides.append((phase, str(run.get("program") or ""), [str(line) for line in run.get("symptom") or []]))
    return sides


def runs(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Strategy -> training result: the runs of `compare`, or the one run of ddp/fsdp."""
    nested = result.get("runs")
    if isinstance(nested, dict):
        ordered = [k for k in STRATEGY_ORDER if k in nested] + [k for k in nested if k not in STRATEGY_ORDER]
        return {k: nested[k] for k in ordered if isinstance(nested[k], dict)}
    if isinstance(result.get("memory"), dict):
        config = result.get("config") or {}
        label = str(config.get("strategy") or result.get("demo") or "run")
        if config.get("sharding") and label == "fsdp":
            label = f"fsdp-{config['sharding']}"
        return {label: result}
    return {}


def memory_by_component(run: dict[str, Any], rank: int = 0) -> dict[str, float]:
    """Bytes rank `rank` holds per component, and its peak."""
    ranks = lookup(run, "memory.ranks")
    if not isinstance(ranks, list) or not ranks:
        return {}
    entry = ranks[rank] if rank < len(ranks) else ranks[0]
    return {k: float(entry[k]) for k in (*COMPONENTS, "peak") if isinstance(entry.get(k), (int, float))}


# The categories a training result's peak is split into (memory.ranks[r].peak_breakdown), in order.
PEAK_CATEGORIES = ("params", "unsharded_params", "grads", "optimizer", "all_gather", "reduce_scatter",
                   "ddp_buckets", "buffers", "inputs", "activations", "temporaries", "transient")


def peak_breakdown(run: dict[str, Any], rank: int = 0) -> dict[str, float]:
    """Bytes of each category at rank `rank`'s peak, in the fixed order; empty when not measured."""
    ranks = lookup(run, "memory.ranks")
    if not isinstance(ranks, list) or not ranks:
        return {}
    entry = ranks[rank] if rank < len(ranks) else ranks[0]
    parts = entry.get("peak_breakdown") if isinstance(entry, dict) else None
    if not isinstance(parts, dict):
        return {}
    return {k: float(parts[k]) for k in PEAK_CATEGORIES if isinstance(parts.get(k), (int, float)) and parts[k]}


def peak_where(run: dict[str, Any], rank: int = 0) -> str | None:
    """'backward, in blocks.3.mlp': the phase and module of rank `rank`'s peak; None when not measured."""
    ranks = lookup(run, "memory.ranks")
    if not isinstance(ranks, list) or not ranks:
        return None
    entry = ranks[rank] if rank < len(ranks) else ranks[0]
    phase = entry.get("peak_phase") if isinstance(entry, dict) else None
    if not phase:
        return None
    module = entry.get("peak_module")
    return f"{phase}, in {module}" if module else f"{phase}, outside the model's modules"


def throughput(run: dict[str, Any]) -> dict[str, float]:
    block = run.get("throughput") or {}
    figures = {k: float(block[k]) for k in ("samples_per_s", "tokens_per_s") if isinstance(block.get(k), (int, float))}
    step = block.get("step_time_s")
    if isinstance(step, dict) and isinstance(step.get("median"), (int, float)):
        figures["step_time_s"] = float(step["median"])
    return figures


def comm_per_step(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    block = lookup(run, "comm.per_step")
    return {op: v for op, v in block.items() if isinstance(v, dict)} if isinstance(block, dict) else {}


def scalar_measurements(result: dict[str, Any], limit: int = 12) -> list[tuple[str, str]]:
    """Top-level measured numbers of a concept demo, for a generic table."""
    rows: list[tuple[str, str]] = []
    skip = {"schema", "demo", "config", "env", "checks", "runs", "memory", "throughput", "comm", "loss", "theory"}

    def visit(prefix: str, value: Any, depth: int) -> None:
        if len(rows) >= limit:
            return
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, (int, float)):
            rows.append((prefix, format_bytes(value) if "bytes" in prefix else f"{value:,.6g}"))
        elif isinstance(value, dict) and depth < 2:
            for key, inner in value.items():
                visit(f"{prefix}.{key}" if prefix else str(key), inner, depth + 1)
        elif isinstance(value, list) and value and len(value) <= 8 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            rows.append((prefix, ", ".join(f"{v:,.6g}" for v in value)))

    for key, value in result.items():
        if key not in skip:
            visit(key, value, 0)
    return rows


def format_bytes(num_bytes: float) -> str:
    from ddpfsdp.demos.units import format_bytes as format_in

    return format_in(num_bytes, "iec")
