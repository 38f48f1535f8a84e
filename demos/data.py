"""Synthetic training data with structure a model can learn, made in process from a seed.

GPT: token sequences walked on a fixed random sparse Markov chain. Each token has a handful of
successors, and the successors favour a few common tokens, so next-token loss starts at about
log(vocab) and falls quickly (first the token frequencies, then the transitions) towards the
chain's entropy rate.
Images (ViT, ResNet): every class has a fixed low-frequency template; a sample is its class's
template plus Gaussian noise, so cross-entropy falls from log(classes).

The data depends only on the seed: every rank and every run sees the same dataset, and
`DistributedSampler` (seeded, reshuffled by `set_epoch`) decides which rank reads which samples,
as real training does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ddpfsdp.demos.presets import GPTShape, ResNetShape, ViTShape

SUCCESSORS = 4  # next tokens each token can lead to
ZIPF_EXPONENT = 1.0  # how strongly successors favour common tokens
TEMPLATE_GRID = 4  # image templates are drawn at image_size / 4 and upsampled: smooth, learnable
NOISE_STD = 1.0  # per-pixel noise around a template of unit standard deviation

# Distinct streams of the one seed, so the dataset does not change when the sampler's use of the
# seed does (DistributedSampler shuffles with torch.Generator().manual_seed(seed + epoch)).
_CHAIN_STREAM = 1_000_003
_SAMPLE_STREAM = 2_000_003


class MarkovTokens(Dataset):
    """`num_samples` sequences of seq_len + 1 tokens; an item is (inputs, next-token targets)."""

    def __init__(self, shape: GPTShape, *, seed: int, num_samples: int) -> None:
        self.transitions, self.successors = markov_chain(shape.vocab, seed=seed)
        generator = torch.Generator().manual_seed(seed + _SAMPLE_STREAM)
        tokens = torch.empty(num_samples, shape.seq_len + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(0, shape.vocab, (num_samples,), generator=generator)
        # One vectorised step per position over all sequences at once.
        for t in range(shape.seq_len):
            choice = torch.multinomial(self.transitions[tokens[:, t]], 1, generator=generator).squeeze(1)
            tokens[:, t + 1] = self.successors[tokens[:, t], choice]
        self.tokens = tokens

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        row = self.tokens[index]
        return row[:-1], row[1:]

    def entropy_rate(self) -> float:
        """The lowest achievable mean next-token loss (nats), weighting tokens by how often they occur."""
        counts = torch.bincount(self.tokens[:, :-1].reshape(-1), minlength=self.transitions.shape[0]).double()
        p = self.transitions.double()
        per_token = -(p * p.clamp_min(1e-30).log()).sum(dim=1)
        return float((counts * per_token).sum() / counts.sum())


def markov_chain(vocab: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(transition probabilities (vocab, SUCCESSORS), successor ids (vocab, SUCCESSORS))."""
    generator = torch.Generator().manual_seed(seed + _CHAIN_STREAM)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    zipf = ranks.pow(-ZIPF_EXPONENT)
    popular = torch.randperm(vocab, generator=generator)  # which token ids are the common ones
    picks = torch.multinomial(zipf.expand(vocab, vocab), SUCCESSORS, replacement=True, generator=generator)
    successors = popular[picks]
    # Dirichlet(1) weights: exponential draws, normalised.
    weights = -torch.rand(vocab, SUCCESSORS, generator=generator, dtype=torch.float64).clamp_min(1e-12).log()
    return (weights / weights.sum(dim=1, keepdim=True)).float(), successors


