"""Planted: the output is all-reduced, but x's gradient is not: each rank keeps its slice's share of it."""
import torch


def parallel_mlp(comm, x, w1, b1, w2, b2):
    class Reduce(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            tensor = tensor.clone()
            comm.all_reduce(tensor)
            return tensor

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Reduce.apply(torch.relu(x @ w1.T + b1) @ w2.T) + b2
