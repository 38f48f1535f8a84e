"""A right ring all-reduce whose steps are comm.batch_isend_irecv batches, one of them of torch's own P2POp."""
import torch
import torch.distributed as dist


def ring_all_reduce(comm, tensor):
    n, rank = comm.world_size, comm.rank
    chunks = tensor.tensor_split(n)

    def exchange(send, receive, step):
        make = dist.P2POp if step == 0 else comm.P2POp
        recv_op, send_op = (dist.irecv, dist.isend) if step == 0 else (comm.irecv, comm.isend)
        for request in comm.batch_isend_irecv([make(recv_op, receive, (rank - 1) % n), make(send_op, send, (rank + 1) % n)]):
            request.wait()

    for step in range(n - 1):
        into = chunks[(rank - step - 1) % n]
        incoming = torch.empty_like(into)
        exchange(chunks[(rank - step) % n], incoming, step)
        into.add_(incoming)
    for step in range(n - 1):
        exchange(chunks[(rank + 1 - step) % n], chunks[(rank - step) % n], step)
