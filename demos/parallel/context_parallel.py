"""Context parallelism: each rank of a "cp" group holds S/cp tokens of every sequence, and causal
self-attention passes keys and values around the group's ring, written here by hand.

    plan = ContextParallel.apply(model, run, dims, mesh)   # in `parallelize`, before FSDP
    tokens, targets = plan.local_batch(batch)              # this rank's chunks of every sequence

Why by hand. torch 2.13's `torch.distributed.tensor.experimental.context_parallel` targets the GPU's
attention kernels and does not run on CPU ranks. Tried with gloo: attention raises "Operator
aten._scaled_dot_product_flash_attention_for_cpu.default does not have a sharding strategy
registered" (`_attention.py` registers ring handlers for the flash, efficient and cuDNN ops only), and a
buffer that requires grad cannot be handed to it ("cannot resize variables that require grad": it
shards its buffers in place). So this module runs torch's algorithm itself, step for step as
`_templated_ring_attention` and `_templated_ring_attention_backward` run it with the one-hop rotation
(`set_rotate_method("alltoall")`, whose `_AllToAllRotater` moves a block to the next rank with
`permute_tensor`; here one `batch_isend_irecv` of a send to the next rank and a receive from the
previous). torch's default rotation, ALL_GATHER, gathers every block at once instead (`theory.context_parallel`).

The layout (`SequenceLayout`). Balanced, the sequence is cut into 2·cp chunks and rank r holds chunks r
and 2cp-1-r, one early and one late (torch's `_HeadTailLoadBalancer`); contiguous, rank r holds the
r-th of cp chunks. A rank's tokens go through the embeddings with their own positions, and every layer
but attention works token by token on them.

Forward, step i of cp, the rank holds the K/V block of rank (r - i) mod cp, the source; it starts
sending that block on (if i < cp - 1) and computes against it:
  i = 0               its own block, under the causal mask (its two chunks in order are causal too)
  source < r          every query against the block: balanced, only the block's early chunk, since
                      its late chunk comes after both of this rank's chunks
  source > r          contiguous: nothing (the whole block is in the future); balanced, only the late
                      chunk's queries, against the whole block
and merges the block's output into the running one with their log-sum-exps (the online softmax, in
fp32: `_SDPAMerger`'s form, out - sigmoid(lse_b - lse)·(out - out_b)).
Backward runs the same steps: the K/V blocks travel again (cp - 1 sends), and an fp32 dK/dV
accumulator travels one hop behind them: each rank adds its share for the block it holds and sends the
sum on, cp times, so the last hop brings each block's gradient home (torch's `dkv_rotater`, fp32 by
`_cp_options.convert_to_f32`). Each block's gradients come from the attention kernel's backward given
the merged output and log-sum-exp, as torch does it (FlashAttention-2's backward recomputes the
block's probabilities from them).

The block kernel. On the CPU (and on fake tensors) torch's own fused kernel,
`aten._scaled_dot_product_flash_attention_for_cpu` and its backward, which return and take the
log-sum-exp; elsewhere the same mathematics in plain matmuls (fp32 scores).

What is counted (`Ring.ledger`): each send as it is handed to `batch_isend_irecv` (what and how many
bytes), and the query-key pairs each block's kernel scores (a diagonal block of n tokens n(n+1)/2, a
full one nq·nk), times batch and heads: the measured compute of each rank.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch
import torch.distributed as dist
from torch import nn

from ddpfsdp.demos.theory.context_parallel import BALANCED_CHUNKS_PER_RANK, check_cp, rank_chunks
from ddpfsdp.demos.train.models import GPTEmbeddings, SelfAttention

SPLITS = ("head-tail", "contiguous")  # balanced (torch's head-tail load balancer) or not
KV_TAG, DKV_TAG = 0, 1  # the two rotations in flight in backward, told apart on the wire
GRAD_DTYPE = torch.float32  # dK/dV are accumulated and sent in fp32 (torch's convert_to_f32)


# ----------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class SequenceLayout:
    """Which tokens of a sequence of `seq_len` one rank of `cp` holds, in order."""

    cp: int
    rank: int
    seq_len: int
    balanced: bool = True

    def __post_init__(self) -> None:
        check_cp(self.cp, self.seq_len, balanced=self.balanced)

    @property
    def chunks(self) -> tuple[int, ...]:
        return rank_chunks(self.cp, self.rank, balanced=self.balanced)

    @property
    def chunk_tokens(self) -> int:
        return self.seq_len // (self.cp * (BALANCED_CHUNKS_PER_RANK if self.balanced else 1))

    @property
    def tokens(self) -> int:
        return self.seq_len // self.cp

    def take(self, tensor: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """This rank's tokens of `tensor`, whose dimension `dim` is the whole sequence (slices only, so a
        fake tensor stays fake)."""
        n = self.chunk_tokens
        return torch.cat([tensor.narrow(dim, c * n, n) for c in self.chunks], dim=dim)

    def positions(self, device: Any) -> torch.Tensor:
        """The positions in the sequence of this rank's tokens."""
        n = self.chunk_tokens
        return torch.cat([torch.arange(c * n, (c + 1) * n, device=device) for c in self.chunks])


