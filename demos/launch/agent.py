"""The ranks' supervisor on one machine: `ddpfsdp demo` starts this, and this starts the ranks.

    python -m ddpfsdp.demos.launch.agent fsdp      # the run's options in request.SPEC_ENV, its placement in PLACEMENT_ENV

It does for a one-node run what torchrun's agent does: gives each rank RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and decides the ranks' threads (`thread_default`, the one
place that does); when a rank fails, stops the others (SIGTERM, then SIGKILL after STOP_GRACE_S), or with
`--on-failure wait` lets them run on to their own end (the failure lab's other ranks show their own
symptom); passes a SIGTERM or SIGINT of its own on to them; and writes its failure report in torchrun's layout ("Failures:",
"Root Cause (first observed failure):", "rank :", "exitcode :"), which
`launch.launcher.summarize_failure` reads.

What it does not do as torchrun does is start each rank as a fresh interpreter. A rank's first
seconds are spent importing torch and torch._dynamo (which every optimizer step imports); torchrun's
agent imports torch too, only to supervise. On CPU, on Linux, this agent imports them once, with the
worker and the demo's module, then forks the ranks, which start with all of it loaded. It runs no
tensor operation before it forks, so no OpenMP thread pool is copied into a rank. A CUDA run, and any
run off Linux, starts each rank fresh (`python -m ddpfsdp.demos.worker`): a process must not be
forked once CUDA has been initialised in it, and fork is not safe on every system.

Multi-node runs, and launches of one's own, use torchrun or srun with the worker (see demos/worker.py).
"""

from __future__ import annotations

import datetime
import importlib
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import click

from ddpfsdp.demos import registry, worker
from ddpfsdp.demos.base.placement import PLACEMENT_ENV, Placement
from ddpfsdp.demos.launch.hardware import free_port

STOP_GRACE_S = 3.0  # a stopped rank's time to leave before it is killed
START_ENV = "DDPFSDP_RANK_START"  # "fork" or "exec": how ranks start (default: fork on CPU under Linux)
PRELOAD = ("torch", "torch.distributed", "torch._dynamo")  # what every rank imports; the demo's module follows


class Stopped(Exception):
    """The agent was asked to stop (SIGTERM or SIGINT)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class Exit:
    rank: int
    pid: int
    code: int  # negative: killed by that signal
    when: float


def start_method(device: str) -> str:
    """fork where it is safe and saves the ranks' imports (CPU, Linux), else exec; START_ENV overrides."""
    asked = os.environ.get(START_ENV, "")
    if asked in ("fork", "exec"):
        return asked
    return "fork" if device == "cpu" and sys.platform.startswith("linux") else "exec"


