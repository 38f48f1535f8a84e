"""Rank 0's verdict on how the learner's code ran: collected from the board, said as a reviewer would.

`collect` polls the board until every rank has posted its outcome, or one failed and the others had a
moment to post theirs, or a rank has been running one case (or waiting) past the deadline without
posting. `health` turns what it found into the checks every kata carries (no_exception,
no_forbidden_call, no_deadlock, finishes, every_request_waited) and the lines that explain a failure;
`name_cycle` says what the waits of a deadlock have in common ("every rank receives before it sends").
Only `collect` touches the board; the rest are functions of the outcomes, so a test can feed them the
outcomes of any broken run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ddpfsdp.demos.katas.board import describe_wait
from ddpfsdp.demos.result.checks import Check

FAILED = ("raised", "forbidden", "deadline")
LEARNER_STATES = ("importing", "running", "waiting")  # the learner's code is running: the deadline applies


def collect(board: Any, world_size: int, deadline_s: float, limit_s: float, grace_s: float = 0.5,
            poll_s: float = 0.02) -> tuple[dict[int, dict], dict[int, dict]]:
    """Every rank's outcome, and the last state of each rank that posted none."""
    started = time.monotonic()
    first_failure: float | None = None
    while True:
        outcomes = board.outcomes()
        if len(outcomes) == world_size:
            return outcomes, {}
        now = time.monotonic()
        if first_failure is None and any(o.get("status") in FAILED for o in outcomes.values()):
            first_failure = now
        states = {rank: state for rank, state in board.states().items() if rank not in outcomes}
        overdue = [rank for rank, state in states.items() if state.get("what") in LEARNER_STATES
                   and time.time() - state.get("since", time.time()) > deadline_s + 1.0]
        if (first_failure is not None and now - first_failure >= grace_s) or overdue or now - started > limit_s:
            outcomes = board.outcomes()  # a last look: an outcome may have landed meanwhile
            return outcomes, {rank: state for rank, state in board.states().items() if rank not in outcomes}
        time.sleep(poll_s if now - started < 1.0 else 5 * poll_s)


@dataclass
class Health:
    """How the learner's code ran on every rank: the checks, the lines that explain a failure, and
    whether the ranks can leave together (`clean`)."""

    checks: list[Check]
    lines: list[str] = field(default_factory=list)  # the failure, for a person
    traceback: str = ""  # the first exception's, the learner's frames first
    clean: bool = True


def _status(rank: int, outcome: dict | None, state: dict | None, now_s: float) -> str:
    """What a rank that is not waiting on anyone was doing, in a few words."""
    if outcome is None:
        if state is None:
            return f"rank {rank} never started your code"
        if state.get("what") == "running":
            seconds = now_s - state.get("since", now_s)
            return (f"rank {rank} is still running your code, case {_case(state)}, after {seconds:.1f} s, waiting on "
                    "no peer")
        return f"rank {rank} is {state.get('what', 'somewhere')}"
    status = outcome.get("status")
    if status == "finished":
        return f"rank {rank} finished"
    if status == "raised":
        error = outcome.get("error", {})
        return f"rank {rank} raised {error.get('type')}: {error.get('message')}"
    if status == "forbidden":
        return f"rank {rank} called {outcome.get('op')}, which the kata forbids"
    return f"rank {rank}: {status}"


def _case(state: dict) -> str:
    return state.get("case_label") or str(state.get("case", 0) + 1)


def waits_of(outcomes: dict[int, dict], states: dict[int, dict]) -> dict[int, dict]:
    """Each rank's wait at the end: from its deadline outcome, or, when it posted nothing, its last state."""
    waits = {}
    for rank, outcome in outcomes.items():
        if outcome.get("status") == "deadline":
            waits[rank] = outcome["wait"]
    for rank, state in states.items():
        if state.get("what") == "waiting" and rank not in outcomes:
            waits[rank] = state["wait"]
    return waits


