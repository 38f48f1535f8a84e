"""Where a run's ranks are: the device, how many ranks, and how many share each GPU.

    placement = Placement("cuda", 4, ranks_per_gpu=2)   # 4 ranks, 2 on each of 2 GPUs, over gloo
    placement.backend, placement.gpus, placement.shared  # "gloo", 2, True

One value says it, worked out once: the launcher resolves it from --gpus, --procs and
--ranks-per-gpu (`launch.placement`), hands it to every rank in PLACEMENT_ENV, and the guard, the
agent, the worker, the rank's context and the result read it from there. Nothing else re-derives
the GPU count, the backend or whether ranks share a GPU.

A rank is a process on a device:
  cuda, one rank per GPU      NCCL
  cuda, K ranks on each GPU   gloo with CUDA tensors (NCCL refuses two ranks on one device), real
                              CUDA memory but neither NCCL's time nor N GPUs' compute
  cpu                         gloo on CPU processes
  fake                        a simulated world: one process, fake tensors, a fake process group

Torch-free: the CLI and the quiz read it before any rank starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass

PLACEMENT_ENV = "DDPFSDP_PLACEMENT"  # set by the launcher for its agent and ranks: this placement as JSON
DEVICES = ("cuda", "cpu", "fake")


@dataclass(frozen=True)
class Placement:
    device: str  # "cuda", "cpu", or "fake" (a simulated world: one process, fake tensors)
    world_size: int
    ranks_per_gpu: int = 1  # on CUDA: ranks sharing each GPU; above 1 they run on gloo

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; a placement is on one of {', '.join(DEVICES)}")
        if self.world_size < 1 or self.ranks_per_gpu < 1:
            raise ValueError(f"a placement needs at least one rank and one rank per GPU, got {self}")

    @property
    def shared(self) -> bool:
        """Ranks share a GPU: gloo with CUDA tensors, since NCCL runs one rank per GPU."""
        return self.device == "cuda" and self.ranks_per_gpu > 1

    @property
    def gpus(self) -> int:
        return max(1, self.world_size // self.ranks_per_gpu) if self.device == "cuda" else 0

    @property
    def backend(self) -> str:
        if self.device == "fake":
            return "fake"
        return "nccl" if self.device == "cuda" and not self.shared else "gloo"

    @property
    def simulated(self) -> bool:
        return self.device == "fake"

    @property
    def tensor_device(self) -> str:
        """The device type the ranks' tensors report: a simulated world's fake tensors are made on the CPU."""
        return "cpu" if self.device == "fake" else self.device

    def gpu_of(self, local_rank: int) -> int:
        """The GPU a local rank drives: local ranks 0..K-1 the first, K..2K-1 the next, and so on."""
        return local_rank // self.ranks_per_gpu

    def describe(self) -> str:
        if self.device == "fake":
            return f"a simulated world of {self.world_size} ranks (one process, fake tensors, fake process group)"
        if self.shared:
            where = "one GPU" if self.gpus == 1 else f"each of {self.gpus} GPUs"
            return (f"{self.world_size} ranks, {self.ranks_per_gpu} sharing {where} (gloo, CUDA tensors: memory is "
                    "real, time is not NCCL's)")
        if self.device == "cuda":
            return f"{self.world_size} GPU{'s' if self.world_size != 1 else ''} (NCCL)"
        return f"{self.world_size} CPU process{'es' if self.world_size != 1 else ''} (gloo)"

    def shared_label(self) -> str | None:
        """What a run with K ranks on each GPU is, said on every screen and in its result; None otherwise."""
        if not self.shared:
            return None
        where = "one GPU" if self.gpus == 1 else f"each of {self.gpus} GPUs"
        return (f"{self.ranks_per_gpu} ranks share {where} over gloo (CUDA tensors): memory per rank is real CUDA "
                f"memory; throughput and communication time are not NCCL's and not {self.world_size} GPUs'")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Placement:
        """What `to_json` wrote; ValueError for anything else."""
        try:
            data = json.loads(text)
            return cls(str(data["device"]), int(data["world_size"]), int(data.get("ranks_per_gpu", 1)))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{PLACEMENT_ENV}={text!r} is not a placement: {exc}") from None

    @classmethod
    def of_rank(cls, environ: Mapping[str, str], device: str, world_size: int) -> Placement:
        """This rank's placement: the launcher's (PLACEMENT_ENV), or under a launch of one's own (torchrun,
        srun) one rank per GPU on `device`. ValueError when the launcher's does not match the world joined."""
        sent = environ.get(PLACEMENT_ENV)
        if not sent:
            return cls(device, world_size)
        placement = cls.from_json(sent)
        if placement.world_size != world_size:
            raise ValueError(f"{PLACEMENT_ENV} places {placement.world_size} ranks, but WORLD_SIZE is {world_size}")
        return placement
