"""Ring reduce-scatter: N-1 steps, each rank passing a running sum one neighbour on.

At step s rank r sends its running sum of chunk (r - s - 1) % N to rank r+1 and adds what rank r-1 sends,
its running sum of chunk (r - s - 2) % N, into its own. A chunk's sum starts at the rank after its owner
and travels N-1 hops, collecting one rank's contribution per hop, so it is complete when it reaches its
owner: rank r ends with chunk r summed over every rank, having sent N-1 chunks, (N-1)/N of the input.
"""

import torch


def ring_reduce_scatter(comm, output, input):
    n, rank = comm.world_size, comm.rank
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = input.clone().chunk(n)
    for step in range(n - 1):
        send, into = chunks[(rank - step - 1) % n], chunks[(rank - step - 2) % n]
        incoming = torch.empty_like(into)
        requests = [comm.irecv(incoming, left), comm.isend(send, right)]
        for request in requests:
            request.wait()
        into.add_(incoming)
    output.copy_(chunks[rank])
