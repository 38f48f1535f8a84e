"""Tensor parallelism inside each GPT block, on the "tp" dimension of a ("dp", "tp") DeviceMesh.

The plan (Megatron-LM's, as torch.distributed.tensor.parallel expresses it):

    attn.qkv    ColwiseParallel    rows split by head (the model lays qkv out per head), output Shard(-1)
    attn.proj   RowwiseParallel    input Shard(-1), partial sums all-reduced (or reduce-scattered)
    mlp.fc      ColwiseParallel    the hidden width split
    mlp.proj    RowwiseParallel
    embeddings.token  RowwiseParallel(input Replicate): the vocabulary split, the lookup all-reduced
    head.out    ColwiseParallel(output Shard(-1), DTensor): logits split by vocabulary, for `loss_parallel`

With sequence parallelism (Korthikanti et al., 2022) the residual stream between the pairs is split
by sequence (Shard(1)): the LayerNorms run under SequenceParallel, the row-wise Linears reduce-scatter
into it, PrepareModuleInput all-gathers it before attention and the MLP, and the embeddings' output
is cut to each rank's slice of the sequence; the head all-gathers its input.

FSDP is applied afterwards over "dp" (`fully_shard` shards each TP DTensor further, dim 0; see
`torch/distributed/fsdp/_fully_shard/_fsdp_param.py`, `_init_sharding_spec_tp`). The position table,
the LayerNorms and the row-wise Linears' biases stay whole on every TP rank.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.distributed.tensor.parallel import ParallelStyle

    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.measure.comm import PerOp

# Torch is imported inside the functions: the CLI checks --tp against the model (check_tp_shape)
# before any rank starts.
# The result's names of a 2-D run's groups, and the mesh dimension (`degrees.DIMS`) each is: tp is the
# fastest-varying, so its groups are consecutive ranks, a node's GPUs.
DIMS = {"dp": "dp_shard", "tp": "tp"}


def check_tp_shape(shape: Any, tp: int, world_size: int, sequence_parallel: bool = False) -> None:
    """Refuse a TP degree the model cannot split, saying what would (`shape` None: nothing to check; the
    world's split is the degrees' own check, `ParallelDims.of`). Sequence parallelism also splits the
    sequence, so tp must divide it too."""
    if tp < 2:
        raise ValueError(f"--tp must be at least 2 (got {tp}); without it the run is plain FSDP")
    if shape is None:
        return
    heads = getattr(shape, "heads", None)
    if heads is None or getattr(shape, "vocab", None) is None:
        raise ValueError("--tp applies to the GPT decoder (--arch gpt): its plan splits heads and the vocabulary")
    if heads % tp:
        divisors = [d for d in range(2, heads + 1) if heads % d == 0 and world_size % d == 0 and world_size // d >= 2]
        raise ValueError(f"--tp {tp} must divide the model's {heads} heads (each TP rank computes whole heads); "
                         f"try {', '.join(map(str, divisors)) or 'a smaller --tp'}")
    if shape.vocab % tp:
        raise ValueError(f"--tp {tp} must divide the vocabulary ({shape.vocab}): the embedding and the head split it")
    if sequence_parallel and shape.seq_len % tp:
        raise ValueError(f"--sequence-parallel splits the sequence ({shape.seq_len}) over --tp {tp}, which must "
                         f"divide it; change --seq-len or --tp, or drop --sequence-parallel")


def block_plan(sequence_parallel: bool) -> dict[str, ParallelStyle]:
    """One transformer block's plan: column-wise then row-wise in attention and in the MLP."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel

    if not sequence_parallel:
        return {"attn.qkv": ColwiseParallel(), "attn.proj": RowwiseParallel(),
                "mlp.fc": ColwiseParallel(), "mlp.proj": RowwiseParallel()}
    gather = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
    return {
        "ln_attn": SequenceParallel(),
        "attn": PrepareModuleInput(**gather),
        "attn.qkv": ColwiseParallel(),
        "attn.proj": RowwiseParallel(output_layouts=Shard(1)),
        "ln_mlp": SequenceParallel(),
        "mlp": PrepareModuleInput(**gather),
        "mlp.fc": ColwiseParallel(),
        "mlp.proj": RowwiseParallel(output_layouts=Shard(1)),
    }


