"""Ring all-reduce: a reduce-scatter phase, then an all-gather phase, N-1 steps each.

The tensor is split into N chunks (tensor_split: views, the first n % N one element longer). In the
reduce-scatter phase, at step s rank r sends its running sum of chunk (r - s) % N to rank r+1 and adds
what rank r-1 sends, its sum of chunk (r - s - 1) % N, into its own; after N-1 steps rank r holds the full
sum of chunk (r + 1) % N. In the all-gather phase the finished chunks go round once more, each rank
overwriting its copy with what it receives. The receive and the send of each step are posted together:
a send completes only once its receiver has posted the receive, so a blocking send first would deadlock.
"""

import torch


def ring_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = tensor.view(-1).tensor_split(n)

    def exchange(send, receive):
        requests = [comm.irecv(receive, left), comm.isend(send, right)]
        for request in requests:
            request.wait()

    for step in range(n - 1):  # reduce-scatter
        send, into = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        exchange(send, incoming)
        into.add_(incoming)
    for step in range(n - 1):  # all-gather
        send, into = chunks[(rank + 1 - step) % n], chunks[(rank - step) % n]
        exchange(send, into)
