"""Planted: each rank ends with the sum of the chunk after its own: an off-by-one chunk index."""
import torch


def ring_reduce_scatter(comm, output, input):
    n, rank = comm.world_size, comm.rank
    chunks = input.clone().chunk(n)
    for step in range(n - 1):
        into = chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        for request in [comm.irecv(incoming, (rank - 1) % n), comm.isend(chunks[(rank - step) % n], (rank + 1) % n)]:
            request.wait()
        into.add_(incoming)
    output.copy_(chunks[(rank + 1) % n])