def name_cycle(waits: dict[int, dict], outcomes: dict[int, dict], world_size: int) -> str:
    """What the waits have in common, as a reviewer says it (no leading capital, no full stop)."""
    p2p = {rank: wait for rank, wait in waits.items() if wait.get("op") in ("send", "recv")}
    collective = {rank: wait for rank, wait in waits.items() if rank not in p2p}
    cycle = _cycle(p2p)
    if cycle:
        kinds = {p2p[rank]["op"] for rank in cycle}
        steps = {p2p[rank].get("step") for rank in cycle}
        who = "every rank" if len(cycle) == world_size else _ranks(cycle)
        if kinds == {"recv"}:
            if len(steps) > 1:
                return (f"{who} waits to receive, in different steps ({_steps(cycle, p2p)}): a rank skipped or "
                        "repeated a step, so the messages no longer pair up")
            return (f"{who} receives before it sends" if who == "every rank" else
                    f"{who} each receive before they send: none of them reaches its send")
        if kinds == {"send"}:
            return (f"{who} sends before it receives, and a send completes only once its receiver has posted the "
                    "receive (gloo and NCCL alike): post the receive first, or isend and irecv and wait on both")
        return f"{who} wait on each other around the cycle {' -> '.join(str(r) for r in [*cycle, cycle[0]])}"
    if collective and p2p:
        one, other = min(collective), min(p2p)
        return (f"rank {one} waits in {collective[one]['op']} while rank {other} waits for a message: the ranks call "
                "different operations, so neither is ever matched")
    if len({(w.get("op"), w.get("call")) for w in collective.values()}) > 1:
        return "the ranks wait in different collectives (or different calls of one): each must call the same ones in the same order"
    for rank, wait in sorted(p2p.items()):
        peer = wait.get("peer")
        peer_outcome = outcomes.get(peer, {})
        if peer_outcome.get("status") == "finished":
            what = "the message" if wait["op"] == "recv" else "the receive"
            return (f"rank {peer} finished without posting {what} rank {rank} waits for: a "
                    f"{'send' if wait['op'] == 'recv' else 'receive'} is missing, or goes to another rank")
    if collective and len(collective) < world_size:
        absent = sorted(set(range(world_size)) - set(collective))
        return f"{_ranks(absent)} never joined the {next(iter(collective.values()))['op']} the others wait in"
    return "no rank got the message it waits for"


