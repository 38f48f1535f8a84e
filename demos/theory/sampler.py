"""DistributedSampler's indices: which samples each rank draws in one epoch, without shuffling
(torch/utils/data/distributed.py), padded or cut to a multiple of the world size."""

from __future__ import annotations

import math


def sampler_indices(dataset_len: int, num_replicas: int, rank: int, drop_last: bool = False) -> list[int]:
    """The dataset indices one rank draws from DistributedSampler(shuffle=False) in one epoch.

    Every rank gets the same count. Without drop_last the index list is padded to a multiple of
    the world size by repeating indices from its start; with drop_last its tail is cut instead.
    Rank r then takes every num_replicas-th index starting at r.
    """
    if dataset_len < 1 or num_replicas < 1:
        raise ValueError("a sampler needs at least one sample and one replica")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} must be in [0, {num_replicas - 1}]")
    if drop_last and dataset_len % num_replicas:
        per_rank = math.ceil((dataset_len - num_replicas) / num_replicas)
    else:
        per_rank = math.ceil(dataset_len / num_replicas)
    total = per_rank * num_replicas
    indices = list(range(dataset_len))
    if total > dataset_len:
        indices = (indices * math.ceil(total / dataset_len))[:total]
    else:
        indices = indices[:total]
    return indices[rank:total:num_replicas]
