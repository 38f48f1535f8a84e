"""What this machine can run: CUDA devices, collective backends, CPU cores, memory and a free port.

The launcher picks its default from here (every visible GPU on NCCL, else 2 CPU processes on gloo),
and `ddpfsdp doctor` prints it.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field

from ddpfsdp.demos.base.host import cpu_count, ram_bytes

DEFAULT_CPU_PROCS = 2


def torch_gpu_build() -> str | None:
    """The GPU toolkit the installed torch was built for ("CUDA 13.0", "HIP 6.4"), or None for a CPU
    build, read from torch/version.py without importing torch; "unknown" when that file cannot be
    read as expected, so that a caller imports torch and asks it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        folder = next(iter(spec.submodule_search_locations or ())) if spec else None
        text = open(os.path.join(folder, "version.py"), encoding="utf-8").read() if folder else ""
    except (OSError, StopIteration, ValueError):
        return "unknown"
    return gpu_build_in_version_file(text)


def gpu_build_in_version_file(text: str) -> str | None:
    """What torch/version.py says of the GPU build: its `cuda` and `hip` strings (None in a CPU build),
    as torch.version.cuda and torch.version.hip give them; "unknown" unless both are plain constants."""
    import ast

    try:
        body = ast.parse(text).body
    except SyntaxError:
        return "unknown"
    builds = {}
    for node in body:
        target = node.target if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [None])[0]
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and isinstance(node.value, ast.Constant):
            builds[target.id] = node.value.value
    if set(builds) != {"cuda", "hip"}:
        return "unknown"
    found = [f"{name.upper()} {version}" for name, version in sorted(builds.items()) if version]
    return found[0] if found else None


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    total_memory_bytes: int
    capability: str


@dataclass(frozen=True)
class DefaultLaunch:
    device: str  # "cuda" or "cpu"
    world_size: int
    backend: str  # "nccl" or "gloo"

    def describe(self) -> str:
        if self.device == "cuda":
            return f"{self.world_size} GPU{'s' if self.world_size != 1 else ''} on NCCL"
        return f"{self.world_size} CPU processes on gloo"

    def describe_for(self, needed: int) -> str:
        """The default placement of a demo that needs `needed` ranks: fewer GPUs than that are shared."""
        if self.device == "cuda" and self.world_size < needed:
            return (f"{needed} ranks sharing {'the GPU' if self.world_size == 1 else f'{self.world_size} GPUs'} "
                    "on gloo with CUDA tensors")
        return self.describe()


@dataclass(frozen=True)
class Hardware:
    torch_version: str
    torch_build: str  # "CUDA 12.8" or "CPU"
    cuda_available: bool
    gpus: list[GPU] = field(default_factory=list)
    nccl_available: bool = False
    gloo_available: bool = False
    cpu_count: int = 1
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    python: str = platform.python_version()
    platform: str = platform.platform()

    @property
    def default_launch(self) -> DefaultLaunch:
        if self.gpus and self.nccl_available:
            return DefaultLaunch("cuda", len(self.gpus), "nccl")
        return DefaultLaunch("cpu", DEFAULT_CPU_PROCS, "gloo")

    @property
    def placements(self) -> list[str]:
        return placements(len(self.gpus), self.nccl_available, self.gloo_available)

    @property
    def data_parallel_commands(self) -> list[str]:
        """How to run a training demo here, on its fewest ranks (2): on GPUs only where there are two."""
        from ddpfsdp.demos.registry import DATA_PARALLEL_MIN_RANKS

        return commands_for_ranks("ddp", DATA_PARALLEL_MIN_RANKS, len(self.gpus))

    def to_dict(self) -> dict:
        data = asdict(self)
        data["default_launch"] = asdict(self.default_launch)
        data["data_parallel_commands"] = self.data_parallel_commands
        data["placements"] = self.placements
        return data


def commands_for_ranks(demo: str, ranks: int, gpus: int) -> list[str]:
    """Commands that run `demo` on `ranks` ranks on a machine with `gpus` CUDA GPUs: one rank per GPU
    where there are that many (NCCL will not put two ranks on one), else ranks sharing the GPUs over
    gloo where the GPUs divide them; on CPU processes always."""
    if gpus >= ranks:
        on_gpus = [f"ddpfsdp demo {demo} --gpus {ranks}"]
    elif gpus:
        used = max(g for g in range(1, gpus + 1) if ranks % g == 0)
        on_gpus = [f"ddpfsdp demo {demo} --gpus {used} --ranks-per-gpu {ranks // used}"]
    else:
        on_gpus = []
    return [*on_gpus, f"ddpfsdp demo {demo} --procs {ranks}"]


def placements(gpus: int, nccl: bool, gloo: bool) -> list[str]:
    """What a machine with `gpus` CUDA GPUs can run, one line each: one rank per GPU on NCCL, K ranks
    sharing each GPU on gloo with CUDA tensors, CPU processes on gloo, a simulated world."""
    lines = []
    if gpus and nccl:
        lines.append(f"1 to {gpus} ranks, one per GPU, on NCCL: --gpus N" if gpus > 1
                     else "1 rank on the GPU, on NCCL: --gpus 1 --ranks-per-gpu 1")
    if gpus and gloo:
        lines.append(f"K ranks sharing {'the GPU' if gpus == 1 else 'each GPU'} on gloo with CUDA tensors "
                     f"(real memory, not NCCL's time): --gpus {'1' if gpus == 1 else 'N'} --ranks-per-gpu K")
    if gloo:
        lines.append("N CPU processes on gloo: --procs N")
    lines.append("a simulated world of N ranks in one process (training demos): --simulate --world N")
    return lines


def detect() -> Hardware:
    """Inspect torch and the machine. Never raises on a machine without CUDA."""
    import torch
    import torch.distributed as dist

    cuda_available = torch.cuda.is_available()
    gpus = []
    if cuda_available:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append(GPU(index, props.name, props.total_memory, f"{props.major}.{props.minor}"))
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    if getattr(torch.version, "hip", None):
        build = f"ROCm {torch.version.hip}"
    total, available = ram_bytes()
    dist_ok = dist.is_available()
    return Hardware(
        torch_version=torch.__version__,
        torch_build=build,
        cuda_available=cuda_available,
        gpus=gpus,
        nccl_available=dist_ok and dist.is_nccl_available(),
        gloo_available=dist_ok and dist.is_gloo_available(),
        cpu_count=cpu_count(),
        ram_total_bytes=total,
        ram_available_bytes=available,
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a rendezvous on this host (the kernel
    picks it; another process could take it before the ranks bind it, as with torchrun --standalone)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
