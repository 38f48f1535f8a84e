"""All-reduce as reduce-scatter then all-gather.

Sum `tensor` over every rank, in place, as dist.all_reduce(tensor) would, using exactly one
comm.reduce_scatter_single(output, input) and one comm.all_gather_single(output, input). Both need the
tensor in N equal chunks (N = comm.world_size), and the checker's tensors come in sizes N does not divide.

comm.all_reduce is not offered: that is the answer. The checker compares your result on every rank with
torch's, and looks at the collectives you called: one reduce-scatter, then one all-gather, on the tensor
padded by fewer than N elements.

    ddpfsdp kata check allreduce-halves          ddpfsdp kata hint allreduce-halves
"""


def all_reduce_in_halves(comm, tensor):
    raise NotImplementedError("one reduce-scatter, one all-gather")
