"""FaultRun: the failure lab's launch of N ranks, through the one launcher, held to each fault's deadline.

    run = FaultRun(["desync"], procs=2, timeout_s=3)
    for event in run.events():       # start, progress (one per program), result (one per fault)
        ...
    run.result, run.results, run.error, run.leftover_pids()

The ranks are started as every demo's are (`launch.launcher.DemoRun`, its agent, the worker), with two
settings of the launcher's own: a rank that fails does not stop the others (`on_failure="wait"`: a
broken program's symptom on the other ranks is what the lab shows), and the flight recorder keeps
FR_BUFFER_SIZE entries. What is the lab's own is the deadline: each fault must end within its
process-group timeout plus FAULT_GRACE_S, counted from the start of its first program, and the ranks
must start within STARTUP_LIMIT_S; a run that overstays is stopped and reported. The records the ranks
write go to a folder of this run's, removed at the end. Importing this module does not import torch.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence

from ddpfsdp.demos.faults import catalog
from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError
from ddpfsdp.demos.result.schema import DemoResult

DEFAULT_TIMEOUT_S = 3.0
FAULT_GRACE_S = 10.0  # each fault ends within its timeout plus this
STARTUP_LIMIT_S = 120.0  # for the ranks to import torch and meet, on a busy machine
MAX_PROCS = 8
FR_BUFFER_SIZE = "4000"  # flight-recorder entries per rank; torch 2.13's default is 2000, older ones' 0


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
        self.wall_s: dict[str, float] = {}  # each fault's, from its first program's start to the next fault's
        self._run: DemoRun | None = None
        self._current: tuple[str, float] | None = None  # the fault under way and when its first program began
        self._launched = 0.0
        self._folder: str | None = None
        self._cancelled = False

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

    # --- what the launcher saw ---------------------------------------------------------------------------

    @property
    def results(self) -> dict[str, DemoResult]:
        """Each fault's result, by name, as the ranks reported them."""
        held = self._run.results if self._run is not None else []
        return {result.config.extra.get("fault"): result for result in held}

    @property
    def result(self) -> DemoResult | None:
        return self.results.get(self.faults[0]) if len(self.faults) == 1 else None

    @property
    def error(self) -> Event | None:
        return self._run.error if self._run is not None else None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def returncode(self) -> int | None:
        return self._run.returncode if self._run is not None else None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled and len(self.results) == len(self.faults)

    def leftover_pids(self) -> list[int]:
        return self._run.leftover_pids() if self._run is not None else []

    # --- starting and stopping ------------------------------------------------------------------------

    def start(self) -> None:
        if self._run is not None or self._cancelled:
            return
        self._folder = tempfile.mkdtemp(prefix="ddpfsdp-fault-")
        asked = {"faults": self.faults, "timeout_s": self.timeout_s, "run_dir": self._folder}
        self._launched = time.monotonic()
        self._run = DemoRun("fault", asked=asked, procs=self.world_size, timeout_s=STARTUP_LIMIT_S, on_failure="wait",
                            watchdog=self._watch, extra_env={"TORCH_FR_BUFFER_SIZE": FR_BUFFER_SIZE})
        self._run.start()

    def cancel(self) -> None:
        """Stop every rank (safe from any thread); returns when all are gone, within about 5 s."""
        self._cancelled = True
        if self._run is not None:
            self._run.cancel()

    # --- the deadlines ------------------------------------------------------------------------------------

    def _watch(self, event: Event | None) -> str | None:
        """The launcher's watchdog: each fault's wall time from its progress events, and why the run must
        stop when a fault (or the start) overstays."""
        now = time.monotonic()
        if event is not None and event.get("event") == "progress" and (
                self._current is None or self._current[0] != event.get("fault")):
            if self._current is not None:
                self.wall_s[self._current[0]] = now - self._current[1]
            self._current = (event.get("fault"), now)
        elif event is not None and event.get("event") == "result" and self._current is not None:
            self.wall_s.setdefault(self._current[0], now - self._current[1])
        if self._current is None and now - self._launched > STARTUP_LIMIT_S:
            return f"the ranks did not start within {STARTUP_LIMIT_S:g} s; every rank has been stopped"
        if self._current is not None and self._current[0] not in self.wall_s and \
                now - self._current[1] > self.timeout_s + FAULT_GRACE_S:
            return (f"fault {self._current[0]} did not end within its {self.timeout_s:g} s timeout plus "
                    f"{FAULT_GRACE_S:g} s; every rank has been stopped")
        return None

    def events(self) -> Iterator[Event]:
        """Start the run if needed and yield its events (each fault's result among them) until every rank
        has exited, or a deadline has passed."""
        self.start()
        if self._run is None:
            return
        try:
            yield from self._run.events()
        finally:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)


def run_from_link(args: Sequence[str]) -> FaultRun:
    """The run a question's demo link starts (`demo = { name = "fault", args = ["desync"] }`)."""
    return FaultRun.from_args(args)
