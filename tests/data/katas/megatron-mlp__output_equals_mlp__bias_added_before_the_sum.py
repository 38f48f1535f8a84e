"""Planted: b2 is added on every rank before the all-reduce, so the output carries it N times."""
import torch


def parallel_mlp(comm, x, w1, b1, w2, b2):
    class Copy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            return tensor.view_as(tensor)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            comm.all_reduce(grad)
            return grad

    class Reduce(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            tensor = tensor.clone()
            comm.all_reduce(tensor)
            return tensor

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Reduce.apply(torch.relu(Copy.apply(x) @ w1.T + b1) @ w2.T + b2)
