"""Planted: the right result by passing the whole input round the ring: (N-1) x the input, not (N-1)/N."""
import torch


def ring_reduce_scatter(comm, output, input):
    n, rank = comm.world_size, comm.rank
    total = input.clone()
    passing = input.clone()
    for _ in range(n - 1):
        incoming = torch.empty_like(passing)
        for request in [comm.irecv(incoming, (rank - 1) % n), comm.isend(passing, (rank + 1) % n)]:
            request.wait()
        total += incoming
        passing = incoming
    output.copy_(total.chunk(n)[rank])
