"""Start a demo on N ranks of this machine and stream its events.

    run = DemoRun("fsdp", ["--model", "tiny"], procs=2)      # or DemoRun("fsdp", asked=spec, procs=2)
    for event in run.events():
        ...
    run.result, run.error, run.returncode

The demo's options are read once (`request`): parsed from `args`, or given already read as `asked`;
checked for the placement; then handed to every rank as JSON in an environment variable
(`request.SPEC_ENV`), so no rank parses a command line again.

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
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ddpfsdp.demos import registry
from ddpfsdp.demos.launch import events as event_protocol
from ddpfsdp.demos.launch import request
from ddpfsdp.demos.launch.context import DEVICE_ENV, FAIL_MODE_ENV, FAIL_RANK_ENV, FAIL_STEP_ENV, TIMEOUT_ENV
from ddpfsdp.demos.launch.hardware import DEFAULT_CPU_PROCS, commands_for_ranks
from ddpfsdp.demos.launch.sharing import RANKS_PER_GPU_ENV, refusal
from ddpfsdp.demos.registry import Demo

RUN_ID_ENV = "DDPFSDP_RUN_ID"
STOP_GRACE_S = 4.0  # SIGTERM to the agent, then this long before anything left is killed
STDERR_TAIL_LINES = 200


class LaunchError(Exception):
    """The run cannot start as asked (e.g. more GPUs than the machine has)."""


@dataclass(frozen=True)
class Placement:
    device: str  # "cuda", "cpu", or "fake" (a simulated world: one process, fake tensors)
    world_size: int
    ranks_per_gpu: int = 1  # on CUDA: ranks sharing each GPU; above 1 they run on gloo (launch.sharing)

    @property
    def shared(self) -> bool:
        """Ranks share a GPU: gloo with CUDA tensors, since NCCL runs one rank per GPU."""
        return self.device == "cuda" and self.ranks_per_gpu > 1

    @property
    def gpus(self) -> int:
        return self.world_size // self.ranks_per_gpu if self.device == "cuda" else 0

    @property
    def backend(self) -> str:
        if self.device == "fake":
            return "fake"
        return "nccl" if self.device == "cuda" and not self.shared else "gloo"

    def describe(self) -> str:
        if self.device == "fake":
            return f"a simulated world of {self.world_size} ranks (one process, fake tensors, fake process group)"
        if self.shared:
            where = "one GPU" if self.gpus == 1 else f"each of {self.gpus} GPUs"
            return (f"{self.world_size} ranks, {self.ranks_per_gpu} sharing {where} (gloo, CUDA tensors: memory is "
                    "real, time is not NCCL's)")
        if self.device == "cuda":
            return f"{self.world_size} GPU{'s' if self.world_size != 1 else ''} (NCCL)"
        return f"{self.world_size} CPU process{'es' if self.world_size != 1 else ''} (gloo)"


def cuda_device_count() -> int:
    """The CUDA GPUs torch can use here. A CPU build of torch has none, and says so without being
    imported (2 s the launcher would otherwise spend before any rank starts); a GPU build is asked."""
    from ddpfsdp.demos.launch.hardware import torch_gpu_build

    if torch_gpu_build() is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_placement(gpus: int | None = None, procs: int | None = None, demo: str = "DEMO",
                      cpu_procs: int = DEFAULT_CPU_PROCS, ranks_per_gpu: int | None = None,
                      needed: int = 1) -> Placement:
    """Where a run goes: `gpus` CUDA devices, `procs` CPU processes, or the machine's default (on CPU,
    `cpu_procs`: as many processes as the run needs, `request.cpu_procs`).

    On GPUs, `ranks_per_gpu` ranks go on each; left unset, one, unless the GPUs are fewer than the
    `needed` ranks: then as many share each GPU as make up the need (a one-GPU machine runs a
    two-rank demo as two ranks on its GPU, over gloo). `ranks_per_gpu=1` asks for one rank per GPU.
    """
    if gpus is not None and procs is not None:
        raise LaunchError("choose one of --gpus (CUDA, NCCL) and --procs (CPU processes, gloo), not both")
    if ranks_per_gpu is not None and ranks_per_gpu < 1:
        raise LaunchError(f"--ranks-per-gpu must be at least 1 (the ranks on each GPU), got {ranks_per_gpu}. "
                          f"Two ranks sharing one GPU: ddpfsdp demo {demo} --gpus 1 --ranks-per-gpu 2")
    if ranks_per_gpu is not None and procs is not None:
        raise LaunchError(f"--ranks-per-gpu places ranks on GPUs and --procs runs CPU processes: choose one. "
                          f"Ranks sharing a GPU: ddpfsdp demo {demo} --gpus 1 --ranks-per-gpu {ranks_per_gpu}; "
                          f"CPU processes: ddpfsdp demo {demo} --procs {procs}")
    if procs is not None:
        if procs < 1:
            raise LaunchError(f"--procs must be at least 1, got {procs}")
        return Placement("cpu", procs)
    available = cuda_device_count()
    if gpus is not None:
        if gpus < 1:
            raise LaunchError(f"--gpus must be at least 1, got {gpus}")
        if gpus > available:
            have = f"{available} CUDA GPU{'s' if available != 1 else ''}" if available else "no CUDA GPU"
            ranks = gpus * (ranks_per_gpu or 1)
            raise LaunchError(
                f"--gpus {gpus} asked for {gpus} GPUs but this machine has {have}. "
                f"To run on CPU processes here: ddpfsdp demo {demo} --procs {ranks}"
            )
    elif available:
        gpus = available
    elif ranks_per_gpu is not None:
        raise LaunchError(f"--ranks-per-gpu {ranks_per_gpu} shares a CUDA GPU between ranks, and this machine has no "
                          f"CUDA GPU. To run on CPU processes here: ddpfsdp demo {demo} --procs {max(ranks_per_gpu, 2)}")
    else:
        return Placement("cpu", cpu_procs)
    if ranks_per_gpu is None:
        ranks_per_gpu = -(-needed // gpus) if gpus < needed else 1
    return Placement("cuda", gpus * ranks_per_gpu, ranks_per_gpu)


def needed_ranks(demo: Demo, asked: request.Asked) -> int:
    """The fewest ranks the run shows what it is for on: one for a demo that runs on one, else what it
    gets on CPU when no count is given (two, or two groups of --tp for a 2-D run)."""
    return 1 if demo.min_world_size <= 1 else max(demo.min_world_size, request.cpu_procs(asked))


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


def too_few_ranks(demo: str, needed: int, placement: Placement, gpus: int, simulates: bool = False) -> str:
    """Why `placement` is refused for `demo`, naming only commands that run on a machine with `gpus`
    CUDA GPUs (fewer GPUs than ranks: ranks sharing a GPU over gloo, never `--gpus` beyond them)."""
    commands = commands_for_ranks(demo, needed, gpus)
    if simulates:
        commands.append(f"ddpfsdp demo {demo} --simulate --world 8 (a simulated world, in one process)")
    machine = ""
    if placement.device == "cuda" and gpus < needed:
        machine = (f" This machine has {gpus} CUDA GPU{'s' if gpus != 1 else ''}, and NCCL runs one rank per GPU, "
                   f"so {needed} ranks here share {'it' if gpus == 1 else 'them'} over gloo, or are CPU processes.")
    return (f"{demo} needs at least {needed} ranks (what it shows happens between ranks); this run would have "
            f"{placement.describe()}.{machine} Run: " + "; or ".join(commands))


def check_placement(demo: Demo, asked: request.Asked, placement: Placement) -> None:
    """Refuse, before anything starts, a run its placement cannot hold: too few ranks for the demo, or
    options the demo's own checks refuse for this world size and device."""
    import click

    try:
        if request.simulated_world(asked) is None and placement.world_size < demo.min_world_size:
            raise LaunchError(too_few_ranks(demo.name, demo.min_world_size, placement, cuda_device_count(),
                                            simulates=demo.kind == "training"))
        if placement.shared and (why := refusal(demo.name, placement.ranks_per_gpu, placement.world_size)):
            raise LaunchError(why)
        request.validate(demo, asked, placement.world_size, None if placement.device == "fake" else placement.device)
    except click.ClickException as exc:
        raise LaunchError(exc.format_message()) from None


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