def _ranks(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"


def _steps(cycle: list[int], waits: dict[int, dict]) -> str:
    return ", ".join(f"rank {rank} in step {waits[rank].get('step')}" for rank in cycle)


def _cycle(waits: dict[int, dict]) -> list[int]:
    """A cycle of ranks each waiting on the next (rank -> its peer), or [] when the waits form none."""
    for start in sorted(waits):
        path: list[int] = []
        rank: int | None = start
        while rank in waits and rank not in path:
            path.append(rank)
            rank = waits[rank].get("peer")
        if rank in path:
            return path[path.index(rank):]
    return []


def health(outcomes: dict[int, dict], states: dict[int, dict], world_size: int, deadline_s: float,
           p2p: bool, now_s: float | None = None) -> Health:
    """The checks every kata carries, from every rank's outcome (and the last state of those without one)."""
    now_s = time.time() if now_s is None else now_s
    raised = {r: o for r, o in sorted(outcomes.items()) if o.get("status") == "raised"}
    forbidden = {r: o for r, o in sorted(outcomes.items()) if o.get("status") == "forbidden"}
    waits = waits_of(outcomes, states)
    stuck = {r: s for r, s in sorted(states.items()) if r not in waits and r not in outcomes}
    pending = {r: o.get("pending", []) for r, o in sorted(outcomes.items()) if o.get("pending")}
    lines: list[str] = []
    traceback = ""
    checks: list[Check] = []

    if raised:
        rank, outcome = next(iter(raised.items()))
        error = outcome.get("error", {})
        traceback = error.get("traceback", "")
        detail = f"rank {rank} raised {error.get('type')}: {error.get('message')}{_where(error)}"
        if len(raised) > 1:
            detail += f" (and ranks {', '.join(str(r) for r in list(raised)[1:])})"
        lines.append(detail)
        checks.append(Check("no_exception", False, detail, {"ranks": list(raised), "type": error.get("type"),
                                                           "message": error.get("message"), "line": error.get("line")}))
    else:
        checks.append(Check("no_exception", True, f"no exception on any of {world_size} ranks"))

    if forbidden:
        rank, outcome = next(iter(forbidden.items()))
        detail = f"rank {rank}: {outcome.get('message')}{_where(outcome)}"
        lines.append(detail)
        checks.append(Check("no_forbidden_call", False, detail, {"ranks": list(forbidden), "op": outcome.get("op")}))
    else:
        checks.append(Check("no_forbidden_call", True, "only allowed calls"))

    if waits:
        per_rank = [describe_wait(waits[r]) if r in waits else _status(r, outcomes.get(r), states.get(r), now_s)
                    for r in range(world_size)]
        first_failed = raised or forbidden
        if first_failed:
            culprit = next(iter(first_failed))
            detail = (f"{'; '.join(describe_wait(waits[r]) for r in sorted(waits))}: rank {culprit} failed first (above), "
                      "so what they wait for never came")
            checks.append(Check("no_deadlock", None, detail, {"waits": waits},
                                not_judged=f"rank {culprit} failed first; the others waited for it"))
        else:
            labels = {wait.get("case_label") for wait in waits.values()}
            one_case = len(labels) == 1 and None not in labels
            per_rank = [describe_wait(waits[r], with_case=not one_case) if r in waits
                        else _status(r, outcomes.get(r), states.get(r), now_s) for r in range(world_size)]
            detail = f"{'; '.join(per_rank)}: {name_cycle(waits, outcomes, world_size)}"
            where = f", in case {next(iter(labels))}" if one_case else ""
            lines.insert(0, f"deadlock after the {deadline_s:g} s deadline{where}: " + detail)
            checks.append(Check("no_deadlock", False, detail, {"waits": {str(r): w for r, w in waits.items()},
                                                               "deadline_s": deadline_s}))
    else:
        checks.append(Check("no_deadlock", True, f"no wait passed the {deadline_s:g} s deadline"))

    if stuck:
        detail = "; ".join(_status(r, None, s, now_s) for r, s in stuck.items())
        detail += ": a loop that never ends, or work far too slow for the case"
        lines.append(detail)
        checks.append(Check("finishes", False, detail, {"ranks": list(stuck), "deadline_s": deadline_s}))
    else:
        checks.append(Check("finishes", True, f"every rank finished within the {deadline_s:g} s deadline"
                            if not waits and not raised and not forbidden else "no rank was left running"))

    if p2p:
        if pending:
            first = next(iter(pending.values()))[0]
            count = sum(len(p) for p in pending.values())
            detail = (f"{count} request{'s' if count != 1 else ''} never waited on, e.g. "
                      f"{describe_wait(first).replace(' waits', ' started', 1)}: wait on every request before "
                      "the buffer is used or the function returns")
            lines.append(detail)
            checks.append(Check("every_request_waited", False, detail, {"pending": {str(r): p for r, p in pending.items()}}))
        elif outcomes and all(o.get("status") == "finished" for o in outcomes.values()):
            checks.append(Check("every_request_waited", True, "every request was waited on"))
        else:
            checks.append(Check("every_request_waited", None, "the code did not finish on every rank", {},
                                not_judged="the code did not finish on every rank"))

    clean = (len(outcomes) == world_size and all(o.get("status") == "finished" for o in outcomes.values())
             and not pending)
    return Health(checks, lines, traceback, clean)


def _where(record: dict) -> str:
    where = record.get("where")
    return f" ({where})" if where else ""
