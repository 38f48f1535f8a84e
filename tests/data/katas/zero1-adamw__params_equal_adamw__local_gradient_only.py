"""Planted: each rank steps its shard with its own gradient, never reduced over the ranks."""
import math

import torch


class ShardedAdamW:
    def __init__(self, comm, param, lr, betas, eps, weight_decay):
        self.comm, self.param = comm, param
        self.shard_numel = math.ceil(param.numel() / comm.world_size)
        self.padded = self.shard_numel * comm.world_size
        flat = torch.zeros(self.padded)
        flat[: param.numel()] = param.detach()
        self.start = comm.rank * self.shard_numel
        self.shard = torch.nn.Parameter(flat[self.start : self.start + self.shard_numel].clone())
        self.optimizer = torch.optim.AdamW([self.shard], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def step(self, grad):
        padded = torch.zeros(self.padded)
        padded[: grad.numel()] = grad
        self.shard.grad = padded[self.start : self.start + self.shard_numel].clone()
        self.optimizer.step()
        gathered = torch.empty(self.padded)
        self.comm.all_gather_single(gathered, self.shard.detach())
        with torch.no_grad():
            self.param.copy_(gathered[: self.param.numel()])
