"""The models the training demos train: a GPT decoder, a ViT classifier and a BasicBlock ResNet.

Each model is built from a shape in `ddpfsdp.demos.base.shapes` and has exactly that shape's parameter
count. Each exposes the submodules that FSDP wraps:
  `units()`  the modules per-block wrapping shards, in forward order (embeddings/stem, every block,
             head), which together hold every parameter, so the root holds none;
  `layers()` finer modules inside the blocks (attention and MLP; each conv+norm pair), for
             per-layer wrapping.
Setting `model.checkpoint_activations = True` (before wrapping) runs every block's body under
activation checkpointing (non-reentrant, which composes with FSDP's hooks), keeping only block
inputs alive between forward and backward; the blocks recompute the rest in backward.

Initialisation depends on the seed only, never on the rank or the device: FSDP shards whatever
each rank holds without broadcasting, so every rank must build bit-identical weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ddpfsdp.demos.base.shapes import GPTShape, ResNetShape, ViTShape, shape_for

DeviceLike = torch.device | str | None

INIT_STD = 0.02  # GPT-2 / ViT initialisation scale for linear and embedding weights


class SelfAttention(nn.Module):
    """Multi-head self-attention with a fused qkv projection, its output rows laid out per head.

    The qkv projection's 3d outputs are grouped by head, [q_h, k_h, v_h] for each head h (Megatron-LM's
    fused layout), not [q; k; v]: a tensor-parallel split of those rows into contiguous chunks
    (ColwiseParallel's Shard(0)) then gives each rank whole heads, and the forward reads the number of
    heads it holds from the shape. Without tensor parallelism the layout is a fixed permutation of the
    rows of a randomly initialised weight: the same model.
    """

    def __init__(self, d_model: int, heads: int, *, causal: bool, device: DeviceLike = None) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model, device=device)
        self.proj = nn.Linear(d_model, d_model, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        qkv = self.qkv(x).view(batch, tokens, -1, 3, self.head_dim)
        # (batch, heads, tokens, head_dim): the layout scaled_dot_product_attention expects.
        q, k, v = (qkv[:, :, :, part].transpose(1, 2) for part in range(3))
        y = self.attend(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(batch, tokens, -1))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention of the queries against the keys and values (context parallelism swaps in its ring)."""
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class MLP(nn.Module):
    def __init__(self, d_model: int, device: DeviceLike = None) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model, device=device)
        self.proj = nn.Linear(4 * d_model, d_model, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class CheckpointedBlock(nn.Module):
    """A block whose body can run under activation checkpointing.

    The checkpoint sits inside the block, so a wrapper placed around the block (an FSDP unit, as
    torchtitan arranges it) sees an ordinary module: its all-gather happens before the
    checkpointed region, and the recomputation in backward reuses the unsharded parameters.
    """

    checkpoint_activations = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint_activations and torch.is_grad_enabled():
            return checkpoint(self.body, x, use_reentrant=False)
        return self.body(x)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class TransformerBlock(CheckpointedBlock):
    """Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, heads: int, *, causal: bool, device: DeviceLike = None) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model, device=device)
        self.attn = SelfAttention(d_model, heads, causal=causal, device=device)
        self.ln_mlp = nn.LayerNorm(d_model, device=device)
        self.mlp = MLP(d_model, device=device)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class GPTEmbeddings(nn.Module):
    def __init__(self, shape: GPTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.token = nn.Embedding(shape.vocab, shape.d_model, device=device)
        self.position = nn.Embedding(shape.seq_len, shape.d_model, device=device)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.token(tokens) + self.position(self.positions(tokens))

    def positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """Each token's position in its sequence (a context-parallel rank's tokens are its chunks')."""
        return torch.arange(tokens.shape[1], device=tokens.device)


class LMHead(nn.Module):
    """Final LayerNorm and the untied projection to the vocabulary."""

    def __init__(self, shape: GPTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(shape.d_model, device=device)
        self.out = nn.Linear(shape.d_model, shape.vocab, bias=False, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


class _BlockModel(nn.Module):
    """What the three models share: an entry unit, a list of blocks, a head unit."""

    # Module classes per-block / per-layer wrapping targets; FSDP1's ModuleWrapPolicy reads these.
    unit_classes: tuple[type[nn.Module], ...] = ()
    layer_classes: tuple[type[nn.Module], ...] = ()

    @property
    def checkpoint_activations(self) -> bool:
        return all(block.checkpoint_activations for block in self.blocks) and len(self.blocks) > 0

    @checkpoint_activations.setter
    def checkpoint_activations(self, enabled: bool) -> None:
        # Set before wrapping: a DDP or FSDP1 wrapper is a different object from this model.
        for block in self.blocks:
            block.checkpoint_activations = bool(enabled)

    def _entry(self) -> nn.Module:
        raise NotImplementedError

    def units(self) -> list[nn.Module]:
        return [self._entry(), *self.blocks, self.head]

    def layers(self) -> list[nn.Module]:
        return [m for block in self.blocks for m in block.modules() if isinstance(m, self.layer_classes)]

    def _run_blocks(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class GPT(_BlockModel):
    unit_classes = (GPTEmbeddings, TransformerBlock, LMHead)
    layer_classes = (SelfAttention, MLP)

    def __init__(self, shape: GPTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.shape = shape
        self.embeddings = GPTEmbeddings(shape, device)
        self.blocks = nn.ModuleList(
            TransformerBlock(shape.d_model, shape.heads, causal=True, device=device) for _ in range(shape.layers)
        )
        self.head = LMHead(shape, device)

    def _entry(self) -> nn.Module:
        return self.embeddings

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, tokens) token ids -> (batch, tokens, vocab) next-token logits."""
        return self.head(self._run_blocks(self.embeddings(tokens)))


class PatchEmbedding(nn.Module):
    """Image -> patch tokens, with the class token in front and position embeddings added."""

    def __init__(self, shape: ViTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(shape.channels, shape.d_model, kernel_size=shape.patch, stride=shape.patch,
                              device=device)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, shape.d_model, device=device))
        self.position = nn.Parameter(torch.zeros(1, shape.tokens, shape.d_model, device=device))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.conv(images).flatten(2).transpose(1, 2)  # (batch, patches, d_model)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)
        return torch.cat([cls, patches], dim=1) + self.position


class ClassifierHead(nn.Module):
    """Final LayerNorm and a linear classifier on the class token."""

    def __init__(self, shape: ViTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(shape.d_model, device=device)
        self.out = nn.Linear(shape.d_model, shape.classes, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x[:, 0]))


class ViT(_BlockModel):
    unit_classes = (PatchEmbedding, TransformerBlock, ClassifierHead)
    layer_classes = (SelfAttention, MLP)

    def __init__(self, shape: ViTShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.shape = shape
        self.patch_embed = PatchEmbedding(shape, device)
        self.blocks = nn.ModuleList(
            TransformerBlock(shape.d_model, shape.heads, causal=False, device=device) for _ in range(shape.layers)
        )
        self.head = ClassifierHead(shape, device)

    def _entry(self) -> nn.Module:
        return self.patch_embed

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(batch, channels, height, width) -> (batch, classes) logits."""
        return self.head(self._run_blocks(self.patch_embed(images)))


class BatchNorm(nn.BatchNorm2d):
    """BatchNorm2d that also runs when mixed precision gives it bf16 inputs and weights.

    FSDP's mixed-precision policy casts this layer's weight and bias to bf16 but leaves the
    running statistics (buffers) in fp32, a mix the kernel rejects. Then it normalises in fp32,
    as autocast does for batch norm, and returns the input's dtype. In one dtype it is
    BatchNorm2d unchanged.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == self.weight.dtype == self.running_mean.dtype:
            return super().forward(x)
        momentum = self.momentum
        if self.training:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative average, as BatchNorm2d computes it
                momentum = 1.0 / float(self.num_batches_tracked)
        out = F.batch_norm(x.float(), self.running_mean, self.running_var, self.weight.float(), self.bias.float(),
                           self.training, momentum or 0.0, self.eps)
        return out.to(x.dtype)


class ConvNorm(nn.Module):
    """A bias-free convolution followed by BatchNorm: the layer a BasicBlock is made of."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, device: DeviceLike = None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=kernel // 2, bias=False, device=device)
        self.norm = BatchNorm(out_ch, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


class BasicBlock(CheckpointedBlock):
    def __init__(self, in_ch: int, out_ch: int, stride: int, device: DeviceLike = None) -> None:
        super().__init__()
        self.conv1 = ConvNorm(in_ch, out_ch, 3, stride, device)
        self.conv2 = ConvNorm(out_ch, out_ch, 3, 1, device)
        self.shortcut = ConvNorm(in_ch, out_ch, 1, stride, device) if stride != 1 or in_ch != out_ch else None

    def body(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.conv2(F.relu(self.conv1(x))) + identity)


class Stem(nn.Module):
    def __init__(self, shape: ResNetShape, device: DeviceLike = None) -> None:
        super().__init__()
        stride = 2 if shape.imagenet_stem else 1
        self.conv = ConvNorm(shape.channels, shape.widths[0], shape.stem_kernel, stride, device)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1) if shape.imagenet_stem else nn.Identity()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.pool(F.relu(self.conv(images)))


class PoolHead(nn.Module):
    """Global average pooling and a linear classifier."""

    def __init__(self, shape: ResNetShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.out = nn.Linear(shape.widths[-1], shape.classes, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x.mean(dim=(2, 3)))


class ResNet(_BlockModel):
    unit_classes = (Stem, BasicBlock, PoolHead)
    layer_classes = (ConvNorm,)

    def __init__(self, shape: ResNetShape, device: DeviceLike = None) -> None:
        super().__init__()
        self.shape = shape
        self.stem = Stem(shape, device)
        self.blocks = nn.ModuleList(BasicBlock(*block, device=device) for block in shape.block_shapes())
        self.head = PoolHead(shape, device)

    def _entry(self) -> nn.Module:
        return self.stem

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(batch, channels, height, width) -> (batch, classes) logits."""
        return self.head(self._run_blocks(self.stem(images)))


_ARCHS = {"gpt": GPT, "vit": ViT, "resnet": ResNet}


def _initialise(model: nn.Module, generator: torch.Generator) -> None:
    """Seeded initialisation, GPT-2 style for transformers and He (fan-out) for convolutions.

    The model comes from `to_empty`, so a tensor missed here would hold leftover memory; every
    parameter and buffer is accounted for, and a miss is an error rather than silent garbage.
    """
    residual_std = INIT_STD
    if isinstance(model, (GPT, ViT)):
        # GPT-2 scales the projections that write into the residual stream by 1/sqrt(2 * layers).
        residual_std = INIT_STD / math.sqrt(2 * max(1, model.shape.layers))
    done: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            std = residual_std if name.endswith(("attn.proj", "mlp.proj")) else INIT_STD
            nn.init.normal_(module.weight, 0.0, std, generator=generator)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, INIT_STD, generator=generator)
        elif isinstance(module, nn.Conv2d):
            if isinstance(model, ResNet):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            else:
                nn.init.normal_(module.weight, 0.0, INIT_STD, generator=generator)
        elif isinstance(module, PatchEmbedding):
            nn.init.normal_(module.cls_token, 0.0, INIT_STD, generator=generator)
            nn.init.normal_(module.position, 0.0, INIT_STD, generator=generator)
            done.update({id(module.cls_token), id(module.position)})
            continue
        elif isinstance(module, (nn.LayerNorm, nn.BatchNorm2d)):
            nn.init.ones_(module.weight)
            if isinstance(module, nn.BatchNorm2d):
                module.reset_running_stats()
                done.update(id(b) for b in module.buffers(recurse=False))
        else:
            continue
        done.add(id(module.weight))
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
            done.add(id(module.bias))
    missed = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if id(t) not in done]
    if missed:
        raise RuntimeError(f"no initialisation for {', '.join(missed)}")


def build_model(arch: str, preset: str, *, seed: int, device: torch.device | str | None = None,
                **overrides: int | None) -> nn.Module:
    """The model of `arch` at `preset` (with overrides), initialised from `seed` on the CPU.

    Weights are always drawn on the CPU with a private generator, so every rank and every run gets
    the same values whatever its device; strategies move them. `device="meta"` builds the structure
    without allocating (for counting parameters of models too big to hold).
    """
    shape = shape_for(arch, preset, **overrides)
    # Built on meta, then given storage once: the constructors' own random init would be thrown
    # away anyway, and it would advance the global RNG.
    model = _ARCHS[arch](shape, device="meta")
    if device is not None and torch.device(device).type == "meta":
        return model
    model.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        _initialise(model, generator)
    return model if device is None else model.to(device)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def model_facts(model: nn.Module, shard_size: int) -> dict[str, int]:
    """What the analytic model's allowances need, read from the model's tensors before FSDP shards them:
    a dim-0 row of every parameter, the largest one, the elements FSDP adds by padding each parameter's
    dim 0 to a multiple of `shard_size`, the parameter tensors, and the parameters' and buffers' bytes.

    Rows and padding are those of the tensors FSDP shards: on a 2-D model each TP rank's local tensor
    (`DTensor.to_local`), which FSDP splits over dp; the sizes are the whole model's. Shapes only, so a
    model on the meta device answers as a real one does."""
    params = list(model.parameters())
    local = [p.to_local() if hasattr(p, "to_local") else p for p in params]
    return {
        "fsdp_padding_elements": fsdp_padding_elements(local, shard_size),
        "shard_row_bytes": shard_row_bytes(local),
        "largest_param_bytes": largest_param_bytes(params),
        "param_tensors": len(params),
        "unsharded_params": sum(p.numel() * p.element_size() for p in params),
        "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
    }


def shard_row_bytes(params: Iterable[torch.Tensor]) -> int:
    """One dim-0 row of every parameter: how far a rank's shard can sit from 1/N of a tensor.

    FSDP2 shards each parameter on dim 0 in ceil(rows/N) chunks: a rank holds up to one padded row
    more than rows/N (padding) or up to one row less (the last ranks of an uneven split).
    """
    return sum(_row_elements(p)[1] * p.element_size() for p in params)


def fsdp_padding_elements(params: Iterable[torch.Tensor], shard_size: int) -> int:
    """The elements FSDP2 adds by padding each parameter's dim 0 up to a multiple of `shard_size`."""
    return sum(-rows % shard_size * row for rows, row in map(_row_elements, params))


def _row_elements(p: torch.Tensor) -> tuple[int, int]:
    """A parameter's dim-0 rows and the elements in each (a 0-d tensor is one row of one)."""
    rows = p.shape[0] if p.dim() else 1
    return rows, p.numel() // max(rows, 1)


def largest_param_bytes(params: Iterable[torch.Tensor]) -> int:
    """The largest parameter: zro partitions whole tensors, so a rank's share can miss 1/N by one."""
    return max((p.numel() * p.element_size() for p in params), default=0)


def iter_unit_names(model: nn.Module, modules: list[nn.Module]) -> Iterator[str]:
    """Qualified names of `modules` inside `model`, in the given order."""
    names = {id(module): name for name, module in model.named_modules()}
    for module in modules:
        yield names[id(module)]
