"""Ring all-gather.

Every rank passes `input` (k elements); fill `output` (N x k elements, N = comm.world_size) with every
rank's input in rank order, as dist.all_gather_single(output, input) does (torch 2.13's name;
all_gather_into_tensor is its deprecated older one).

Use only point-to-point messages between neighbours on a ring: comm.isend(tensor, dst) and
comm.irecv(tensor, src) return requests to .wait() on. The checker compares your output on every rank with
torch's, and counts each rank's messages: a ring sends N-1 chunks, (N-1)/N of the output, per rank.

    ddpfsdp kata check ring-allgather          ddpfsdp kata hint ring-allgather
"""


def ring_all_gather(comm, output, input):
    raise NotImplementedError("every rank's input, in rank order, into output")
