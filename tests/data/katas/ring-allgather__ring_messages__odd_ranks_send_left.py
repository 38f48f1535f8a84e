"""Planted: the right output, but odd ranks pass their chunks left and even ranks right: no ring."""


def ring_all_gather(comm, output, input):
    n, rank = comm.world_size, comm.rank
    chunks = output.chunk(n)
    chunks[rank].copy_(input)
    step = 1 if rank % 2 == 0 else -1
    requests = []
    for peer in range(n):
        if peer != rank:
            requests.append(comm.irecv(chunks[peer], peer))
    target = (rank + step) % n
    for other in range(n):
        if other != target and other != rank:
            requests.append(comm.isend(input, other))
    requests.append(comm.isend(input, target))
    for request in requests:
        request.wait()
