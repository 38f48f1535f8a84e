"""The board: what each rank of a kata run writes into the process group's store, for rank 0 to read.

    state/<rank>     what the rank is doing now: loading, running case i, or waiting (on what, since when)
    outcome/<rank>   how its run of the learner's code ended: finished (with its measurements), raised,
                     forbidden, deadline; written once
    verdict          rank 0's word to the others: "clean" (leave together) or "abort" (the run is over)

The store is the process group's own (a TCPStore served by rank 0), reached without any collective, so
it still answers when every rank is blocked in a receive or the group is broken: when a wait passes the
deadline, rank 0 reads every rank's wait from here and names the cycle. Each run writes under its own key,
so several katas can run one after another on the same ranks.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict

from ddpfsdp.demos.result.schema import JsonObject


class Wait(TypedDict, total=False):
    """What a rank waits on: a message from or to a peer, or a collective; where in the learner's code."""

    rank: int
    op: str  # "recv", "send", or a collective's name ("all_reduce")
    peer: int | None
    step: int  # messages this rank has received in the case so far
    call: int  # which call of a collective (0: its first in the case)
    case: int
    case_label: str
    direct: bool  # called through torch.distributed, not comm


class State(TypedDict, total=False):
    """A rank's latest word on the board: what it is doing, and since when (time.time())."""

    what: str  # "importing", "preparing", "running" or "waiting" (the learner's code is running in all but one)
    since: float
    case: int
    case_label: str
    wait: Wait


class Outcome(TypedDict, total=False):
    """How a rank's run of the learner's code ended, posted once."""

    status: str  # "finished", "raised", "forbidden" or "deadline"
    elapsed_s: float
    output: str  # what the learner's code printed on this rank
    measured: list[list[Any]]  # finished: [case index, the judge's numbers] per case it ran
    pending: list[Wait]  # finished: requests never waited on
    error: JsonObject  # raised: type, message, traceback, where, case
    op: str  # forbidden: the operation refused
    message: str  # forbidden: the refusal
    where: str  # forbidden: the line in the learner's file
    wait: Wait  # deadline: what it waited on

PREFIX = "ddpfsdp-kata"


class Board:
    def __init__(self, store: Any, run_key: str, rank: int, world_size: int) -> None:
        self._store = store
        self._prefix = f"{PREFIX}/{run_key}"
        self.rank = rank
        self.world_size = world_size
        self.last_wait: Wait | None = None

    @classmethod
    def of_default_group(cls, run_key: str) -> Board:
        import torch.distributed as dist

        return cls(dist.distributed_c10d._get_default_store(), run_key, dist.get_rank(), dist.get_world_size())

    def _key(self, name: str) -> str:
        return f"{self._prefix}/{name}"

    def _set(self, name: str, value: Any) -> None:
        self._store.set(self._key(name), json.dumps(value))

    def _read(self, name: str) -> Any:
        key = self._key(name)
        if not self._store.check([key]):
            return None
        return json.loads(self._store.get(key))

    # --- a rank writes -------------------------------------------------------------------------------

    def state(self, what: str, **fields: Any) -> None:
        self._set(f"state/{self.rank}", {"what": what, "since": time.time(), **fields})

    def running(self, case: int, case_label: str = "") -> None:
        self.state("running", case=case, case_label=case_label)

    def waiting(self, wait: Wait) -> None:
        self.last_wait = wait
        self.state("waiting", wait=wait)

    def post_outcome(self, outcome: Outcome) -> None:
        self._set(f"outcome/{self.rank}", outcome)

    # --- rank 0 reads --------------------------------------------------------------------------------

    def outcomes(self) -> dict[int, Outcome]:
        found = {}
        for rank in range(self.world_size):
            outcome = self._read(f"outcome/{rank}")
            if outcome is not None:
                found[rank] = outcome
        return found

    def states(self) -> dict[int, State]:
        found = {}
        for rank in range(self.world_size):
            state = self._read(f"state/{rank}")
            if state is not None:
                found[rank] = state
        return found

    def post_verdict(self, clean: bool) -> None:
        self._store.set(self._key("verdict"), "clean" if clean else "abort")

    def wait_verdict(self, timeout_s: float) -> bool | None:
        """True for clean, False for abort, None when rank 0 said nothing in `timeout_s`."""
        import datetime

        key = self._key("verdict")
        try:
            self._store.wait([key], datetime.timedelta(seconds=timeout_s))
        except RuntimeError:
            return None
        return self._store.get(key) == b"clean"


def describe_wait(wait: Wait, with_case: bool = True) -> str:
    """A wait as a reviewer says it: "rank 0 waits to receive from 1 in step 0"."""
    who = f"rank {wait.get('rank')}"
    op, peer, step = wait.get("op"), wait.get("peer"), wait.get("step")
    if op == "recv":
        text = f"{who} waits to receive from {peer} in step {step}"
    elif op == "send":
        text = f"{who} waits for its send to {peer} to be received, in step {step}"
    else:
        text = f"{who} waits in {op} #{wait.get('call', 0)}"
    notes = [f"torch.distributed.{op} called directly"] if wait.get("direct") else []
    if with_case and wait.get("case_label"):
        notes.append(f"case {wait['case_label']}")
    return text + (f" ({', '.join(notes)})" if notes else "")