# ----------------------------------------------------------------------------- what a ring counts


class CallRecord(TypedDict):
    """One ring attention call on one rank: its sends and the query-key pairs its kernels scored."""

    phase: str  # "forward" (a recomputed forward too) or "backward"
    kv_sends: int
    kv_bytes: int
    dkv_sends: int
    dkv_bytes: int
    pairs: int


def _new_record(phase: str) -> CallRecord:
    return CallRecord(phase=phase, kv_sends=0, kv_bytes=0, dkv_sends=0, dkv_bytes=0, pairs=0)


def _pairs(nq: int, nk: int, causal: bool, batch_heads: int) -> int:
    return batch_heads * (nq * (nq + 1) // 2 if causal else nq * nk)


@dataclass
class Ring:
    """One rank's place on its cp group's ring, and what its ring attention has done (`ledger`)."""

    group: Any  # the cp group's ProcessGroup
    layout: SequenceLayout
    ledger: list[CallRecord] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def size(self) -> int:
        return self.layout.cp

    def rotate(self, buffer: torch.Tensor, tag: int, record: CallRecord, what: str) -> _Pending:
        """Send `buffer` to the next rank and receive the previous rank's into a buffer like it."""
        arrived = torch.empty_like(buffer)
        ops = [dist.P2POp(dist.isend, buffer, group=self.group, group_peer=(self.rank + 1) % self.size, tag=tag),
               dist.P2POp(dist.irecv, arrived, group=self.group, group_peer=(self.rank - 1) % self.size, tag=tag)]
        works = dist.batch_isend_irecv(ops)
        record[f"{what}_sends"] += 1
        record[f"{what}_bytes"] += buffer.numel() * buffer.element_size()
        return _Pending(works, arrived, buffer)


@dataclass
class _Pending:
    """A rotation in flight: wait for it, then read what arrived. The sent buffer is kept until then."""

    works: list[Any]
    arrived: torch.Tensor
    sent: torch.Tensor

    def wait(self) -> torch.Tensor:
        for work in self.works or []:
            work.wait()
        return self.arrived


# ----------------------------------------------------------------------------- the block kernel


def _fused(tensor: torch.Tensor, fused: bool | None) -> bool:
    """torch's CPU kernel where the tensors are on the CPU (unless told otherwise), plain matmuls elsewhere."""
    return tensor.device.type == "cpu" if fused is None else fused


def block_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  fused: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One block's attention: its output (q's dtype) and the fp32 log-sum-exp of each query's scores."""
    if _fused(q, fused):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
        return out, lse.float()
    scores = _scores(q, k, causal)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse.unsqueeze(-1)).to(v.dtype), v)
    return out, lse


