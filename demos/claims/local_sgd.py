"""The claims a local-SGD run bears out against plain DDP on the same model, seed and data.

Pure functions of a local-SGD result's own block (`schema.LocalSgd`), so a test can hand them broken numbers
and watch them fail. torch's rules, from its 2.13 source (`parallel.local_sgd` quotes them):
  - the hook all-reduces gradients while its iteration count is below W, the warm-up: steps 0 to W - 1;
  - the averager averages at steps W, W + H, W + 2H, ... (0-based): `step >= warmup_steps` and
    `(step - warmup_steps) % period == 0`, its counter advanced once per optimizer step;
  - an averaging is one all-reduce of every parameter that holds a gradient, flattened into one buffer.
So over S steps local SGD all-reduces W + A times, A = ceil((S - W) / H), against DDP's S steps of gradient
buckets of the same bytes (fp32 gradients, fp32 parameters): a ratio of (W + A) / S, which tends to 1 / H.

Equality. Replicas are compared element by element against rank 0's: DDP's and the warm-up's replicas step
on the same all-reduced gradient and stay bitwise equal, and an averaging hands every rank the same
all-reduced buffer (a ring's result is reduced once and copied to every rank), so right after it the
replicas are bitwise equal too; between averagings each rank has stepped on its own batch and they differ.
The losses of the first W + 1 steps (the last of them computed on the weights the warm-up left) are held
to DDP's within LOSS_RTOL, room for DDP's reducer and the hook (`tensor.div_(group.size())`, torch's
ddp_comm_hooks/default_hooks.py) to divide by N in another order; on 2, 3 and 4 gloo ranks they measured
bitwise equal. After that the gap is measured and
reported, never judged: a few steps of a tiny model say nothing of convergence at scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import LocalSgd, LocalSgdRun

LOSS_RTOL = 1e-5


def averaging_steps(period: int, warmup: int, steps: int) -> list[int]:
    """The 0-based steps at which torch's PeriodicModelAverager averages: W, W + H, ... below `steps`
    (torch/distributed/algorithms/model_averaging/averagers.py, `average_parameters`)."""
    if period < 1 or warmup < 0:
        raise ValueError(f"a period of at least 1 and a warm-up of at least 0, got {period} and {warmup}")
    return list(range(warmup, steps, period))


def synchronous_steps(warmup: int, steps: int) -> list[int]:
    """The 0-based steps whose gradients the post-local-SGD hook all-reduces: those below the warm-up."""
    return list(range(min(max(warmup, 0), steps)))


def bytes_ratio(period: int, warmup: int, steps: int) -> float:
    """Theory: local SGD's all-reduced bytes over DDP's, with a parameter averaging as large as a step's
    gradients: (W + A) / S."""
    return (len(synchronous_steps(warmup, steps)) + len(averaging_steps(period, warmup, steps))) / steps


def _block(local_sgd: LocalSgd | Mapping[str, Any]) -> LocalSgd:
    return LocalSgd.from_json(local_sgd)


def _runs(block: LocalSgd) -> tuple[LocalSgdRun | None, LocalSgdRun | None]:
    return block.run("ddp"), block.run("local-sgd")


def _missing(block: LocalSgd, ddp: LocalSgdRun | None, local: LocalSgdRun | None) -> list[str]:
    """What keeps a check from reading the block at all."""
    if block.period is None or block.warmup is None or not block.steps:
        return ["the block names no period, warm-up or steps"]
    misses = [f"no {name} run" for name, run in (("ddp", ddp), ("local-sgd", local)) if run is None]
    misses += [f"the {run.name} run has {len(run.steps)} steps, not {block.steps}"
               for run in (ddp, local) if run is not None and len(run.steps) != block.steps]
    return misses


def _off(misses: list[str]) -> str:
    """The first four misses, for a detail line; empty when there are none."""
    if not misses:
        return ""
    return f"; off: {'; '.join(misses[:4])}" + (f" and {len(misses) - 4} more" if len(misses) > 4 else "")


def _short(steps: list[int]) -> str:
    return ", ".join(map(str, steps)) if steps else "none"


def all_reduces_follow_torch_schedule(local_sgd: LocalSgd | Mapping[str, Any]) -> Check:
    """DDP all-reduces gradients on every step; local SGD on every warm-up step as DDP does, then exactly one
    all-reduce of the parameters on each step torch's rule names (W, W + H, ...) and none on any other, on
    every rank."""
    block = _block(local_sgd)
    ddp, local = _runs(block)
    misses = _missing(block, ddp, local)
    if misses:
        return Check("all_reduces_follow_torch_schedule", False, "; ".join(misses), {})
    assert ddp is not None and local is not None and block.period is not None and block.warmup is not None
    expected = averaging_steps(block.period, block.warmup, block.steps or 0)
    synchronous = synchronous_steps(block.warmup, block.steps or 0)
    if block.averaged_steps != expected:
        misses.append(f"the block names averagings at {_short(block.averaged_steps)}, torch's rule {_short(expected)}")
    for d, s in zip(ddp.steps, local.steps):
        if not d.all_reduces or min(d.all_reduces) < 1:
            misses.append(f"DDP step {d.step}: {d.all_reduces} all-reduces per rank, not one or more")
        if s.step in synchronous:
            if s.all_reduces != d.all_reduces or s.all_reduce_bytes != d.all_reduce_bytes:
                misses.append(f"warm-up step {s.step}: {s.all_reduces} all-reduces of {s.all_reduce_bytes} B per "
                              f"rank, DDP's {d.all_reduces} of {d.all_reduce_bytes} B")
        elif s.step in expected:
            if set(s.all_reduces) != {1} or set(s.all_reduce_bytes) != {block.param_bytes}:
                misses.append(f"averaging step {s.step}: {s.all_reduces} all-reduces of {s.all_reduce_bytes} B per "
                              f"rank, not one of the parameters' {block.param_bytes} B")
        elif any(s.all_reduces):
            misses.append(f"local step {s.step}: {s.all_reduces} all-reduces per rank, not none")
    seen = [s.step for s in local.steps if s.step is not None and s.step >= block.warmup and any(s.all_reduces)]
    detail = (f"H {block.period}, W {block.warmup}, {block.steps} steps: DDP all-reduced on every step "
              f"({ddp.steps[0].all_reduces[0] if ddp.steps and ddp.steps[0].all_reduces else 0} on step 0 on rank 0); "
              f"local SGD on the warm-up steps {_short(synchronous)} as DDP did, then on {_short(seen)}, torch's rule "
              f"W + kH giving {_short(expected)}, one all-reduce of the {block.param_bytes:,} B of parameters each")
    detail += _off(misses)
    return Check("all_reduces_follow_torch_schedule", not misses, detail,
                 {"period": block.period, "warmup": block.warmup, "steps": block.steps, "expected": expected,
                  "seen": seen})


def _total_bytes(run: LocalSgdRun, rank: int) -> int:
    return sum(s.all_reduce_bytes[rank] if rank < len(s.all_reduce_bytes) else 0 for s in run.steps)


def local_sgd_all_reduces_fewer_bytes(local_sgd: LocalSgd | Mapping[str, Any]) -> Check:
    """Over the run each rank all-reduced (W + A) / S of DDP's bytes, as counted: the warm-up's gradients and A
    averagings of parameters as large as a step's gradients, against S steps of gradients."""
    block = _block(local_sgd)
    ddp, local = _runs(block)
    misses = _missing(block, ddp, local)
    if misses:
        return Check("local_sgd_all_reduces_fewer_bytes", False, "; ".join(misses), {})
    assert ddp is not None and local is not None and block.period is not None and block.warmup is not None
    expected = bytes_ratio(block.period, block.warmup, block.steps or 0)
    ranks = max((len(s.all_reduce_bytes) for s in ddp.steps), default=0)
    rows = []
    for rank in range(ranks):
        ddp_bytes, local_bytes = _total_bytes(ddp, rank), _total_bytes(local, rank)
        ratio = local_bytes / ddp_bytes if ddp_bytes else None
        rows.append({"rank": rank, "ddp_bytes": ddp_bytes, "local_sgd_bytes": local_bytes, "ratio": ratio})
        if ratio is None or abs(ratio - expected) > 1e-9 * expected or not ratio < 1:
            misses.append(f"rank {rank}: {local_bytes} B against DDP's {ddp_bytes} B")
    if not rows:
        misses.append("no rank counted")
    first = rows[0] if rows else {"ddp_bytes": 0, "local_sgd_bytes": 0, "ratio": None}
    measured = "not measured" if first["ratio"] is None else f"{first['ratio']:.4f}"
    detail = (f"all-reduced over {block.steps} steps on rank 0: DDP {first['ddp_bytes']:,} B, local SGD "
              f"{first['local_sgd_bytes']:,} B, a ratio of {measured}; expected (W + A) / S = "
              f"({block.warmup} + {len(averaging_steps(block.period, block.warmup, block.steps or 0))}) / "
              f"{block.steps} = {expected:.4f} (1 - {expected:.4f} = {1 - expected:.0%} saved; 1/H = "
              f"{1 / block.period:.2f} of DDP's over a long run)")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("local_sgd_all_reduces_fewer_bytes", not misses, detail, {"expected_ratio": expected, "ranks": rows})


