"""One FSDP unit: a Linear held as a flat 1/N shard.

Construction flattens weight and bias into one vector, pads it with zeros to a multiple of N and keeps a
copy of this rank's slice only. forward all-gathers the shards into the padded vector, views the weight and
the bias out of it, computes, and returns with no reference to the gathered vector left, so it is freed:
reshard after forward. backward gathers again (the parameters were freed), computes the Linear's gradients,
flattens and pads them like the parameters, and reduce-scatters them: each rank receives the sum of its own
slice, divided by N, the same numbers DDP's all-reduce would give it.
"""

import math

import torch


class FSDPLinear:
    def __init__(self, comm, weight, bias):
        self.comm = comm
        self.shapes = (weight.shape, bias.shape)
        self.numel = weight.numel() + bias.numel()
        self.shard_numel = math.ceil(self.numel / comm.world_size)
        flat = self._padded(torch.cat([weight.reshape(-1), bias.reshape(-1)]))
        start = comm.rank * self.shard_numel
        self.shard = flat[start : start + self.shard_numel].clone()
        self.grad_shard = None

    def _padded(self, flat):
        padded = torch.zeros(self.shard_numel * self.comm.world_size, dtype=flat.dtype, device=flat.device)
        padded[: flat.numel()] = flat
        return padded

    def _gather(self):
        full = torch.empty(self.shard_numel * self.comm.world_size, dtype=self.shard.dtype, device=self.shard.device)
        self.comm.all_gather_single(full, self.shard)
        weight_shape, bias_shape = self.shapes
        weight = full[: weight_shape.numel()].view(weight_shape)
        bias = full[weight_shape.numel() : self.numel].view(bias_shape)
        return weight, bias

    def forward(self, x):
        weight, bias = self._gather()
        return x @ weight.T + bias

    def backward(self, x, grad_y):
        weight, _ = self._gather()
        del weight  # a Linear's gradients need the input and grad_y only; the gather is what FSDP pays
        flat_grad = self._padded(torch.cat([(grad_y.T @ x).reshape(-1), grad_y.sum(0)]))
        self.grad_shard = torch.empty(self.shard_numel, dtype=flat_grad.dtype, device=flat_grad.device)
        self.comm.reduce_scatter_single(self.grad_shard, flat_grad)
        self.grad_shard /= self.comm.world_size
