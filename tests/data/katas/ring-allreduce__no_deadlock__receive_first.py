"""Planted: every rank receives before it sends, with blocking calls: a deadlock."""
import torch


def ring_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    chunks = tensor.tensor_split(n)
    for step in range(n - 1):
        incoming = torch.empty_like(chunks[(rank - step - 1) % n])
        comm.recv(incoming, (rank - 1) % n)
        comm.send(chunks[(rank - step) % n], (rank + 1) % n)
        chunks[(rank - step - 1) % n].add_(incoming)
