"""Does measuring cost the demo speed? The `ddp` demo's throughput against a bare DDP loop.

    python tests/benchmarks/bench_ddp_throughput.py                      # 2 CPU processes, gpt small
    python tests/benchmarks/bench_ddp_throughput.py --gpus 2 --model base
    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        tests/benchmarks/bench_ddp_throughput.py --bare --model small    # the bare loop alone

Both sides train the same model, data, per-rank batch, warm-up and timed steps: the bare loop is
what a person would write by hand (DistributedDataParallel, AdamW, the same DistributedSampler
loader), timed from the first to the last timed step, the slowest rank deciding. The runs
alternate, and each side's best of `--repeats` is compared, so a neighbour's burst of load on a
shared machine hits both. The demo should reach at least 0.95 of the bare loop. Not a pytest test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from ddpfsdp.demos.train.spec import MEASURED_STEPS

TARGET_RATIO = 0.95


def bare_loop(args: argparse.Namespace) -> None:
    """One rank of the hand-written loop; rank 0 prints {"samples_per_s": ...} as its last line."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from ddpfsdp.demos.train.data import compute_loss, make_loader
    from ddpfsdp.demos.train.models import build_model
    from ddpfsdp.demos.base.shapes import shape_for

    cuda = args.device == "cuda"
    if cuda:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(args.seed)
        model = build_model("gpt", args.model, seed=args.seed).to(device)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
        shape = shape_for("gpt", args.model)
        loader, sampler = make_loader("gpt", shape, batch_size=args.batch_size, rank=rank, world_size=world,
                                      seed=args.seed, num_samples=args.batch_size * world * min(args.steps, 8))

        def batches():
            epoch = 0
            while True:
                sampler.set_epoch(epoch)
                yield from loader
                epoch += 1

        stream = batches()

        def step() -> None:
            loss = compute_loss("gpt", ddp, next(stream))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(args.warmup):
            step()
        timed = args.steps - args.warmup - MEASURED_STEPS
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(timed):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        wall = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        dist.all_reduce(wall, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"samples_per_s": args.batch_size * world * timed / wall.item()}), flush=True)
    finally:
        dist.destroy_process_group()


def _launch(args: argparse.Namespace, world: int) -> tuple[float, float]:
    """(demo samples/s, demo wall s) and then the bare loop's samples/s."""
    from ddpfsdp.demos.launch.launcher import DemoRun

    demo_args = ["--model", args.model, "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                 "--warmup", str(args.warmup), "--seed", str(args.seed)]
    started = time.perf_counter()
    run = DemoRun("ddp", demo_args, **({"gpus": world} if args.device == "cuda" else {"procs": world}))
    for _ in run.events():
        pass
    if run.result is None:
        raise SystemExit(f"the ddp demo failed: {run.error or list(run.stderr_tail)[-10:]}")
    return run.result["throughput"]["samples_per_s"], time.perf_counter() - started


def _bare(args: argparse.Namespace, world: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
               __file__, "--bare", "--device", args.device, "--model", args.model, "--batch-size",
               str(args.batch_size), "--steps", str(args.steps), "--warmup", str(args.warmup), "--seed", str(args.seed)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the bare loop failed:\n{proc.stderr[-2000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])["samples_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bare", action="store_true", help="run one rank of the bare loop (under torchrun)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--model", default="small")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.bare:
        args.device = args.device or "cpu"
        bare_loop(args)
        return
    args.device = "cuda" if args.gpus else "cpu"
    world = args.gpus or args.procs
    demo_rates, bare_rates, walls = [], [], []
    for repeat in range(args.repeats):
        rate, wall = _launch(args, world)
        demo_rates.append(rate)
        walls.append(wall)
        bare_rates.append(_bare(args, world))
        print(f"repeat {repeat + 1}: demo {demo_rates[-1]:.2f} samples/s (run {wall:.1f} s wall), "
              f"bare {bare_rates[-1]:.2f} samples/s", flush=True)
    demo, bare = max(demo_rates), max(bare_rates)
    ratio = demo / bare
    where = f"{world} GPUs (NCCL)" if args.device == "cuda" else f"{world} CPU processes (gloo)"
    print(f"gpt {args.model}, batch {args.batch_size} per rank, {args.steps} steps ({args.warmup} warm-up), {where}")
    print(f"demo ddp : {demo:.2f} samples/s (best of {args.repeats})")
    print(f"bare loop: {bare:.2f} samples/s (best of {args.repeats})")
    print(f"ratio    : {ratio:.3f} (target >= {TARGET_RATIO}) {'OK' if ratio >= TARGET_RATIO else 'BELOW TARGET'}")
    if args.device == "cpu":
        print("gloo on CPU does not represent NCCL on GPUs; this compares the two loops, not the hardware.")


if __name__ == "__main__":
    main()
