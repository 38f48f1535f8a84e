"""The claims a straggler run bears out: a synchronous step waits for its slowest rank.

Pure functions of a straggler result's own block (`schema.Straggler`), so a test can hand them broken
numbers and watch them fail.

The tolerance. Each claim compares two times measured on the same ranks in the same run (the steps
without and with the delay taken in turn, so a burst of load from elsewhere weighs on both), and allows
a quarter of the delay plus the spread of the steps without it (their slowest less their fastest, on the
noisiest rank), the spread counted up to another quarter of the delay. The spread is this machine's own
noise, measured, not assumed: on a 2-core CPU shared with other processes a step can be held up by a
scheduler slice or two, and a sleep can overshoot by as much. The whole stays within half the delay, so
that the wrong answers stay outside it: a rank that did not wait for the slow one (a wait of 0), a slow
rank that waited as long as the others (the delay), a step that grew by the ranks' mean (base + delay / N:
half a delay short at N = 2, three quarters at N = 4, against the other claims). With no delay at all the
spread alone is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import Straggler, StragglerRank

DELAY_SHARE = 0.25  # of the delay, allowed beside the measured spread (see the module's docstring)


def _block(straggler: Straggler | Mapping[str, Any]) -> Straggler:
    return Straggler.from_json(straggler)


def spread_s(straggler: Straggler | Mapping[str, Any]) -> float:
    """The widest spread of the steps timed without the delay, over the ranks: this run's own noise."""
    spreads = [(r.base_step_s.max or 0.0) - (r.base_step_s.min or 0.0)
               for r in _block(straggler).ranks if r.base_step_s is not None]
    return max(spreads, default=0.0)


def tolerance_s(straggler: Straggler | Mapping[str, Any]) -> float:
    """A quarter of the delay and the measured spread, that up to another quarter (see the module)."""
    block = _block(straggler)
    delay, spread = block.delay_s or 0.0, spread_s(block)
    return DELAY_SHARE * delay + (min(spread, DELAY_SHARE * delay) if delay > 0 else spread)


def _ms(seconds: float | None) -> str:
    return "not measured" if seconds is None else f"{seconds * 1e3:.0f} ms"


def _others(block: Straggler) -> list[StragglerRank]:
    return [r for r in block.ranks if r.rank != block.slow_rank]


def _slow(block: Straggler) -> StragglerRank | None:
    return next((r for r in block.ranks if r.rank == block.slow_rank), None)


def straggler_sets_every_step(straggler: Straggler | Mapping[str, Any]) -> Check:
    """Every rank's slowed step (median) is the slow rank's, and about its own step without the delay plus the
    delay: at most that plus the tolerance, and at least the delay less the tolerance.

    Why the range is wider below: base + delay assumes the slow rank's own work takes as long as it did
    without the delay. Ranks that share CPU cores (with each other or anything else) compete for them in a
    step without the delay; in a slowed step the others wait in their collective while the slow rank
    computes, so it computes faster and the step falls short of base + delay by that much, by at most its
    own work: never below the delay, since every rank waits for the slow rank's sleep. On GPUs of their
    own no rank lends the slow one anything, and the step is base + delay. Where the step without the delay
    is long against the delay, the ranks' mean (base + delay / N) falls inside that range too; the waits
    (`others_wait_in_first_collective`, `slow_rank_does_not_wait`) tell the two apart.
    """
    block = _block(straggler)
    delay, tolerance = block.delay_s or 0.0, tolerance_s(block)
    slow = _slow(block)
    pace = slow.slowed_step_s.median if slow is not None and slow.slowed_step_s else None
    rows, misses = [], []
    for r in block.ranks:
        base = r.base_step_s.median if r.base_step_s else None
        slowed = r.slowed_step_s.median if r.slowed_step_s else None
        if base is None or slowed is None:
            misses.append(f"rank {r.rank}: not timed")
            continue
        off = slowed - (base + delay)
        rows.append({"rank": r.rank, "base_s": base, "slowed_s": slowed, "off_s": off})
        if off > tolerance:
            misses.append(f"rank {r.rank}: {_ms(slowed)} is {_ms(off)} over {_ms(base)} + {_ms(delay)}")
        elif slowed < delay - tolerance:
            misses.append(f"rank {r.rank}: {_ms(slowed)} is shorter than the delay")
        if pace is not None and abs(slowed - pace) > tolerance:
            misses.append(f"rank {r.rank}: {_ms(slowed)}, not the slow rank's {_ms(pace)}")
    if not rows or pace is None:
        misses.append("no rank was timed" if not rows else f"rank {block.slow_rank}, the slow one, was not timed")
    steps = ", ".join(f"rank {row['rank']} {_ms(row['base_s'])} -> {_ms(row['slowed_s'])}" for row in rows)
    short = min((row["off_s"] for row in rows), default=0.0)
    detail = (f"median step without -> with rank {block.slow_rank} sleeping {_ms(delay)}: {steps}; every rank takes "
              f"the slow rank's step, its own + {_ms(delay)} give or take {_ms(tolerance)} ({DELAY_SHARE:g} of the "
              f"delay + the spread of the steps without it, at most another {DELAY_SHARE:g})")
    if short < -tolerance:
        detail += (f"; {_ms(-short)} short of it: the slow rank computed alone on the shared CPU cores while the "
                   "others waited, and never below the delay")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("straggler_sets_every_step", not misses, detail,
                 {"delay_s": delay, "tolerance_s": tolerance, "slow_step_s": pace, "ranks": rows})


