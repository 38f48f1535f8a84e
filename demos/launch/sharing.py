"""Ranks that share a GPU: K processes on one CUDA device, over gloo with CUDA tensors.

    ddpfsdp demo fsdp --gpus 1 --ranks-per-gpu 2

NCCL refuses two ranks on one device at their first collective ("Duplicate GPU detected : rank 0 and
rank 1 both on CUDA device", ncclInvalidUsage), so a one-GPU machine runs its ranks on gloo: each rank
is its own process with its own CUDA context and caching allocator, so what it holds is real CUDA
memory, measured by the same code as on N GPUs. What it does not show is N GPUs' time: the ranks
share one GPU's compute, and gloo copies each CUDA tensor through pinned host memory and runs the
collective on the CPU. So every result of such a run carries the label (`config.shared_gpu`), its
throughput has no MFU, and the checks whose claim is about time are reported as not judged.

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

from typing import Any

from ddpfsdp.demos.result.checks import CheckDocument, not_judged

RANKS_PER_GPU_ENV = "DDPFSDP_RANKS_PER_GPU"  # set by the launcher for its ranks: K ranks on each GPU

GLOO_CUDA_COLLECTIVES = ("broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor",
                         "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single")
GLOO_HOST_ONLY = ("send", "recv", "isend", "irecv", "batch_isend_irecv", "all_reduce_coalesced",
                  "all_gather_coalesced", "all_gather_into_tensor_coalesced")

# Demos whose own code calls a collective that gloo cannot run on CUDA tensors, and which.
NEEDS_HOST_COLLECTIVE = {
    "allreduce": "isend/irecv (its ring all-reduce is written with point-to-point sends)",
}

# Checks whose claim is about time on N GPUs, which K ranks sharing one GPU over gloo cannot bear
# out or refute: why each is not judged there.
_TIME_ON_GPUS = ("the ranks share one GPU's compute and gloo runs each collective on the CPU after a copy to "
                 "host memory, so when a collective runs against compute says nothing of NCCL on separate GPUs")
NOT_JUDGED = {
    "ddp_overlaps_allreduce_with_backward": _TIME_ON_GPUS,
    "tp_collectives_on_critical_path": _TIME_ON_GPUS,
}
# gloo's reduce-scatter is an all-reduce and a copy, handed back as a Work with no future
# (ProcessGroupGloo::reduce_scatter_tensor_coalesced returns a LambdaWork); on CUDA tensors no host
# thread can stamp when it ends, so a timeline that counted every collective but could not stamp
# those is not judged there, while a count that is off still fails.
UNSTAMPED = ("gloo's reduce-scatter on CUDA tensors returns a Work with no future (an all-reduce and a copy), so "
             "when it completed cannot be stamped; every collective was counted")
MFU_NOTE = ("no MFU: the ranks share one GPU's compute, and gloo's collectives run on the CPU, so neither "
            "throughput nor step time is N GPUs'")


def label(ranks_per_gpu: int, gpus: int) -> str:
    """What a run with K ranks on each GPU is, said on every screen and in the result's config."""
    where = "one GPU" if gpus == 1 else f"each of {gpus} GPUs"
    return (f"{ranks_per_gpu} ranks share {where} over gloo (CUDA tensors): memory per rank is real CUDA memory; "
            f"throughput and communication time are not NCCL's and not {gpus * ranks_per_gpu} GPUs'")


def refusal(demo: str, ranks_per_gpu: int, world_size: int) -> str | None:
    """Why `demo` cannot run with ranks sharing a GPU, with what runs instead; None when it can."""
    needs = NEEDS_HOST_COLLECTIVE.get(demo)
    if needs is None or ranks_per_gpu <= 1:
        return None
    return (f"{demo} needs {needs}, which gloo cannot run on CUDA tensors (it passes their memory to the network "
            f"as host memory), and ranks sharing a GPU run on gloo. Run it on CPU processes: "
            f"ddpfsdp demo {demo} --procs {world_size}")


def _judged_here(check: CheckDocument) -> CheckDocument:
    """A check as it stands on ranks sharing a GPU: itself, or not judged with the reason."""
    if check.get("name") in NOT_JUDGED:
        return not_judged(check, NOT_JUDGED[check["name"]])
    values = check.get("values") or {}
    if (check.get("name") == "timeline_records_every_collective" and check.get("passed") is False
            and values.get("miscounted") is False and any(values.get("without_completion") or [])):
        return not_judged(check, UNSTAMPED)
    return check


def mark_result(result: dict[str, Any], ranks_per_gpu: int, gpus: int) -> dict[str, Any]:
    """The result of a run on K ranks per GPU, labelled: its config says so (and so does each of compare's
    runs), its MFU is withheld and the checks in NOT_JUDGED are not judged. A result of one rank per
    GPU, or of CPU processes, comes back as it was."""
    if ranks_per_gpu <= 1:
        return result
    text = label(ranks_per_gpu, gpus)
    marked = dict(result)
    if isinstance(marked.get("config"), dict):
        marked["config"] = {**marked["config"], "ranks_per_gpu": ranks_per_gpu, "gpus": gpus, "shared_gpu": text}
    if isinstance(marked.get("throughput"), dict):
        marked["throughput"] = {**marked["throughput"], "mfu": "n/a", "note": MFU_NOTE}
    if isinstance(marked.get("checks"), list):
        marked["checks"] = [_judged_here(c) if isinstance(c, dict) else c for c in marked["checks"]]
    if isinstance(marked.get("runs"), dict):
        marked["runs"] = {name: mark_result(run, ranks_per_gpu, gpus) if isinstance(run, dict) else run
                          for name, run in marked["runs"].items()}
    notes = list(marked.get("notes") or [])
    marked["notes"] = [text, *notes]
    return marked
