"""Planted: the ranks beyond the power of two are folded in but never sent the result (3 ranks)."""
import torch


def recursive_doubling_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    power = 1 << (n.bit_length() - 1)
    incoming = torch.empty_like(tensor)
    if rank >= power:
        comm.send(tensor, rank - power)
        comm.recv(tensor, rank - power)
        return
    if rank + power < n:
        comm.recv(incoming, rank + power)
        tensor.add_(incoming)
    distance = 1
    while distance < power:
        for request in [comm.irecv(incoming, rank ^ distance), comm.isend(tensor, rank ^ distance)]:
            request.wait()
        tensor.add_(incoming)
        distance *= 2