class TemplateImages(Dataset):
    """Class template plus noise; an item is (image (channels, size, size), label).

    Items are made on demand from (seed, index), so a 224-pixel dataset costs no memory up front.
    """

    def __init__(self, shape: ViTShape | ResNetShape, *, seed: int, num_samples: int) -> None:
        self.shape = shape
        self.num_samples = num_samples
        self.seed = seed
        generator = torch.Generator().manual_seed(seed + _CHAIN_STREAM)
        grid = max(1, shape.image_size // TEMPLATE_GRID)
        self.templates = torch.randn(shape.classes, shape.channels, grid, grid, generator=generator)
        self.labels = torch.randint(0, shape.classes, (num_samples,), generator=generator)

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        label = self.labels[index]
        size = self.shape.image_size
        template = F.interpolate(self.templates[label][None], size=(size, size), mode="nearest")[0]
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + _SAMPLE_STREAM + index)
        noise = torch.randn(template.shape, generator=generator)
        return template + NOISE_STD * noise, label


def shape_of(obj: Any) -> GPTShape | ViTShape | ResNetShape:
    """The preset shape of a shape, a model, or a model inside a DDP / FSDP1 wrapper."""
    shapes = (GPTShape, ViTShape, ResNetShape)
    while not isinstance(obj, shapes):
        inner = getattr(obj, "shape", None)
        if isinstance(inner, shapes):
            return inner
        if not hasattr(obj, "module"):
            raise TypeError(f"expected a model shape or a demo model, got {type(obj).__name__}")
        obj = obj.module
    return obj


def make_dataset(arch: str, shape: Any, *, seed: int, num_samples: int) -> Dataset:
    if arch == "gpt":
        return MarkovTokens(shape, seed=seed, num_samples=num_samples)
    if arch in ("vit", "resnet"):
        return TemplateImages(shape, seed=seed, num_samples=num_samples)
    raise ValueError(f"unknown architecture {arch!r}; choose one of gpt, vit, resnet")


def make_loader(
    arch: str,
    model_or_shape: Any,
    *,
    batch_size: int,
    rank: int,
    world_size: int,
    seed: int,
    num_samples: int,
    epoch_aware: bool = True,
) -> tuple[DataLoader, DistributedSampler]:
    """A per-rank loader over the seeded dataset, and its sampler.

    `epoch_aware=True` shuffles with the seed, and the order changes when the training loop calls
    `sampler.set_epoch(epoch)`; False reads the dataset in order every epoch. Incomplete batches
    are dropped, so every rank runs the same number of equally sized steps.
    """
    shape = shape_of(model_or_shape)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if num_samples < batch_size * world_size:
        raise ValueError(
            f"num_samples {num_samples} is fewer than one batch per rank "
            f"({batch_size} x {world_size} ranks = {batch_size * world_size}); raise num_samples"
        )
    dataset = make_dataset(arch, shape, seed=seed, num_samples=num_samples)
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=epoch_aware, seed=seed, drop_last=True
    )
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0)
    return loader, sampler


def compute_loss(arch: str, model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy of a batch, computed in fp32 whatever precision the model runs in.

    The batch is moved to the model's device; images are cast to the parameters' dtype (so an
    all-bf16 model gets bf16 inputs; FSDP's mixed-precision policy and autocast cast by themselves).
    """
    inputs, targets = batch
    param = next(model.parameters())
    device = param.device
    if inputs.is_floating_point():
        inputs = inputs.to(device=device, dtype=param.dtype, non_blocking=True)
    else:
        inputs = inputs.to(device=device, non_blocking=True)
    targets = targets.to(device=device, non_blocking=True)
    logits = model(inputs)
    if arch == "gpt":
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return F.cross_entropy(logits.float(), targets)


def tokens_per_sample(arch: str, shape: Any) -> int | None:
    """Tokens one sample feeds the model: the sequence for GPT, patches + class token for ViT.

    None for ResNet: a convolutional network has no tokens, and a tokens/s figure would be invented.
    """
    shape = shape_of(shape)
    if arch == "gpt":
        return shape.seq_len
    if arch == "vit":
        return shape.tokens
    if arch == "resnet":
        return None
    raise ValueError(f"unknown architecture {arch!r}; choose one of gpt, vit, resnet")


def chance_loss(arch: str, shape: Any) -> float:
    """Cross-entropy of a uniform guess: log(vocab) or log(classes)."""
    shape = shape_of(shape)
    return math.log(shape.vocab if arch == "gpt" else shape.classes)
