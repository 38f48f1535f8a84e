"""Where a run's ranks go: --gpus, --procs and --ranks-per-gpu resolved once into the run's `Placement`.

    placement = resolve_placement(gpus=None, procs=None, demo="fsdp", cpu_procs=2, needed=2)
    check_placement(registry.get("fsdp"), spec, placement)      # refuses what the placement cannot hold

The `Placement` value itself (`base.placement`) is torch-free and read by every stage; this module
decides it from the command line and the machine, and refuses a placement a demo cannot run on
(too few ranks, a collective gloo cannot run on CUDA tensors, a combination of options that the demo's
own checks refuse for that world size). Importing it does not import torch; asking how many GPUs there
are does, where the installed torch is a GPU build.
"""

from __future__ import annotations

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.launch import request
from ddpfsdp.demos.launch.hardware import DEFAULT_CPU_PROCS, commands_for_ranks
from ddpfsdp.demos.launch.sharing import refusal
from ddpfsdp.demos.registry import Demo


class LaunchError(Exception):
    """The run cannot start as asked (e.g. more GPUs than the machine has)."""


def cuda_device_count() -> int:
    """The CUDA GPUs torch can use here. A CPU build of torch has none, and says so without being
    imported (2 s the launcher would otherwise spend before any rank starts); a GPU build is asked."""
    from ddpfsdp.demos.launch.hardware import torch_gpu_build

    if torch_gpu_build() is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_placement(gpus: int | None = None, procs: int | None = None, demo: str = "DEMO",
                      cpu_procs: int = DEFAULT_CPU_PROCS, ranks_per_gpu: int | None = None,
                      needed: int = 1) -> Placement:
    """Where a run goes: `gpus` CUDA devices, `procs` CPU processes, or the machine's default (on CPU,
    `cpu_procs`: as many processes as the run needs, `request.cpu_procs`).

    On GPUs, `ranks_per_gpu` ranks go on each; left unset, one, unless the GPUs are fewer than the
    `needed` ranks: then as many share each GPU as make up the need (a one-GPU machine runs a
    two-rank demo as two ranks on its GPU, over gloo). `ranks_per_gpu=1` asks for one rank per GPU.
    """
    if gpus is not None and procs is not None:
        raise LaunchError("choose one of --gpus (CUDA, NCCL) and --procs (CPU processes, gloo), not both")
    if ranks_per_gpu is not None and ranks_per_gpu < 1:
        raise LaunchError(f"--ranks-per-gpu must be at least 1 (the ranks on each GPU), got {ranks_per_gpu}. "
                          f"Two ranks sharing one GPU: ddpfsdp demo {demo} --gpus 1 --ranks-per-gpu 2")
    if ranks_per_gpu is not None and procs is not None:
        raise LaunchError(f"--ranks-per-gpu places ranks on GPUs and --procs runs CPU processes: choose one. "
                          f"Ranks sharing a GPU: ddpfsdp demo {demo} --gpus 1 --ranks-per-gpu {ranks_per_gpu}; "
                          f"CPU processes: ddpfsdp demo {demo} --procs {procs}")
    if procs is not None:
        if procs < 1:
            raise LaunchError(f"--procs must be at least 1, got {procs}")
        return Placement("cpu", procs)
    available = cuda_device_count()
    if gpus is not None:
        if gpus < 1:
            raise LaunchError(f"--gpus must be at least 1, got {gpus}")
        if gpus > available:
            have = f"{available} CUDA GPU{'s' if available != 1 else ''}" if available else "no CUDA GPU"
            ranks = gpus * (ranks_per_gpu or 1)
            raise LaunchError(
                f"--gpus {gpus} asked for {gpus} GPUs but this machine has {have}. "
                f"To run on CPU processes here: ddpfsdp demo {demo} --procs {ranks}"
            )
    elif available:
        gpus = available
    elif ranks_per_gpu is not None:
        raise LaunchError(f"--ranks-per-gpu {ranks_per_gpu} shares a CUDA GPU between ranks, and this machine has no "
                          f"CUDA GPU. To run on CPU processes here: ddpfsdp demo {demo} --procs {max(ranks_per_gpu, 2)}")
    else:
        return Placement("cpu", cpu_procs)
    if ranks_per_gpu is None:
        ranks_per_gpu = -(-needed // gpus) if gpus < needed else 1
    return Placement("cuda", gpus * ranks_per_gpu, ranks_per_gpu)


def needed_ranks(demo: Demo, asked: request.Asked) -> int:
    """The fewest ranks the run shows what it is for on: one for a demo that runs on one, else what it
    gets on CPU when no count is given (two, or two groups of --tp for a 2-D run)."""
    return 1 if demo.min_world_size <= 1 else max(demo.min_world_size, request.cpu_procs(asked))


def too_few_ranks(demo: str, needed: int, placement: Placement, gpus: int, simulates: bool = False) -> str:
    """Why `placement` is refused for `demo`, naming only commands that run on a machine with `gpus`
    CUDA GPUs (fewer GPUs than ranks: ranks sharing a GPU over gloo, never `--gpus` beyond them)."""
    commands = commands_for_ranks(demo, needed, gpus)
    if simulates:
        commands.append(f"ddpfsdp demo {demo} --simulate --world 8 (a simulated world, in one process)")
    machine = ""
    if placement.device == "cuda" and gpus < needed:
        machine = (f" This machine has {gpus} CUDA GPU{'s' if gpus != 1 else ''}, and NCCL runs one rank per GPU, "
                   f"so {needed} ranks here share {'it' if gpus == 1 else 'them'} over gloo, or are CPU processes.")
    return (f"{demo} needs at least {needed} ranks (what it shows happens between ranks); this run would have "
            f"{placement.describe()}.{machine} Run: " + "; or ".join(commands))


def check_placement(demo: Demo, asked: request.Asked, placement: Placement) -> None:
    """Refuse, before anything starts, a run its placement cannot hold: too few ranks for the demo, or
    options the demo's own checks refuse for this world size and device."""
    import click

    try:
        if request.simulated_world(asked) is None and placement.world_size < demo.min_world_size:
            raise LaunchError(too_few_ranks(demo.name, demo.min_world_size, placement, cuda_device_count(),
                                            simulates=demo.kind == "training"))
        if placement.shared and (why := refusal(demo.name, placement.ranks_per_gpu, placement.world_size)):
            raise LaunchError(why)
        request.validate(demo, asked, placement.world_size, None if placement.device == "fake" else placement.device)
    except click.ClickException as exc:
        raise LaunchError(exc.format_message()) from None
