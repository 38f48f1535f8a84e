"""How fast a bad demo option is refused, against a bad calc option, each in a fresh interpreter.

    python tests/benchmarks/bench_bad_input.py
    python tests/benchmarks/bench_bad_input.py --repeats 9

Runs `ddpfsdp demo ddp --bucket-mb -1` and `ddpfsdp calc --params 7B --precision fp64` as a person
would (`python -m ddpfsdp.quiz.cli ...`), alternating which goes first, and prints the median wall
time of each and their ratio beside its target: the demo's refusal within 3x the calc's. A demo
option that is checked only after the run is placed pays for importing torch (seconds), so it
misses by far. Both must exit with status 2 and name the option. Not a pytest test: timings
belong to a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_RATIO = 3.0
CASES = {
    "demo": (["demo", "ddp", "--bucket-mb", "-1"], "--bucket-mb"),
    "calc": (["calc", "--params", "7B", "--precision", "fp64"], "--precision"),
}


def refusal_s(argv: list[str], names: str, home: str) -> float:
    """Wall time of one refused command, from start to exit, checking that it was refused for `names`."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ddpfsdp.quiz.cli", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, "DDPFSDP_HOME": home}, timeout=120)
    elapsed = time.perf_counter() - started
    if proc.returncode != 2 or names not in proc.stderr or "Traceback" in proc.stderr:
        raise SystemExit(f"ddpfsdp {' '.join(argv)} was not refused as expected (status {proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as home:
        for repeat in range(args.repeats):
            # ABBA: each side goes first as often as second, so a warm file cache favours neither.
            for name in (list(CASES) if repeat % 2 == 0 else list(reversed(CASES))):
                argv, names = CASES[name]
                times[name].append(refusal_s(argv, names, home))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, (argv, _) in CASES.items():
        print(f"{name}: ddpfsdp {' '.join(argv):45s} median {median[name]:.3f} s "
              f"(min {min(times[name]):.3f}, max {max(times[name]):.3f}; {args.repeats} runs)")
    ratio = median["demo"] / median["calc"]
    verdict = "meets it" if ratio < TARGET_RATIO else "misses it"
    print(f"ratio demo / calc {ratio:.2f}x (target < {TARGET_RATIO:g}x): {verdict}")
    return 0 if ratio < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
