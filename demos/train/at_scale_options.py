"""The command lines of the at-scale demos, made from the run's spec, and the checks of what they are given.

    ddpfsdp demo straggler --procs 2 --slow-rank 1 --delay-ms 200
    ddpfsdp demo checkpoint-resume --procs 4 --resume-on 2 --dir ./ckpt
    ddpfsdp demo local-sgd --procs 2 --period 4 --local-sgd-warmup 2

Their options are RunSpec fields (`train.spec`, `demos=STRAGGLER` / `RESUME` / `LOCAL_SGD`), so click reads types, bounds
and choices from there. What relates them to the world they run on is checked here, before any rank
starts: the slow rank inside the world; a checkpoint folder that can be written and holds nothing of
another job's; a resume whose options match the checkpoint's and whose ranks split its global batch. A
straggler's delay against the process group's time-out is the launcher's to check (`launch.launcher`),
since the time-out is a launch option. Only click is imported here, never torch.
"""

from __future__ import annotations

from typing import Any, Mapping

import click

from ddpfsdp.demos.base.bounds import MAX_PROCS
from ddpfsdp.demos.train.checkpoint_folder import (
    FolderError,
    check_folder,
    check_global_batch,
    differences,
    resume_world,
)
from ddpfsdp.demos.train.options import _check_shape, _check_trace, options_for, spec_of
from ddpfsdp.demos.train.spec import AT_SCALE_STRATEGIES, RunSpec

STRAGGLER_OPTIONS = options_for("straggler")
RESUME_OPTIONS = options_for("checkpoint-resume")
LOCAL_SGD_OPTIONS = options_for("local-sgd")


def _check_strategy(demo: str, spec: RunSpec) -> None:
    if spec.strategy not in AT_SCALE_STRATEGIES:
        raise click.UsageError(f"{demo} trains with --strategy ddp or fsdp, got {spec.strategy}")


def validate_straggler(spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
                       device: str | None = None) -> None:
    """The slow rank is one of the world's; the rest as any training run's options."""
    spec = spec_of("straggler", spec)
    _check_strategy("straggler", spec)
    _check_shape(spec)
    _check_trace(spec)
    if world_size is not None and spec.slow_rank >= world_size:
        more = (f", or more ranks with --procs {spec.slow_rank + 1}" if spec.slow_rank < MAX_PROCS else "")
        raise click.UsageError(f"--slow-rank {spec.slow_rank} is not a rank of this run: it has {world_size} ranks, "
                               f"0 to {world_size - 1}; give one of those{more}")


def validate_checkpoint_resume(spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
                               device: str | None = None) -> None:
    """A folder to save in or a checkpoint of this demo's to resume from, with the same options, on a world
    that splits its global batch. A launch of the run's own plan (its phase set) was checked as the run."""
    spec = spec_of("checkpoint-resume", spec)
    _check_strategy("checkpoint-resume", spec)
    _check_shape(spec)
    if spec.phase is not None:
        return
    try:
        manifest = check_folder(spec.dir) if spec.dir else None
        if manifest is not None and device is not None:
            resolved = spec.resolved(device)
            differ = differences(manifest, resolved, resolved.batch_size * manifest.world_size)
            if differ:
                raise FolderError(f"--dir {spec.dir} holds a checkpoint saved with other options: {'; '.join(differ)}. "
                                  "Resume it with the options it was saved with, or save anew in an empty folder")
        if world_size is not None:
            saved_world = manifest.world_size if manifest else world_size
            batch_size = spec.batch_size or spec.batch_size_default()
            global_batch = manifest.global_batch if manifest else batch_size * saved_world
            check_global_batch(global_batch, saved_world, resume_world(spec, saved_world), batch_size)
    except FolderError as exc:
        raise click.UsageError(str(exc)) from None


def validate_local_sgd(spec: RunSpec | Mapping[str, Any], world_size: int | None = None,
                       device: str | None = None) -> None:
    """DDP replicas to average (local SGD takes no --strategy: FSDP's ranks hold shards, not replicas); the
    model's shape as any training run's."""
    spec = spec_of("local-sgd", spec)
    if spec.strategy != "ddp":
        raise click.UsageError(f"local-sgd averages DDP replicas; it does not train with {spec.strategy}, whose "
                               "ranks do not each hold the whole model. Leave the strategy out")
    _check_shape(spec)
