"""Stragglers: a synchronous step waits for its slowest rank.

All theory; nothing here is measured.

- The step. With DDP or FSDP every rank meets the others in each step's collectives (DDP's gradient
  all-reduce, FSDP's all-gathers and reduce-scatters), and a collective cannot end before its last
  rank has joined it. So a step at N ranks takes the maximum of the N ranks' own times, not their mean:
  the fast ranks spend the difference waiting inside the collective.
- A rare slow step. If each rank, independently, has probability p of a slow step (a page fault, a
  thermal throttle, a noisy neighbour on the network, a garbage collection), the step is slow when at
  least one rank is: P(slow step) = 1 - (1 - p)^N. At p = 0.1% that is 1.0% at 10 ranks, 9.5% at
  100, 63% at 1,000 and 99.995% at 10,000: at that scale nearly every step has a straggler.
- The expected step. A slow rank adds a delay d; several slow ranks in one step overlap (the step
  waits for the slowest, not for the sum), so with one delay d for all of them the expected step is
  base + d * P(slow step).
- A persistently slow rank (one node whose backward takes 800 ms where the others take 500 ms) sets
  every step: the others wait 300 ms in the collective each step, and the job runs at 500/800 = 62.5%
  of its compute rate however many ranks are fast.
- Jitter. For step times that vary about a mean mu with standard deviation sigma (Gaussian,
  independent), the expected maximum of N grows like sigma * sqrt(2 ln N): E[max] <= mu + sigma *
  sqrt(2 ln N), the standard bound on the maximum of N Gaussian variables, so a 1% jitter becomes a
  4.3% longer step at 10,000 ranks.
- A delay longer than the process group's time-out does not slow the step: the collective is
  aborted and the job fails (torch's default time-out is 10 minutes for NCCL, 30 for other backends:
  `init_process_group`'s `timeout`).

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

NCCL_DEFAULT_TIMEOUT_S = 600.0
"""`init_process_group`'s default time-out for NCCL in torch 2.13 (10 minutes; 30 for other backends)."""


def check_probability(p: Any, what: str = "per-rank probability") -> float:
    """A probability in [0, 1]; a ValueError says what to give instead."""
    try:
        value = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number from 0 to 1 (e.g. 0.001 for 0.1%), got {p!r}") from None
    if not 0 <= value <= 1 or math.isnan(value):
        raise ValueError(f"{what} must be from 0 to 1 (e.g. 0.001 for 0.1%), got {p!r}")
    return value


def check_ranks(n: Any) -> int:
    """A whole number of ranks, at least 1 ("10K" too)."""
    from ddpfsdp.demos.base.units import parse_count

    try:
        if isinstance(n, float) and not n.is_integer():
            raise ValueError(n)
        return parse_count(n)
    except ValueError:
        raise ValueError(f"the number of ranks must be a whole number of at least 1, got {n!r}") from None


def check_delay_s(delay_s: Any, timeout_s: float = NCCL_DEFAULT_TIMEOUT_S) -> float:
    """A straggler's delay: at least 0, and shorter than the collective's time-out, past which the job
    fails instead of waiting."""
    try:
        value = float(delay_s)
    except (TypeError, ValueError):
        raise ValueError(f"a delay is a number of seconds, got {delay_s!r}") from None
    if math.isnan(value) or value < 0:
        raise ValueError(f"a delay cannot be negative (got {delay_s!r} s); give 0 or more seconds")
    if value >= timeout_s:
        raise ValueError(f"a delay of {value:g} s reaches the collective's time-out ({timeout_s:g} s, NCCL's default): "
                         "the job would fail, not wait; give a delay shorter than the time-out")
    return value


def check_step_s(step_s: Any) -> float:
    try:
        value = float(step_s)
    except (TypeError, ValueError):
        raise ValueError(f"a step time is a number of seconds, got {step_s!r}") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"a step time must be more than 0 s, got {step_s!r}")
    return value


def slow_step_probability(p: float, ranks: int) -> float:
    """P(at least one of `ranks` independent ranks is slow) = 1 - (1 - p)^N, computed without
    cancellation for small p (1 - (1 - 1e-9)^10 in floating point loses most of its digits)."""
    p, ranks = check_probability(p), check_ranks(ranks)
    if p == 1:
        return 1.0
    return -math.expm1(ranks * math.log1p(-p))