def rank_environment(rank: int, nproc: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
            "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def thread_default(placement: Placement, environ: Mapping[str, str]) -> dict[str, str]:
    """The ranks' OpenMP threads when nothing set OMP_NUM_THREADS: CPU ranks share the host's cores
    between them; several GPU ranks get one each, as torchrun gives them (torch/distributed/run.py), so
    ranks that compute on their GPUs do not each start a thread per core."""
    if "OMP_NUM_THREADS" in environ:
        return {}
    if placement.device == "cpu":
        from ddpfsdp.demos.base.host import cpu_count

        return {"OMP_NUM_THREADS": str(max(1, cpu_count() // placement.world_size))}
    return {"OMP_NUM_THREADS": "1"} if placement.world_size > 1 else {}


def preload(demo: str) -> None:
    """Import what every rank of `demo` imports, so forked ranks start with it (runs no tensor op): the
    demo's own list where it names one (a kata's ranks skip torch._dynamo, a second of every start)."""
    entry = registry.get(demo)
    modules = PRELOAD
    if entry.preload:
        from ddpfsdp.demos.launch import request

        sent = os.environ.get(request.SPEC_ENV)
        modules = registry.load(entry.preload)(request.options_of(request.from_json(entry, sent)) if sent else {})
    for module in modules:
        importlib.import_module(module)
    importlib.import_module(entry.module.split(":")[0])


def _forked_rank(demo: str, device: str, environment: dict[str, str]) -> None:
    """A forked rank: run the demo as the worker would, then leave without interpreter teardown."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.update(environment)
        code = worker.rank_exit_code(demo, [], device)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - printed as an uncaught exception would be, with its [rankN] prefix
        sys.excepthook(*sys.exc_info())
    finally:
        worker.exit_now(code)


class Ranks:
    """The ranks of one run on this machine, started, watched and stopped."""

    def __init__(self, demo: str, device: str, nproc: int, method: str) -> None:
        self.demo, self.device, self.nproc, self.method = demo, device, nproc, method
        self.running: dict[int, int] = {}  # pid -> rank
        self.exits: list[Exit] = []

    def start(self) -> None:
        if self.method == "fork":
            preload(self.demo)
            sys.stdout.flush()
            sys.stderr.flush()
        port = free_port()  # after the imports: the less time before rank 0 binds it, the better
        for rank in range(self.nproc):
            environment = rank_environment(rank, self.nproc, port)
            if self.method == "fork":
                with warnings.catch_warnings():
                    # Python 3.12 and later warn on forking a process that has a thread: importing
                    # torch leaves one waiting, as it is in every DataLoader whose workers are forked.
                    warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                            category=DeprecationWarning)
                    pid = os.fork()
                if pid == 0:
                    _forked_rank(self.demo, self.device, environment)
            else:
                pid = subprocess.Popen(
                    [sys.executable, "-u", "-m", "ddpfsdp.demos.worker", "--device", self.device, self.demo],
                    env={**os.environ, **environment}, stdin=subprocess.DEVNULL).pid
            self.running[pid] = rank

    def _reap(self, pid: int, status: int) -> Exit | None:
        rank = self.running.pop(pid, None)
        if rank is None:
            return None
        self.exits.append(Exit(rank, pid, os.waitstatus_to_exitcode(status), time.time()))
        return self.exits[-1]

    def wait(self, on_failure: str = "stop") -> Exit | None:
        """Wait until every rank has exited, or (on_failure "stop") one has failed: the first that failed
        (None when all succeeded)."""
        first = None
        while self.running:
            pid, status = os.waitpid(-1, 0)
            done = self._reap(pid, status)
            if done is not None and done.code != 0:
                if on_failure == "stop":
                    return done
                first = first or done
        return first

    def stop(self) -> None:
        """SIGTERM every rank still running; SIGKILL what is left after STOP_GRACE_S; reap them all."""
        for pid in list(self.running):
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.running and time.monotonic() < deadline:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.02)
            else:
                self._reap(pid, status)
        for pid in list(self.running):
            _signal(pid, signal.SIGKILL)
        while self.running:
            pid, status = os.waitpid(-1, 0)
            self._reap(pid, status)

    def report(self, first: Exit) -> str:
        """The failures in torchrun's layout: every failed rank, then the first one observed."""
        host = socket.gethostname()

        def entry(index: int, failure: Exit) -> list[str]:
            when = datetime.datetime.fromtimestamp(failure.when).strftime("%Y-%m-%d_%H:%M:%S")
            how = ""
            if failure.code < 0:
                try:
                    how = f"  ({signal.Signals(-failure.code).name})"
                except ValueError:
                    pass
            return [f"[{index}]:", f"  time      : {when}", f"  host      : {host}",
                    f"  rank      : {failure.rank} (local_rank: {failure.rank})",
                    f"  exitcode  : {failure.code} (pid: {failure.pid}){how}"]

        others = [failure for failure in self.exits if failure.code != 0 and failure is not first]
        lines = ["=" * 60, f"{self.demo} failed on rank {first.rank}; the agent stopped the other ranks", "Failures:"]
        for index, failure in enumerate(others, start=1):
            lines += entry(index, failure)
        if not others:
            lines.append("  <NO_OTHER_FAILURES>")
        lines += ["-" * 60, "Root Cause (first observed failure):", *entry(0, first), "=" * 60]
        return "\n".join(lines)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _stop_on(signum: int, frame: object) -> None:
    raise Stopped(signum)


def supervise(demo: str, placement: Placement, method: str | None = None, on_failure: str = "stop") -> int:
    """Start the placement's ranks of `demo` and wait for them: 0 when every rank succeeded, else 1, or
    128 + the signal that stopped the agent."""
    os.environ.update(thread_default(placement, os.environ))
    ranks = Ranks(demo, placement.device, placement.world_size, method or start_method(placement.device))
    previous = {signum: signal.signal(signum, _stop_on) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        ranks.start()
        failed = ranks.wait(on_failure)
    except BaseException as exc:
        for signum in previous:
            signal.signal(signum, signal.SIG_IGN)  # a second signal does not cut the stop short
        ranks.stop()
        if isinstance(exc, Stopped):
            return 128 + exc.signum
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if failed is None:
        return 0
    ranks.stop()
    print(ranks.report(failed), file=sys.stderr, flush=True)
    return 1


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--on-failure", type=click.Choice(["stop", "wait"]), default="stop", show_default=True,
              help="When a rank fails: stop the others, or let them run on to their own end.")
@click.argument("demo", type=click.Choice(list(registry.DEMOS)))
def main(on_failure: str, demo: str) -> None:
    """Start and supervise the ranks of one demo on this machine, as the launcher placed them (PLACEMENT_ENV)."""
    sent = os.environ.get(PLACEMENT_ENV)
    if not sent:
        raise click.UsageError(f"{PLACEMENT_ENV} is not set: the agent is started by the launcher "
                               "(ddpfsdp demo ...), which places the run")
    try:
        placement = Placement.from_json(sent)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    worker.exit_now(supervise(demo, placement, on_failure=on_failure))


if __name__ == "__main__":
    main(prog_name="python -m ddpfsdp.demos.launch.agent")
