"""Before a training demo launches: will it fit? An estimate per rank against what the device has free.

The estimate is the analytic model's (`ddpfsdp.demos.theory`): model state, the step's working set,
activations, plus a fixed runtime overhead per process. It is compared with free GPU memory
(CUDA) or the available RAM shared by the CPU processes, less a safety margin. When it does not
fit, the verdict names a configuration that would (FSDP full sharding, activation checkpointing,
a smaller batch, more GPUs, a smaller model), and the caller refuses to launch unless forced.
A demo's options are read as its RunSpec (`train.spec`): an option left out takes the run's default.
It sits with the launch, not the theory: it reads the run's spec, the demos' own checks of a
suggestion (`train.options`) and what the host has free.

Pure Python at import; torch is imported only to ask CUDA what is free, and then in a child
process, so the launcher never holds a CUDA context on the GPUs its ranks are about to use.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, TypedDict

import click

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.theory.activations import model_activation_bytes, resnet_activation_bytes
from ddpfsdp.demos.theory.gpt_layout import gpt_unit_params
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.run import theory_for_run
from ddpfsdp.demos.base import shapes
from ddpfsdp.demos.train.options import validate
from ddpfsdp.demos.train.spec import TRAINING_DEMOS, RunSpec, command_flags, option_fields
from ddpfsdp.demos.registry import DATA_PARALLEL_MIN_RANKS
from ddpfsdp.demos.base.units import format_bytes

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.run import RunTheory
    from ddpfsdp.demos.theory.tensor_parallel import TwoDRunTheory

SAFETY_MARGIN = 0.10
"""Fraction of the free memory kept back for the allocator's fragmentation and what we do not model."""

PROCESS_OVERHEAD_BYTES = {"cuda": 2**30, "cpu": 512 * 2**20}
"""Per process, beyond tensors: CUDA context and NCCL buffers on a GPU; the interpreter and torch on CPU."""



class EstimateParts(TypedDict):
    """A rank's estimated bytes by what holds them."""

    model_state: int
    working_set: int
    activations: int
    process_overhead: int


class _RunEstimate(TypedDict):
    total_bytes: int
    parts: EstimateParts
    strategy: str


class RankEstimate(_RunEstimate):
    """The per-rank estimate of a demo's fullest run (compare's runs differ in strategy only)."""

    arch: str
    model: str | None
    params: int


@dataclass(frozen=True)
class Verdict:
    fits: bool
    estimate_bytes: int | None  # per rank
    available_bytes: int | None  # per rank, before the safety margin
    message: str
    suggestion: str | None = None
    forced: bool = False
    breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def proceed(self) -> bool:
        """Launch or not: it fits, or the user forced it."""
        return self.fits or self.forced


# ----------------------------------------------------------------------------- the estimate


def _units(spec: RunSpec, shape: Any) -> list[int]:
    """The parameters of each FSDP unit."""
    if spec.arch == "gpt":
        return gpt_unit_params(shape, wrap=spec.wrap)
    if spec.arch == "vit":
        blocks = [shape.block_params] * shape.layers
        return [shape.params] if spec.wrap == "model" else [shape.embedding_params, *blocks, shape.head_params, 0]
    blocks = [shape.basic_block_params(*block) for block in shape.block_shapes()]
    return [shape.params] if spec.wrap == "model" else [shape.stem_params, *blocks, shape.head_params, 0]


def _activations(spec: RunSpec, shape: Any, strategy: str) -> int:
    """The analytic model's activations, with the precision applied as `strategy` applies it
    (`implementation(...).cast`: under bf16-mixed DDP's autocast keeps an fp32 residual stream, FSDP2's
    param_dtype a bf16 one); for a ResNet a rough count."""
    if spec.arch == "resnet":
        return resnet_activation_bytes(shape, spec.batch_size, spec.precision)
    cast = implementation(strategy, spec.precision).cast
    return model_activation_bytes(spec.arch, shape, spec.batch_size, spec.checkpoint_activations,
                                  spec.precision, cast=cast)


