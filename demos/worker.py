"""The per-rank entry point of every demo.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ddpfsdp.demos.worker fsdp --model tiny

The same module runs unchanged under a user's own multi-node launch:

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        --rdzv-id job1 -m ddpfsdp.demos.worker fsdp --model base
    srun --nodes 2 --ntasks-per-node 8 --gpus-per-node 8 python -m ddpfsdp.demos.worker fsdp

(under Slurm without torchrun, RANK/WORLD_SIZE/LOCAL_RANK come from SLURM_PROCID/SLURM_NTASKS/
SLURM_LOCALID, and MASTER_ADDR/MASTER_PORT must be exported by the batch script).

What a rank runs comes from the launcher as JSON (`launch.request.SPEC_ENV`), read without parsing
a command line; under a launch of one's own, as above, the rank parses its command line itself.

Rank 0 writes JSON-lines events on stdout (ddpfsdp.demos.launch.events); any rank that fails writes an
`error` event with its traceback before it exits non-zero, and the process group is always destroyed.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from datetime import timedelta
from typing import Any

import click

from ddpfsdp.demos import registry
from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.launch import events, request
from ddpfsdp.demos.launch.context import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.train.spec import RunSpec

TRACEBACK_CHARS = 3000  # keeps an error event well inside one pipe write


def _env_from_slurm() -> None:
    """Map Slurm's task variables onto torch.distributed's when launched by srun without torchrun."""
    if "RANK" in os.environ or "SLURM_PROCID" not in os.environ:
        return
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
    os.environ["LOCAL_RANK"] = os.environ.get("SLURM_LOCALID", "0")


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this rank if its launcher dies, so no rank outlives an abandoned run."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass


def _standalone_defaults() -> None:
    """`python -m ddpfsdp.demos.worker ...` with no launcher runs as a world of one."""
    world_size = int(os.environ.setdefault("WORLD_SIZE", "1"))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    if world_size > 1:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
        if missing:
            raise click.UsageError(
                f"{' and '.join(missing)} must be set for a world of {world_size} ranks: export "
                "MASTER_ADDR=<the first node's address> MASTER_PORT=29500 before srun, or launch with torchrun"
            )
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        from ddpfsdp.demos.launch.hardware import free_port

        os.environ["MASTER_PORT"] = str(free_port())


def cuda_index(local_rank: int, visible: int) -> int:
    """The GPU this rank drives: its local rank, or the one GPU a scheduler bound to this task."""
    if local_rank < visible:
        return local_rank
    if visible == 1:
        return 0  # srun --gpus-per-task=1 / --gpu-bind: every task sees its own GPU as cuda:0
    raise click.UsageError(
        f"local rank {local_rank} has no GPU of its own: this process sees {visible} CUDA device(s). "
        "Start one rank per GPU (--nproc-per-node = GPUs per node), or bind one GPU to each task"
    )


def _emit_error(rank: int, exc: BaseException, message: str | None = None) -> None:
    """An error event; a usage error carries its message and no traceback."""
    event = {
        "event": "error",
        "rank": rank,
        "message": message or f"{type(exc).__name__}: {exc}",
        "traceback": "" if message else "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:],
    }
    sys.stdout.write(events.encode(event) + "\n")
    sys.stdout.flush()


def asked_of(demo: registry.Demo, args: list[str]) -> request.Asked:
    """What this rank runs: the launcher's JSON when it sent one, else this rank's own command line,
    parsed and checked for the world size (a bare torchrun or srun launch)."""
    sent = os.environ.get(request.SPEC_ENV)
    if sent:
        if args:
            raise click.UsageError(f"{request.SPEC_ENV} is set: the run's options come from it, not from "
                                   f"the command line ({' '.join(args)}); unset it or drop them")
        return request.from_json(demo, sent)
    asked = request.from_args(demo, args)
    request.validate(demo, asked, int(os.environ["WORLD_SIZE"]))
    return asked


def run_rank(demo_name: str, args: list[str], device_type: str | None = None) -> int:
    """This rank's part of one demo: join the process group, run the demo, report; the exit status."""
    demo = registry.get(demo_name)
    _env_from_slurm()
    _standalone_defaults()
    die_with_parent()
    rank = int(os.environ["RANK"])
    try:
        asked = asked_of(demo, args)
    except click.ClickException as exc:
        _emit_error(rank, exc, exc.format_message())
        raise
    if request.simulated_world(asked) is not None:
        return _run_simulated(demo, asked)

    import torch
    import torch.distributed as dist

    from ddpfsdp.demos.launch.context import DemoContext

    device_type = device_type or ("cuda" if torch.cuda.is_available() else "cpu")
    timeout = timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    try:
        placement = Placement.of_rank(os.environ, device_type, int(os.environ["WORLD_SIZE"]))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if isinstance(asked, RunSpec) and not os.environ.get(request.SPEC_ENV):
        asked = asked.resolved(placement.device)  # a launch of one's own: the launcher did not resolve it
    try:
        if placement.device == "cuda":
            local_rank = int(os.environ["LOCAL_RANK"])
            device = torch.device("cuda", cuda_index(placement.gpu_of(local_rank), torch.cuda.device_count()))
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        # NCCL refuses two ranks on one device at their first collective; gloo takes CUDA tensors.
        if placement.backend == "nccl":
            dist.init_process_group("nccl", timeout=timeout, device_id=device)
        else:
            dist.init_process_group("gloo", timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - reported to the launcher as an event, then re-raised
        _emit_error(rank, exc)
        raise

    try:
        ctx = DemoContext.from_env(device=device, placement=placement)
        ctx.emit(
            "start",
            demo=demo.name,
            world_size=ctx.world_size,
            device=device.type,
            backend=placement.backend,
            ranks_per_gpu=placement.ranks_per_gpu if device.type == "cuda" else None,
            config=request.options_of(asked),
        )
        results = demo.run_on_rank(ctx, asked)
        if ctx.is_main:
            for result in results if isinstance(results, list) else [results]:
                if not isinstance(result, DemoResult):
                    raise TypeError(f"demo {demo.name!r} returned {type(result).__name__} on rank 0, not a DemoResult")
                ctx.emit("result", result=result.to_json())  # the result's one crossing to JSON on a rank
        # Ranks leave together: a rank that tears down gloo while a peer's transfer is still in
        # flight can abort that peer.
        dist.barrier()
        dist.destroy_process_group()
        return 0
    except Exception as exc:  # noqa: BLE001 - reported as an event and on stderr; the launcher ends the rest
        _emit_error(rank, exc)
        traceback.print_exc()
        # No destroy here: with NCCL it can block on the collective that a dead peer never joins.
        return 1


def _run_simulated(demo: registry.Demo, spec: Any) -> int:
    """A simulated run: this one process plays rank 0 of --world ranks; no process group to join."""

    def emit(event: str, **fields: Any) -> None:
        sys.stdout.write(events.encode({"event": event, **fields}) + "\n")
        sys.stdout.flush()

    try:
        from ddpfsdp.demos.train.simulate import simulate

        emit("start", demo=demo.name, world_size=spec.world, device="fake", backend="fake",
             config=request.options_of(spec))
        result = simulate(demo.name, spec, log=lambda message: emit("log", message=message))
        emit("result", result=result.to_json())
        return 0
    except click.ClickException as exc:
        _emit_error(0, exc, exc.format_message())
        return 2
    except Exception as exc:  # noqa: BLE001 - reported as an event and on stderr, as a rank's failure is
        _emit_error(0, exc)
        traceback.print_exc()
        return 1


def rank_exit_code(demo_name: str, args: list[str], device_type: str | None = None) -> int:
    """`run_rank`, with a usage error shown as click shows it and turned into its exit status."""
    try:
        return run_rank(demo_name, args, device_type)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code


def exit_now(code: int) -> None:
    """Leave without interpreter teardown, which can abort in gloo's destructors after a clean run."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class _DemoName(click.Choice):
    """A demo's name; a retired one is refused saying what to run instead."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        refusal = registry.retired(value) if isinstance(value, str) else None
        if refusal:
            self.fail(refusal, param, ctx)
        return super().convert(value, param, ctx)


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
@click.option(
    "--device",
    "device_type",
    type=click.Choice(["cuda", "cpu"]),
    default=None,
    help="Where to train: cuda (NCCL) or cpu (gloo). Default: cuda when torch sees a GPU.",
)
@click.argument("demo_name", metavar="DEMO", type=_DemoName(list(registry.DEMOS)))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def main(device_type: str | None, demo_name: str, args: tuple[str, ...]) -> None:
    """Run one demo on this rank; launch it with torchrun, srun or `ddpfsdp demo`."""
    exit_now(rank_exit_code(demo_name, list(args), device_type))


if __name__ == "__main__":
    main(prog_name="python -m ddpfsdp.demos.worker")
