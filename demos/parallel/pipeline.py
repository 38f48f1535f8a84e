"""Pipeline parallelism: the model cut into stages, and each stage parallelized by the one `parallelize`.

    place = PipelinePlace.of(dims, mesh, rank)
    stages = pipeline_stages(net, run, dims, mesh, place, device, wire, v)   # [(stage index, module)]

torchtitan's `pipeline_llm(model, parallel_dims, job_config, ..., parallelize_fn)` is the model: the model
is split first (here the GPT's blocks into pp x V stages, the analytic model's `stage_layers`: rank r
holds stages r, r + pp, ...; the embeddings go with stage 0, the final LayerNorm, the LM head and the
loss with the last stage), and each stage module then goes through the same parallelization as a
whole model (`parallelize.parallelize`, given the run's degrees and mesh): with --dp, FSDP over the
stage's replicas, one unit per stage, not resharded after forward (every micro-batch would all-gather it
again), and each stage's own optimizer (AdamW keeps every parameter's state apart, so V optimizers step as
one would).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.parallel.strategies import Prepared
from ddpfsdp.demos.train.spec import RunSpec


@dataclass(frozen=True)
class PipelinePlace:
    """This rank's coordinates in the run's degrees: its place in its pipeline and its replica, with the
    pipeline's process group (None: the whole world)."""

    pp: int
    pp_rank: int
    dp: int
    dp_rank: int
    group: Any = None

    @classmethod
    def of(cls, dims: ParallelDims, mesh: Any, rank: int) -> PipelinePlace:
        if dims.dp_shard == 1:
            return cls(pp=dims.pp, pp_rank=rank, dp=1, dp_rank=0)
        return cls(pp=dims.pp, pp_rank=mesh.get_local_rank("pp"), dp=dims.dp_shard,
                   dp_rank=mesh.get_local_rank("dp_shard"), group=mesh.get_group("pp"))


def stage_blocks(layers: int, pp: int, v: int) -> dict[int, list[int]]:
    """The block indices of each stage index, from the analytic model's split (larger stages first)."""
    from ddpfsdp.demos.theory.pipeline import stage_layers

    sizes = stage_layers(layers, pp, v)
    by_stage = {rank + k * pp: sizes[rank][k] for rank in range(pp) for k in range(v)}
    out, start = {}, 0
    for index in range(pp * v):
        out[index] = list(range(start, start + by_stage[index]))
        start += by_stage[index]
    return out


class Stage(nn.Module):
    """A run of consecutive blocks, with the embeddings in front on the first stage and the head after them
    on the last. It computes on `compute` and hands what it sends to `wire`: the same device but for ranks
    sharing a GPU over gloo, whose sends and receives take host memory only, so the activations and
    gradients between stages cross through the CPU there (autograd carries the gradients back across the
    copy)."""

    def __init__(self, net: nn.Module, blocks: list[int], first: bool, last: bool, compute: Any, wire: Any) -> None:
        super().__init__()
        self.embeddings = net.embeddings if first else None
        self.blocks = nn.ModuleList(net.blocks[i] for i in blocks)
        self.head = net.head if last else None
        self.compute, self.wire = compute, wire

    def forward(self, x: Any) -> Any:
        x = x.to(self.compute)
        if self.embeddings is not None:
            x = self.embeddings(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x) if self.head is not None else x.to(self.wire)


def pipeline_stages(net: nn.Module, run: RunSpec, dims: ParallelDims, mesh: Any, place: PipelinePlace,
                    device: Any, wire: Any, v: int) -> list[tuple[int, Prepared]]:
    """This rank's stages of `net` (stage index, and the stage as `parallelize` made it with its optimizer,
    on `device`), each parallelized as `run` says over the run's degrees and mesh."""
    from ddpfsdp.demos.parallel.parallelize import World, parallelize

    stages_total = dims.pp * v
    blocks = stage_blocks(len(net.blocks), dims.pp, v)
    out = []
    for index in (place.pp_rank + k * dims.pp for k in range(v)):
        module = Stage(net, blocks[index], index == 0, index == stages_total - 1, device, wire)
        out.append((index, parallelize(module, run, World(dims.world_size), device, dims=dims, mesh=mesh)))
    return out
