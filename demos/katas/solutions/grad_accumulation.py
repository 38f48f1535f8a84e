"""Gradient accumulation with one synchronisation.

Each micro-batch's mean loss is divided by their number before backward, so the gradients autograd adds
into .grad sum to the mean over all of them. Only after the last micro-batch are the gradients averaged over
the ranks: one all-reduce per parameter (sum, then divide by the world size: gloo has no AVG). The result is
one big-batch step's gradient, at 1/k of the traffic of synchronising every micro-batch; DDP's no_sync()
and FSDP's set_requires_gradient_sync(False) skip the all-reduce the same way.
"""


def accumulate_gradients(comm, model, micro_batches, loss_fn):
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets) / len(micro_batches)
        loss.backward()
    for parameter in model.parameters():
        comm.all_reduce(parameter.grad)
        parameter.grad /= comm.world_size
