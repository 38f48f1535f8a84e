"""DistributedSampler's indices, as torch/utils/data/distributed.py computes them.

Every rank draws the same permutation (a generator seeded with seed + epoch, so set_epoch changes it),
pads it to a multiple of num_replicas by repeating its own beginning (wrapping round when the dataset is
smaller than the padding), or with drop_last cuts it to the largest multiple that fits, and then takes
every num_replicas-th index starting at its rank. The shards are disjoint because the permutation is the
same everywhere, and they interleave rather than forming contiguous blocks.
"""

import math

import torch


def distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last):
    if drop_last and dataset_len % num_replicas != 0:
        num_samples = math.ceil((dataset_len - num_replicas) / num_replicas)
    else:
        num_samples = math.ceil(dataset_len / num_replicas)
    total_size = num_samples * num_replicas
    if shuffle:
        generator = torch.Generator()
        generator.manual_seed(seed + epoch)
        indices = torch.randperm(dataset_len, generator=generator).tolist()
    else:
        indices = list(range(dataset_len))
    if drop_last:
        indices = indices[:total_size]
    else:
        padding = total_size - len(indices)
        indices += (indices * math.ceil(padding / len(indices)))[:padding] if padding else []
    return indices[rank:total_size:num_replicas]
