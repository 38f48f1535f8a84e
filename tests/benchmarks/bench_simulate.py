"""Simulated FSDP runs at interview scale, as a user starts them: wall time and peak memory against targets.

    python tests/benchmarks/bench_simulate.py                 # 7B on 64 ranks, then 70B on 512
    python tests/benchmarks/bench_simulate.py --case 70b-512
    python tests/benchmarks/bench_simulate.py --demo compare --world 64 --params 7B

Each case runs `ddpfsdp demo fsdp --simulate --world N --params P --precision bf16-mixed --json` in a
fresh process and prints its wall time and the largest resident set of it and the one process it
starts, each beside its case's target and as a ratio (below 1.0 meets it), with the load average
before and after (the machine may be shared). The two named cases' results are also held against
their fixtures (`tests/golden/simulate/`, see tests/test_simulate_golden.py): a faster simulation must
report the same figures. DDPFSDP_WRITE_GOLDEN=1 rewrites those fixtures.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_simulate_golden import GOLDEN, SCALE, differences, normalised  # noqa: E402

GiB = 2**30
# case -> (fixture in SCALE, wall-time target in seconds, peak RSS target in bytes)
CASES = {
    "7b-64": ("cli-fsdp-7b-64-bf16-mixed", 60.0, 4 * GiB),
    "70b-512": ("cli-fsdp-70b-512-bf16-mixed", 30.0, 4 * GiB),
}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _child_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB; RUSAGE_CHILDREN is the largest of all children waited for.
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def _run(args: tuple[str, ...]) -> tuple[float, int, dict]:
    """(wall seconds, peak RSS bytes, result) of one CLI run in a fresh process tree."""
    command = [sys.executable, "-c", _MEASURE, *args]
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DDPFSDP_HOME": home})
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(proc.returncode)
    measured, _, output = proc.stdout.partition("\n")
    wall_s, rss_bytes = json.loads(measured)
    return wall_s, rss_bytes, json.loads(output)


# A small parent per case, so each case's peak RSS is its own (RUSAGE_CHILDREN keeps the largest child ever).
_MEASURE = """
import json, os, resource, subprocess, sys, time
command = [sys.executable, "-m", "ddpfsdp.quiz.cli", "demo", *sys.argv[1:], "--json"]
started = time.perf_counter()
proc = subprocess.run(command, capture_output=True, text=True)
wall_s = time.perf_counter() - started
sys.stderr.write(proc.stderr)
print(json.dumps([wall_s, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024]))
sys.stdout.write(proc.stdout)
sys.exit(proc.returncode)
"""


def _fixture_verdict(name: str, result: dict) -> str:
    path = GOLDEN / f"{name}.json"
    actual = normalised(result)
    if os.environ.get("DDPFSDP_WRITE_GOLDEN"):
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
        return f"wrote {path.name}"
    changed = differences(json.loads(path.read_text()), actual)
    if changed:
        return "DIFFERS from " + path.name + ":\n  " + "\n  ".join(changed[:20])
    return f"same figures as {path.name}"


def _report(args: tuple[str, ...], target_s: float, target_rss: int, fixture: str | None) -> bool:
    load_before = _load()
    wall_s, rss_bytes, result = _run(args)
    checks = result.get("checks", [])
    verdict = _fixture_verdict(fixture, result) if fixture else "no fixture"
    print("ddpfsdp demo " + " ".join(args) + " --json")
    print(f"  wall time   {wall_s:6.1f} s    target {target_s:.0f} s     ratio {wall_s / target_s:.2f}")
    print(f"  peak RSS    {rss_bytes / GiB:6.2f} GiB  target {target_rss / GiB:.0f} GiB   ratio {rss_bytes / target_rss:.2f}")
    print(f"  simulation  {result['wall_s']:6.1f} s inside the worker; checks passed "
          f"{sum(1 for c in checks if c['passed'])}/{len(checks)}")
    print(f"  figures     {verdict}")
    print(f"  load avg    {load_before} before, {_load()} after (1, 5, 15 min; {os.cpu_count()} CPUs)")
    return wall_s < target_s and rss_bytes < target_rss and not verdict.startswith("DIFFERS")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append",
                        help="a named case (default: all); its figures are held against its fixture")
    parser.add_argument("--demo", choices=["ddp", "zro", "fsdp", "compare"], help="any other run, timed only")
    parser.add_argument("--world", type=int, default=64)
    parser.add_argument("--params", default="7B")
    parser.add_argument("--target-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.demo:
        run = (args.demo, "--simulate", "--world", str(args.world), "--params", args.params,
               "--precision", "bf16-mixed")
        return 0 if _report(run, args.target_s, 4 * GiB, None) else 1
    met = [_report(SCALE[fixture], target_s, target_rss, fixture)
           for fixture, target_s, target_rss in (CASES[c] for c in args.case or CASES)]
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
