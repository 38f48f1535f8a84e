"""Where a demo started from the app will run, said before torch is imported.

The launcher decides for certain (every visible CUDA GPU on NCCL; on fewer GPUs than the demo needs
ranks, the ranks sharing them over gloo, so one GPU runs a two-rank demo as two ranks on it; else 2 CPU
processes on gloo), but it imports torch to ask CUDA, which takes seconds on a busy machine. Two cases are known at once:
a simulated run (`--simulate --world N`: N ranks in one process), and a machine where no GPU device
is there for torch to find (no /dev/nvidia* and no /dev/kfd, or CUDA_VISIBLE_DEVICES hides every
GPU), which can only run on CPU processes. Anywhere else the app waits for the launcher's answer.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

import click


def no_gpu_here() -> bool:
    """True when torch cannot see a GPU on this machine, whatever build it is."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return True
    return not glob.glob("/dev/nvidia[0-9]*") and not os.path.exists("/dev/kfd")


def foreseen_placement(demo: str, args: Sequence[str]) -> str | None:
    """'2 ranks on cpu (gloo)', 'a simulated world of 64 ranks', or None when only the launcher can tell
    (or the demo's options cannot be read: the launcher then says what is wrong with them)."""
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request

    try:
        asked = request.from_args(registry.get(demo), args)
    except (ValueError, click.ClickException):
        return None
    world = request.simulated_world(asked)
    if world is not None:
        return f"a simulated world of {world} ranks"
    if no_gpu_here():
        return f"{request.cpu_procs(asked)} ranks on cpu (gloo)"
    return None
