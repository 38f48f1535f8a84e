"""A ZeRO-1 AdamW step on a flat parameter.

The parameter is padded to a multiple of N and split into N shards; rank r keeps AdamW's state (exp_avg,
exp_avg_sq) for shard r only, through a torch.optim.AdamW over a shard-sized tensor: 1/N of the state. A
step reduce-scatters the gradients (summed, then divided by N: the mean DDP would all-reduce), steps the
shard, and all-gathers the updated shards into the whole parameter. The traffic is DDP's all-reduce, split
into its two halves with the optimizer step in between.
"""

import math

import torch


class ShardedAdamW:
    def __init__(self, comm, param, lr, betas, eps, weight_decay):
        self.comm, self.param = comm, param
        self.shard_numel = math.ceil(param.numel() / comm.world_size)
        self.padded = self.shard_numel * comm.world_size
        start = comm.rank * self.shard_numel
        padded = torch.zeros(self.padded, dtype=param.dtype, device=param.device)
        padded[: param.numel()] = param.detach()
        self.shard = torch.nn.Parameter(padded[start : start + self.shard_numel].clone())
        self.optimizer = torch.optim.AdamW([self.shard], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                           foreach=False)

    def step(self, grad):
        padded_grad = torch.zeros(self.padded, dtype=grad.dtype, device=grad.device)
        padded_grad[: grad.numel()] = grad
        shard_grad = torch.empty(self.shard_numel, dtype=grad.dtype, device=grad.device)
        self.comm.reduce_scatter_single(shard_grad, padded_grad)
        self.shard.grad = shard_grad / self.comm.world_size
        self.optimizer.step()
        gathered = torch.empty(self.padded, dtype=self.param.dtype, device=self.param.device)
        self.comm.all_gather_single(gathered, self.shard.detach())
        with torch.no_grad():
            self.param.copy_(gathered[: self.param.numel()])
