"""Planted: DistributedSampler itself, the answer: refused before anything starts."""
from torch.utils.data import DistributedSampler


def distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last):
    sampler = DistributedSampler(range(dataset_len), num_replicas, rank, shuffle, seed, drop_last)
    sampler.set_epoch(epoch)
    return list(sampler)
