"""Wall-time targets, measured as a user meets them, each printed as a ratio to its target.

    python tests/benchmarks/bench_wall_times.py            # everything
    python tests/benchmarks/bench_wall_times.py --only quiz

- `ddpfsdp demo fsdp --procs 2` (the default CPU model) ends in under 20 s.
- Every concept demo ends in under 20 s on 2 processes, and sampler, allreduce and reduce-scatter
  also on 4.
- The quiz's first screen is up in under 0.5 s, from a fresh interpreter (a first run, which also
  validates the bank, is reported beside a warm one).

A ratio below 1.0 meets the target. Not a pytest test: timings belong to a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

DEMO_TARGET_S = 20.0
QUIZ_TARGET_S = 0.5
CONCEPTS = ["sampler", "allreduce", "reduce-scatter", "wrap", "reshard", "comm", "no-sync", "equivalence", "checkpoint"]
FOUR_PROCS = ["sampler", "allreduce", "reduce-scatter"]

# Wall-clock time is shared between processes, so the probe can count from its own launch.
QUIZ_PROBE = """
import asyncio, os, time
from ddpfsdp.quiz.app import make_app

async def main():
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        while app.startup_ms is None:
            await pilot.pause(0.005)
        print(f"{time.time() - float(os.environ['LAUNCHED_AT']):.4f} {app.startup_ms / 1000:.4f}")

asyncio.run(main())
"""


def _row(label: str, seconds: float, target: float) -> None:
    verdict = "OK" if seconds < target else "OVER"
    print(f"{label:<50} {seconds:7.2f} s   target {target:g} s   ratio {seconds / target:5.2f}  {verdict}")


def time_demo(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", *argv, "--json"], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"ddpfsdp demo {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def time_quiz(home: str) -> tuple[float, float]:
    """(seconds from launching a fresh interpreter to the first screen, the app's own figure)."""
    env = {**os.environ, "DDPFSDP_HOME": home, "LAUNCHED_AT": repr(time.time())}
    proc = subprocess.run([sys.executable, "-c", QUIZ_PROBE], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the quiz did not start:\n{proc.stderr[-2000:]}")
    launch_to_screen_s, app_s = (float(x) for x in proc.stdout.split()[-2:])
    return launch_to_screen_s, app_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["fsdp", "concepts", "quiz"], default=None)
    args = parser.parse_args()

    if args.only in (None, "fsdp"):
        _row("demo fsdp --procs 2", time_demo(["fsdp", "--procs", "2"]), DEMO_TARGET_S)
    if args.only in (None, "concepts"):
        for name in CONCEPTS:
            _row(f"demo {name} --procs 2", time_demo([name, "--procs", "2"]), DEMO_TARGET_S)
        for name in FOUR_PROCS:
            _row(f"demo {name} --procs 4", time_demo([name, "--procs", "4"]), DEMO_TARGET_S)
    if args.only in (None, "quiz"):
        with tempfile.TemporaryDirectory() as home:
            for label in ("quiz first screen (first run)", "quiz first screen (warm)", "quiz first screen (warm)"):
                total_s, app_s = time_quiz(home)
                _row(f"{label}, app's own {app_s * 1000:.0f} ms", total_s, QUIZ_TARGET_S)


if __name__ == "__main__":
    main()