def _worst(diffs: list[float]) -> float | None:
    """The largest difference over the ranks; nan where any rank's is not a number (max() would pass over it)."""
    if not diffs:
        return None
    return math.nan if any(not math.isfinite(d) for d in diffs) else max(diffs)


def replicas_drift_and_are_reaveraged(local_sgd: LocalSgd | Mapping[str, Any]) -> Check:
    """DDP's replicas are bitwise equal after every step; local SGD's after each warm-up step and right after
    each averaging, and different on every local step between averagings."""
    block = _block(local_sgd)
    ddp, local = _runs(block)
    misses = _missing(block, ddp, local)
    if misses:
        return Check("replicas_drift_and_are_reaveraged", False, "; ".join(misses), {})
    assert ddp is not None and local is not None and block.period is not None and block.warmup is not None
    averaged = set(averaging_steps(block.period, block.warmup, block.steps or 0))
    synchronous = set(synchronous_steps(block.warmup, block.steps or 0))
    drifted: list[float] = []
    for d in ddp.steps:
        worst = _worst(d.replica_diff)
        if worst is None or worst != 0:
            misses.append(f"DDP step {d.step}: replicas {worst} apart, not equal")
    for s in local.steps:
        worst = _worst(s.replica_diff)
        if worst is None:
            misses.append(f"local-SGD step {s.step}: not compared")
        elif math.isnan(worst):
            misses.append(f"local-SGD step {s.step}: a replica difference that is not a finite number")
        elif s.step in synchronous or s.step in averaged:
            if worst != 0:
                misses.append(f"step {s.step} ({'warm-up' if s.step in synchronous else 'averaged'}): replicas "
                              f"{worst:.3g} apart, not equal")
        elif worst > 0:
            drifted.append(worst)
        else:
            misses.append(f"local step {s.step}: replicas equal although each rank stepped alone")
    if len(local.steps) > max(synchronous | averaged, default=-1) + 1 and not drifted:
        misses.append("no local step left the replicas apart")
    detail = (f"max |p - p on rank 0| over every element and rank: DDP 0 on all {len(ddp.steps)} steps; local SGD 0 "
              f"after the warm-up steps ({_short(sorted(synchronous))}) and the averagings ({_short(sorted(averaged))}), "
              f"and {min(drifted, default=0):.3g} to {max(drifted, default=0):.3g} on the {len(drifted)} local steps "
              "between them")
    detail += _off(misses)
    return Check("replicas_drift_and_are_reaveraged", not misses, detail,
                 {"drift_min": min(drifted, default=None), "drift_max": max(drifted, default=None),
                  "local_steps": len(drifted)})


