"""Planted: forward keeps the gathered parameters on the unit (no reshard after forward)."""
import math

import torch


class FSDPLinear:
    def __init__(self, comm, weight, bias):
        self.comm, self.shapes = comm, (weight.shape, bias.shape)
        self.numel = weight.numel() + bias.numel()
        self.shard_numel = math.ceil(self.numel / comm.world_size)
        flat = torch.zeros(self.shard_numel * comm.world_size)
        flat[: self.numel] = torch.cat([weight.reshape(-1), bias])
        self.shard = flat[comm.rank * self.shard_numel : (comm.rank + 1) * self.shard_numel].clone()
        self.full = None

    def _gather(self):
        full = torch.empty(self.shard_numel * self.comm.world_size)
        self.comm.all_gather_single(full, self.shard)
        return full

    def forward(self, x):
        self.full = self._gather()
        weight_shape, _ = self.shapes
        return x @ self.full[: weight_shape.numel()].view(weight_shape).T + self.full[weight_shape.numel() : self.numel]

    def backward(self, x, grad_y):
        self._gather()
        flat = torch.zeros(self.shard_numel * self.comm.world_size)
        flat[: self.numel] = torch.cat([(grad_y.T @ x).reshape(-1), grad_y.sum(0)])
        self.grad_shard = torch.empty(self.shard_numel)
        self.comm.reduce_scatter_single(self.grad_shard, flat)
        self.grad_shard /= self.comm.world_size