def _run_theory(spec: RunSpec, shape: Any, world_size: int) -> tuple[RunTheory | TwoDRunTheory, int]:
    """The analytic model's figures for one run on `world_size` ranks, and its activations per rank:
    a --tp run's are the 2-D model's (one TP rank's share of the parameters and activations), a --cp
    run's one cp rank's tokens'."""
    if spec.tp:
        from ddpfsdp.demos.theory.tensor_parallel import two_d_run_theory

        theory = two_d_run_theory(shape=shape, world_size=world_size, tp=spec.tp, precision=spec.precision,
                                  optimizer=spec.optimizer, batch_size=spec.batch_size,
                                  sequence_parallel=spec.sequence_parallel)
        return theory, theory["activation_bytes"]
    if spec.cp:
        from ddpfsdp.demos.theory.context_parallel import activation_bytes

        # FSDP over dp x cp (every rank), each rank's activations at S/cp with the ring's buffers
        theory = theory_for_run(strategy="fsdp", sharding=spec.sharding, params=shape.params, world_size=world_size,
                                precision=spec.precision, optimizer=spec.optimizer, unit_params=_units(spec, shape))
        held = activation_bytes(shape, spec.batch_size, spec.cp, spec.precision,
                                checkpoint_activations=spec.checkpoint_activations,
                                cast=implementation("fsdp", spec.precision).cast)
        return theory, held["activation_bytes"]
    theory = theory_for_run(strategy=spec.strategy, sharding=spec.sharding, params=shape.params, world_size=world_size,
                            precision=spec.precision, optimizer=spec.optimizer, replicas=spec.replicas,
                            unit_params=_units(spec, shape))
    return theory, _activations(spec, shape, theory["strategy"])


def _spec(demo: str, spec: RunSpec | Mapping[str, Any]) -> RunSpec:
    return spec if isinstance(spec, RunSpec) else RunSpec.for_demo(demo, spec)


def estimate_rank_bytes(demo: str, spec: RunSpec | Mapping[str, Any], *, device: str,
                        world_size: int) -> RankEstimate:
    """The per-rank estimate for a training demo's spec (or the options that make it): {"total_bytes",
    "parts", "model", ...}.

    Options left out take RunSpec's defaults. Raises ValueError for options RunSpec does not allow.
    """
    runs = _spec(demo, spec).resolved(device).runs(demo)
    first = runs[0]  # compare's runs differ in strategy only
    shape = shapes.shape_for(first.arch, first.model, **first.overrides)
    overhead = PROCESS_OVERHEAD_BYTES["cpu" if device == "cpu" else "cuda"]
    worst: _RunEstimate | None = None
    for each in runs:
        theory, activations = _run_theory(each, shape, world_size)
        parts: EstimateParts = {
            "model_state": theory["model_state_bytes"],
            "working_set": theory["working_set_bytes"],
            "activations": activations,
            "process_overhead": overhead,
        }
        total = sum(parts.values())
        if worst is None or total > worst["total_bytes"]:
            worst = {"total_bytes": total, "parts": parts, "strategy": theory["strategy"]}
    assert worst is not None
    return {**worst, "arch": first.arch, "model": first.model, "params": shape.params}


# ----------------------------------------------------------------------------- what is free


