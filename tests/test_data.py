"""Synthetic data: seeded, learnable, and split between ranks by DistributedSampler."""

from __future__ import annotations

import math

import pytest
import torch

from ddpfsdp.demos.train import data
from ddpfsdp.demos.train.models import build_model
from ddpfsdp.demos.base.shapes import shape_for


def _all_batches(loader):
    return [tuple(t.clone() for t in batch) for batch in loader]


def test_same_seed_same_data_other_seed_other_data():
    shape = shape_for("gpt", "tiny")
    a = data.MarkovTokens(shape, seed=5, num_samples=16).tokens
    b = data.MarkovTokens(shape, seed=5, num_samples=16).tokens
    c = data.MarkovTokens(shape, seed=6, num_samples=16).tokens
    assert torch.equal(a, b) and not torch.equal(a, c)

    image_shape = shape_for("vit", "tiny")
    x = data.TemplateImages(image_shape, seed=5, num_samples=8)
    y = data.TemplateImages(image_shape, seed=5, num_samples=8)
    assert all(torch.equal(x[i][0], y[i][0]) and x[i][1] == y[i][1] for i in range(8))


def test_gpt_targets_are_next_tokens_drawn_from_the_chain():
    shape = shape_for("gpt", "tiny")
    dataset = data.MarkovTokens(shape, seed=0, num_samples=32)
    inputs, targets = dataset[3]
    assert inputs.shape == targets.shape == (shape.seq_len,)
    assert torch.equal(inputs[1:], targets[:-1])
    allowed = dataset.successors[dataset.tokens[:, :-1]]  # (samples, seq, SUCCESSORS)
    assert (allowed == dataset.tokens[:, 1:, None]).any(dim=-1).all()
    # Learnable: the best achievable loss is far below a uniform guess.
    assert dataset.entropy_rate() < 0.3 * math.log(shape.vocab)


def test_image_classes_are_separable():
    shape = shape_for("resnet", "tiny")
    dataset = data.TemplateImages(shape, seed=0, num_samples=64)
    size = shape.image_size
    templates = torch.nn.functional.interpolate(dataset.templates, size=(size, size), mode="nearest")
    hits = 0
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert image.shape == (shape.channels, size, size)
        nearest = ((templates - image) ** 2).flatten(1).sum(1).argmin()
        hits += int(nearest == label)
    assert hits >= 60  # a nearest-template classifier is nearly always right: the labels carry signal


def test_a_sample_is_the_same_whatever_batch_it_is_in():
    shape = shape_for("vit", "tiny")
    dataset = data.TemplateImages(shape, seed=0, num_samples=32)
    images, labels = dataset.__getitems__([5, 17, 2])
    for row, index in enumerate([5, 17, 2]):
        image, label = dataset[index]
        assert torch.equal(images[row], image) and labels[row] == label
    loader, sampler = data.make_loader("vit", shape, batch_size=4, rank=1, world_size=2, seed=0, num_samples=32)
    sampler.set_epoch(3)
    first = next(iter(loader))
    indices = list(sampler)[:4]
    assert torch.equal(first[0], torch.stack([dataset[i][0] for i in indices]))


def test_sampler_splits_ranks_disjointly_and_reshuffles_by_epoch():
    shape = shape_for("gpt", "tiny")
    per_rank = []
    for rank in range(2):
        loader, sampler = data.make_loader("gpt", shape, batch_size=4, rank=rank, world_size=2, seed=0,
                                           num_samples=21)
        assert isinstance(sampler, torch.utils.data.DistributedSampler)
        sampler.set_epoch(0)
        per_rank.append(list(sampler))
        assert len(loader) == 2  # 21 samples, drop_last: 10 per rank, 2 full batches of 4
    assert not set(per_rank[0]) & set(per_rank[1])
    assert len(per_rank[0]) == len(per_rank[1]) == 10

    loader, sampler = data.make_loader("gpt", shape, batch_size=4, rank=0, world_size=2, seed=0, num_samples=40)
    sampler.set_epoch(0)
    epoch0 = _all_batches(loader)
    sampler.set_epoch(0)
    again = _all_batches(loader)
    sampler.set_epoch(1)
    epoch1 = _all_batches(loader)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(epoch0, again))
    assert not all(torch.equal(a[0], b[0]) for a, b in zip(epoch0, epoch1))

    _, fixed = data.make_loader("gpt", shape, batch_size=4, rank=0, world_size=2, seed=0, num_samples=40,
                                epoch_aware=False)
    fixed.set_epoch(1)
    assert list(fixed) == list(range(0, 40, 2))


