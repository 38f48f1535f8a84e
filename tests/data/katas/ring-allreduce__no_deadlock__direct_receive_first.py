"""Planted: torch.distributed's own blocking recv before its send, on every rank: a deadlock all the same."""
import torch
import torch.distributed as dist


def ring_all_reduce(comm, tensor):
    n, rank = dist.get_world_size(), dist.get_rank()
    incoming = torch.empty_like(tensor)
    dist.recv(incoming, (rank - 1) % n)
    dist.send(tensor, (rank + 1) % n)
    tensor.add_(incoming)
