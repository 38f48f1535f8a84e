"""Planted: no padding, so the reduce-scatter's input is not N equal chunks: torch raises."""
import torch


def all_reduce_in_halves(comm, tensor):
    n = comm.world_size
    shard = torch.empty(tensor.numel() // n + 1)
    comm.reduce_scatter_single(shard, tensor)
    comm.all_gather_single(tensor, shard)
