"""Planted: torch's own all-reduce, reached by a name the file check cannot see: refused at run time."""
import torch.distributed as dist


def ring_all_reduce(comm, tensor):
    getattr(dist, "all_" + "reduce")(tensor)
