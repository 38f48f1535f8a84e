"""One real launch per demo configuration per test session, shared by every test that reads it.

A test asks conftest's session fixtures for a run by demo and arguments, as a user would type them:

    def test_fsdp_shards(demo_result):
        result = demo_result("fsdp", "--model", "tiny")          # the result, after asserting the run ended well
    def test_progress(demo_run):
        run = demo_run("compare", "--model", "tiny")             # the finished run: events, result, leftovers

The first test to ask launches the demo for real (the launcher, its agent, gloo ranks); every later
request with the same demo, arguments and world size reads that launch. Test modules therefore spell a
configuration the same way where their assertions allow it (the question bank's links first, as
tests/test_bank_evidence.py must run those anyway), and keep a configuration of their own where an
assertion needs one. A run that failed fails every test that reads it, with its error.

A training demo launched on real ranks also writes its recorded step as a Chrome trace (`--trace`, a
file rank 0 writes after the run; nothing it measures changes), so the trace tests read the same launch.

Under pytest-xdist the workers share one folder: a launch is written there as JSON, under a lock of its
own, so the first worker to ask launches it and every other worker reads the file (waiting on the lock
while the launch runs) instead of launching it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TRACED_DEMOS = ("ddp", "zro", "fsdp", "cp")

# Checks of a share of wall time on 4 ranks sharing 2 cores with the rest of the suite: the run judges
# each and shows its numbers, and a test feeds it broken numbers; a test of a shared launch asserts only
# its half that does not depend on time (tests/test_two_d_run.py).
TIMED_CHECKS = frozenset({"tp_collectives_on_critical_path"})


@dataclass
class FinishedRun:
    """A launch that has ended: what the launcher saw, kept for every test that reads it."""

    demo: str
    args: tuple[str, ...]
    procs: int
    events: list[dict[str, Any]]
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    returncode: int | None
    ok: bool
    leftover_pids: list[int]
    stderr_tail: list[str]
    trace: dict[str, Any] | None = None
    wall_s: float = 0.0
    logs: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return " ".join([self.demo, *self.args, f"(procs {self.procs})"])

    def assert_ok(self) -> dict[str, Any]:
        """The result, after asserting the run finished cleanly and left no process."""
        stderr = "\n".join(self.stderr_tail[-60:])
        assert self.error is None, f"{self.label} failed: {self.error}\n{stderr}"
        assert self.ok and self.result is not None, f"{self.label}: exit {self.returncode}, no result\n{stderr}"
        assert self.leftover_pids == [], f"{self.label} left processes {self.leftover_pids}"
        return self.result


def _name(key: Any) -> str:
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def shared_json(folder: Path, key: Any, make: Callable[[], Any]) -> Any:
    """What `make()` returned for `key` in this session, as JSON reads it back: made by the first worker
    to ask, under a lock of its own, and read from `folder` by every later one."""
    name = _name(key)
    saved = folder / f"{name}.json"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            partial = saved.with_suffix(".partial")
            partial.write_text(json.dumps(make()))
            os.replace(partial, saved)
        return json.loads(saved.read_text())


def _traced(demo: str, args: tuple[str, ...]) -> bool:
    return demo in TRACED_DEMOS and "--simulate" not in args and "--no-timeline" not in args and "--trace" not in args


class DemoRuns:
    """The session's launches, keyed by (demo, arguments, processes)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._done: dict[tuple[str, tuple[str, ...], int], FinishedRun] = {}

    def __call__(self, demo: str, *args: str, procs: int = 2) -> FinishedRun:
        if "--simulate" in args:
            procs = 1  # a simulated world is --world ranks in one process, whatever processes were asked
        key = (demo, tuple(str(a) for a in args), procs)
        if key not in self._done:
            self._done[key] = self._shared(*key)
        return self._done[key]

    def _shared(self, demo: str, args: tuple[str, ...], procs: int) -> FinishedRun:
        """The launch another worker of this session wrote, or this worker's own, written for them."""
        key = [demo, args, procs]
        trace_file = self.folder / f"{_name(key)}-trace.json"
        data = shared_json(self.folder, key, lambda: asdict(self._launch(demo, args, procs, trace_file)))
        return FinishedRun(**{**data, "args": tuple(data["args"])})

    @staticmethod
    def _launch(demo: str, args: tuple[str, ...], procs: int, trace_file: Path) -> FinishedRun:
        import time

        from ddpfsdp.demos.launch.launcher import DemoRun

        trace_path = trace_file if _traced(demo, args) else None
        extra = ["--trace", str(trace_path)] if trace_path else []
        started = time.monotonic()
        run = DemoRun(demo, [*args, *extra], procs=procs)
        events = list(run.events())
        trace = json.loads(trace_path.read_text()) if trace_path and trace_path.exists() else None
        return FinishedRun(
            demo=demo, args=args, procs=procs, events=events, result=run.result.to_json() if run.result else None,
            error=run.error,
            returncode=run.returncode, ok=run.ok, leftover_pids=run.leftover_pids(),
            stderr_tail=list(run.stderr_tail), trace=trace, wall_s=time.monotonic() - started,
            logs=[event["message"] for event in events if event["event"] == "log"],
        )
