"""Planted: blocking sends to every peer in rank order before any receive: a deadlock."""


def all_to_all(comm, output, input):
    n, rank = comm.world_size, comm.rank
    sending, receiving = input.chunk(n), output.chunk(n)
    receiving[rank].copy_(sending[rank])
    for peer in range(n):
        if peer != rank:
            comm.send(sending[peer], peer)
    for peer in range(n):
        if peer != rank:
            comm.recv(receiving[peer], peer)
