from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass

import pytest
from demo_runs import DemoRuns, shared_json

from ddpfsdp.demos.launch import agent


def pytest_configure(config):
    """Python caches compiled bytecode for the session, whatever PYTHONDONTWRITEBYTECODE says.

    The suite starts well over a hundred interpreters (the workers, each demo's launcher and ranks),
    and each imports the same project modules; without the cache every one compiles them again (half
    a second each), and every worker rewrites every test module's assertions again. The variable is
    dropped before the workers start, so they and every process they launch inherit the default."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


# The longest test modules (`pytest --durations=0` on 2 cores), those held up by one long launch first:
# xdist hands out whole modules in collection order, so starting these first keeps the last worker from
# finishing alone with a long one while the others sit idle.
LONGEST_FIRST = (
    "test_faults.py", "test_compile.py", "test_strategies.py",  # each waits on one long launch
    "test_bank_evidence.py", "test_simulate.py", "test_concepts.py", "test_quiz_app.py", "test_interview_app.py",
    "test_pipeline_demo.py", "test_at_scale_demos.py", "test_quiz_demo.py", "test_launcher.py", "test_katas.py",
    "test_kata_cli.py", "test_quiz_snapshots.py",
    "test_simulate_golden.py", "test_agreement.py",
)


def pytest_collection_modifyitems(config, items):
    """The longest modules first (LONGEST_FIRST), the rest in their own order; a module's tests keep theirs."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_xdist_auto_num_workers(config):
    """One worker more than the cores this process may run on (`--maxprocesses` caps it).

    A worker is often waiting rather than computing: on ranks it launched, on another worker's launch
    of a shared demo, on a Textual app's timers, on a fault's timeout. With one worker per core those
    waits leave a core idle (on 2 cores, about 50 of 700 core-seconds); one more worker fills them.
    PYTEST_XDIST_AUTO_NUM_WORKERS, where set, is xdist's to read."""
    from ddpfsdp.demos.launch.hardware import cpu_count

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return cpu_count() + 1


def _session_folder(tmp_path_factory, name: str):
    """A folder every worker of this session shares."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session = session.parent  # the folder every worker's own temporary folder is made in
    folder = session / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def snap_compare(snap_compare):
    """pytest-textual-snapshot's `snap_compare`, with every text cursor on the screen held steady.

    An Input or TextArea blinks its cursor every half second; on a busy machine the screenshot may
    fall in either half, so a snapshot with a cursor would pass or fail by timing. With blinking off
    the cursor of the focused widget is always drawn, as the stored snapshots show it."""

    def compare(app, *args, run_before=None, **kwargs):
        async def steady(pilot):
            if run_before is not None:
                await run_before(pilot)
            for widget in pilot.app.screen.query("Input, TextArea"):
                widget.cursor_blink = False
            await pilot.pause()

        return snap_compare(app, *args, run_before=steady, **kwargs)

    return compare


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRuns:
    """`demo_run(name, *args, procs=2)`: the session's one launch of that configuration (tests/demo_runs.py)."""
    return DemoRuns(_session_folder(tmp_path_factory, "demo-runs"))


@pytest.fixture(scope="session")
def simulated(tmp_path_factory):
    """`simulated(demo, options)`: the session's one in-process simulation of that configuration
    (`simulate(demo, options)`), as JSON reads it back; shared by every test and worker that asks."""
    folder = _session_folder(tmp_path_factory, "simulated-runs")
    done: dict[str, dict] = {}

    def result(demo: str, options: dict) -> dict:
        from ddpfsdp.demos.train.simulate import simulate

        key = json.dumps([demo, options], sort_keys=True)
        if key not in done:
            done[key] = shared_json(folder, key, lambda: simulate(demo, dict(options)).to_json())
        return done[key]

    return result


@pytest.fixture(scope="session")
def demo_result(demo_run):
    """`demo_result(name, *args, procs=2)`: that launch's result, after asserting it ended well."""

    def result(demo: str, *args: str, procs: int = 2) -> dict:
        return demo_run(demo, *args, procs=procs).assert_ok()

    return result


