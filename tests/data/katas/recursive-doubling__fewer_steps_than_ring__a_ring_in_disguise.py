"""Planted: a ring all-reduce passing the whole buffer N-1 times: right result, no fewer steps."""
import torch


def recursive_doubling_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    passing = tensor.clone()
    for _ in range(n - 1):
        incoming = torch.empty_like(passing)
        for request in [comm.irecv(incoming, (rank - 1) % n), comm.isend(passing, (rank + 1) % n)]:
            request.wait()
        tensor.add_(incoming)
        passing = incoming
    extra = torch.empty_like(tensor)
    for _ in range(n - 1):
        for request in [comm.irecv(extra, (rank - 1) % n), comm.isend(tensor, (rank + 1) % n)]:
            request.wait()
