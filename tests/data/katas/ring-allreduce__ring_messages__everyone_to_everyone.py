"""Planted: every rank sends its whole tensor to every other rank and sums: right result, no ring."""
import torch


def ring_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    received = [torch.empty_like(tensor) for _ in range(n)]
    requests = []
    for peer in range(n):
        if peer != rank:
            requests += [comm.irecv(received[peer], peer), comm.isend(tensor, peer)]
    for request in requests:
        request.wait()
    for peer in range(n):
        if peer != rank:
            tensor.add_(received[peer])