def sigint_as_a_terminal_sends_it() -> None:
    """`preexec_fn` of a process a test interrupts with SIGINT: its default disposition back.

    A shell without job control starts a background command (`bash .ci/run &`) with SIGINT ignored,
    and an ignored signal stays ignored across fork and exec; Python then installs no Ctrl+C handler,
    and the SIGINT a test sends would reach nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def ddpfsdp_home(tmp_path, monkeypatch):
    """Every test gets its own data directory; none touches the real one."""
    home = tmp_path / "ddpfsdp-home"
    monkeypatch.setenv("DDPFSDP_HOME", str(home))
    return home


@dataclass
class CliOutcome:
    """What `ddpfsdp ARGV` did: its exit status, what it wrote, and an exception that escaped it."""

    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


def run_cli(*argv: str, stdin: str | None = None, env: dict[str, str] | None = None) -> CliOutcome:
    """Run the `ddpfsdp` entry point (`quiz.cli:main`, as the installed script does) in this process.

    click's CliRunner isolates stdin, stdout, stderr and the environment; `main` adds what the bare
    group lacks (the data-directory error handling), so this is the path a person's command takes,
    without the cost of a fresh interpreter. An exception that escapes `main` is returned, not raised:
    for a user it would be a traceback.
    """
    from click.testing import CliRunner

    from ddpfsdp.quiz import cli

    exception = None
    with CliRunner().isolation(input=stdin, env=env) as (stdout, stderr, _):
        saved_argv = sys.argv
        sys.argv = ["ddpfsdp", *argv]
        try:
            cli.main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except Exception as error:  # noqa: BLE001 - what escapes is the finding
            exception, code = error, 1
        finally:
            sys.argv = saved_argv
        return CliOutcome(code, stdout.getvalue().decode(), stderr.getvalue().decode(), exception)


RANK_PRELOAD = (*agent.PRELOAD, "ddpfsdp.demos.train.loop")  # what the demos' agent preloads, and the loop

RANK_SCRIPT_END = """
import json as _json, os as _os, sys as _sys
import torch.distributed as _dist

with open(_os.path.join(_sys.argv[1], f"rank{rank}.json"), "w") as _f:
    _json.dump(out, _f)
