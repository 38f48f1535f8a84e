"""cuBLAS workspaces: how much memory they hold during a training step, and how to free them.

torch gives every (cuBLAS handle, stream) pair a workspace the first time the pair runs a matmul,
allocated from the caching allocator, so it counts in `memory_allocated` and in the peak; it keeps
it until `torch._C._cuda_clearCublasWorkspaces()` (aten/src/ATen/cuda/CublasHandlePool.cpp; in torch
2.13 one map for the process, `cublas_handle_stream_to_workspace`, keyed by handle and stream:
ATen/cuda/CUDAContextLight.h in its include folder). Handles belong to threads, and a training
step's forward runs on the caller's thread while its backward runs on autograd's own thread for the
device (torch/csrc/autograd/engine.cpp): one step on one stream makes two workspaces. Left alone, the
first run in a process (DDP in `compare`) pays for them and every later run finds them allocated.

Sizes, as torch reads them: CUBLAS_WORKSPACE_CONFIG (":SIZE_KIB:COUNT" pairs, summed), by default
":4096:8" (32 MiB) on compute capability 9 (Hopper) and ":4096:2:16:8" (8 MiB + 128 KiB) before it;
and a cuBLASLt workspace of CUBLASLT_WORKSPACE_SIZE KiB, 1 MiB by default, which 2.13's open-source
builds fold into the cuBLAS one (torch/backends/cuda/__init__.py, `blas_workspace_size`).

Torch-free at import: the claims read the sizes without a GPU.
"""

from __future__ import annotations

import os
import re
from typing import Any

HANDLE_STREAM_PAIRS = 2  # the forward's thread and autograd's device thread, on one stream
CUBLAS_WORKSPACE_BYTES_SM90 = 4096 * 1024 * 8  # ":4096:8": compute capability 9 and later
CUBLAS_WORKSPACE_BYTES_OLDER = 4096 * 1024 * 2 + 16 * 1024 * 8  # ":4096:2:16:8": before Hopper
CUBLASLT_WORKSPACE_BYTES_DEFAULT = 1024 * 1024  # CUBLASLT_WORKSPACE_SIZE's default, 1024 KiB


def cublas_workspace_config_bytes(config: str | None, major: int) -> int:
    """One cuBLAS workspace's bytes: CUBLAS_WORKSPACE_CONFIG, else the default for a GPU of compute
    capability `major`.

    Releases differ on which architectures get 32 MiB (9.0 only; or 9, 10 and 12); every 9.x and
    later gets it here, an upper bound where they differ.
    """
    default = CUBLAS_WORKSPACE_BYTES_SM90 if major >= 9 else CUBLAS_WORKSPACE_BYTES_OLDER
    if not config:
        return default
    pairs = re.findall(r":([0-9]+):([0-9]+)", config)
    if not pairs:
        return default  # torch warns and uses its default
    return sum(int(size_kib) * 1024 * int(count) for size_kib, count in pairs)


def cublaslt_workspace_config_bytes(value: str | None) -> int:
    """The cuBLASLt workspace's bytes: CUBLASLT_WORKSPACE_SIZE (KiB), else 1 MiB."""
    try:
        return int(value) * 1024 if value else CUBLASLT_WORKSPACE_BYTES_DEFAULT
    except ValueError:
        return CUBLASLT_WORKSPACE_BYTES_DEFAULT  # torch warns and uses its default


def blas_workspace_bytes(cublas_bytes: int, cublaslt_bytes: int, pairs: int = HANDLE_STREAM_PAIRS) -> int:
    """The most a training step's workspaces hold: a cuBLAS and a cuBLASLt workspace per pair.

    Where torch folds the Lt workspace into the cuBLAS one, this is high by 1 MiB a pair.
    """
    return pairs * (cublas_bytes + cublaslt_bytes)


# What a Hopper GPU's defaults give: the margin for a GPU whose result does not say its own.
HOPPER_DEFAULT_BYTES = blas_workspace_bytes(CUBLAS_WORKSPACE_BYTES_SM90, CUBLASLT_WORKSPACE_BYTES_DEFAULT)


def cuda_blas_workspace_bytes(device: Any) -> int:
    """`blas_workspace_bytes` for this CUDA device: torch's own sizes where it reports them
    (`torch.backends.cuda.cublas_workspace_size`, 2.13), else the environment and the GPU's compute
    capability, read as torch reads them."""
    import torch

    cublas = getattr(torch.backends.cuda, "cublas_workspace_size", None)
    cublaslt = getattr(torch.backends.cuda, "cublaslt_workspace_size", None)
    if cublas is not None and cublaslt is not None:
        return blas_workspace_bytes(int(cublas()), int(cublaslt()))
    major = torch.cuda.get_device_properties(torch.device(device)).major
    return blas_workspace_bytes(cublas_workspace_config_bytes(os.environ.get("CUBLAS_WORKSPACE_CONFIG"), major),
                                cublaslt_workspace_config_bytes(os.environ.get("CUBLASLT_WORKSPACE_SIZE")))


def clear_blas_workspaces(device: Any) -> bool:
    """Free every cuBLAS workspace torch holds, as torch's own memory-leak checks do
    (torch/testing/_internal/common_utils.py). False where there is nothing to clear: not CUDA, or a
    torch without the call (a CPU build).

    The clear runs on this thread and again inside a backward pass, on autograd's thread: where a
    torch keeps the map per thread, the backward's workspace is freed as well.
    """
    import torch

    device = torch.device(device)
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if device.type != "cuda" or clear is None:
        return False

    class ClearOnBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            return tensor.view_as(tensor)

        @staticmethod
        def backward(ctx, grad):
            clear()
            return grad

    torch.cuda.synchronize(device)  # no kernel may still be using a workspace
    clear()
    probe = torch.zeros((), device=device, requires_grad=True)
    ClearOnBackward.apply(probe).backward()
    del probe
    torch.cuda.synchronize(device)
    return True
