"""Planted: the all-reduced gradients are summed over the ranks and never divided by the world size."""


def accumulate_gradients(comm, model, micro_batches, loss_fn):
    for inputs, targets in micro_batches:
        (loss_fn(model(inputs), targets) / len(micro_batches)).backward()
    for parameter in model.parameters():
        comm.all_reduce(parameter.grad)
