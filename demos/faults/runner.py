"""FaultRun: start N ranks of the failure lab, hold them to a deadline, stop every one, build the results.

    run = FaultRun(["desync"], procs=2, timeout_s=3)
    for event in run.events():       # start, progress (one per program), result (one per fault)
        ...
    run.result, run.results, run.error, run.leftover_pids()

The ranks are this module's children, started directly (see `rank`), each in its own session so a
Ctrl+C at the terminal reaches only us; every one carries the launcher's DDPFSDP_RUN_ID, so anything
left is found and killed the launcher's way (`kill_run`). Each fault must end within its process-group
timeout plus FAULT_GRACE_S, counted from rank 0's start of its first program; a run that overstays is
stopped and reported. Importing this module does not import torch.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ddpfsdp.demos.faults import catalog, report
from ddpfsdp.demos.faults.fault import PHASES
from ddpfsdp.demos.faults.rank import analysis_path, record_path
from ddpfsdp.demos.launch import events as event_protocol
from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.launch.hardware import free_port
from ddpfsdp.demos.launch.launcher import (
    RUN_ID_ENV,
    STOP_GRACE_S,
    LaunchError,
    kill_run,
    processes_with_env,
)

DEFAULT_TIMEOUT_S = 3.0
FAULT_GRACE_S = 10.0  # each fault ends within its timeout plus this
STARTUP_LIMIT_S = 120.0  # for the ranks to import torch and meet, on a busy machine
MAX_PROCS = 8
FR_BUFFER_SIZE = "4000"  # flight-recorder entries per rank; torch 2.13's default is 2000, older ones' 0
STDERR_TAIL_LINES = 40


NO_OPTIONS: list = []  # the registry's options for `fault`: its command parses its own


def launch_order(names: Sequence[str]) -> list[str]:
    """The faults of one launch, validated and ordered: those whose broken program ends cleanly first,
    then those that raise, then at most one that hangs, so nothing runs after a program that failed."""
    faults = []
    for name in names:
        try:
            faults.append(catalog.get(name))
        except ValueError as exc:
            raise LaunchError(str(exc)) from None
    hanging = [fault.name for fault in faults if fault.hangs]
    if len(hanging) > 1:
        raise LaunchError(f"one hanging fault per launch, so each ends within its timeout plus {FAULT_GRACE_S:g} s; got {', '.join(hanging)}")
    if len(set(names)) != len(names):
        raise LaunchError("a fault is named twice")
    return [fault.name for fault in sorted(faults, key=lambda f: (f.hangs, f.raises))]


class FaultRun:
    """One launch of N ranks running one or more faults (at most one that hangs)."""

    def __init__(self, faults: Sequence[str], *, procs: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S):
        if not 2 <= procs <= MAX_PROCS:
            raise LaunchError(f"--procs must be from 2 to {MAX_PROCS}: a fault needs ranks that disagree; got {procs}")
        if not 1 <= timeout_s <= 60:
            raise LaunchError(f"--timeout-s must be from 1 to 60 seconds, got {timeout_s:g}")
        self.faults = launch_order(list(faults))
        self.world_size = procs
        self.timeout_s = float(timeout_s)
        self.run_id = uuid.uuid4().hex
        self.results: dict[str, dict[str, Any]] = {}
        self.wall_s: dict[str, float] = {}
        self.error: Event | None = None
        self.cancelled = False
        self.returncode: int | None = None
        self.env: dict[str, Any] = {}
        self._procs: list[subprocess.Popen[str]] = []
        self._dir: Path | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_args(cls, args: Sequence[str]) -> FaultRun:
        """A run from a demo link's arguments: NAME [--procs N] [--timeout-s T] (the quiz's runner hook)."""
        args = list(args)
        options = {"--procs": 2, "--timeout-s": DEFAULT_TIMEOUT_S}
        for flag, cast in (("--procs", int), ("--timeout-s", float)):
            if flag in args:
                at = args.index(flag)
                options[flag] = cast(args[at + 1])
                del args[at : at + 2]
        return cls(args, procs=int(options["--procs"]), timeout_s=float(options["--timeout-s"]))

    @property
    def result(self) -> dict[str, Any] | None:
        return self.results.get(self.faults[0]) if len(self.faults) == 1 else None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled and len(self.results) == len(self.faults)

    # --- starting and stopping ------------------------------------------------------------------------

    def _environment(self, rank: int, port: int) -> dict[str, str]:
        from ddpfsdp.demos.launch.hardware import cpu_count

        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(self.world_size),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), RUN_ID_ENV: self.run_id,
            "PYTHONUNBUFFERED": "1",
        })
        env.setdefault("OMP_NUM_THREADS", str(max(1, cpu_count() // self.world_size)))
        env.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER_SIZE)
        return env

    def start(self) -> None:
        with self._lock:
            if self._procs or self.cancelled:
                return
            self._dir = Path(tempfile.mkdtemp(prefix="ddpfsdp-fault-"))
            port = free_port()
            command = [sys.executable, "-m", "ddpfsdp.demos.faults.rank", str(self._dir), str(self.timeout_s), *self.faults]
            for rank in range(self.world_size):
                with open(self._dir / f"rank{rank}.stderr", "w") as stderr:
                    self._procs.append(subprocess.Popen(
                        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                        stderr=stderr, text=True, bufsize=1, env=self._environment(rank, port), start_new_session=True))

    def cancel(self) -> None:
        """Stop every rank (safe from any thread); returns when all are gone, within about 5 s."""
        self.cancelled = True
        self._stop()

    def _stop(self) -> None:
        alive = [proc for proc in self._procs if proc.poll() is None]
        for proc in alive:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in alive:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        kill_run(self.run_id)
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    @property
    def pids(self) -> list[int]:
        """The rank processes this run started."""
        return [proc.pid for proc in self._procs]

    def leftover_pids(self) -> list[int]:
        return processes_with_env(RUN_ID_ENV, self.run_id)

    # --- the event stream -------------------------------------------------------------------------------

    def _fail(self, message: str, rank: int | None = None) -> None:
        if self.error is None:
            self.error = Event(event="error", rank=rank, message=message, traceback=self._stderr_tail())

    def _stderr_tail(self) -> str:
        tails = []
        for rank in range(self.world_size):
            path = self._dir / f"rank{rank}.stderr" if self._dir else None
            if path and path.is_file():
                lines = path.read_text(errors="replace").splitlines()[-STDERR_TAIL_LINES:]
                tails += [f"[rank{rank}]: {line}" for line in lines]
        return "\n".join(tails)

    def _watch(self) -> Iterator[Event]:
        """Rank 0's events until its stdout closes, holding the ranks to their deadlines."""
        assert self._procs[0].stdout is not None
        launched = time.monotonic()
        current: tuple[str, float] | None = None  # the fault under way and when its first program began
        for event in event_protocol.read_in_background(self._procs[0].stdout):
            now = time.monotonic()
            if self.cancelled:
                return
            if event is not None:
                if event.get("event") == "start":
                    self.env = event.get("env") or {}
                elif event.get("event") == "progress" and (current is None or current[0] != event.get("fault")):
                    if current is not None:
                        self.wall_s[current[0]] = now - current[1]
                    current = (event.get("fault"), now)
                elif event.get("event") == "error":
                    self._fail(event.get("message", "a rank failed"), event.get("rank"))
                yield event
            if current is None and now - launched > STARTUP_LIMIT_S:
                return self._fail(f"the ranks did not start within {STARTUP_LIMIT_S:g} s; every rank has been stopped")
            if current is not None and now - current[1] > self.timeout_s + FAULT_GRACE_S:
                return self._fail(f"fault {current[0]} did not end within its {self.timeout_s:g} s timeout plus "
                                  f"{FAULT_GRACE_S:g} s; every rank has been stopped")
        if current is not None:
            self.wall_s[current[0]] = time.monotonic() - current[1]

    def events(self) -> Iterator[Event]:
        """Start the run if needed and yield its events until every rank has exited, then the results."""
        self.start()
        if not self._procs:
            return
        try:
            yield from self._run_to_the_end()
            if not self.cancelled:
                yield from self._results() if self.error is None else [self.error]
        finally:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)

    def _run_to_the_end(self) -> Iterator[Event]:
        try:
            yield from self._watch()
            deadline = time.monotonic() + FAULT_GRACE_S
            for proc in self._procs if self.error is None and not self.cancelled else ():
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._fail("a rank did not exit after the run; every rank has been stopped")
                    break
        finally:
            # On success, failure, a deadline or an exception in the consumer (Ctrl+C): every rank goes.
            self._stop()
            self.returncode = max((abs(proc.returncode or 0) for proc in self._procs), default=0)
        if self.returncode and self.error is None and not self.cancelled:
            self._fail(f"a rank exited with status {self.returncode}")

    def _results(self) -> Iterator[Event]:
        import json

        assert self._dir is not None
        config = {"world_size": self.world_size, "device": "cpu", "backend": "gloo", "timeout_s": self.timeout_s}
        for name in self.faults:
            fault = catalog.get(name)
            phases = {}
            for phase in PHASES:
                records = []
                for rank in range(self.world_size):
                    path = record_path(self._dir, name, phase, rank)
                    records.append(json.loads(path.read_text()) if path.is_file() else None)
                analysis = analysis_path(self._dir, name, phase)
                phases[phase] = report.phase_result(fault, phase, records, json.loads(analysis.read_text()) if analysis.is_file() else None)
            result = report.build(fault, phases, config=config, env=self.env, wall_s=self.wall_s.get(name))
            self.results[name] = result
            yield Event(event="result", result=result)


def run_from_link(args: Sequence[str]) -> FaultRun:
    """The run a question's demo link starts (`demo = { name = "fault", args = ["desync"] }`)."""
    return FaultRun.from_args(args)