def test_loader_accepts_a_model_and_rejects_too_few_samples():
    model = build_model("vit", "tiny", seed=0)
    loader, _ = data.make_loader("vit", model, batch_size=3, rank=0, world_size=1, seed=0, num_samples=6)
    images, labels = next(iter(loader))
    assert images.shape == (3, 3, 32, 32) and labels.shape == (3,)
    with pytest.raises(ValueError, match="raise num_samples"):
        data.make_loader("gpt", shape_for("gpt", "tiny"), batch_size=4, rank=0, world_size=2, seed=0, num_samples=7)


def test_loader_pins_batches_bound_for_cuda_only():
    """The loop's copies are non_blocking; only from pinned memory are they asynchronous. Pinning
    itself needs CUDA, so on CPU the decision is what can be shown: the loader is built to pin for a
    CUDA device and not for the CPU, and a CPU-bound batch is passed through untouched."""
    shape = shape_for("gpt", "tiny")
    common = dict(batch_size=2, rank=0, world_size=1, seed=0, num_samples=4)
    for device, pins in (("cuda", True), (torch.device("cuda", 1), True), ("cpu", False), (None, False)):
        loader, _ = data.make_loader("gpt", shape, device=device, **common)
        assert loader.pin_memory is pins, device
    batch = next(iter(data.make_loader("gpt", shape, device="cpu", **common)[0]))
    assert data.pinned(batch, "cpu") is batch
    assert not batch[0].is_pinned()


def test_shape_of_sees_through_wrappers():
    model = build_model("gpt", "tiny", seed=0)

    class Wrapper(torch.nn.Module):  # the attribute DDP and FSDP1 keep the wrapped model under
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert data.shape_of(Wrapper(Wrapper(model))) is model.shape
    assert data.shape_of(model.shape) is model.shape
    with pytest.raises(TypeError, match="expected a model shape"):
        data.shape_of(torch.nn.Linear(2, 2))


def test_tokens_per_sample():
    assert data.tokens_per_sample("gpt", shape_for("gpt", "tiny")) == 64
    assert data.tokens_per_sample("vit", shape_for("vit", "base")) == 197
    assert data.tokens_per_sample("resnet", shape_for("resnet", "18")) is None


def test_compute_loss_casts_images_for_an_all_bf16_model():
    model = build_model("resnet", "tiny", seed=0).to(torch.bfloat16)
    dataset = data.TemplateImages(model.shape, seed=0, num_samples=4)
    batch = (torch.stack([dataset[i][0] for i in range(4)]), dataset.labels[:4])
    loss = data.compute_loss("resnet", model, batch)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)


def test_a_small_gpt_learns_the_chain_quickly():
    torch.manual_seed(0)
    model = build_model("gpt", "tiny", seed=0, layers=1, d_model=64, heads=2, seq_len=32)
    loader, sampler = data.make_loader("gpt", model, batch_size=8, rank=0, world_size=1, seed=0, num_samples=320)
    sampler.set_epoch(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for batch in loader:
        loss = data.compute_loss("gpt", model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(data.chance_loss("gpt", model), rel=0.05)
    assert sum(losses[-5:]) / 5 < 0.6 * losses[0]
