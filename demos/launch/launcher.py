"""Start a demo on N ranks of this machine and stream its events: the one way any rank is started.

    run = DemoRun("fsdp", ["--model", "tiny"], procs=2)      # or DemoRun("fsdp", asked=spec, procs=2)
    for event in run.events():
        ...
    run.result, run.error, run.returncode

Every run starts here: the training and concept demos, the failure lab's programs, a learner's kata.
The demo's options are read once (`request`): parsed from `args`, or given already read as `asked`
(a training run's spec resolved for the device here, once); the run is placed once (`launch.placement`)
and checked for it; then both are handed to the agent and every rank as JSON in the environment
(`request.SPEC_ENV`, `base.placement.PLACEMENT_ENV`), so no rank parses a command line or works out
its placement again. What differs between kinds of run is two settings: what the agent does when a
rank fails (`on_failure`: stop the others, or let them run on to show their own symptom) and when a
run has overstayed (`deadline_s` for the whole run, or a `watchdog` that reads its events: a hang is
stopped and said to be one). Each result event's
JSON is read into a typed `DemoResult` once, on arrival (`results`).

The ranks are started and watched by an agent (`python -m ddpfsdp.demos.launch.agent`, which does for one
machine what torchrun's agent does, and on CPU forks the ranks with torch already imported). It runs
in its own session, so a Ctrl+C aimed at the terminal reaches only us; we then stop the agent with
SIGTERM, which it forwards to every rank before it exits. The agent is never SIGKILLed while ranks may
still be alive: its ranks would be orphaned. Every process of a run carries
DDPFSDP_RUN_ID in its environment, so anything left behind can be found and stopped.

Importing this module does not import torch.
"""

from __future__ import annotations

import collections
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ddpfsdp.demos import registry
from ddpfsdp.demos.launch import events as event_protocol
from ddpfsdp.demos.launch import request
from ddpfsdp.demos.launch.context import DEFAULT_TIMEOUT_S, FAIL_MODE_ENV, FAIL_RANK_ENV, FAIL_STEP_ENV, TIMEOUT_ENV
from ddpfsdp.demos.base.placement import PLACEMENT_ENV, Placement
from ddpfsdp.demos.launch.placement import (
    LaunchError,
    check_placement,
    cuda_device_count,
    needed_ranks,
    resolve_placement,
)
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.train.spec import RunSpec

RUN_ID_ENV = "DDPFSDP_RUN_ID"
STOP_GRACE_S = 4.0  # SIGTERM to the agent, then this long before anything left is killed
STDERR_TAIL_LINES = 200
# What the agent does when a rank fails: stop the others (torchrun's way), or let them run on to their own
# end (the failure lab: a broken program's symptom on the other ranks is what it shows).
ON_FAILURE = ("stop", "wait")


def processes_with_env(name: str, value: str) -> list[int]:
    """PIDs of live processes whose environment has name=value (Linux; [] elsewhere)."""
    needle = f"{name}={value}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat", "rb") as stat:
                        # A zombie has exited already; it only waits for its parent to reap it.
                        if stat.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                            found.append(int(entry))
        except OSError:
            continue
    return found


