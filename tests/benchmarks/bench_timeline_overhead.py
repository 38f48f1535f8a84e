"""Does recording a step in time cost the timed steps speed? Throughput with and without the timeline.

    python tests/benchmarks/bench_timeline_overhead.py                         # ddp, 2 CPU processes, gpt small
    python tests/benchmarks/bench_timeline_overhead.py --demo fsdp --model tiny --repeats 3
    python tests/benchmarks/bench_timeline_overhead.py --gpus 2 --model base

The same demo configuration runs with --timeline and --no-timeline, alternating which goes first,
and each side's best samples/s over `--repeats` is compared, so a neighbour's burst of load on a
shared machine hits both; the fastest single timed step of each side is printed too. The timeline is recorded on
the communication step, which runs after the timed steps, so the ratio should be at least 0.95.
Not a pytest test.
"""

from __future__ import annotations

import argparse

from ddpfsdp.demos.launch.launcher import DemoRun

TARGET_RATIO = 0.95


def throughput(demo: str, args: list[str], gpus: int | None, procs: int | None) -> tuple[float, float]:
    """(samples/s over the timed steps, samples/s of the fastest timed step on rank 0)."""
    run = DemoRun(demo, args, gpus=gpus, procs=procs)
    for _ in run.events():
        pass
    if run.result is None:
        raise SystemExit(f"{demo} failed: {run.error}")
    config, speed = run.result["config"], run.result["throughput"]
    per_step_samples = config["batch_size"] * config["world_size"]
    return float(speed["samples_per_s"]), per_step_samples / speed["step_time_s"]["min"]


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
    fastest = {"--timeline": 0.0, "--no-timeline": 0.0}
    for repeat in range(args.repeats):
        # ABBA: each side goes first as often as second, so whatever favours a later run favours both.
        for flag in (list(best) if repeat % 2 == 0 else list(reversed(best))):
            value, step = throughput(args.demo, [*common, flag], args.gpus, procs)
            best[flag] = max(best[flag], value)
            fastest[flag] = max(fastest[flag], step)
            print(f"repeat {repeat + 1}: {flag:14s} {value:10.2f} samples/s (fastest step {step:.2f})", flush=True)
    ratio = best["--timeline"] / best["--no-timeline"]
    print(f"{args.demo} {args.model}: timed-step throughput with the timeline {best['--timeline']:.2f} samples/s, "
          f"without {best['--no-timeline']:.2f} samples/s; ratio {ratio:.3f} (target >= {TARGET_RATIO})")
    print(f"fastest single timed step: with {fastest['--timeline']:.2f}, without {fastest['--no-timeline']:.2f} "
          f"samples/s; ratio {fastest['--timeline'] / fastest['--no-timeline']:.3f} (less exposed to a neighbour's load)")
    raise SystemExit(0 if ratio >= TARGET_RATIO else 1)


if __name__ == "__main__":
    main()
