"""One process, no parallelism: the reference a parallel run's loss per step is held to.

The same model, seed, optimizer and global batches on one process. A 2-D run's data-parallel group g
reads its sampler's share of each step (DistributedSampler over the dp groups) and its TP ranks read the
same batch: one process that concatenates every group's batch of a step sees the same global batch
(`loader_batches`). A pipeline's replicas each read their share of the step's global batch
(`train.pipeline.global_batches`). Either way the process's mean loss is the mean of the groups' (equal
sizes), which is what the run reports, and the run averages the gradients over its data-parallel ranks,
so the steps are the same too. The reference trains in fp32; the claims state the tolerance per precision.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from ddpfsdp.demos.train.spec import RunSpec


def one_process_losses(spec: RunSpec, batches: Iterable[Any], device: torch.device) -> list[float]:
    """The loss of each step on one process and `device`: the run's model, seed and optimizer (`lr`,
    implementation) over `batches`. The model is built on the CPU, as a run builds it, then moved: a
    seeded draw on a GPU gives other weights."""
    from ddpfsdp.demos.parallel.strategies import build_optimizer, optimizer_impl
    from ddpfsdp.demos.train.data import compute_loss
    from ddpfsdp.demos.train.models import build_model

    torch.manual_seed(spec.seed)
    model = build_model(spec.arch, spec.model, seed=spec.seed, **spec.overrides).to(device)
    optimizer = build_optimizer(spec, model, optimizer_impl(spec, device))
    losses: list[float] = []
    for batch in batches:
        loss = compute_loss(spec.arch, model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
    return losses


def loader_batches(spec: RunSpec, data_parallel: int, steps: int, samples_per_rank_steps: int) -> Iterator[Any]:
    """The global batch of each of `steps` steps of a run whose `data_parallel` groups each read their
    DistributedSampler's share, epoch by epoch as the run's loop reshuffles them."""
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.train.data import make_loader

    shape = shape_for(spec.arch, spec.model, **spec.overrides)
    samplers, loaders = [], []
    for group in range(data_parallel):
        loader, sampler = make_loader(spec.arch, shape, batch_size=spec.batch_size, rank=group,
                                      world_size=data_parallel, seed=spec.seed,
                                      num_samples=spec.batch_size * data_parallel * min(steps, samples_per_rank_steps))
        samplers.append(sampler)
        loaders.append(loader)
    given, epoch = 0, 0
    while given < steps:
        for sampler in samplers:
            sampler.set_epoch(epoch)  # as the run's loop does at each pass over the data
        for batches in zip(*loaders):
            if given == steps:
                return
            yield tuple(torch.cat(parts) for parts in zip(*batches))
            given += 1
        epoch += 1


def reference_losses(spec: RunSpec, data_parallel: int, steps: int, samples_per_rank_steps: int,
                     device: torch.device) -> list[float]:
    """A data-parallel run's reference: one process on the global batches its groups read."""
    return one_process_losses(spec, loader_batches(spec, data_parallel, steps, samples_per_rank_steps), device)
