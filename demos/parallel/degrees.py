"""The parallel degrees of one run, and the meshes they make: one type, worked out once.

    dims = ParallelDims.of(spec, world_size=8)   # e.g. FSDP over dp 4 x tensor parallelism over tp 2
    dims.dp_shard, dims.tp, dims.mesh_shape       # 4, 2, {"dp_shard": 4, "tp": 2}
    mesh = dims.build_mesh("cpu")                 # a DeviceMesh with those dimensions (torch imported here)

torchtitan's `ParallelDims` is the model: the degrees of data parallelism (replicated, `dp_replicate`,
and sharded, `dp_shard`), pipeline (`pp`), context (`cp`), expert (`ep`) and tensor (`tp`) parallelism
multiply to the world size, and one object answers "is X enabled" and builds the meshes; nothing else
re-derives them. A run's degrees follow from its spec and its world size (`of`):

    ddp, zro             dp_replicate = world                    every rank a whole replica
    fsdp full, grad-op   dp_shard = world / (tp x pp)            one shard group; with --tp, each TP shard
                                                                 sharded again over dp_shard
    fsdp hybrid          dp_replicate = replicas, dp_shard = world / replicas
    fsdp no-shard        dp_replicate = world                    FSDP2 holding everything, as DDP does
    pipeline (--pp)      pp = world / dp, dp_shard = dp          each stage sharded over its replicas
    moe (--ep)           dp_shard = world, ep = --ep or world    the dense part sharded over every rank, the
                                                                 experts split over each ep group of ranks
    cp (--cp)            cp = --cp, dp_shard = world / cp        FSDP over dp_shard x cp: the cp ranks run
                                                                 the same weights on different tokens

The mesh's dimensions go slowest first in the order of DIMS, each left out at degree 1, so the
fastest-varying dimension holds consecutive ranks: tensor parallelism's groups are a node's GPUs, as on a
real cluster, and a pipeline's stages are consecutive ranks. Expert parallelism borrows its ranks from the
data-parallel and context dimensions (torchtitan's rule: ep divides dp_shard x cp) rather than adding a
dimension of its own.

Torch-free at import: the CLI checks a run's degrees before any rank starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpfsdp.demos.train.spec import RunSpec

DIMS = ("dp_replicate", "dp_shard", "pp", "cp", "tp")  # a mesh's dimensions, slowest first


@dataclass(frozen=True)
class ParallelDims:
    """Degrees that multiply to `world_size`: data parallelism replicated and sharded, pipeline, context and
    tensor parallelism; expert parallelism over ranks of the data-parallel and context dimensions."""

    world_size: int
    dp_replicate: int = 1
    dp_shard: int = 1
    pp: int = 1
    cp: int = 1
    tp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        degrees = {name: getattr(self, name) for name in (*DIMS, "ep")}
        small = [f"{name} {value}" for name, value in degrees.items() if value < 1]
        if small:
            raise ValueError(f"every parallel degree is at least 1; got {', '.join(small)}")
        if prod(getattr(self, name) for name in DIMS) != self.world_size:
            spelled = " x ".join(f"{name} {getattr(self, name)}" for name in DIMS if getattr(self, name) > 1) or "1"
            raise ValueError(f"the parallel degrees ({spelled}) must multiply to the world of {self.world_size} ranks")
        if (self.dp_shard * self.cp) % self.ep:
            raise ValueError(f"expert parallelism over {self.ep} ranks must divide dp_shard x cp "
                             f"({self.dp_shard} x {self.cp}): its ranks are borrowed from those dimensions")

    # --- a run's degrees ------------------------------------------------------------------------------

    @classmethod
    def of(cls, run: RunSpec, world_size: int) -> ParallelDims:
        """The degrees `run` trains with on `world_size` ranks. ValueError, saying what would do, for a world
        the run's degrees do not divide."""
        if run.is_pipeline:
            dp = run.dp
            pp = run.pp or (world_size // dp if world_size % dp == 0 else 0)
            if pp < 2 or pp * dp != world_size:
                given = f"--pp {run.pp} x " if run.pp else ""
                raise ValueError(f"{given}--dp {dp} on {world_size} ranks: the ranks are dp x pp with pp at least 2; "
                                 f"give --procs {(run.pp or 2) * dp} (or another multiple of {dp} of at least "
                                 f"{2 * dp})")
            return cls(world_size, dp_shard=dp, pp=pp)
        if run.is_moe:
            ep = run.ep or world_size
            if world_size % ep or ep < 2:
                fitting = [n for n in range(2, world_size + 1) if world_size % n == 0 and run.experts % n == 0]
                other = f"--ep {' or '.join(map(str, fitting))}, or " if fitting else ""
                raise ValueError(f"--ep {ep} must divide the world of {world_size} ranks (its ranks are borrowed from "
                                 f"data parallelism): give {other}--procs {ep} or {2 * ep}")
            return cls(world_size, dp_shard=world_size, ep=ep)
        if run.cp:
            cp = run.cp
            if run.tp:
                raise ValueError("--cp composes with FSDP over dp x cp here, not with --tp: drop one of the two")
            if world_size % cp:
                raise ValueError(f"--cp {cp} must divide the world of {world_size} ranks (the mesh is dp x cp): try "
                                 f"--procs {cp} or {2 * cp}, or --world {2 * cp} with --simulate")
            return cls(world_size, dp_shard=world_size // cp, cp=cp)
        if run.strategy in ("ddp", "zro") or run.sharding == "no-shard":
            return cls(world_size, dp_replicate=world_size)
        if run.tp:
            tp = run.tp
            if world_size % tp or world_size // tp < 2:
                raise ValueError(f"--tp {tp} must divide the world of {world_size} ranks and leave at least 2 "
                                 f"data-parallel groups (the mesh is dp x tp): try --procs {2 * tp}, or --world "
                                 f"{2 * tp} with --simulate")
            return cls(world_size, dp_shard=world_size // tp, tp=tp)
        if run.sharding == "hybrid":
            replicas = run.replicas
            if replicas < 2 or world_size % replicas or world_size <= replicas:
                raise ValueError(f"--sharding hybrid with --replicas {replicas} cannot split {world_size} ranks: "
                                 "replicas must be at least 2, divide the world size and be smaller than it "
                                 "(e.g. --procs 4 --replicas 2)")
            return cls(world_size, dp_replicate=replicas, dp_shard=world_size // replicas)
        return cls(world_size, dp_shard=world_size)

    @staticmethod
    def fewest_ranks(run: RunSpec) -> int:
        """The smallest world `run` shows what it is for on: two data-parallel groups of its other degrees
        (two ranks; two groups of --tp or of --cp; --replicas shard groups of two; two stages per pipeline
        replica; two groups of --ep)."""
        if run.is_pipeline:
            return (run.pp or 2) * run.dp
        if run.is_moe:  # --ep N: two ep groups, each expert on two ranks; else every rank one ep group
            return 2 * run.ep if run.ep else 2
        if run.cp:
            return 2 * run.cp
        if run.tp:
            return 2 * run.tp
        if run.strategy == "fsdp" and run.sharding == "hybrid":
            return max(2, 2 * run.replicas)
        return 2

    # --- what is enabled --------------------------------------------------------------------------------

    @property
    def dp(self) -> int:
        """The data-parallel degree: the replicas that each read their own batch."""
        return self.dp_replicate * self.dp_shard

    @property
    def fsdp_size(self) -> int:
        """The ranks FSDP splits each parameter over (1 where nothing is sharded): the shard dimension, and
        the cp ranks, which hold the same weights (torchtitan's dp_shard x cp)."""
        return self.dp_shard * self.cp

    @property
    def hybrid(self) -> bool:
        return self.dp_replicate > 1 and self.dp_shard > 1

    @property
    def mesh_shape(self) -> dict[str, int]:
        """The mesh's dimensions above degree 1, slowest first."""
        return {name: getattr(self, name) for name in DIMS if getattr(self, name) > 1}

    def describe(self) -> str:
        shape = self.mesh_shape
        return " x ".join(f"{name} {degree}" for name, degree in shape.items()) or "one rank"

    # --- meshes (torch) ---------------------------------------------------------------------------------

    def build_mesh(self, device_type: str) -> Any:
        """The world's DeviceMesh with the dimensions of `mesh_shape`. Replicated data parallelism keeps its
        shard dimension even at degree 1: that (replicas, 1) pair is how FSDP holds every parameter whole
        (no-shard). The device type is the run's: on a GPU host running CPU ranks, torch's default (the
        accelerator) would hand CUDA tensors to gloo."""
        from torch.distributed.device_mesh import init_device_mesh

        shape = self.mesh_shape
        if self.dp_replicate > 1 and "dp_shard" not in shape:
            shape = {"dp_replicate": self.dp_replicate, "dp_shard": 1, **{k: v for k, v in shape.items()
                                                                          if k != "dp_replicate"}}
        shape = shape or {"dp_shard": 1}
        return init_device_mesh(device_type, tuple(shape.values()), mesh_dim_names=tuple(shape))

    def ep_mesh(self, device_type: str) -> Any:
        """Expert parallelism's own mesh of the world, (edp, ep), ep fastest: each "ep" group's ranks hold
        the experts between them and exchange tokens; each "edp" group's ranks hold the same experts
        (Megatron-LM's expert-data-parallel group) and average their gradients."""
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(device_type, (self.world_size // self.ep, self.ep), mesh_dim_names=("edp", "ep"))

    def fsdp_mesh(self, mesh: Any) -> Any:
        """What FSDP shards over: the 1-D shard dimension, or with replicas (HSDP, no-shard) the
        (replicate, shard) pair; with context parallelism the shard and cp dimensions flattened into one
        (torchtitan's "dp_shard_cp"), since the cp ranks' gradients are partial sums of the same weights'."""
        if self.cp > 1:
            names = tuple(name for name in ("dp_shard", "cp") if name in mesh.mesh_dim_names)
            return mesh[names]._flatten("dp_shard_cp") if len(names) > 1 else mesh["cp"]
        if self.dp_replicate > 1:
            return mesh["dp_replicate", "dp_shard"]
        return mesh["dp_shard"] if mesh.mesh_dim_names != ("dp_shard",) else mesh
