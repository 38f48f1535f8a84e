"""A simulated 7B run on 64 ranks, as a user starts it: wall time and peak memory against targets.

    python tests/benchmarks/bench_simulate.py
    python tests/benchmarks/bench_simulate.py --demo compare

Runs `ddpfsdp demo fsdp --simulate --world 64 --params 7B --precision bf16-mixed --json` (or the
demo given) in a fresh process and prints its wall time and the largest resident set of it and
the one process it starts, each beside its target (60 s, 4 GiB) and as a ratio; below 1.0 meets it.
Not a pytest test: timings belong to a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

TARGET_S = 60.0
TARGET_RSS_BYTES = 4 * 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="fsdp", choices=["ddp", "zero1", "fsdp", "compare"])
    parser.add_argument("--world", type=int, default=64)
    parser.add_argument("--params", default="7B")
    args = parser.parse_args()
    command = [sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", args.demo, "--simulate", "--world",
               str(args.world), "--params", args.params, "--precision", "bf16-mixed", "--json"]
    with tempfile.TemporaryDirectory() as home:
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DDPFSDP_HOME": home})
        wall_s = time.perf_counter() - started
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    # Linux reports ru_maxrss in KiB: the largest of the CLI and the simulating process it waited for.
    rss_bytes = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result = json.loads(proc.stdout)
    checks = result.get("checks", [])
    print(" ".join(command[2:]))
    print(f"wall time   {wall_s:6.1f} s    target {TARGET_S:.0f} s     ratio {wall_s / TARGET_S:.2f}")
    print(f"peak RSS    {rss_bytes / 2**30:6.2f} GiB  target {TARGET_RSS_BYTES / 2**30:.0f} GiB   "
          f"ratio {rss_bytes / TARGET_RSS_BYTES:.2f}")
    print(f"simulation  {result['wall_s']:6.1f} s inside the worker; checks passed "
          f"{sum(1 for c in checks if c['passed'])}/{len(checks)}")
    return 0 if wall_s < TARGET_S and rss_bytes < TARGET_RSS_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