def block_backward(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                   lse: torch.Tensor, causal: bool, fused: bool | None = None) -> tuple[torch.Tensor, ...]:
    """One block's gradients, given the merged output and log-sum-exp of these queries (FlashAttention-2's
    backward: the probabilities recomputed, then dV, dP, dS, dQ and dK)."""
    if _fused(q, fused):
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse.to(torch.float32).contiguous(), 0.0, causal)
        return dq, dk, dv
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = torch.exp(_scores(q, k, causal) - lse.unsqueeze(-1))
    dout32, v32 = dout.float(), v.float()
    dv = torch.matmul(p.transpose(-2, -1), dout32)
    dp = torch.matmul(dout32, v32.transpose(-2, -1))
    ds = p * (dp - (dout32 * out.float()).sum(-1, keepdim=True))
    return (torch.matmul(ds, k.float()) * scale).to(q.dtype), (torch.matmul(ds.transpose(-2, -1), q.float())
                                                                * scale).to(k.dtype), dv.to(v.dtype)


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores


def _merge(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor) -> None:
    """Fold one block's output and log-sum-exp into the running ones, in place (both fp32): the online
    softmax in the stable form torch's `_SDPAMerger` uses."""
    weight = torch.sigmoid(block_lse - lse).unsqueeze(-1)
    out.sub_(weight * (out - block_out.float()))
    lse.sub_(torch.nn.functional.logsigmoid(lse - block_lse))


def _step_parts(ring: Ring, i: int) -> str:
    """What step i computes: "local" (its own block, causal), "all" (every query against the whole
    block), "early" (every query against the block's early chunk), "late" (the late chunk's queries
    against the whole block) or "skip"."""
    if i == 0:
        return "local"
    source = (ring.rank - i) % ring.size
    if not ring.layout.balanced:
        return "all" if source < ring.rank else "skip"
    return "early" if source < ring.rank else "late"


