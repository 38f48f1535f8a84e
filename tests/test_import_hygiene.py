"""What must not import torch (or Textual, or numpy) does not: every such path, in one fresh interpreter.

A fresh interpreter is the only way to prove a deferral defers, since this test process has long imported
everything. One interpreter starts with nothing of the project loaded and forks a child per path, so
each path starts from the same clean state and is judged alone; each child runs its path and reports
which forbidden modules it left in `sys.modules`, or the error it raised.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddpfsdp.demos.launch.hardware import torch_gpu_build

TORCH = ("torch",)
TORCH_TEXTUAL = ("torch", "textual")
TORCH_TEXTUAL_NUMPY = ("torch", "textual", "numpy")

CLI = "from click.testing import CliRunner\nfrom ddpfsdp.quiz.cli import cli, COMMANDS\n"


def _invoke(*argv: str, exit_code: int = 0, words: str = "") -> str:
    """Code that runs `ddpfsdp ARGV` in-process and checks its exit status (and a phrase of its output)."""
    return (f"r = CliRunner().invoke(cli, {list(argv)!r})\n"
            f"assert r.exit_code == {exit_code}, (r.exit_code, r.output[-2000:])\n"
            f"assert {words!r} in r.output, r.output[-2000:]\n")


# Bad demo options that need no world size: click refuses them before the run is placed (placing
# it imports a GPU build of torch to count GPUs). (argv, what the message names)
BAD_DEMO_OPTIONS = [
    (["demo", "ddp", "--bucket-mb", "-1"], "Invalid value for '--bucket-mb': -1.0 is not in the range 0<x<=1048576"),
    (["demo", "ddp", "--steps", "0"], "--steps"),
    (["demo", "ddp", "--model", "huge"], "--model"),
    (["demo", "fsdp", "--sharding", "diagonal"], "--sharding"),
    (["demo", "fsdp", "--procs", "2", "--sharding", "hybrid", "--replicas", "3"], "--replicas"),
    (["demo", "allreduce", "--numel", "-1"], "--numel"),
    (["demo", "sampler", "--epochs", "0"], "--epochs"),
    (["demo", "ddp", "--procs", "0"], "--procs"),
]

# name -> (code run in a clean child, modules it must not have imported)
PATHS: dict[str, tuple[str, tuple[str, ...]]] = {
    "importing the CLI": ("import ddpfsdp.quiz.cli\n", TORCH_TEXTUAL_NUMPY),
    "ddpfsdp --help, and --help of every command": (
        CLI + _invoke("--help") + "for name in COMMANDS:\n"
        "    r = CliRunner().invoke(cli, [name, '--help'])\n"
        "    assert r.exit_code == 0, (name, r.output[-2000:])\n",
        TORCH_TEXTUAL),
    "demo --help, demo fsdp --help and demo fault --list": (
        CLI + _invoke("demo", "--help") + _invoke("demo", "fsdp", "--help") + _invoke("demo", "fault", "--list"),
        TORCH),
    "a bad demo option that needs no world size": (
        CLI + "".join(_invoke(*argv, exit_code=2, words=words) for argv, words in BAD_DEMO_OPTIONS), TORCH),
    "calc, as text and as --json": (
        CLI + _invoke("calc", "--params", "7B", "--gpus", "8") + _invoke("calc", "--params", "7B", "--gpus", "8", "--json"),
        TORCH_TEXTUAL_NUMPY),
    "every module of the analytic model, and an estimate": (
        "import importlib, pkgutil, ddpfsdp.demos.theory as theory\n"
        "for m in pkgutil.iter_modules(theory.__path__, 'ddpfsdp.demos.theory.'):\n"
        "    importlib.import_module(m.name)\n"
        "from ddpfsdp.demos.theory.estimate import estimate\n"
        "estimate(model='base', gpus=8)\n",
        TORCH_TEXTUAL_NUMPY),
    "the launch guard's verdict": (
        "from ddpfsdp.demos.launch import guard\n"
        "from ddpfsdp.demos.base.placement import Placement\n"
        "guard.check_launch('ddp', {'model': 'base', 'batch_size': 8}, Placement('cuda', 2), force=False,\n"
        "                   available_bytes=2**34)\n",
        TORCH),
    "drill --json and drill --plain": (
        CLI + _invoke("drill", "--json", "--count", "14", "--seed", "2")
        + "r = CliRunner().invoke(cli, ['drill', '--plain', '--seed', '2'], input='1\\n2\\nq\\n')\n"
          "assert r.exit_code == 0, r.output\n",
        TORCH_TEXTUAL),
    "every demo's evidence view, loaded and drawn": (
        "from rich.console import Console, Group\n"
        "from ddpfsdp.demos.registry import DEMOS, load\n"
        "from ddpfsdp.demos.result.schema import as_result\n"
        "for name, entry in DEMOS.items():\n"
        "    Console(width=80, record=True).print(Group(*load(entry.evidence_view)(as_result({'demo': name}), 80)))\n",
        TORCH_TEXTUAL),
    "progress, as text and as --json": (CLI + _invoke("progress") + _invoke("progress", "--json"), TORCH_TEXTUAL),
    "search, numbers, glossary and the csv export": (
        CLI + _invoke("quiz", "--search", "bucket", "cap") + _invoke("numbers") + _invoke("glossary", "reshard")
        + "import tempfile, os\n"
          "r = CliRunner().invoke(cli, ['export', 'csv', os.path.join(tempfile.mkdtemp(), 'c.csv')])\n"
          "assert r.exit_code == 0, r.output\n",
        TORCH_TEXTUAL),
    "kata list, start, hint, solution and a check refused before launch": (
        "import os, tempfile\nos.environ['DDPFSDP_HOME'] = tempfile.mkdtemp()\nfolder = tempfile.mkdtemp()\n" + CLI
        + _invoke("kata", "list") + _invoke("kata", "list", "--json", words='"katas"')
        + "r = CliRunner().invoke(cli, ['kata', 'start', 'ring-allreduce', '--dir', folder])\nassert r.exit_code == 0, r.output\n"
        + _invoke("kata", "hint", "ring-allreduce", words="Hint 1")
        + _invoke("kata", "solution", "ring-allreduce", "--give-up", words="def ring_all_reduce")
        + "r = CliRunner().invoke(cli, ['kata', 'check', 'ring-allreduce', os.path.join(folder, 'nope.py')])\n"
          "assert r.exit_code == 1 and 'does not exist' in r.output, r.output\n",
        TORCH_TEXTUAL_NUMPY),
    "the Katas screen and the app's kata handlers": (
        "import ddpfsdp.quiz.app, ddpfsdp.quiz.screens.katas, ddpfsdp.quiz.screens.feedback\n", TORCH),
    "the katas' catalogue, learner-file checks, board, referee and rank entry": (
        "import ddpfsdp.demos.katas.catalog, ddpfsdp.demos.katas.learner_file, ddpfsdp.demos.katas.board\n"
        "import ddpfsdp.demos.katas.referee, ddpfsdp.demos.katas.rank, ddpfsdp.demos.katas.render, ddpfsdp.quiz.katas\n",
        TORCH_TEXTUAL_NUMPY),
    "interview --json": (CLI + _invoke("interview", "--json", "--seed", "1"), TORCH_TEXTUAL),
    "the interview screens imported and a plain interview taken to its debrief": (
        "import io, sys\n"
        "import ddpfsdp.quiz.app, ddpfsdp.quiz.screens.interview, ddpfsdp.quiz.screens.debrief\n"
        "from rich.console import Console\n"
        "from ddpfsdp.quiz.interview.generate import generate\n"
        "from ddpfsdp.quiz.interview.plain import run_interview_plain\n"
        "sys.stdin = io.StringIO('s\\n' * 11 + '\\n')\n"
        "run_interview_plain(generate(5), console=Console(file=io.StringIO()), runner=lambda demo, args: None)\n",
        TORCH),
    "the bank loaded and validated, grading, the store and the scheduler": (
        "from ddpfsdp.quiz.loader import load_bank\n"
        "from ddpfsdp.quiz import grading, store, scheduler\n"
        "load_bank()\n",
        TORCH_TEXTUAL),
    "every concept demo's module (the rank code imports torch when it runs)": (
        "import importlib\n"
        "from ddpfsdp.demos import registry\n"
        "for demo in registry.DEMOS.values():\n"
        "    if demo.kind == 'concept':\n"
        "        module = importlib.import_module(demo.module.split(':')[0])\n"
        "        assert callable(module.run) and isinstance(module.OPTIONS, list), demo.name\n",
        TORCH),
    "the training demo's options, report and claims": (
        "import ddpfsdp.demos.train.demo, ddpfsdp.demos.train.options, ddpfsdp.demos.measure.report\n"
        "import ddpfsdp.demos.claims.training\n",
        TORCH),
    "simulated-run options validated": (
        "from ddpfsdp.demos.train.options import validate_fsdp\n"
        "validate_fsdp({'simulate': True, 'world': 64, 'params': '7B'}, 1)\n",
        TORCH),
    "reading a timeline: lanes, trace, report, timeline claims, charts": (
        "import ddpfsdp.demos.measure.lanes, ddpfsdp.demos.measure.trace, ddpfsdp.demos.measure.report\n"
        "import ddpfsdp.demos.claims.timeline, ddpfsdp.quiz.widgets.charts\n",
        TORCH),
}

if torch_gpu_build() is None:  # a GPU build of torch is imported to count its GPUs
    PATHS["a run placed by the launcher, on this CPU build of torch"] = (
        "from ddpfsdp.demos.launch.launcher import DemoRun, Placement\n"
        "assert DemoRun('fsdp', ['--model', 'tiny']).placement == Placement('cpu', 2)\n",
        TORCH)

# Runs in the fresh interpreter: only the standard library before the fork, each path after it.
DRIVER = r'''
import json, os, sys, traceback

paths = json.loads(sys.stdin.read())
report = {}
for name, (code, forbidden) in paths.items():
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the path with its output out of the way, report, and leave at once
        os.close(read_end)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            exec(compile(code, name, "exec"), {"__name__": "__hygiene__"})
            outcome = {"imported": [m for m in forbidden if m in sys.modules], "error": None}
        except BaseException:
            outcome = {"imported": [m for m in forbidden if m in sys.modules], "error": traceback.format_exc()[-3000:]}
        os.write(write_end, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    report[name] = json.loads(b"".join(chunks) or b'{"imported": [], "error": "the child died without a report"}')
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def report() -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(PATHS), capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_interpreter_starts_clean():
    """Nothing the driver itself imports is on the lists, so a path's report is the path's own doing."""
    proc = subprocess.run([sys.executable, "-c", "import json, os, sys, traceback; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=60)
    loaded = set(json.loads(proc.stdout))
    assert not loaded & {"torch", "textual", "numpy", "click", "rich"}


def test_every_path_defers_its_heavy_imports(report):
    assert set(report) == set(PATHS)
    errors = {name: outcome["error"] for name, outcome in report.items() if outcome["error"]}
    assert not errors, "\n\n".join(f"{name}:\n{error}" for name, error in errors.items())
    imported = {name: outcome["imported"] for name, outcome in report.items() if outcome["imported"]}
    assert not imported, "these paths imported what they must not: " + "; ".join(
        f"{name}: {', '.join(modules)}" for name, modules in imported.items())


def test_a_path_that_imports_torch_is_named(tmp_path):
    """The driver's report names a path that imports a forbidden module, and one that fails."""
    paths = {"quiet": ("import json\n", TORCH), "heavy": ("import numpy\n", ("numpy",)),
             "broken": ("raise ValueError('no such thing')\n", TORCH)}
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(paths), capture_output=True, text=True,
                          timeout=120)
    found = json.loads(proc.stdout)
    assert found["quiet"] == {"imported": [], "error": None}
    assert found["heavy"]["imported"] == ["numpy"] and found["heavy"]["error"] is None
    assert "ValueError: no such thing" in found["broken"]["error"]
