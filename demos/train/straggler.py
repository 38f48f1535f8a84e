"""A straggler on real ranks: one rank sleeps before every step, and the whole job waits for it.

    ddpfsdp demo straggler --procs 2 --slow-rank 1 --delay-ms 500
    ddpfsdp demo straggler --procs 4 --strategy fsdp --slow-rank 3

Every rank trains the same DDP or FSDP2 model (the one `parallelize()`, as `ddp` and `fsdp` do); after the
warm-up, `timed_steps_each` steps are timed as they are and as many with the slow rank sleeping
`delay_ms` before each step's forward, in turn (a stand-in for a slow data loader, a throttled GPU, a noisy
neighbour), then one more slowed step is recorded in time on every rank (`measure.timeline`). A collective
cannot complete on any rank before the last rank has joined it, so the others sit inside their first
collective of the step for about the delay, and every rank's step takes the slow rank's time: the step of
N ranks is the maximum of their N times (`theory.stragglers`), not their mean. The checks
(`claims.straggler`) hold the slowed step to the step without the delay plus the delay, the others' wait
in their first collective to the delay, and the slow rank to no wait of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ddpfsdp.demos.result.schema import DemoResult, StepTime, Straggler, StragglerRank, Timeline
from ddpfsdp.demos.result.step_record import RankStep
from ddpfsdp.demos.measure.trace import write_logged
from ddpfsdp.demos.train.spec import RunSpec

DELAY_SPAN = "straggler delay"  # the slow rank's sleep in its recorded step (phase "delay": not compute)
BARRIER_SPAN = "ranks aligned"  # the barrier that starts the recorded step together on every rank


@dataclass
class _RankFigures:
    """What one rank measured, gathered to rank 0."""

    rank: int
    base_s: list[float]
    slowed_s: list[float]
    timeline: RankStep


def _sleep(seconds: float) -> None:
    """Sleep `seconds`, to the end: time.sleep may wake early on a signal it retries after (PEP 475), and
    a shortfall would show up as a delay shorter than asked."""
    end = time.perf_counter() + seconds
    while (left := end - time.perf_counter()) > 0:
        time.sleep(left)


def _timed(trainer: Any, steps: int, delay_s: float) -> tuple[list[float], list[float]]:
    """This rank's wall time of `steps` steps as they are and of as many with `delay_s` slept before the
    forward, taken in turn (as, slowed, as, slowed, ...) so that whatever else loads the machine meanwhile
    weighs on both alike."""
    from ddpfsdp.demos.measure.memory import StepTimer

    timers = {False: StepTimer(trainer.device), True: StepTimer(trainer.device)}
    for slowed in (False, True) * steps:
        timer = timers[slowed]
        timer.start()
        with timer.step():
            if slowed and delay_s:
                _sleep(delay_s)
            loss = trainer.step()
        timer.stop()
        trainer.record("slowed" if slowed else "timed", loss, loss if trainer.on_cpu else None)
    return list(timers[False].times_s), list(timers[True].times_s)


def _recorded(ctx: Any, trainer: Any, delay_s: float) -> tuple[RankStep, list[str]]:
    """One slowed step recorded in time (spans, collectives issued and completed), and the units followed; the
    ranks start its work together, give or take a barrier's release (the barrier is not a counted collective)."""
    import torch.distributed as dist

    from ddpfsdp.demos.measure.memory import ddp_reducer_bytes
    from ddpfsdp.demos.measure.timeline import TimelineRecorder
    from ddpfsdp.demos.parallel.strategies import timeline_units

    followed = timeline_units(trainer.model, trainer.prepared)
    hidden_bytes = ddp_reducer_bytes(trainer.train_model) if trainer.on_cpu else 0
    recorder = TimelineRecorder(trainer.device, trainer.train_model, followed, trainer.optimizer,
                                hidden_bytes=hidden_bytes)
    with recorder:
        # Inside the recording, so what the recorder does on entering (a walk of the live tensors, the profiler's
        # start) cannot leave one rank starting its step later than another.
        recorder.begin(BARRIER_SPAN, "barrier")
        dist.barrier()
        recorder.end(BARRIER_SPAN, "barrier")
        if delay_s:
            recorder.begin(DELAY_SPAN, "delay")
            _sleep(delay_s)
            recorder.end(DELAY_SPAN, "delay")
        loss = trainer.step(recorder=recorder)
    timeline = recorder.to_dict(ctx.rank)
    recorder.release()
    trainer.record("recorded", loss, loss)
    return timeline, [name for name, _, _ in followed]