def kill_run(run_id: str, wait_s: float = 1.0) -> None:
    """SIGKILL every live process of a run (found by RUN_ID_ENV) and wait up to `wait_s` for them to go."""
    for pid in processes_with_env(RUN_ID_ENV, run_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while processes_with_env(RUN_ID_ENV, run_id) and time.monotonic() < deadline:
        time.sleep(0.05)


@dataclass(frozen=True)
class Failure:
    """What the failure report says about a rank that died without reporting an error itself."""

    rank: int | None
    message: str  # one line for a person; "" when the report could not be read
    rank_lines: tuple[str, ...]  # the failing rank's own last stderr lines, prefix removed


_ENTRY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ENTRY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")


def summarize_failure(lines: list[str], reported: frozenset[int] | set[int] = frozenset(), keep: int = 15) -> Failure:
    """Which rank ended the run, read from the failure report in torchrun's layout (the agent's, or
    torchrun's own), and how it ended.

    The report lists every failed rank with its exit code. Its "Root Cause" is only the first one
    observed; torchrun orders ranks that fail within the same second by rank, so a rank whose peer
    vanished can be named in the vanished rank's place. The rank to blame is one that failed without
    reporting an error itself (`reported` holds the ranks that did) and was not merely stopped; when no
    rank reported, the root cause. An uncaught exception on a rank is printed with the prefix
    `[rankN]:` (torch.distributed's excepthook), so that rank's own last lines can be shown. A negative
    exit code is a signal.
    """
    entries: list[tuple[int, int]] = []
    root: tuple[int, int] | None = None
    rank: int | None = None
    in_root = False
    for line in lines:
        if line.startswith("Root Cause"):
            in_root = True
        elif match := _ENTRY_RANK.match(line):
            rank = int(match.group(1))
        elif rank is not None and (match := _ENTRY_EXIT.match(line)):
            entries.append((rank, int(match.group(1))))
            if in_root and root is None:
                root = entries[-1]
            rank = None
    # Once a rank has reported, the launcher stops the rest, and a stopped rank exits with 1 or by
    # SIGTERM: only another exit (a signal such as SIGKILL or SIGSEGV, an os._exit) is a silent death.
    stopped = {-signal.SIGTERM, 1} if reported else {-signal.SIGTERM}
    silent = sorted(e for e in entries if e[0] not in reported and e[1] not in stopped)
    chosen = silent[0] if silent else None if reported else root
    if chosen is None:
        return Failure(None, "", ())
    rank, code = chosen
    own = tuple(_RANK_PREFIX.sub("", line) for line in lines if (m := _RANK_PREFIX.match(line)) and int(m.group(1)) == rank)[-keep:]
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    left = "" if own else " and left no traceback (a hard exit, a signal, or a crash in native code)"
    return Failure(rank, f"rank {rank} {how} before reporting an error{left}", own)


def _read(demo: str, args: list[str]) -> request.Asked:
    """What a demo is asked from its command line; a demo or an option that does not exist is a LaunchError."""
    import click

    try:
        return request.from_args(registry.get(demo), args)
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    except click.ClickException as exc:
        raise LaunchError(exc.format_message()) from None


@dataclass(frozen=True)
class Launch:
    """One start of the agent and its ranks: what they are asked, and where they run."""

    asked: request.Asked
    placement: Placement


def placed_like(first: Placement, world_size: int) -> Placement:
    """Where a later launch of `world_size` ranks goes, on the first one's device: CPU processes, or GPUs, one
    rank each as far as there are GPUs (those the first launch shared, where it shared them), the rest sharing."""
    if world_size == first.world_size or first.device != "cuda":
        return first if world_size == first.world_size else Placement(first.device, world_size)
    gpus = first.gpus if first.shared else max(first.gpus, cuda_device_count())
    used = max(g for g in range(1, min(gpus, world_size) + 1) if world_size % g == 0)
    return Placement("cuda", world_size, world_size // used)


def planned_launches(entry: registry.Demo, asked: request.Asked, placement: Placement, scratch: str) -> list[Launch]:
    """The launches of one run, in order: the demo's own plan (its `launches` hook: checkpoint-resume saves on N
    ranks, then resumes on M), each placed and checked before anything starts; else the one launch asked.
    `scratch` is a folder the run may use and the launcher removes when the run ends (not made here)."""
    if not entry.launches:
        return [Launch(asked, placement)]
    import click

    try:
        plan = [Launch(each, placement if world is None else placed_like(placement, world))
                for each, world in registry.load(entry.launches)(asked, placement.world_size, scratch)]
        for launch in plan:
            check_placement(entry, launch.asked, launch.placement)
    except click.ClickException as exc:
        raise LaunchError(exc.format_message()) from None
    return plan


def check_waits(asked: request.Asked, timeout_s: float | None) -> None:
    """Refuse a run that makes ranks wait in a collective as long as its time-out: the job would abort there
    instead of waiting (a straggler's delay)."""
    wait_s = asked.designed_wait_s() if isinstance(asked, RunSpec) else 0.0
    limit_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if wait_s >= limit_s:
        raise LaunchError(f"--delay-ms {wait_s * 1e3:g} makes the other ranks wait {wait_s:g} s in a collective, not "
                          f"less than the process group's time-out of {limit_s:g} s (--timeout-s): the job would "
                          f"abort there instead of waiting for the slow rank. Give a delay below {limit_s:g} s, or "
                          f"a longer --timeout-s")


class DemoRun:
    """One run of one demo on N ranks: one launch, or the launches its plan makes, one after another."""

    def __init__(
        self,
        demo: str,
        args: list[str] | tuple[str, ...] = (),
        *,
        asked: request.Asked | None = None,
        gpus: int | None = None,
        procs: int | None = None,
        ranks_per_gpu: int | None = None,
        placement: Placement | None = None,
        timeout_s: float | None = None,
        fail_rank: int | None = None,
        fail_step: int | None = None,
        fail_mode: str = "raise",
        extra_env: dict[str, str] | None = None,
        deadline_s: float | None = None,
        watchdog: Callable[[event_protocol.Event | None], str | None] | None = None,
        on_failure: str = "stop",
    ):
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure {on_failure!r}: choose one of {', '.join(ON_FAILURE)}")
        if timeout_s is not None and not (math.isfinite(timeout_s) and 0 < timeout_s <= request.MAX_TIMEOUT_S):
            # a rank turns it into a timedelta for its process group: nan or 1e400 would fail there, unseen
            raise LaunchError(f"--timeout-s must be a positive number of seconds, at most {request.MAX_TIMEOUT_S:,.0f}; "
                              f"got {timeout_s}")
        self.demo = demo
        self.args = [str(a) for a in args]
        self.asked = asked if asked is not None else _read(demo, self.args)
        entry = registry.get(demo)
        self.placement = placement or resolve_placement(gpus, procs, demo, request.cpu_procs(self.asked), ranks_per_gpu,
                                                        needed_ranks(entry, self.asked))
        world = request.simulated_world(self.asked)
        if world is not None:
            # --procs and --gpus do not apply: the simulated ranks are --world, all in one process.
            self.placement = Placement("fake", world)
        check_placement(entry, self.asked, self.placement)
        if isinstance(self.asked, RunSpec) and not self.placement.simulated:
            self.asked = self.asked.resolved(self.placement.device)  # once, where the device is known
        check_waits(self.asked, timeout_s)
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.watchdog = watchdog
        self.on_failure = on_failure
        self.fail_rank = fail_rank
        self.fail_step = fail_step
        self.fail_mode = fail_mode
        self.extra_env = extra_env or {}
        self.run_id = uuid.uuid4().hex
        # made by whichever launch needs it (a rank), removed when the run ends however it ends
        self.scratch = os.path.join(tempfile.gettempdir(), f"ddpfsdp-{demo}-{self.run_id}")
        self.launches = planned_launches(entry, self.asked, self.placement, self.scratch)
        self._launch = self.launches[0]
        self._started: float | None = None
        self.results: list[DemoResult] = []  # one per result event, read once from its JSON
        self.error: event_protocol.Event | None = None
        # the agent's account of the first rank to fail, read after a failed run; a rank's own error
        # event can be a consequence (a peer's dropped connection) of another rank's silent death.
        self.root_cause: Failure | None = None
        self.reported_ranks: set[int] = set()
        self.returncode: int | None = None
        self.cancelled = False
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._proc: subprocess.Popen[str] | None = None
        self._stderr_reader: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def command(self) -> list[str]:
        """What the launcher starts: the agent, which starts the ranks (a simulated world: its one process).
        What the ranks run and where come in the environment (`request.SPEC_ENV`, `PLACEMENT_ENV`)."""
        if self._launch.placement.device == "fake":
            return [sys.executable, "-m", "ddpfsdp.demos.worker", self.demo]
        return [sys.executable, "-m", "ddpfsdp.demos.launch.agent", "--on-failure", self.on_failure, self.demo]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env[RUN_ID_ENV] = self.run_id
        env[PLACEMENT_ENV] = self._launch.placement.to_json()
        env[request.SPEC_ENV] = request.to_json(registry.get(self.demo), self._launch.asked)
        env["PYTHONUNBUFFERED"] = "1"
        if self.timeout_s is not None:
            env[TIMEOUT_ENV] = str(self.timeout_s)
        if self.fail_rank is not None and self.fail_step is not None:
            env[FAIL_RANK_ENV] = str(self.fail_rank)
            env[FAIL_STEP_ENV] = str(self.fail_step)
            env[FAIL_MODE_ENV] = self.fail_mode
        return env

    def start(self) -> None:
        with self._lock:
            if self._proc is not None:
                return
            if self.cancelled:
                raise LaunchError("the run was cancelled before it started")
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                env=self._environment(),
                start_new_session=True,
            )
        self._stderr_reader = threading.Thread(target=self._read_stderr, name="demo-stderr", daemon=True)
        self._stderr_reader.start()

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self.stderr_tail.append(line.rstrip("\n"))

    @property
    def result(self) -> DemoResult | None:
        """The run's result (its last, where a launch reports several)."""
        return self.results[-1] if self.results else None

    def _overdue(self, event: event_protocol.Event | None, started: float) -> str | None:
        """Why the run must stop now (its deadline passed, or its watchdog says so), or None."""
        if self.deadline_s is not None and time.monotonic() - started > self.deadline_s:
            return f"{self.demo} did not end within its deadline of {self.deadline_s:g} s; every rank has been stopped"
        return self.watchdog(event) if self.watchdog is not None else None

    def events(self) -> Iterator[event_protocol.Event]:
        """Start the run if needed and yield its events until every process has exited, or until the run
        overstays (`deadline_s`, or what `watchdog` says after each event and each quiet moment): then
        every rank is stopped and the error says why. A run of several launches starts each once the one
        before it has ended well; the first to fail, or a cancel, ends the run."""
        try:
            for index, launch in enumerate(self.launches):
                if index:
                    if self.cancelled or self.error is not None or self.returncode != 0:
                        return
                    with self._lock:
                        self._launch, self._proc, self.returncode = launch, None, None
                yield from self._launch_events()
        finally:
            if os.path.isdir(self.scratch):
                shutil.rmtree(self.scratch, ignore_errors=True)

    def _launch_events(self) -> Iterator[event_protocol.Event]:
        """The events of the launch under way, until its processes have exited or the run overstays."""
        try:
            self.start()
        except LaunchError:
            if self.cancelled:  # cancelled between two launches: the next is never started
                return
            raise
        assert self._proc is not None and self._proc.stdout is not None
        if self._started is None:
            self._started = time.monotonic()
        started = self._started
        overdue = None
        try:
            for event in event_protocol.read_in_background(self._proc.stdout):
                if event is not None:
                    kind = event["event"]
                    if kind == "result":
                        self.results.append(DemoResult.from_json(event.get("result")))
                    elif kind == "error":
                        self.reported_ranks.add(event.get("rank"))
                        if self.error is None:
                            self.error = event
                    yield event
                overdue = self._overdue(event, started)
                if overdue:
                    break
            if not overdue:
                self.returncode = self._proc.wait()
        finally:
            if overdue or self._proc.poll() is None:
                self._stop()
            self._finish()
        if overdue and not self.cancelled:
            if self.error is None:
                self.error = event_protocol.Event(event="error", rank=None, message=overdue,
                                                  traceback="\n".join(list(self.stderr_tail)[-40:]))
                yield self.error
            return
        if self.returncode != 0 and not self.cancelled:
            self.root_cause = summarize_failure(list(self.stderr_tail), self.reported_ranks)
        if self.returncode != 0 and self.error is None and not self.cancelled:
            failure = self.root_cause
            self.error = event_protocol.Event(
                event="error",
                rank=failure.rank,
                message=failure.message or f"the launcher exited with status {self.returncode}",
                traceback="\n".join(failure.rank_lines),
            )
            yield self.error

    @property
    def launcher_output(self) -> str:
        """Everything the agent and the ranks wrote to stderr (the last STDERR_TAIL_LINES lines)."""
        return "\n".join(self.stderr_tail)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None and not self.cancelled

    def cancel(self) -> None:
        """Stop every rank (safe from any thread). Returns when all of them are gone, within ~5 s."""
        self.cancelled = True
        self._stop()

    def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)  # the agent forwards it to every rank
            except ProcessLookupError:
                pass
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        self._kill_leftovers()
        if proc.poll() is None:
            proc.kill()  # its ranks are gone by now, so nothing is orphaned
            proc.wait()
        self.returncode = proc.returncode

    def _kill_leftovers(self) -> None:
        kill_run(self.run_id)

    def _finish(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.wait()
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=2)
        # Ranks exit with their agent; this only catches a rank that somehow outlived it.
        self._kill_leftovers()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        if self.returncode is None:
            self.returncode = proc.returncode

    def leftover_pids(self) -> list[int]:
        return processes_with_env(RUN_ID_ENV, self.run_id)
