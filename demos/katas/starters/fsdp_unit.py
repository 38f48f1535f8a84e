"""One FSDP unit from scratch.

Write FSDPLinear(comm, weight, bias), one Linear layer (y = x @ weight.T + bias) kept as FSDP keeps a unit:

    __init__(comm, weight, bias)   flatten weight and bias into one vector, pad it with zeros to a multiple
                                   of N = comm.world_size, and keep only this rank's 1/N slice, as self.shard
                                   (keep nothing else of the full parameters)
    forward(x) -> y                all-gather the shards into the full parameters, compute y, and let the
                                   gathered parameters go before returning (reshard after forward)
    backward(x, grad_y)            all-gather again (FSDP does: the parameters were freed), compute the
                                   gradients of weight and bias, and reduce-scatter them into self.grad_shard,
                                   this rank's slice of the flattened, padded gradient, averaged over ranks

Every rank has the same weight and bias and its own x and grad_y. You may call comm.all_gather_single and
comm.reduce_scatter_single (a sum; comm.world_size is N). The checker compares self.shard with the slice of
the padded parameters, y with the full Linear's, self.grad_shard with DDP's mean gradient; it counts the
collectives of each phase, and watches every gathered tensor: none may be alive after forward, and no more
than one unit's worth at once.

    ddpfsdp kata check fsdp-unit          ddpfsdp kata hint fsdp-unit
"""


class FSDPLinear:
    def __init__(self, comm, weight, bias):
        raise NotImplementedError("keep a flat 1/N shard of weight and bias")

    def forward(self, x):
        raise NotImplementedError("all-gather, compute, free")

    def backward(self, x, grad_y):
        raise NotImplementedError("all-gather, compute the gradients, reduce-scatter into self.grad_shard")
