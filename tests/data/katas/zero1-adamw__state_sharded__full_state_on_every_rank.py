"""Planted: every rank steps AdamW on the whole parameter: right numbers, N times the optimizer state."""
import torch


class ShardedAdamW:
    def __init__(self, comm, param, lr, betas, eps, weight_decay):
        self.comm, self.param = comm, param
        self.full = torch.nn.Parameter(param.detach().clone())
        self.optimizer = torch.optim.AdamW([self.full], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                           foreach=False)

    def step(self, grad):
        grad = grad.clone()
        self.comm.all_reduce(grad)
        self.full.grad = grad / self.comm.world_size
        self.optimizer.step()
        gathered = torch.empty(self.param.numel() * self.comm.world_size)
        self.comm.all_gather_single(gathered, self.full.detach())
        with torch.no_grad():
            self.param.copy_(self.full)