def _halves(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    early, late = tensor.chunk(BALANCED_CHUNKS_PER_RANK, dim=2)
    return early, late


class RingAttention(torch.autograd.Function):
    """Causal attention of this rank's queries against every rank's keys and values, over `ring`.
    q, k, v: (batch, heads, S/cp, head_dim), this rank's tokens in `ring.layout`'s order."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring) -> torch.Tensor:
        record = _new_record("forward")
        batch_heads = q.shape[0] * q.shape[1]
        # laid out (batch, tokens, heads, head_dim) as attention's own CPU kernel lays out its output, so the
        # output projection's input (heads folded back into the width) is a view of it, not a copy
        batch, heads, tokens, width = q.shape
        out = torch.zeros(batch, tokens, heads, width, dtype=torch.float32, device=q.device).transpose(1, 2)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device)
        block = torch.cat([k.flatten(), v.flatten()])
        pending = None
        for i in range(ring.size):
            if i > 0:
                block = pending.wait()
            if i < ring.size - 1:
                pending = ring.rotate(block, KV_TAG, record, "kv")
            key, value = block[: k.numel()].view_as(k), block[k.numel():].view_as(v)
            parts = _step_parts(ring, i)
            if parts == "skip":
                continue
            query, rows = q, slice(None)
            if parts == "early":
                key, value = _halves(key)[0], _halves(value)[0]
            elif parts == "late":
                query, rows = _halves(q)[1], slice(q.shape[2] // 2, None)
            block_out, block_lse = block_forward(query, key, value, causal=parts == "local")
            record["pairs"] += _pairs(query.shape[2], key.shape[2], parts == "local", batch_heads)
            if i == 0:
                out.copy_(block_out)
                lse.copy_(block_lse)
            else:
                _merge(out[:, :, rows], lse[:, :, rows], block_out, block_lse)
        ring.ledger.append(record)
        result = out.to(q.dtype)
        ctx.ring = ring
        # q, k and v as they came (views of the qkv projection's output, as attention's own kernel keeps
        # them): saving copies would hold two more blocks per layer than one process's attention does
        ctx.save_for_backward(q, k, v, result, lse)
        return result

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
        ring: Ring = ctx.ring
        q, k, v, out, lse = ctx.saved_tensors
        record = _new_record("backward")
        dout = dout.contiguous()
        batch_heads = q.shape[0] * q.shape[1]
        dq = torch.zeros(q.shape, dtype=GRAD_DTYPE, device=q.device)
        block = torch.cat([k.flatten(), v.flatten()])
        pending_kv = pending_dkv = None
        half = q.shape[2] // 2
        for i in range(ring.size):
            if i > 0:
                block = pending_kv.wait()
            if i < ring.size - 1:
                pending_kv = ring.rotate(block, KV_TAG, record, "kv")
            key, value = block[: k.numel()].view_as(k), block[k.numel():].view_as(v)
            parts = _step_parts(ring, i)
            grads = None
            if parts != "skip":
                query, o, g, logsumexp = q, out, dout, lse
                if parts == "early":
                    key, value = _halves(key)[0], _halves(value)[0]
                elif parts == "late":
                    query, o, g, logsumexp = (_halves(t)[1] for t in (q, out, dout, lse))
                grads = block_backward(g, query, key, value, o, logsumexp, causal=parts == "local")
                record["pairs"] += _pairs(query.shape[2], key.shape[2], parts == "local", batch_heads)
            # the accumulator of the block held: this rank's own at step 0, else what arrived from the previous rank
            if i == 0:
                acc = torch.zeros(k.numel() + v.numel(), dtype=GRAD_DTYPE, device=q.device)
            else:
                acc = pending_dkv.wait()
            acc_k, acc_v = acc[: k.numel()].view(k.shape), acc[k.numel():].view(v.shape)
            if grads is not None:
                dq_, dk_, dv_ = grads
                keys = slice(None, half) if parts == "early" else slice(None)
                acc_k[:, :, keys] += dk_.float()
                acc_v[:, :, keys] += dv_.float()
                if parts == "late":
                    dq[:, :, half:] += dq_.float()
                else:
                    dq += dq_.float()
            pending_dkv = ring.rotate(acc, DKV_TAG, record, "dkv")
        home = pending_dkv.wait()
        ring.ledger.append(record)
        dk = home[: k.numel()].view(k.shape).to(k.dtype)
        dv = home[k.numel():].view(v.shape).to(v.dtype)
        return dq.to(q.dtype), dk, dv, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring) -> torch.Tensor:
    return RingAttention.apply(q, k, v, ring)


# ----------------------------------------------------------------------------- the model's swap


class RingSelfAttention(SelfAttention):
    """The GPT's attention with its attention kernel replaced by the ring (`ring` set by the plan):
    the same qkv and proj weights, the same names."""

    ring: Ring

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return ring_attention(q, k, v, self.ring)


class SequenceShardEmbeddings(GPTEmbeddings):
    """The GPT's embeddings for this rank's tokens, each at its own position in the sequence."""

    layout: SequenceLayout

    def positions(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.layout.positions(tokens.device)


def swap_class(module: nn.Module, cls: type, **attributes: Any) -> None:
    """Give `module` the subclass `cls` in place (as fully_shard gives a module its FSDP class,
    torch/distributed/fsdp/_fully_shard/_fsdp_init.py): its parameters, names and hooks stay."""
    module.__class__ = cls
    for name, value in attributes.items():
        setattr(module, name, value)


# ----------------------------------------------------------------------------- the plan


class RingFigures(TypedDict):
    """What one rank's ring attention did over a run, gathered to rank 0 (`ContextParallel.figures`)."""

    cp_rank: int
    dp_rank: int
    chunks: list[int]
    calls: list[CallRecord]
    counted: dict[str, dict[str, float]]  # the ring's sends and recvs in the recorded step, as CommCounter saw them


@dataclass
class ContextParallel:
    """A GPT whose attention runs as ring attention over the "cp" dimension of the run's mesh; FSDP then
    shards it over dp_shard x cp (`degrees.ParallelDims.fsdp_mesh`)."""

    mesh: Any
    ring: Ring
    cp: int
    dp: int
    dp_rank: int  # this rank's data-parallel group: which batch it reads (its cp group reads the same one)
    fsdp_group: Any  # the group FSDP reduce-scatters gradients over: dp_shard x cp

    @classmethod
    def apply(cls, model: nn.Module, run: Any, dims: Any, mesh: Any) -> ContextParallel:
        """Swap every block's attention for the ring over the mesh's "cp" group, and the embeddings for
        this rank's positions, in place, before FSDP."""
        shape = model.shape
        blocks = list(getattr(model, "blocks", []))
        if not isinstance(model.embeddings, GPTEmbeddings) or not all(block.attn.causal for block in blocks):
            raise ValueError("context parallelism splits a causal decoder's sequence: --arch gpt")
        group = mesh.get_group("cp")
        layout = SequenceLayout(dims.cp, mesh.get_local_rank("cp"), shape.seq_len,
                                balanced=(run.cp_split or SPLITS[0]) == "head-tail")
        ring = Ring(group, layout)
        swap_class(model.embeddings, SequenceShardEmbeddings, layout=layout)
        for block in blocks:
            swap_class(block.attn, RingSelfAttention, ring=ring)
        dp_rank = mesh.get_local_rank("dp_shard") if dims.dp_shard > 1 else 0
        fsdp = dims.fsdp_mesh(mesh)
        return cls(mesh, ring, dims.cp, dims.dp_shard, dp_rank, fsdp.get_group())

    def local_batch(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's tokens of every sequence of its data-parallel group's batch, and their targets."""
        tokens, targets = batch
        return self.ring.layout.take(tokens), self.ring.layout.take(targets)

    def group_names(self) -> dict[str, str]:
        """This rank's FSDP group (dp_shard x cp) and ring group (cp) by name."""
        return {"fsdp": str(self.fsdp_group.group_name), "cp": str(self.ring.group.group_name)}

    def traffic(self, counter: Any) -> dict[str, dict[str, dict[str, float]]]:
        """This rank's collectives by what they are for: FSDP's (on its group, its collectives) and the
        ring's (on the cp group, its sends and receives). With dp 1 the two are one process group,
        so they are told apart by op as well."""
        by_group = counter.per_group()
        names = self.group_names()
        ring_ops = ("send", "recv")
        return {"fsdp": {op: v for op, v in by_group.get(names["fsdp"], {}).items() if op not in ring_ops},
                "cp": {op: v for op, v in by_group.get(names["cp"], {}).items() if op in ring_ops}}

    def figures(self, traffic: dict[str, dict[str, dict[str, float]]]) -> RingFigures:
        """What this rank's ring did over the run, with its sends counted in the recorded step (`traffic`)."""
        layout = self.ring.layout
        return RingFigures(cp_rank=layout.rank, dp_rank=self.dp_rank, chunks=list(layout.chunks),
                           calls=list(self.ring.ledger), counted=traffic.get("cp", {}))

    def describe(self) -> str:
        split = "head-tail (chunks r and 2cp-1-r)" if self.ring.layout.balanced else "contiguous"
        return (f"context parallel over cp {self.cp} (ring attention, {split} split of {self.ring.layout.seq_len} "
                f"tokens), FSDP over dp {self.dp} x cp {self.cp}")

    @staticmethod
    def loss_context() -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    @staticmethod
    def local_value(tensor: torch.Tensor) -> torch.Tensor:
        return tensor
