"""A latency-optimal all-reduce: recursive doubling.

Sum `tensor` over every rank, in place, in as few message steps as you can: log2(N) exchanges of the whole
buffer when N = comm.world_size is a power of two, instead of a ring's 2(N-1) chunk steps. For other N, fold
the ranks beyond the largest power of two in first and out at the end.

Use point-to-point messages: comm.isend/comm.irecv (requests to .wait() on), comm.send/comm.recv. The
checker compares your result with dist.all_reduce's on every rank, counts the messages each rank receives
(exactly log2 N whole buffers for a power of two; at most floor(log2 N) + 2 otherwise), and weighs your
measured steps and bytes against a ring's in the alpha-beta model.

    ddpfsdp kata check recursive-doubling --procs 4          ddpfsdp kata hint recursive-doubling
"""


def recursive_doubling_all_reduce(comm, tensor):
    raise NotImplementedError("log2(N) exchanges with rank ^ 2**k")
