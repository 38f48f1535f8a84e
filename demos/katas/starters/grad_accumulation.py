"""Gradient accumulation with one synchronisation per step.

Every rank gets the same `model` (fresh, no gradients yet) and its own `micro_batches`, a list of k
(inputs, targets) pairs of equal size. Leave in each parameter's .grad, on every rank, the gradient of the
mean loss over every rank's micro-batches: what one process would get from one step on all of them at once.
`loss_fn(model(inputs), targets)` is a micro-batch's mean loss.

You may call comm.all_reduce(tensor) (a sum; comm.world_size is N). The checker compares every gradient with
the big-batch step's, and counts your all-reduces: they must come after the last micro-batch's loss, and
carry each gradient once: synchronising every micro-batch gives the same gradients for k times the traffic.

    ddpfsdp kata check grad-accumulation          ddpfsdp kata hint grad-accumulation
"""


def accumulate_gradients(comm, model, micro_batches, loss_fn):
    raise NotImplementedError("accumulate the micro-batches, then synchronise once")
