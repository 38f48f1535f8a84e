"""How long a kata check takes, against importing torch.distributed, on this machine, in one run.

    python tests/benchmarks/bench_kata.py                   # 5 rounds, ring-allreduce on 4 processes
    python tests/benchmarks/bench_kata.py --rounds 9 --kata sampler-indices --procs 2

A learner checks after every edit; the loop must feel immediate. The floor of any check is starting a
Python that imports torch, so the check is measured against exactly that:
`ddpfsdp kata check ring-allreduce --reference --procs 4` from the command to its exit, over
`python -c "import torch, torch.distributed"`. Each round runs both, alternating which goes first, so a
neighbour's burst of load hits both; load only ever adds time, so each side's fastest run is the best
estimate of its own cost, and the ratio of the fastest runs is held to the target (1.5). The median of
the rounds' own ratios is printed beside it. Every run gets a fresh data directory, and one check before
the rounds writes the bytecode. Not a pytest test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_RATIO = 1.5


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kata", default="ring-allreduce")
    parser.add_argument("--procs", type=int, default=4)
    options = parser.parse_args()
    env = {**os.environ, "DDPFSDP_HOME": tempfile.mkdtemp(prefix="ddpfsdp-bench-")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    check = [sys.executable, "-m", "ddpfsdp.quiz.cli", "kata", "check", options.kata, "--reference",
             "--procs", str(options.procs)]
    floor = [sys.executable, "-c", "import torch, torch.distributed"]
    wall_s(check, env)  # bytecode, page cache
    checks, floors = [], []
    for round_index in range(options.rounds):
        pair = [(checks, check), (floors, floor)]
        for times, argv in pair if round_index % 2 == 0 else pair[::-1]:
            times.append(wall_s(argv, env))
        print(f"round {round_index + 1}: check {checks[-1]:.2f} s, import torch {floors[-1]:.2f} s, "
              f"ratio {checks[-1] / floors[-1]:.2f}", flush=True)
    ratio = min(checks) / min(floors)
    rounds = statistics.median(c / f for c, f in zip(checks, floors))
    print(f"fastest: check {min(checks):.2f} s, import torch {min(floors):.2f} s: ratio {ratio:.2f} "
          f"(target {TARGET_RATIO}); median of the rounds' ratios {rounds:.2f}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    raise SystemExit(0 if ratio <= TARGET_RATIO else 1)


if __name__ == "__main__":
    main()
