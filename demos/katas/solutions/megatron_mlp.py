"""A Megatron MLP: column-parallel, then row-parallel.

Each rank holds rows of W1 (and of b1) and the matching columns of W2, so relu(x W1_r^T + b1_r) is its own
slice of the hidden layer, with no communication, and that slice times W2_r^T is its share of the output.
Megatron's two conjugate operators carry the rest: g all-reduces the partial outputs in forward and passes
the gradient through in backward; f passes x through in forward and all-reduces x's gradient in backward,
since each rank's x.grad holds only its slice's contribution. b2 is added once, after the sum.
"""

import torch


def parallel_mlp(comm, x, w1, b1, w2, b2):
    class Copy(torch.autograd.Function):  # Megatron's f
        @staticmethod
        def forward(ctx, tensor):
            return tensor.view_as(tensor)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            comm.all_reduce(grad)
            return grad

    class Reduce(torch.autograd.Function):  # Megatron's g
        @staticmethod
        def forward(ctx, tensor):
            tensor = tensor.clone()
            comm.all_reduce(tensor)
            return tensor

        @staticmethod
        def backward(ctx, grad):
            return grad

    hidden = torch.relu(Copy.apply(x) @ w1.T + b1)
    return Reduce.apply(hidden @ w2.T) + b2
