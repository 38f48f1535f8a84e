"""Planted: the generator is seeded with the seed alone: every epoch repeats (set_epoch ignored)."""
import math

import torch


def distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last):
    if drop_last and dataset_len % num_replicas:
        total = math.ceil((dataset_len - num_replicas) / num_replicas) * num_replicas
    else:
        total = math.ceil(dataset_len / num_replicas) * num_replicas
    indices = torch.randperm(dataset_len, generator=torch.Generator().manual_seed(seed)).tolist() if shuffle \
        else list(range(dataset_len))
    indices = indices[:total] if drop_last else (indices * math.ceil(total / max(1, dataset_len)))[:total]
    return indices[rank:total:num_replicas]