def loss_gap(local_sgd: LocalSgd | Mapping[str, Any]) -> list[float | None]:
    """Per step, local SGD's mean loss less DDP's (None where either was not measured)."""
    block = _block(local_sgd)
    ddp, local = _runs(block)
    if ddp is None or local is None:
        return []
    return [None if d.loss is None or s.loss is None else s.loss - d.loss for d, s in zip(ddp.steps, local.steps)]


def loss_matches_ddp_until_local_steps(local_sgd: LocalSgd | Mapping[str, Any]) -> Check:
    """The first W + 1 losses (the warm-up's, and the first local step's, computed on the weights the warm-up
    left) equal DDP's within LOSS_RTOL: the same model, seed, data and synchronous updates. After them the gap
    is reported as this run measured it, not judged."""
    block = _block(local_sgd)
    ddp, local = _runs(block)
    misses = _missing(block, ddp, local)
    if misses:
        return Check("loss_matches_ddp_until_local_steps", False, "; ".join(misses), {})
    assert ddp is not None and local is not None and block.warmup is not None
    gaps = loss_gap(block)
    shared = min(block.warmup + 1, block.steps or 0)
    bitwise = True
    for index in range(shared):
        d, s = ddp.steps[index].loss, local.steps[index].loss
        if d is None or s is None:
            misses.append(f"step {index}: a loss not measured")
        elif not (math.isfinite(s) and math.isfinite(d) and abs(s - d) <= LOSS_RTOL * abs(d)):
            misses.append(f"step {index}: {s:.6g} against DDP's {d:.6g}")
        bitwise = bitwise and d == s
    after = [g for g in gaps[shared:] if g is not None]
    last = gaps[-1] if gaps else None
    detail = (f"steps 0 to {shared - 1} (the warm-up and the first local step): local SGD's loss "
              f"{'bitwise equal to' if bitwise and not misses else 'within ' + format(LOSS_RTOL, 'g') + ' of'} DDP's; "
              f"then, measured in this run only: the gap (local SGD - DDP) "
              f"{min(after, default=0):+.4f} to {max(after, default=0):+.4f} over {len(after)} steps, "
              f"{'not measured' if last is None else format(last, '+.4f')} at the last")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("loss_matches_ddp_until_local_steps", not misses, detail,
                 {"rtol": LOSS_RTOL, "shared_steps": shared, "bitwise": bitwise, "gaps": gaps})


def local_sgd_checks(local_sgd: LocalSgd | Mapping[str, Any]) -> list[Check]:
    return [all_reduces_follow_torch_schedule(local_sgd), local_sgd_all_reduces_fewer_bytes(local_sgd),
            replicas_drift_and_are_reaveraged(local_sgd), loss_matches_ddp_until_local_steps(local_sgd)]
