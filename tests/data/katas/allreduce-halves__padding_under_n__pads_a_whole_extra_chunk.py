"""Planted: pads by a whole extra chunk more than needed: right result, N more elements sent."""
import math

import torch


def all_reduce_in_halves(comm, tensor):
    n = comm.world_size
    shard = math.ceil(tensor.numel() / n) + 1
    padded = torch.zeros(shard * n)
    padded[: tensor.numel()] = tensor
    mine = torch.empty(shard)
    comm.reduce_scatter_single(mine, padded)
    comm.all_gather_single(padded, mine)
    tensor.copy_(padded[: tensor.numel()])
