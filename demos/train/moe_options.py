"""`ddpfsdp demo moe`'s command line and its checks before launch (torch-free).

    ddpfsdp demo moe --procs 4 --ep 2 --experts 4 --top-k 2 --capacity-factor 1.0

The MoE run's options are RunSpec fields like every training demo's (`spec`: ep, experts, top_k,
capacity_factor), its command line made from them. What relates them to each other and to the world the
launcher placed is checked here, with the analytic model's own checks (`theory.expert_parallel.check_moe`,
`check_ep`) and the run's degrees (`ParallelDims.of`), so a bad combination is refused, with what to change,
before any rank starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from ddpfsdp.demos.base.shapes import GPT_PRESETS
from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.train.options import _check_trace, options_for, spec_of
from ddpfsdp.demos.train.spec import RunSpec

MOE_OPTIONS = options_for("moe")

# Tried on torch 2.13: over the "fake" backend (train/simulate.py's world) a collective moves no data, and
# fake tensors hold none: reading the split sizes the counts all-to-all delivers (`.tolist()`) raises
# DataDependentOutputException (aten._local_scalar_dense), so no dispatch can be sized.
SIMULATE_REFUSAL = (
    "--simulate: expert parallelism cannot run on fake tensors over a fake process group: the dispatch's split "
    "sizes are data (each rank learns them from an all-to-all of its routers' counts), a fake collective moves "
    "no data and a fake tensor holds none, so torch cannot read them (DataDependentOutputException).{theory} "
    "For the analytic model's whole table (theory, not a run) use: ddpfsdp calc --model {model} --gpus {gpus} "
    "--ep {ep} --experts {experts} --top-k {top_k} --capacity-factor {factor} --batch-size {batch} "
    "--precision fp32; or run the demo on real ranks without --simulate")


def simulate_theory(spec: RunSpec, ep: int, gpus: int) -> str:
    """What the analytic model (calc's expert-parallel section) says of the run asked, labelled as theory;
    empty where the model refuses it."""
    from ddpfsdp.demos.base.shapes import gpt_shape
    from ddpfsdp.demos.theory.expert_parallel import expert_parallel_figures

    try:
        figures = expert_parallel_figures(gpt_shape(spec.model or "tiny"), ep, spec.experts, spec.top_k,
                                          spec.capacity_factor, gpus=gpus, batch_size=spec.batch_size or 4,
                                          precision="fp32")
    except ValueError:
        return ""
    padded = figures["all_to_all_padded"]
    return (f" Theory for this run instead (demos/theory/expert_parallel.py, not a measurement): "
            f"{figures['experts_per_rank']} experts per rank and layer, {figures['params_per_rank']:,} parameters "
            f"per rank with the dense part whole; capacity {figures['capacity_per_expert']} slots per expert; "
            f"{figures['all_to_all']['calls']} all-to-alls per step sending {format_iec(figures['all_to_all']['bytes'])} "
            f"per rank routed evenly, {format_iec(padded['bytes'])} capacity-padded.")


def validate_moe(spec: RunSpec | Mapping[str, Any], world_size: int | None = None, device: str | None = None) -> None:
    """Refuse, before launch, what an MoE run cannot be: experts the ep ranks do not split, top-k above the
    experts, a world ep does not divide, a simulated run."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.theory.expert_parallel import check_ep, check_moe

    spec = spec_of("moe", spec)
    try:
        check_moe(spec.experts, spec.top_k, spec.capacity_factor)
        if spec.ep is not None:
            check_ep(spec.ep, spec.experts)
    except ValueError as exc:
        raise click.UsageError(_flags(str(exc))) from None
    if spec.simulate:
        ep = spec.ep or world_size or 2
        theory = simulate_theory(spec, ep, world_size or ep)
        raise click.UsageError(SIMULATE_REFUSAL.format(
            theory=theory, model=spec.model or "tiny", gpus=world_size or ep, ep=ep, experts=spec.experts,
            top_k=spec.top_k, factor=f"{spec.capacity_factor:g}", batch=spec.batch_size or 4))
    if spec.steps is not None and spec.steps < 2:
        raise click.UsageError(f"--steps must be at least 2 (the first is compared with one process, the last is "
                               f"recorded), got {spec.steps}")
    _check_trace(spec)
    model = spec.model_for(device) if device else spec.model
    if model is not None and model not in GPT_PRESETS:
        raise click.UsageError(f"--model {model}: the MoE layers replace a GPT's MLPs; choose one of "
                               f"{', '.join(GPT_PRESETS)}")
    if world_size is None:
        return
    try:
        ep = ParallelDims.of(spec, world_size).ep
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if spec.experts % ep:
        raise click.UsageError(_split_advice(spec.experts, ep, world_size, given=spec.ep is not None))


def _split_advice(experts: int, ep: int, world: int, given: bool) -> str:
    """Why `experts` cannot go over `ep` of `world` ranks, and the degrees, worlds or expert counts that can."""
    how = f"--ep {ep}" if given else f"the {world} ranks (without --ep the experts go over every rank)"
    fitting = [n for n in range(2, world + 1) if world % n == 0 and experts % n == 0]
    worlds = [n for n in range(2, experts + 1) if experts % n == 0][:3]
    instead = (f"give --ep {' or '.join(map(str, fitting))}" if fitting else
               f"give --procs {' or '.join(map(str, worlds))}" if worlds else "give --experts 2 or more")
    return (f"{experts} experts do not split evenly over {how}: each rank of an ep group holds whole experts, so ep "
            f"must divide both the experts and the world; {instead}, or --experts a multiple of {ep}")


def _flags(message: str) -> str:
    """The analytic model's words as the demo's flags."""
    return (message.replace("choose ep from", "choose --ep from").replace("over ep ", "over --ep ")
            .replace("capacity factor ", "--capacity-factor "))