class DemoRun:
    """One launch of one demo on N ranks."""

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
    ):
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
        self.timeout_s = timeout_s
        self.fail_rank = fail_rank
        self.fail_step = fail_step
        self.fail_mode = fail_mode
        self.extra_env = extra_env or {}
        self.run_id = uuid.uuid4().hex
        self.result: dict[str, Any] | None = None
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
        """The ranks' command line: what they run comes in the environment (`request.SPEC_ENV`)."""
        if self.placement.device == "fake":
            return [sys.executable, "-m", "ddpfsdp.demos.worker", self.demo]
        return [sys.executable, "-m", "ddpfsdp.demos.launch.agent", "--nproc", str(self.placement.world_size),
                "--device", self.placement.device, self.demo]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env[RUN_ID_ENV] = self.run_id
        env[DEVICE_ENV] = self.placement.device
        env[RANKS_PER_GPU_ENV] = str(self.placement.ranks_per_gpu)
        env[request.SPEC_ENV] = request.to_json(registry.get(self.demo), self.asked)
        env["PYTHONUNBUFFERED"] = "1"
        if self.timeout_s is not None:
            env[TIMEOUT_ENV] = str(self.timeout_s)
        if self.fail_rank is not None and self.fail_step is not None:
            env[FAIL_RANK_ENV] = str(self.fail_rank)
            env[FAIL_STEP_ENV] = str(self.fail_step)
            env[FAIL_MODE_ENV] = self.fail_mode
        if self.placement.device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            from ddpfsdp.demos.launch.hardware import cpu_count

            env["OMP_NUM_THREADS"] = str(max(1, cpu_count() // self.placement.world_size))
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

    def events(self) -> Iterator[event_protocol.Event]:
        """Start the run if needed and yield its events until every process has exited."""
        self.start()
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for event in event_protocol.read_in_background(self._proc.stdout):
                if event is None:
                    continue
                kind = event["event"]
                if kind == "result":
                    self.result = event.get("result")
                elif kind == "error":
                    self.reported_ranks.add(event.get("rank"))
                    if self.error is None:
                        self.error = event
                yield event
            self.returncode = self._proc.wait()
        finally:
            if self._proc.poll() is None:
                self.cancel()
            self._finish()
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
