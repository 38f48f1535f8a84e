"""Seconds a simulated run takes per world size, as a user starts it: the figure behind --world's maximum.

    python tests/benchmarks/bench_simulate_worlds.py                       # 70B FSDP on 512 ... the maximum
    python tests/benchmarks/bench_simulate_worlds.py --params 7B --worlds 64 8192
    python tests/benchmarks/bench_simulate_worlds.py --demo compare --params 7B --worlds 64

Each world runs `ddpfsdp demo DEMO --simulate --world N --params P --precision bf16-mixed --json` in a
fresh process and prints its wall time, the CPU time of the process tree (user + system; on a shared
machine the wall time grows with the load, the CPU time much less), the simulation's own wall time as
its result reports it, the checks passed, and the load average before and after. It exits non-zero when a
run fails, a check fails, or one takes longer than --target-s of CPU time: the stated maximum world
(MAX_SIMULATED_WORLD) is the largest that completes within a minute on 2 cores at the largest preset.
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


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(demo: str, world: int, params: str) -> tuple[float, float, dict]:
    """(wall s, CPU s, result) of one CLI run in a fresh process."""
    command = [sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", demo, "--simulate", "--world", str(world),
               "--params", params, "--precision", "bf16-mixed", "--json"]
    cpu_before = _children_cpu_s()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DDPFSDP_HOME": home})
    wall_s = time.perf_counter() - started
    cpu_s = _children_cpu_s() - cpu_before
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{demo} --world {world} --params {params} failed (exit status {proc.returncode})")
    return wall_s, cpu_s, json.loads(proc.stdout)


def main() -> int:
    from ddpfsdp.demos.train.spec import MAX_SIMULATED_WORLD

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", choices=["ddp", "zro", "fsdp", "compare"], default="fsdp")
    parser.add_argument("--params", default="70B", help="a GPT size (default: 70B, the largest)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[512, 2048, MAX_SIMULATED_WORLD])
    parser.add_argument("--target-s", type=float, default=60.0, help="CPU seconds a run may take (default 60)")
    args = parser.parse_args()
    print(f"ddpfsdp demo {args.demo} --simulate --params {args.params} --precision bf16-mixed "
          f"({os.cpu_count()} CPUs; the stated maximum world is {MAX_SIMULATED_WORLD})")
    print(f"{'world':>7}  {'wall s':>7}  {'CPU s':>7}  {'sim s':>7}  checks  load avg before -> after")
    met = True
    for world in args.worlds:
        load_before = _load()
        wall_s, cpu_s, result = run_once(args.demo, world, args.params)
        checks = result.get("checks", [])
        passed = sum(1 for c in checks if c.get("passed"))
        ok = passed == len(checks) and cpu_s <= args.target_s
        met = met and ok
        print(f"{world:>7}  {wall_s:7.1f}  {cpu_s:7.1f}  {result.get('wall_s', float('nan')):7.1f}  "
              f"{passed:>2}/{len(checks):<2}    {load_before} -> {_load()}{'' if ok else '   OVER TARGET OR FAILED'}",
              flush=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
