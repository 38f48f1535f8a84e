"""Ranks that share a GPU: K processes on one CUDA device, over gloo with CUDA tensors.

    ddpfsdp demo fsdp --gpus 1 --ranks-per-gpu 2

NCCL refuses two ranks on one device at their first collective ("Duplicate GPU detected : rank 0 and
rank 1 both on CUDA device", ncclInvalidUsage), so a one-GPU machine runs its ranks on gloo: each rank
is its own process with its own CUDA context and caching allocator, so what it holds is real CUDA
memory, measured by the same code as on N GPUs. What it does not show is N GPUs' time: the ranks
share one GPU's compute, and gloo copies each CUDA tensor through pinned host memory and runs the
collective on the CPU. So every result of such a run carries the label (`config.shared_gpu`), its
throughput has no MFU, and the checks whose claim is about time are reported as not judged: the
result is marked where it is made (`result.build.shared`), from the run's `Placement`.

What gloo can do with CUDA tensors (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp; torch 2.13's
libtorch has a CUDA work class for each of these: AsyncBroadcastCUDAWork, AsyncAllgatherCUDAWork, ...):
broadcast, all_reduce, reduce, all_gather, all_gather_into_tensor (chunked into all_gather), gather,
scatter, all_to_all and all_to_all_single; reduce_scatter_tensor is an all_reduce of the whole input
followed by a copy of this rank's chunk (so gloo moves the all-reduce's bytes, not the reduce-scatter's).
What it cannot: send, recv, isend, irecv and batch_isend_irecv hand the tensor's data pointer to the
TCP transport as host memory, with no check of its device; all_reduce_coalesced, all_gather_coalesced
and all_gather_into_tensor_coalesced have no CUDA path. A demo that needs one of them is refused
before launch (`refusal`).

Torch-free: the launcher, the CLI and the quiz read it before any rank starts.
"""

from __future__ import annotations

GLOO_CUDA_COLLECTIVES = ("broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor",
                         "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single")
GLOO_HOST_ONLY = ("send", "recv", "isend", "irecv", "batch_isend_irecv", "all_reduce_coalesced",
                  "all_gather_coalesced", "all_gather_into_tensor_coalesced")

# Demos whose own code calls a collective that gloo cannot run on CUDA tensors, and which.
NEEDS_HOST_COLLECTIVE = {
    "allreduce": "isend/irecv (its ring all-reduce is written with point-to-point sends)",
    "cp": "batch_isend_irecv (its ring attention passes K/V blocks and their gradients with point-to-point sends)",
}


def refusal(demo: str, ranks_per_gpu: int, world_size: int) -> str | None:
    """Why `demo` cannot run with ranks sharing a GPU, with what runs instead; None when it can."""
    needs = NEEDS_HOST_COLLECTIVE.get(demo)
    if needs is None or ranks_per_gpu <= 1:
        return None
    return (f"{demo} needs {needs}, which gloo cannot run on CUDA tensors (it passes their memory to the network "
            f"as host memory), and ranks sharing a GPU run on gloo. Run it on CPU processes: "
            f"ddpfsdp demo {demo} --procs {world_size}")
