"""Planted: sends chunk `rank` to every peer instead of chunk `peer`: a wrong chunk index."""


def all_to_all(comm, output, input):
    n, rank = comm.world_size, comm.rank
    sending, receiving = input.chunk(n), output.chunk(n)
    receiving[rank].copy_(sending[rank])
    requests = []
    for peer in range(n):
        if peer != rank:
            requests += [comm.irecv(receiving[peer], peer), comm.isend(sending[rank], peer)]
    for request in requests:
        request.wait()
