"""A Megatron MLP: column-parallel, then row-parallel.

The MLP is y = relu(x @ W1.T + b1) @ W2.T + b2, with W1 of shape (h, d) and W2 of shape (d, h). Rank r holds
   w1, b1   its rows of W1 and b1: the r-th of N equal blocks of the h hidden units (column-parallel)
   w2       the matching columns of W2 (row-parallel)
   b2       all of b2
and every rank has the same x. Return y, equal to the unsharded MLP's on every rank; the checker then runs
backward from y, and x.grad and each shard's .grad must equal the unsharded MLP's (sliced like the shards).

You may call comm.all_reduce(tensor) (a sum). Autograd does not see it: a collective that gradients must
flow through belongs in a torch.autograd.Function of your own. The checker counts the all-reduces of forward
and of backward apart: a Megatron MLP makes one of each, of the output's size.

    ddpfsdp kata check megatron-mlp          ddpfsdp kata hint megatron-mlp
"""


def parallel_mlp(comm, x, w1, b1, w2, b2):
    raise NotImplementedError("column-parallel, then row-parallel: one all-reduce each way")
