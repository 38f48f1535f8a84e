"""Planted: rank 1 indexes one chunk past the end."""


def ring_all_gather(comm, output, input):
    chunks = output.chunk(comm.world_size)
    chunks[comm.rank + (comm.rank == 1) * comm.world_size].copy_(input)