def expected_step_s(base_s: float, delay_s: float, p: float, ranks: int) -> float:
    """base + delay x P(slow step): slow ranks of one step overlap, so the step waits one delay."""
    return check_step_s(base_s) + check_delay_s(delay_s) * slow_step_probability(p, ranks)


def persistent_straggler(base_s: float, slow_s: float) -> dict[str, float]:
    """One rank always takes `slow_s` where the others take `base_s`: every step takes `slow_s`."""
    base, slow = check_step_s(base_s), check_step_s(slow_s)
    if slow < base:
        raise ValueError(f"the slow rank's time ({slow:g} s) is shorter than the others' ({base:g} s): "
                         "swap them, or there is no straggler")
    return {"step_s": slow, "others_wait_s": slow - base, "efficiency": base / slow}


def jitter_bound_s(mean_s: float, std_s: float, ranks: int) -> float:
    """The bound on the expected slowest of N Gaussian step times: mu + sigma * sqrt(2 ln N)."""
    mean = check_step_s(mean_s)
    if not std_s >= 0:
        raise ValueError(f"a standard deviation cannot be negative, got {std_s!r}")
    return mean + std_s * math.sqrt(2 * math.log(check_ranks(ranks)))


class StragglerSection(TypedDict):
    """The `stragglers` section of the `ddpfsdp.calc/1` document; the times are None where not given."""

    theory: bool
    ranks: int
    p_rank: float
    p_slow_step: float
    slow_steps_per_1000: float
    steps_between_slow_steps: float
    delay_s: float | None
    step_s: float | None
    expected_step_s: float | None
    slowdown: float | None


def straggler_figures(*, ranks: int, p: float, delay_s: float | None = None, step_s: float | None = None,
                      timeout_s: float = NCCL_DEFAULT_TIMEOUT_S) -> StragglerSection:
    """The `stragglers` section of `ddpfsdp calc --json`."""
    probability = slow_step_probability(p, ranks)
    figures: StragglerSection = {
        "theory": True,
        "ranks": check_ranks(ranks),
        "p_rank": check_probability(p),
        "p_slow_step": probability,
        "slow_steps_per_1000": 1000 * probability,
        "steps_between_slow_steps": math.inf if probability == 0 else 1 / probability,
        "delay_s": None,
        "step_s": None,
        "expected_step_s": None,
        "slowdown": None,
    }
    if delay_s is not None:
        figures["delay_s"] = check_delay_s(delay_s, timeout_s)
    if step_s is not None:
        figures["step_s"] = check_step_s(step_s)
    if delay_s is not None and step_s is not None:
        expected = expected_step_s(step_s, delay_s, p, ranks)
        figures["expected_step_s"] = expected
        figures["slowdown"] = expected / figures["step_s"]
    return figures


# ----------------------------------------------------------------------------- quiz answers


def q_slow_step_probability(*, p: Any, ranks: Any) -> float:
    """1 - (1 - p)^N: the share of steps in which at least one of N ranks is slow."""
    return slow_step_probability(check_probability(p), check_ranks(ranks))


def q_expected_step_s(*, step_s: Any, delay_s: Any, p: Any, ranks: Any) -> float:
    """Seconds per step on average: base + delay x (1 - (1 - p)^N)."""
    return expected_step_s(float(step_s), float(delay_s), check_probability(p), check_ranks(ranks))


def q_expected_step_ms(*, step_ms: Any, delay_ms: Any, p: Any, ranks: Any) -> float:
    """The same in milliseconds, as the drill asks it."""
    return 1e3 * q_expected_step_s(step_s=float(step_ms) / 1e3, delay_s=float(delay_ms) / 1e3, p=p, ranks=ranks)


def q_persistent_straggler_efficiency(*, step_s: Any, slow_step_s: Any) -> float:
    """The share of the fast ranks' time spent computing when one rank always takes `slow_step_s`."""
    return persistent_straggler(float(step_s), float(slow_step_s))["efficiency"]


QUIZ_FUNCTIONS = {
    "slow_step_probability": q_slow_step_probability,
    "straggler_expected_step_s": q_expected_step_s,
    "straggler_expected_step_ms": q_expected_step_ms,
    "persistent_straggler_efficiency": q_persistent_straggler_efficiency,
}
