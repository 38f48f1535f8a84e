"""The 1F1B kata: one stage's forward and backward actions, judged against torch's own 1F1B loop, and the
whole pipeline of the learner's orders simulated with one time unit per action: its idle share against
theory, (p-1)/(m+p-1), and the micro-batches each stage holds in flight against min(m, p - s).

torch's oracle is the runtime loop itself, `Schedule1F1B._step_microbatches`, run on a stand-in stage that
records each forward_one_chunk and backward_one_chunk and sends nothing: the order a real 1F1B run executes.
It is not the schedule's `pipeline_order` IR (`_get_pipeline_order`), which in torch 2.13 numbers the last
stage's forwards from 1 (F1 ... Fm: F0 missing, Fm beyond the micro-batches), an off-by-one that the
runtime loop does not share.
"""

from __future__ import annotations

import contextlib
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, TypedDict

from ddpfsdp.demos.katas.claims import Mismatch
from ddpfsdp.demos.katas.judge import Case, PureJudge, compare_lists, flat_measured
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject


def torch_1f1b(stage: int, num_stages: int, num_microbatches: int) -> list[str]:
    """The actions torch's Schedule1F1B runs on `stage`, recorded from its own loop."""
    from torch.distributed.pipelining.schedules import Schedule1F1B

    seen: list[str] = []
    none = lambda *args, **kwargs: []  # noqa: E731 - the stand-in stage sends and receives nothing
    recorder = SimpleNamespace(
        stage_index=stage, get_fwd_recv_ops=none, get_fwd_send_ops=none, get_bwd_recv_ops=none,
        get_bwd_send_ops=none, perform_reduce_grad=none,
        forward_one_chunk=lambda index, *args, **kwargs: seen.append(f"F{index}"),
        backward_one_chunk=lambda index, **kwargs: seen.append(f"B{index}"))
    schedule = SimpleNamespace(
        _stage=recorder, _num_stages=num_stages, _n_microbatches=num_microbatches, scale_grads=True,
        _check_inputs=lambda args, kwargs, targets, losses: (args, kwargs), _initialize_stage=none,
        _maybe_compute_loss=none, _maybe_get_loss=none, _update_losses=none)
    Schedule1F1B._step_microbatches(schedule, [()] * num_microbatches, [{}] * num_microbatches)
    return seen


def configurations(world_size: int) -> list[tuple[int, int]]:
    """(stages, micro-batches) of the cases: this world's own, and a few others; torch refuses m < p."""
    own = [(world_size, m) for m in sorted({world_size, world_size + 1, 2 * world_size + 1, 8} - set(range(world_size)))]
    return own + [(2, 2), (3, 7), (5, 6), (6, 11)]


class OneFOneB(PureJudge):
    check_name = "equals_schedule_1f1b"
    oracle = "torch's Schedule1F1B"

    def cases(self, world_size: int, seed: int) -> list[Case]:
        return [Case(f"stage {s} of {p}, {m} micro-batches", {"stage": s, "num_stages": p, "num_microbatches": m})
                for p, m in configurations(world_size) for s in range(p)]

    def answer(self, params: JsonObject) -> list[str]:
        return torch_1f1b(params["stage"], params["num_stages"], params["num_microbatches"])

    def compare(self, got: Any, expected: list[str]) -> Mismatch | None:
        return compare_lists(got, expected, "action")

    @contextlib.contextmanager
    def forbid(self) -> Any:
        from torch.distributed.pipelining.schedules import Schedule1F1B

        from ddpfsdp.demos.katas.comm import KataForbidden

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise KataForbidden("Schedule1F1B", "Schedule1F1B is the answer one-f-one-b asks you to write")

        saved = {name: getattr(Schedule1F1B, name) for name in ("_step_microbatches", "_get_pipeline_order")}
        for name in saved:
            setattr(Schedule1F1B, name, refuse)
        try:
            yield
        finally:
            for name, original in saved.items():
                setattr(Schedule1F1B, name, original)

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        orders: dict[tuple[int, int], dict[int, Any]] = {}
        for _, index, numbers in runs:
            params = cases[index].params
            orders.setdefault((params["num_stages"], params["num_microbatches"]), {})[params["stage"]] = numbers["got"]
        return [*super().checks(cases, measured, world_size), bubble_matches_theory(orders),
                in_flight_at_most(orders)]


class Simulated(TypedDict):
    """A pipeline run with one time unit per action."""

    makespan: int
    idle: Fraction  # of the stages' time, over the makespan
    stuck: dict[int, str]  # stage -> the action it could never run (a deadlock); empty when it ran to the end


