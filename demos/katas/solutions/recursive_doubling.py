"""Recursive doubling: log2(N) exchanges of the whole buffer.

With N a power of two, at step k rank r swaps its buffer with rank r XOR 2**k and adds: after step k each
rank holds the sum over a group of 2**(k+1) ranks, so after log2(N) steps over all of them. Otherwise the
P = 2**floor(log2 N) first ranks run it, after each extra rank r >= P has sent its buffer to rank r - P,
which adds it in; at the end rank r - P sends the result back. Fewer steps than a ring's 2(N-1), each
sending the whole buffer: the latency-optimal choice for small messages.
"""

import torch


def recursive_doubling_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    power = 1 << (n.bit_length() - 1)
    incoming = torch.empty_like(tensor)
    if rank >= power:  # fold in: hand the buffer to a partner inside the power of two, wait for the sum
        comm.send(tensor, rank - power)
        comm.recv(tensor, rank - power)
        return
    if rank + power < n:
        comm.recv(incoming, rank + power)
        tensor.add_(incoming)
    distance = 1
    while distance < power:
        partner = rank ^ distance
        requests = [comm.irecv(incoming, partner), comm.isend(tensor, partner)]
        for request in requests:
            request.wait()
        tensor.add_(incoming)
        distance *= 2
    if rank + power < n:  # fold out
        comm.send(tensor, rank + power)
