"""Planted: synchronises after every micro-batch: the same gradients for k times the traffic."""
import torch


def accumulate_gradients(comm, model, micro_batches, loss_fn):
    total = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for inputs, targets in micro_batches:
        model.zero_grad()
        (loss_fn(model(inputs), targets) / len(micro_batches)).backward()
        for name, parameter in model.named_parameters():
            comm.all_reduce(parameter.grad)
            total[name] += parameter.grad / comm.world_size
    for name, parameter in model.named_parameters():
        parameter.grad = total[name]