# Leave as the demo worker does: together, and without interpreter teardown, where gloo's
# destructors can abort a rank after a clean run.
_dist.barrier()
_dist.destroy_process_group()
_os._exit(0)
"""


def fork_ranks(target, nprocs: int, args: tuple, timeout_s: float) -> None:
    """`target(rank, *args)` on `nprocs` processes, forked from a server that imported RANK_PRELOAD once.

    A rank started clean would import torch itself (two seconds, twice that with torch._dynamo, which
    every optimizer step imports); the server is a fresh interpreter of its own, not this test process,
    so no thread or OpenMP pool of this one is forked. As torchrun does, the first rank to fail ends the
    others; so does the time running out.
    """
    import multiprocessing

    import torch.multiprocessing as mp

    multiprocessing.set_forkserver_preload(list(RANK_PRELOAD))  # read when the server starts
    ranks = mp.start_processes(target, args=args, nprocs=nprocs, start_method="forkserver", join=False)
    deadline = time.monotonic() + timeout_s
    try:
        while not ranks.join(timeout=max(0.1, deadline - time.monotonic())):
            assert time.monotonic() < deadline, f"{nprocs} ranks still running after {timeout_s:.0f} s"
    finally:
        for process in ranks.processes:
            if process.is_alive():
                process.kill()
            process.join()


def _script_rank(rank: int, nprocs: int, port: str, path: str, folder: str) -> None:
    """One rank of `run_script_on_ranks`: torchrun's variables, one thread, the script as __main__, its
    output dropped and its errors to `<folder>/rank<r>.stderr`."""
    import runpy

    import torch

    with open(os.devnull, "w") as stdout, open(os.path.join(folder, f"rank{rank}.stderr"), "w") as stderr:
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(nprocs),
                      LOCAL_WORLD_SIZE=str(nprocs), RANK=str(rank), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    sys.argv = [path, folder]
    runpy.run_path(path, run_name="__main__")


def run_script_on_ranks(script: str, folder, nprocs: int = 2, timeout_s: float = 110) -> list[dict]:
    """Run `script` on `nprocs` gloo ranks, one process each, and return each rank's `out`, in rank order.

    The ranks get the variables torchrun would give them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
    without torchrun's agent, a process of its own that would import torch only to supervise them;
    they are forked with torch imported (`fork_ranks`). The script initialises the process group and
    leaves `rank` and a JSON-able dict `out`; what follows it writes `out` to `<folder>/rank<r>.json`
    and ends the rank.
    """
    from ddpfsdp.demos.launch.hardware import free_port

    path = folder / "ranks.py"
    path.write_text(script + RANK_SCRIPT_END)
    try:
        fork_ranks(_script_rank, nprocs, (nprocs, str(free_port()), str(path), str(folder)), timeout_s)
    except Exception as error:  # noqa: BLE001 - reported with what the ranks wrote
        logs = [f"rank {rank}'s stderr:\n{(folder / f'rank{rank}.stderr').read_text()[-2000:]}"
                for rank in range(nprocs) if (folder / f"rank{rank}.stderr").exists()]
        raise AssertionError("\n".join([str(error), *logs])) from None
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(nprocs)]


QUIZ_TOPIC_DDP = '''
topic = "ddp"
title = "DDP basics"
order = 1
description = "How DistributedDataParallel keeps replicas in step."

[[question]]
id = "ddp-grad-sync"
level = 1
kind = "single"
prompt = "How does DDP synchronise **gradients**?"
choices = ["all-reduce in buckets during backward", "all-gather after the step", "a parameter server that averages gradients", "broadcast from rank 0 every step"]
answer = "all-reduce in buckets during backward"
why = [
    "Right: the reducer all-reduces each full bucket while backward goes on.",
    "Wrong: DDP never gathers parameters; every rank holds them all.",
    "Wrong: DDP is collective; no process holds the global copy.",
    "Wrong: rank 0's broadcast happens once, at construction.",
]
demo = { name = "ddp", args = ["--model", "tiny", "--steps", "6"] }
evidence = ["ddp_uses_all_reduce"]

[[question]]
id = "ddp-replicated-state"
level = 2
kind = "multi"
prompt = "Which does every DDP rank hold in full?"
choices = ["parameters", "gradients", "optimizer state", "a 1/N shard of the parameters"]
answer = ["parameters", "gradients", "optimizer state"]
why = [
    "Right: every replica holds all parameters.",
    "Right: after the all-reduce every rank holds the full averaged gradients.",
    "Right: each rank steps its own full optimizer.",
    "Wrong: sharding parameters is FSDP's idea, not DDP's.",
]

[[question]]
id = "ddp-allreduce-wire"
level = 2
kind = "numeric"
prompt = "A ring all-reduce of 1 GB over 4 ranks: how many bytes does each rank send?"
calc = { fn = "wire_bytes_per_rank", args = { op = "all_reduce", bytes = "1GB", ranks = 4 } }
unit = "GB"
tolerance = 0.05
demo = { name = "allreduce", args = [] }
measure = "measured.wire_bytes_per_rank"

[[question]]
id = "ddp-explain-buckets"
level = 3
kind = "explain"
prompt = "Explain why DDP buckets gradients."
talking_points = ["overlap communication with backward", "fewer, larger collectives"]
'''

QUIZ_TOPIC_WRAP = '''
topic = "fsdp-wrap"
title = "Wrap granularity"
order = 2
description = "What a unit is and why per-block wrapping lowers the peak."

[[question]]
id = "wrap-forward-order"
level = 2
kind = "order"
prompt = "Put the FSDP forward of one unit in order."
steps = ["all-gather the unit's parameters", "run the unit's forward", "free the unsharded parameters"]
why = [
    "Each rank holds only a shard, and the forward needs the whole weights.",
    "The forward runs once the gathered parameters are there.",
    "Once the forward is done, the gathered copy is not needed until backward.",
]

[[question]]
id = "wrap-peak-vs-units"
level = 2
kind = "single"
prompt = "Wrapping each block instead of only the root changes the peak how?"
choices = ["it lowers the peak", "it raises the peak", "no change"]
answer = "it lowers the peak"
why = [
    "Right: one unit's parameters are unsharded at a time instead of all of them.",
    "Wrong: more units means less held at once, not more.",
    "Wrong: the unsharded working set shrinks with the unit size.",
]
tags = ["spot-the-flaw"]
demo = { name = "wrap", args = ["--model", "tiny"] }
evidence = ["per_block_peak_below_root_only", "collectives_scale_with_units"]
'''


def write_quiz_bank(root):
    """A small bank of every question kind: (bank_dir, answers_dir) under `root`."""
    import re

    bank_dir = root / "bank"
    answers_dir = root / "answers"
    bank_dir.mkdir(parents=True, exist_ok=True)
    answers_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("ddp", QUIZ_TOPIC_DDP), ("fsdp-wrap", QUIZ_TOPIC_WRAP)):
        (bank_dir / f"{name}.toml").write_text(text)
        for qid in re.findall(r'^id = "([^"]+)"', text, flags=re.M):
            (answers_dir / f"{qid}.md").write_text(f"# {qid}\n\nThe model answer for **{qid}**.\n")
    return bank_dir, answers_dir


@pytest.fixture
def quiz_bank(tmp_path):
    """(bank_dir, answers_dir) of a small fixture bank with every question kind."""
    return write_quiz_bank(tmp_path / "quiz")


def widget_text(widget, width: int = 96) -> str:
    """What a Static widget shows, as one line of plain words."""
    import io

    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return " ".join(console.file.getvalue().split())


async def open_feedback(pilot, question_id):
    """Go to `question_id` in the running app, answer it right, and return the feedback's evidence panel."""
    from ddpfsdp.quiz.screens.feedback import FeedbackScreen

    app = pilot.app
    await pilot.pause()
    while app.screen.question.id != question_id:
        await pilot.press("n")
        await pilot.pause()
    screen = app.screen
    await pilot.press(str(screen.display_choices.index(screen.question.answer) + 1), "enter")
    await pilot.pause()
    assert isinstance(app.screen, FeedbackScreen)
    return app.screen.query_one("#evidence")
