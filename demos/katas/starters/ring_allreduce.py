"""Ring all-reduce from send and recv.

Sum `tensor` (1-D, float32) over every rank, in place, as dist.all_reduce(tensor) would: afterwards every
rank holds the element-wise sum of every rank's tensor.

Use only point-to-point messages between neighbours on a ring (rank r sends to rank r+1 and receives from
rank r-1, wrapping round): comm.isend(tensor, dst) and comm.irecv(tensor, src) return requests to .wait()
on; comm.send and comm.recv block; comm.rank and comm.world_size say who you are. comm.all_reduce is not
offered here: that is the answer.

The checker runs your function on 2, 3 or 4 ranks with sizes that the world size does not divide (down to
one element) and compares the result on every rank with dist.all_reduce's. It counts every message each
rank sends: a ring sends 2(N-1) chunks of about n/N elements per rank, in the reduce-scatter phase and
then the all-gather phase.

    ddpfsdp kata check ring-allreduce          run the check       ddpfsdp kata hint ring-allreduce   a hint
"""


def ring_all_reduce(comm, tensor):
    raise NotImplementedError("sum tensor over every rank with messages around the ring")