def _step_time(times_s: list[float]) -> StepTime:
    import statistics

    return StepTime(median=statistics.median(times_s), min=min(times_s), max=max(times_s))


def first_collective(rank: RankStep) -> tuple[str | None, float | None, float | None]:
    """A rank's first collective in the recorded step: its op, when it was issued counted from the end of the
    barrier that aligned the ranks (None: no barrier recorded), and its issue-to-completion time (None: not
    seen completed)."""
    collectives = sorted(rank.get("collectives", []), key=lambda c: c["seq"])
    if not collectives:
        return None, None, None
    first = collectives[0]
    aligned = next((s["end_s"] for s in rank.get("spans", []) if s["name"] == BARRIER_SPAN), None)
    done = first.get("completed_s")
    return (first["op"], None if aligned is None else first["issued_s"] - aligned,
            None if done is None else done - first["issued_s"])


def run_straggler(ctx: Any, spec: RunSpec) -> DemoResult | None:
    from ddpfsdp.demos.train.loop import Progress, Trainer

    ctx.log(f"straggler: {spec.strategy} on {ctx.world_size} ranks, rank {spec.slow_rank} sleeps "
            f"{spec.delay_ms:g} ms before each slowed step")
    started = time.perf_counter()
    trainer = Trainer(ctx, spec, Progress(None, 0, spec.steps))
    trainer.warm_up()
    delay_s = spec.designed_wait_s() if ctx.rank == spec.slow_rank else 0.0
    base, slowed = _timed(trainer, spec.timed_steps_each, delay_s)
    timeline, units = _recorded(ctx, trainer, delay_s)
    losses = trainer.mean_losses()
    description, params = trainer.prepared.describe(), trainer.params
    del trainer
    gathered: list[_RankFigures] | None = ctx.gather(_RankFigures(ctx.rank, base, slowed, timeline))
    if not ctx.is_main:
        return None
    return _result(ctx, spec, gathered, losses, (description, params, units), time.perf_counter() - started)


def _result(ctx: Any, spec: RunSpec, gathered: list[_RankFigures], losses: list[float],
            model: tuple[str, int, list[str]], wall_s: float) -> DemoResult:
    from ddpfsdp.demos.claims import straggler as claims
    from ddpfsdp.demos.theory.stragglers import persistent_straggler, slow_step_probability

    ranks = []
    for figures in gathered:
        op, issued_s, wait_s = first_collective(figures.timeline)
        ranks.append(StragglerRank(rank=figures.rank, base_step_s=_step_time(figures.base_s),
                                   slowed_step_s=_step_time(figures.slowed_s), first_op=op, first_issued_s=issued_s,
                                   first_wait_s=wait_s))
    block = Straggler(slow_rank=spec.slow_rank, delay_s=spec.designed_wait_s(), steps_each=spec.timed_steps_each,
                      ranks=ranks)
    base_s = ranks[spec.slow_rank].base_step_s.median
    # The analytic model of the same step: the slow rank's time sets every step; one slow rank in N in every
    # step is the p = 1 case of 1 - (1 - p)^N.
    theory = {"theory": True, **persistent_straggler(base_s, base_s + block.delay_s),
              "p_slow_step": slow_step_probability(1.0, ctx.world_size)} if block.delay_s else {"theory": True}
    description, params, units = model
    checks = claims.straggler_checks(block)
    config = {**spec.reported(), "params": params, "description": description, "slow_rank": spec.slow_rank,
              "delay_ms": spec.delay_ms, "timed_steps_each": spec.timed_steps_each}
    step = spec.warmup + 2 * spec.timed_steps_each
    result = ctx.result("straggler", config, checks, straggler=block,
                        timeline=Timeline(step=step, units=units, ranks=[g.timeline for g in gathered]),
                        loss=losses, theory=theory, wall_s=wall_s)
    write_logged(ctx.log, result, spec.trace)
    return result