def others_wait_in_first_collective(straggler: Straggler | Mapping[str, Any]) -> Check:
    """In the recorded step every rank but the slow one sits in its first collective until the slow rank joins
    it: its wait is the time from its own issue to the slow rank's (the delay and the slow rank's work before
    the collective, less this rank's own), within the tolerance; which is the delay where the ranks' work
    takes as long.

    Times are counted from the barrier that starts the recorded step on every rank. Where the ranks have
    cores (or GPUs) of their own the correction is small and the wait is about the delay; where they
    outnumber the cores (4 ranks on 2), the others compute slower while they share the cores the slow rank
    left, issue later, and wait that much less.
    """
    block = _block(straggler)
    delay, tolerance = block.delay_s or 0.0, tolerance_s(block)
    slow = _slow(block)
    joined = slow.first_issued_s if slow is not None else None
    others = _others(block)
    rows, misses = [], []
    for r in others:
        if r.first_wait_s is None or r.first_issued_s is None or joined is None:
            misses.append(f"rank {r.rank}: no completed collective recorded from the aligned start")
            continue
        expected = joined - r.first_issued_s
        rows.append({"rank": r.rank, "wait_s": r.first_wait_s, "until_joined_s": expected})
        if abs(r.first_wait_s - expected) > tolerance:
            misses.append(f"rank {r.rank} waited {_ms(r.first_wait_s)}, the slow rank joined {_ms(expected)} after it")
    if not others:
        misses.append("no rank besides the slow one")
    waits = ", ".join(f"rank {row['rank']} waited {_ms(row['wait_s'])} (the slow rank joined {_ms(row['until_joined_s'])} "
                      f"after its issue)" for row in rows)
    work = None if joined is None else joined - delay
    detail = (f"first collective of the recorded step ({others[0].first_op if others else 'none'}): {waits}; rank "
              f"{block.slow_rank} joined at {_ms(joined)}, its {_ms(delay)} sleep and {_ms(work)} of its own work; "
              f"allowed {_ms(tolerance)}")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("others_wait_in_first_collective", not misses, detail,
                 {"delay_s": delay, "tolerance_s": tolerance, "joined_s": joined, "ranks": rows})


def slow_rank_does_not_wait(straggler: Straggler | Mapping[str, Any]) -> Check:
    """The slow rank finds the others already in its first collective: it completes at once, well within the
    tolerance, however long the others waited."""
    block = _block(straggler)
    delay, tolerance = block.delay_s or 0.0, tolerance_s(block)
    slow = _slow(block)
    wait = slow.first_wait_s if slow is not None else None
    passed = wait is not None and wait <= tolerance
    detail = (f"rank {block.slow_rank}, the slow one, spent {_ms(wait)} in its first collective "
              f"({slow.first_op if slow else 'none'}); at most {_ms(tolerance)} allowed, where the others "
              f"wait about the delay, {_ms(delay)}")
    if slow is None:
        detail = f"rank {block.slow_rank} is not among the ranks measured"
    return Check("slow_rank_does_not_wait", passed, detail,
                 {"delay_s": delay, "tolerance_s": tolerance, "wait_s": wait})


def straggler_checks(straggler: Straggler | Mapping[str, Any]) -> list[Check]:
    return [straggler_sets_every_step(straggler), others_wait_in_first_collective(straggler),
            slow_rank_does_not_wait(straggler)]
