"""Planted: torch's own all-reduce, named in the file: refused before anything starts."""
import torch.distributed as dist


def ring_all_reduce(comm, tensor):
    dist.all_reduce(tensor)
