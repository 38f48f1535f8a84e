"""The 1-process reference of a 2-D run: the same model, seed and global batches, with no parallelism.

A 2-D run's data-parallel group g reads its sampler's share of each step (DistributedSampler over the
dp groups); its TP ranks read the same batch. One process that concatenates every group's batch of a
step sees the same global batch, and its mean loss is the mean of the groups' losses (equal sizes),
which is what the run reports; FSDP averages the gradients over dp, so the steps are the same too.
The reference trains in fp32 whatever the run's precision; `claims` states the tolerance per precision.
"""

from __future__ import annotations

import torch

from ddpfsdp.demos.train.spec import RunSpec


def reference_losses(spec: RunSpec, data_parallel: int, steps: int, samples_per_rank_steps: int,
                     device: torch.device) -> list[float]:
    """The loss of each of `steps` steps on one process and `device` (the run's seed, optimizer and
    batches). The model is built on the CPU, as the run builds it, then moved: a seeded draw on a
    GPU gives other weights."""
    from ddpfsdp.demos.train.data import compute_loss, make_loader
    from ddpfsdp.demos.train.models import build_model
    from ddpfsdp.demos.base.shapes import shape_for
    from ddpfsdp.demos.parallel.strategies import _optimizer

    shape = shape_for(spec.arch, spec.model, **spec.overrides)
    torch.manual_seed(spec.seed)
    model = build_model(spec.arch, spec.model, seed=spec.seed, **spec.overrides).to(device)
    optimizer = _optimizer(spec.optimizer, model.parameters(), spec.lr)
    samplers, loaders = [], []
    for group in range(data_parallel):
        loader, sampler = make_loader(spec.arch, shape, batch_size=spec.batch_size, rank=group,
                                      world_size=data_parallel, seed=spec.seed,
                                      num_samples=spec.batch_size * data_parallel * min(steps, samples_per_rank_steps))
        samplers.append(sampler)
        loaders.append(loader)
    losses: list[float] = []
    epoch = 0
    while len(losses) < steps:
        for sampler in samplers:
            sampler.set_epoch(epoch)  # as the run's loop does at each pass over the data
        for batches in zip(*loaders):
            if len(losses) == steps:
                break
            batch = tuple(torch.cat(parts) for parts in zip(*batches))
            loss = compute_loss(spec.arch, model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss))
        epoch += 1
    return losses
