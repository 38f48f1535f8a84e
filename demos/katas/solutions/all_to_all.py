"""All-to-all from point-to-point messages.

Chunk j of the input goes to rank j, and chunk j of the output comes from rank j; a rank's own chunk is a
local copy. Every receive and every send is posted before any wait: with blocking sends in a fixed order
two ranks that both send first would wait on each other. Each rank sends N-1 messages, (N-1)/N of its input.
"""


def all_to_all(comm, output, input):
    n, rank = comm.world_size, comm.rank
    sending, receiving = input.chunk(n), output.chunk(n)
    receiving[rank].copy_(sending[rank])
    requests = []
    for peer in range(n):
        if peer != rank:
            requests += [comm.irecv(receiving[peer], peer), comm.isend(sending[peer], peer)]
    for request in requests:
        request.wait()