def simulate(orders: dict[int, list[str]], num_stages: int, num_microbatches: int) -> Simulated:
    """Run every stage's actions in its order, one time unit each, each waiting for what it needs: F(s, i) for
    F(s-1, i); B(s, i) for F(s, i) and B(s+1, i). The makespan and idle share, or where it deadlocks."""
    done: dict[tuple[str, int, int], int] = {}  # (kind, stage, micro-batch) -> time it ended
    position = dict.fromkeys(range(num_stages), 0)
    free_at = dict.fromkeys(range(num_stages), 0)
    actions = {stage: [str(a) for a in orders.get(stage) or []] for stage in range(num_stages)}
    progress = True
    while progress:
        progress = False
        for stage in range(num_stages):
            if position[stage] >= len(actions[stage]):
                continue
            action = actions[stage][position[stage]]
            kind, index = action[:1], int(action[1:]) if action[1:].isdigit() else -1
            if kind == "F":
                needs = [("F", stage - 1, index)] if stage > 0 else []
            else:
                needs = [("F", stage, index)] + ([("B", stage + 1, index)] if stage < num_stages - 1 else [])
            if kind not in ("F", "B") or not 0 <= index < num_microbatches or any(need not in done for need in needs):
                continue
            start = max([free_at[stage], *(done[need] for need in needs)])
            done[(kind, stage, index)] = free_at[stage] = start + 1
            position[stage] += 1
            progress = True
    stuck = {stage: actions[stage][position[stage]] for stage in range(num_stages) if position[stage] < len(actions[stage])}
    makespan = max(free_at.values()) if free_at else 0
    busy = sum(len(a) for a in actions.values())
    idle = Fraction(num_stages * makespan - busy, num_stages * makespan) if makespan else Fraction(0)
    return {"makespan": makespan, "idle": idle, "stuck": stuck}


def bubble_matches_theory(orders: dict[tuple[int, int], dict[int, Any]]) -> Check:
    """With one unit per action the pipeline runs to its end, and idles (p-1)/(m+p-1) of the time."""
    shown = []
    for (stages, microbatches), by_stage in sorted(orders.items()):
        run = simulate(by_stage, stages, microbatches)
        theory = Fraction(stages - 1, microbatches + stages - 1)
        if run["stuck"]:
            waits = "; ".join(f"stage {s} waits to run {a}" for s, a in sorted(run["stuck"].items()))
            return Check("bubble_matches_theory", False,
                         f"p={stages}, m={microbatches}: the pipeline deadlocks: {waits} (an action that needs what "
                         "comes later, or one that never comes)", {"stages": stages, "microbatches": microbatches})
        if run["idle"] != theory:
            return Check("bubble_matches_theory", False,
                         f"p={stages}, m={microbatches}: the simulated pipeline idles {float(run['idle']):.3f} of "
                         f"{run['makespan']} units; 1F1B's bubble is (p-1)/(m+p-1) = {float(theory):.3f}",
                         {"stages": stages, "microbatches": microbatches, "idle": float(run["idle"]),
                          "theory": float(theory)})
        shown.append(f"p={stages} m={microbatches}: {float(run['idle']):.3f}")
    return Check("bubble_matches_theory", True, "idle share of the simulated pipeline = (p-1)/(m+p-1): "
                 + "; ".join(shown[:4]) + ("; ..." if len(shown) > 4 else ""), {"configurations": len(shown)})


def in_flight_at_most(orders: dict[tuple[int, int], dict[int, Any]]) -> Check:
    """Stage s never holds more than min(m, p - s) micro-batches forwarded and not yet backward."""
    for (stages, microbatches), by_stage in sorted(orders.items()):
        for stage, actions in sorted(by_stage.items()):
            held = most = 0
            for action in actions or []:
                held += 1 if str(action).startswith("F") else -1 if str(action).startswith("B") else 0
                most = max(most, held)
            limit = min(microbatches, stages - stage)
            if most > limit:
                return Check("in_flight_at_most_p_minus_s", False,
                             f"p={stages}, m={microbatches}: stage {stage} holds {most} micro-batches' activations at "
                             f"once; 1F1B holds at most min(m, p - s) = {limit} (GPipe would hold all {microbatches})",
                             {"stages": stages, "microbatches": microbatches, "stage": stage, "held": most, "limit": limit})
    return Check("in_flight_at_most_p_minus_s", True, "every stage held at most min(m, p - s) micro-batches in flight")


ONE_F_ONE_B = OneFOneB()