def _cuda_free_bytes(world_size: int) -> int | None:
    """The least free memory among the local GPUs the ranks will use, or None if unknown.

    torch.cuda.mem_get_info creates a CUDA context (hundreds of MB per GPU) that would stay for
    the whole run, so it is asked in a short-lived child process unless this process already
    has CUDA initialised.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        count = min(world_size, torch.cuda.device_count())
        return min(torch.cuda.mem_get_info(index)[0] for index in range(count)) if count else None
    code = (
        "import json, sys, torch\n"
        "n = min(int(sys.argv[1]), torch.cuda.device_count())\n"
        "print(json.dumps([torch.cuda.mem_get_info(i)[0] for i in range(n)]))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(world_size)], capture_output=True, text=True, timeout=120
        )
        free = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    return min(free) if free else None


def available_rank_bytes(device: str, world_size: int) -> int | None:
    """Memory one rank may use: free memory of its GPU, or available RAM shared by the processes."""
    if device == "cpu":
        from ddpfsdp.demos.base.host import ram_bytes

        _, available = ram_bytes()
        return None if available is None else available // world_size
    return _cuda_free_bytes(world_size)


# ----------------------------------------------------------------------------- the verdict


def _fits(estimate: int, available: int) -> bool:
    return estimate <= available * (1 - SAFETY_MARGIN)


def _candidates(demo: str, spec: RunSpec, device: str, world_size: int, more_gpus: bool = True):
    """Configurations to try, most similar first: (demo, changed options, world size). On CPU the
    same run on fewer processes comes first: they share one RAM, so fewer leave each one more."""
    if device == "cpu":
        ranks = world_size // 2
        while ranks >= DATA_PARALLEL_MIN_RANKS:
            yield demo, {}, ranks
            ranks //= 2
    base = {"model": spec.model}
    if demo == "ddp" or (demo == "fsdp" and spec.sharding != "full"):
        yield "fsdp", {**base, "sharding": "full"}, world_size
    sharded = {"sharding": "full"} if demo in ("ddp", "fsdp") else {}
    target = "fsdp" if demo == "ddp" else demo
    # A --tp run keeps every block's activations (the demo refuses --checkpoint-activations with it).
    checkpoint = {} if spec.tp else {"checkpoint_activations": True}
    if checkpoint and not spec.checkpoint_activations:
        yield target, {**base, **sharded, **checkpoint}, world_size
    batch = spec.batch_size
    while batch > 1:
        batch //= 2
        yield target, {**base, **sharded, **checkpoint, "batch_size": batch}, world_size
    if device != "cpu" and target == "fsdp" and more_gpus:
        # Sharding divides model state by the world size.
        for more in (world_size * 2, world_size * 4, world_size * 8):
            yield target, {**base, **sharded, **checkpoint, "batch_size": 1}, more
    if device == "cpu" and world_size > 2:
        # CPU processes share one RAM: fewer of them leaves each one more.
        yield target, {**base, **sharded, **checkpoint, "batch_size": 1}, 2
    names = list(shapes.PRESETS[spec.arch])
    if spec.model in names:
        for smaller in reversed(names[: names.index(spec.model)]):
            yield target, {"model": smaller, **sharded, **checkpoint, "batch_size": 1}, world_size


def _suggest(demo: str, spec: RunSpec, device: str, world_size: int,
             available: int, more_gpus: bool = True) -> tuple[str | None, int | None]:
    launch_flag = "--procs" if device == "cpu" else "--gpus"
    options = {item.name: getattr(spec, item.name) for item in option_fields(demo)}
    for target, changed, ranks in _candidates(demo, spec.resolved(device), device, world_size, more_gpus):
        trial = {**options, **changed}
        if target == "fsdp" and demo == "ddp":
            trial.pop("bucket_mb", None)
        try:
            validate(target, trial, ranks, device)  # a suggestion the demo itself would refuse is none
            estimate = estimate_rank_bytes(target, trial, device=device, world_size=ranks)["total_bytes"]
        except (ValueError, click.UsageError):
            continue
        # `available` is per rank; on CPU a different process count shares the same RAM.
        per_rank = available * world_size // ranks if device == "cpu" else available
        if _fits(estimate, per_rank):
            more = f" {launch_flag} {ranks}" if ranks != world_size else ""
            command = " ".join(["ddpfsdp demo", target, *command_flags(target, trial, first=list(changed))]) + more
            return command, estimate
    return None, None


def check_launch(
    demo: str,
    spec: RunSpec | Mapping[str, Any],
    placement: Placement,
    *,
    force: bool,
    available_bytes: int | None = None,
) -> Verdict:
    """Whether a training demo's per-rank memory fits what each rank has free where `placement` puts it.

    `available_bytes` (per rank; with ranks sharing a GPU, that GPU's free memory) replaces the query of
    the device, as tests do. On CPU every rank is a process of this host, so the host's available RAM is
    shared: the run fits when world_size x the per-rank estimate fits in it, less the margin, and the
    message gives that sum. Likewise K ranks on one GPU (gloo, launch.sharing) each hold their own share
    and their own CUDA context: the K estimates together must fit the GPU's free memory. A concept demo
    on shared GPUs is held to its K CUDA contexts. A demo the model cannot size is let through, with a
    message saying so.
    """
    device = "cpu" if placement.device == "cpu" else "cuda"
    world_size, ranks_per_gpu, shared, gpus = (placement.world_size, placement.ranks_per_gpu, placement.shared,
                                               placement.gpus or placement.world_size)
    if demo not in TRAINING_DEMOS and not shared:
        return Verdict(True, None, None, f"{demo}: a concept demo on a small model; no memory estimate needed.")
    if demo not in TRAINING_DEMOS:
        estimate = {"total_bytes": PROCESS_OVERHEAD_BYTES["cuda"], "model": "its small model", "params": None,
                    "parts": {"model_state": 0, "working_set": 0, "activations": 0,
                              "process_overhead": PROCESS_OVERHEAD_BYTES["cuda"]}}
    else:
        try:
            spec = _spec(demo, spec)
            estimate = estimate_rank_bytes(demo, spec, device=device, world_size=world_size)
        except (ValueError, TypeError, AttributeError) as error:
            return Verdict(
                True, None, None,
                f"cannot estimate memory for this configuration ({error}); launching without the check.",
                forced=force,
            )
    total = estimate["total_bytes"]
    available = available_bytes if available_bytes is not None else available_rank_bytes(device, gpus)
    where = "per CPU process (available RAM / processes)" if device == "cpu" else "free on the fullest GPU"
    parts = estimate["parts"]
    described = (
        f"estimate {format_bytes(total, 'GiB')} per rank (theory: model state "
        f"{format_bytes(parts['model_state'], 'GiB')}, working set "
        f"{format_bytes(parts['working_set'], 'GiB')}, activations "
        f"{format_bytes(parts['activations'], 'GiB')}, runtime "
        f"{format_bytes(parts['process_overhead'], 'GiB')})"
    )
    if available is None:
        return Verdict(
            True, total, None,
            f"{described}; free memory is unknown here, so launching without the check.",
            forced=force, breakdown=parts,
        )
    usable = int(available * (1 - SAFETY_MARGIN))
    if device == "cpu":
        # The processes share one host's RAM: say what they need together against what it has.
        described += (
            f"; {world_size} processes x {format_bytes(total, 'GiB')} = {format_bytes(world_size * total, 'GiB')} "
            f"together, against {format_bytes(available * world_size, 'GiB')} of available host RAM"
        )
    needed = total
    if shared:
        # K processes on one GPU: each its own shard, activations and CUDA context, all in one memory.
        needed = ranks_per_gpu * total
        described += (
            f"; {ranks_per_gpu} ranks share each GPU, each with its own CUDA context: {ranks_per_gpu} x "
            f"{format_bytes(total, 'GiB')} = {format_bytes(needed, 'GiB')} together on one GPU"
        )
    if _fits(needed, available):
        return Verdict(
            True, total, available,
            f"{described}; fits in {format_bytes(usable, 'GiB')} usable of {format_bytes(available, 'GiB')} {where}.",
            forced=force, breakdown=parts,
        )
    if demo in TRAINING_DEMOS:
        per_rank = available // ranks_per_gpu if shared else available
        suggestion, suggested_bytes = _suggest(demo, spec, device, world_size, per_rank, more_gpus=not shared)
    else:
        suggestion, suggested_bytes = None, None
    if suggestion:
        advice = f" Try: {suggestion} (estimate {format_bytes(suggested_bytes, 'GiB')} per rank)."
    elif shared:
        advice = (f" Fewer ranks on the GPU (--ranks-per-gpu), or CPU processes: ddpfsdp demo {demo} "
                  f"--procs {world_size}.")
    else:
        advice = " No smaller configuration of this demo fits here; try a smaller --model or more memory."
    override = " --force launches it anyway." if not force else " Launching anyway (--force)."
    params = f" ({estimate['params']:,} params)" if estimate.get("params") else ""
    ranks = (f"{world_size} ranks sharing {gpus} GPU{'s' if gpus != 1 else ''}" if shared
             else f"{world_size} {'processes' if device == 'cpu' else 'GPUs'}")
    return Verdict(
        False, total, available,
        f"{demo} with {estimate['model']}{params} on {ranks} will not fit: {described}, but only "
        f"{format_bytes(usable, 'GiB')} is usable of {format_bytes(available, 'GiB')} {where} "
        f"({SAFETY_MARGIN:.0%} kept back).{advice}{override}",
        suggestion=suggestion, forced=force, breakdown=parts,
    )


__all__ = ["Verdict", "check_launch", "estimate_rank_bytes", "available_rank_bytes", "model_activation_bytes",
           "SAFETY_MARGIN"]