def ends_plan(sequence_parallel: bool) -> dict[str, ParallelStyle]:
    """The embeddings and the head: both split by vocabulary."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleOutput, RowwiseParallel, SequenceParallel

    plan: dict[str, ParallelStyle] = {"embeddings.token": RowwiseParallel(input_layouts=Replicate())}
    if sequence_parallel:
        # The token and position embeddings are added whole, then each rank keeps its slice of the sequence.
        plan["embeddings"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1))
        plan["head.ln"] = SequenceParallel()
        plan["head.out"] = ColwiseParallel(input_layouts=Shard(1), use_local_output=False)
    else:
        plan["head.out"] = ColwiseParallel(use_local_output=False)
    return plan


def parallelize(model: torch.nn.Module, tp_mesh: Any, sequence_parallel: bool) -> torch.nn.Module:
    """Apply the plan to a GPT over the 1-D `tp_mesh`, before FSDP."""
    from torch.distributed.tensor.parallel import parallelize_module

    for block in model.blocks:
        parallelize_module(block, tp_mesh, block_plan(sequence_parallel))
    return parallelize_module(model, tp_mesh, ends_plan(sequence_parallel))


def loss_context() -> contextlib.AbstractContextManager:
    """The context the loss and its backward run in: cross-entropy on vocabulary-sharded logits."""
    from torch.distributed.tensor.parallel import loss_parallel

    return loss_parallel()


def local_value(tensor: torch.Tensor) -> torch.Tensor:
    """A replicated DTensor's value as a plain tensor (the loss, for reporting)."""
    from torch.distributed.tensor import DTensor

    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


@dataclass
class TwoD:
    """A model tensor-parallelised over the "tp" dimension of its (dp, tp) mesh, for FSDP over "dp"."""

    mesh: Any  # the run's 2-D DeviceMesh; its dp_shard dimension is what fully_shard shards over
    tp: int
    dp: int
    dp_rank: int  # this rank's data-parallel group: which batch it reads
    sequence_parallel: bool

    @classmethod
    def apply(cls, model: torch.nn.Module, run: Any, dims: ParallelDims, mesh: Any) -> TwoD:
        """Apply the plan to `model` in place over the "tp" dimension of the run's mesh, before FSDP."""
        check_tp_shape(model.shape, run.tp, dims.world_size, run.sequence_parallel)
        parallelize(model, mesh["tp"], run.sequence_parallel)
        return cls(mesh, dims.tp, dims.dp_shard, mesh.get_local_rank(DIMS["dp"]), run.sequence_parallel)

    def group_names(self) -> dict[str, str]:
        """This rank's dp and tp process groups by name, as the collective counter reports them."""
        return {name: str(self.mesh.get_group(dim).group_name) for name, dim in DIMS.items()}

    def traffic(self, counter: Any) -> dict[str, PerOp]:
        """This rank's collectives per mesh dimension, {"dp": per op, "tp": per op}, from a CommCounter."""
        from ddpfsdp.demos.measure.comm import per_dimension

        return per_dimension(self.group_names(), counter.per_group())

    def describe(self) -> str:
        plan = "ColwiseParallel / RowwiseParallel" + (" + SequenceParallel" if self.sequence_parallel else "")
        return f"tensor parallel over tp {self.tp} ({plan}) inside each block, FSDP over dp {self.dp}"

    @staticmethod
    def loss_context() -> contextlib.AbstractContextManager:
        return loss_context()

    @staticmethod
    def local_value(tensor: torch.Tensor) -> torch.Tensor:
        return local_value(tensor)
