"""Planted: no padding: ranks get different numbers of indices when the replicas do not divide the dataset."""
import torch


def distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last):
    if shuffle:
        indices = torch.randperm(dataset_len, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    else:
        indices = list(range(dataset_len))
    return indices[rank::num_replicas]
