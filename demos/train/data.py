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
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate

from ddpfsdp.demos.base.shapes import GPTShape, ResNetShape, ViTShape

SUCCESSORS = 4  # next tokens each token can lead to
ZIPF_EXPONENT = 1.0  # how strongly successors favour common tokens
TEMPLATE_GRID = 4  # image templates are drawn at image_size / 4 and upsampled: smooth, learnable
NOISE_STD = 1.0  # per-pixel noise around a template of unit standard deviation
NOISE_BANK = 64  # distinct noise images the samples draw from

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
        # Inverse-CDF sampling, one vectorised step per position over all sequences at once.
        cumulative = self.transitions.cumsum(dim=1)
        uniform = torch.rand(num_samples, shape.seq_len, generator=generator)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # thousands of tiny ops: thread hand-offs would cost more than the work
        try:
            for t in range(shape.seq_len):
                current = tokens[:, t]
                choice = (uniform[:, t, None] > cumulative[current]).sum(dim=1).clamp_max(SUCCESSORS - 1)
                tokens[:, t + 1] = self.successors[current, choice]
        finally:
            torch.set_num_threads(threads)
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
    cdf = zipf.cumsum(0) / zipf.sum()
    uniform = torch.rand(vocab, SUCCESSORS, generator=generator, dtype=torch.float64)
    picks = torch.searchsorted(cdf, uniform).clamp_max(vocab - 1)  # inverse CDF: Zipf-distributed ranks
    successors = popular[picks]
    # Dirichlet(1) weights: exponential draws, normalised.
    weights = -torch.rand(vocab, SUCCESSORS, generator=generator, dtype=torch.float64).clamp_min(1e-12).log()
    return (weights / weights.sum(dim=1, keepdim=True)).float(), successors


class TemplateImages(Dataset):
    """Class template plus noise; an item is (image (channels, size, size), label).

    Sample i is always the same image: its class template (drawn at a quarter of the resolution
    and upsampled, so it is smooth) plus one of NOISE_BANK fixed noise images with a random sign.
    The noise carries no label information, so the model must learn the templates. Batches are
    assembled in one vectorised step (`__getitems__`): data preparation stays far below a GPU's
    step time even at 224 pixels, and the measured throughput is the training's, not the loader's.
    """

    def __init__(self, shape: ViTShape | ResNetShape, *, seed: int, num_samples: int) -> None:
        self.shape = shape
        self.num_samples = num_samples
        size = shape.image_size
        grid = max(1, size // TEMPLATE_GRID)
        self.upsample = math.ceil(size / grid)
        generator = torch.Generator().manual_seed(seed + _CHAIN_STREAM)
        self.templates = torch.randn(shape.classes, shape.channels, grid, grid, generator=generator)
        samples = torch.Generator().manual_seed(seed + _SAMPLE_STREAM)
        self.labels = torch.randint(0, shape.classes, (num_samples,), generator=samples)
        self.noise = torch.randn(NOISE_BANK, shape.channels, size, size, generator=samples)
        self.noise_index = torch.randint(0, NOISE_BANK, (num_samples,), generator=samples)
        self.noise_sign = torch.randint(0, 2, (num_samples,), generator=samples).float() * 2 - 1

    def __len__(self) -> int:
        return self.num_samples

    def images(self, indices: torch.Tensor) -> torch.Tensor:
        size = self.shape.image_size
        small = self.templates[self.labels[indices]]
        templates = small.repeat_interleave(self.upsample, dim=2).repeat_interleave(self.upsample, dim=3)
        noise = self.noise[self.noise_index[indices]] * self.noise_sign[indices].view(-1, 1, 1, 1)
        return templates[:, :, :size, :size] + NOISE_STD * noise

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return self.images(index), self.labels[index]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images(torch.tensor([index]))[0], self.labels[index]


def _collate_batch(batch: Any) -> Any:
    """`__getitems__` already returns the stacked batch; anything else is stacked as usual."""
    if isinstance(batch, tuple) and len(batch) == 2 and torch.is_tensor(batch[0]):
        return batch
    return default_collate(batch)


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
    device: Any = None,
) -> tuple[DataLoader, DistributedSampler]:
    """A per-rank loader over the seeded dataset, and its sampler.

    `epoch_aware=True` shuffles with the seed, and the order changes when the training loop calls
    `sampler.set_epoch(epoch)`; False reads the dataset in order every epoch. Incomplete batches
    are dropped, so every rank runs the same number of equally sized steps. For a CUDA `device` the
    batches come in pinned (page-locked) memory, which `compute_loss`'s non_blocking copy needs to
    be asynchronous: from pageable memory the host waits for the copy.
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
    # num_workers=0: data is made in this process in a few milliseconds per batch, and no loader
    # worker processes can outlive a cancelled demo.
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0,
                        collate_fn=_collate_batch, pin_memory=pins_memory(device))
    return loader, sampler


def pins_memory(device: Any) -> bool:
    """Whether batches bound for `device` are pinned: on CUDA only (pinning needs an accelerator)."""
    return device is not None and torch.device(device).type == "cuda"


def pinned(batch: Any, device: Any) -> Any:
    """`batch` (a tensor or a tuple of them) in pinned memory when it is bound for a CUDA device."""
    if not pins_memory(device):
        return batch
    if isinstance(batch, (tuple, list)):
        return type(batch)(pinned(item, device) for item in batch)
    return batch.pin_memory() if isinstance(batch, torch.Tensor) else batch


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
