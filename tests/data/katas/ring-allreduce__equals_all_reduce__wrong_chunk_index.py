"""Planted: the all-gather phase sends chunk (r - s) instead of (r + 1 - s): a wrong chunk index."""
import torch


def ring_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    chunks = tensor.tensor_split(n)

    def exchange(send, receive):
        for request in [comm.irecv(receive, (rank - 1) % n), comm.isend(send, (rank + 1) % n)]:
            request.wait()

    for step in range(n - 1):
        into = chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        exchange(chunks[(rank - step) % n], incoming)
        into.add_(incoming)
    for step in range(n - 1):
        exchange(chunks[(rank - step) % n], chunks[(rank - step - 1) % n])
