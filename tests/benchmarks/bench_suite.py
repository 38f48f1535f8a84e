"""The whole test suite of a base revision and of this working tree, back to back on this machine: the ratio.

    python tests/benchmarks/bench_suite.py                 # base f9766de, each suite once
    python tests/benchmarks/bench_suite.py --base main --rounds 2
    python tests/benchmarks/bench_suite.py -- tests/test_calc_units.py     # a part of each suite

Each side gets its own git worktree under a temporary folder (this tree's is HEAD with the uncommitted
changes to tracked files applied) and its own virtualenv made with --system-site-packages, where the
package is installed editable without dependencies (`pip install --no-deps -e`), so both run on the
same torch, Textual and pytest (and pytest-xdist: each suite runs on the workers its own pyproject.toml
and conftest.py ask for). Then each suite runs in turn (`python -m pytest -q`), alternating which
goes first when there are several rounds, and the script prints both wall times, the CPU seconds the
machine used during each (every process on it, so a quiet machine matters twice), the load average
around each run, and the ratio of this tree's wall time to the base's beside its target (at most 0.5). Every run starts without cached bytecode in its
tree, as a fresh clone does. Timings belong to a quiet machine: check `uptime`.
Takes as long as both suites (about 25 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_RATIO = 0.5


@dataclass
class SuiteRun:
    side: str
    wall_s: float
    cpu_s: float
    returncode: int
    summary: str
    load_before: float
    load_after: float
    output: str


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _worktree(folder: Path, revision: str, with_changes: bool) -> Path:
    tree = folder / "tree"
    _git("worktree", "add", "--detach", str(tree), revision)
    if with_changes:
        diff = subprocess.run(["git", "diff", "--binary", "HEAD"], cwd=ROOT, check=True, capture_output=True).stdout
        if diff.strip():
            subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=tree, input=diff, check=True)
    return tree


def _venv(folder: Path, tree: Path) -> Path:
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "-e",
                    str(tree)], check=True)
    where = subprocess.run([str(python), "-c", "import ddpfsdp.demos.registry as r; print(r.__file__)"],
                           check=True, capture_output=True, text=True, cwd=folder).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the {folder.name} venv imports ddpfsdp from {where}, not from {tree}")
    return python


def _clear_bytecode(tree: Path) -> None:
    """Each run starts cold, as on a fresh clone: no bytecode a previous round of this suite cached."""
    for cache in list(tree.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def _machine_cpu_s() -> float:
    """CPU seconds every process on this machine has used since boot (Linux's /proc/stat): it counts
    the processes a suite starts that nobody waits for (a forkserver's ranks), which the CPU time of
    waited-for children would miss. Elsewhere, the children's time."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _run_suite(side: str, python: Path, tree: Path, timeout_s: float, pytest_args: list[str]) -> SuiteRun:
    _clear_bytecode(tree)
    env = {k: v for k, v in os.environ.items() if k not in ("DDPFSDP_HOME", "PYTEST_ADDOPTS")}
    load_before = os.getloadavg()[0]
    cpu_before = _machine_cpu_s()
    started = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    wall_s = time.perf_counter() - started
    cpu_s = _machine_cpu_s() - cpu_before
    lines = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    summary = lines[-1].strip("= ") if lines else proc.stdout[-500:]
    return SuiteRun(side, wall_s, cpu_s, proc.returncode, summary, load_before, os.getloadavg()[0],
                    proc.stdout + proc.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="f9766de", help="the revision to compare against (default f9766de)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each suite, alternating the order")
    parser.add_argument("--timeout-s", type=float, default=3600)
    parser.add_argument("--keep", action="store_true", help="keep the worktrees and venvs")
    parser.add_argument("--log-dir", type=Path, help="write each run's pytest output here")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest in both trees (after --)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-suite-"))
    sides = {"base": (args.base, False), "this tree": ("HEAD", True)}
    pythons, trees = {}, {}
    try:
        for side, (revision, with_changes) in sides.items():
            place = folder / side.replace(" ", "-")
            place.mkdir()
            trees[side] = _worktree(place, revision, with_changes)
            pythons[side] = _venv(place, trees[side])
        runs: list[SuiteRun] = []
        for round_index in range(args.rounds):
            order = list(sides) if round_index % 2 == 0 else list(sides)[::-1]
            for side in order:
                print(f"round {round_index + 1}: {side} ({sides[side][0]}) ...", flush=True)
                runs.append(_run_suite(side, pythons[side], trees[side], args.timeout_s, args.pytest_args))
                last = runs[-1]
                if args.log_dir:
                    args.log_dir.mkdir(parents=True, exist_ok=True)
                    name = f"round{round_index + 1}-{side.replace(' ', '-')}.log"
                    (args.log_dir / name).write_text(last.output)
                print(f"  {last.wall_s:7.1f} s wall, {last.cpu_s:7.1f} s CPU, load {last.load_before:.2f} -> "
                      f"{last.load_after:.2f}, exit {last.returncode}: {last.summary}", flush=True)
    finally:
        if not args.keep:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)
    wall = {side: sum(r.wall_s for r in runs if r.side == side) / args.rounds for side in sides}
    cpu = {side: sum(r.cpu_s for r in runs if r.side == side) / args.rounds for side in sides}
    ratio = wall["this tree"] / wall["base"]
    print(f"base {args.base}: {wall['base']:.1f} s wall, {cpu['base']:.1f} s CPU (mean of {args.rounds})")
    print(f"this tree:      {wall['this tree']:.1f} s wall, {cpu['this tree']:.1f} s CPU")
    print(f"ratio (wall)    {ratio:.2f}   target <= {TARGET_RATIO}   {'met' if ratio <= TARGET_RATIO else 'NOT met'}")
    print(f"ratio (CPU)     {cpu['this tree'] / cpu['base']:.2f}")
    failed = [r for r in runs if r.returncode != 0]
    for run in failed:
        print(f"note: the {run.side} suite exited {run.returncode}: {run.summary}")
    return 0 if ratio <= TARGET_RATIO and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
