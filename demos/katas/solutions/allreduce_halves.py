"""All-reduce as a reduce-scatter and an all-gather, with padding.

A reduce-scatter needs N equal chunks, so the flat tensor is padded with zeros (which change no sum) up to
ceil(n / N) * N elements. The reduce-scatter leaves each rank the sum of its chunk; the all-gather puts every
summed chunk back in every rank's padded buffer, whose first n elements are the result. The two halves send
(N-1)/N of the padded size each, 2(N-1)/N in all, a ring all-reduce's traffic; FSDP keeps them apart.
"""

import math

import torch


def all_reduce_in_halves(comm, tensor):
    n = comm.world_size
    flat = tensor.view(-1)
    shard = math.ceil(flat.numel() / n)
    padded = torch.zeros(shard * n, dtype=flat.dtype, device=flat.device)
    padded[: flat.numel()] = flat
    mine = torch.empty(shard, dtype=flat.dtype, device=flat.device)
    comm.reduce_scatter_single(mine, padded)
    comm.all_gather_single(padded, mine)
    flat.copy_(padded[: flat.numel()])
