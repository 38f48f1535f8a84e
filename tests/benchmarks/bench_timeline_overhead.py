"""Does recording a step in time cost the timed steps speed? Throughput with and without the timeline.

    python tests/benchmarks/bench_timeline_overhead.py                         # ddp, 2 CPU processes, gpt small
    python tests/benchmarks/bench_timeline_overhead.py --demo fsdp --model tiny --repeats 3
    python tests/benchmarks/bench_timeline_overhead.py --gpus 2 --model base

The same demo configuration runs with --timeline and --no-timeline, alternating, and each side's
best samples/s over `--repeats` is compared, so a neighbour's burst of load on a shared machine
hits both. The timeline is recorded on the communication step only, never a timed one, so the
ratio should be at least 0.95. Not a pytest test.
"""

from __future__ import annotations

import argparse

from ddpfsdp.demos.launch.launcher import DemoRun

TARGET_RATIO = 0.95


def throughput(demo: str, args: list[str], gpus: int | None, procs: int | None) -> float:
    run = DemoRun(demo, args, gpus=gpus, procs=procs)
    for _ in run.events():
        pass
    if run.result is None:
        raise SystemExit(f"{demo} failed: {run.error}")
    return float(run.result["throughput"]["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="ddp", choices=["ddp", "fsdp"])
    parser.add_argument("--model", default="small")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--procs", type=int, default=None)
    args = parser.parse_args()
    procs = args.procs if args.procs or args.gpus else 2
    common = ["--model", args.model, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    best = {"--timeline": 0.0, "--no-timeline": 0.0}
    for repeat in range(args.repeats):
        for flag in best:
            value = throughput(args.demo, [*common, flag], args.gpus, procs)
            best[flag] = max(best[flag], value)
            print(f"repeat {repeat + 1}: {flag:14s} {value:10.2f} samples/s", flush=True)
    ratio = best["--timeline"] / best["--no-timeline"]
    print(f"{args.demo} {args.model}: timed-step throughput with the timeline {best['--timeline']:.2f} samples/s, "
          f"without {best['--no-timeline']:.2f} samples/s; ratio {ratio:.3f} (target >= {TARGET_RATIO})")
    raise SystemExit(0 if ratio >= TARGET_RATIO else 1)


if __name__ == "__main__":
    main()
