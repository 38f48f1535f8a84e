"""Ring all-gather: N-1 steps, each rank passing on the chunk it received last.

Each rank first puts its own input in its chunk of the output. At step s rank r sends chunk (r - s) % N,
which it owns (s = 0) or received at the step before, to rank r+1, and receives chunk (r - s - 1) % N from
rank r-1 straight into the output. N-1 chunks sent per rank: (N-1)/N of the output.
"""


def ring_all_gather(comm, output, input):
    n, rank = comm.world_size, comm.rank
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = output.chunk(n)
    chunks[rank].copy_(input)
    for step in range(n - 1):
        requests = [comm.irecv(chunks[(rank - step - 1) % n], left), comm.isend(chunks[(rank - step) % n], right)]
        for request in requests:
            request.wait()
