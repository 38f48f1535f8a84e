"""One rank of the GPU check (`gpu_check.py`): what a one-GPU machine can run of the training demos.

    python tests/benchmarks/gpu_rank_check.py demo OUT.json fsdp --model base --steps 8
    python tests/benchmarks/gpu_rank_check.py guard OUT.json

`demo` runs a training demo's own entry point (the function the registry names, with the options
its command line parses) as a world of one rank on cuda:0 over NCCL. The launcher refuses a
training demo on fewer than two ranks, since one rank shares no work, but the loop, the
strategies, the peak, the CUDA-event timeline and the trace are the same code, and on a machine
with one GPU this is the only way they run there. Besides the result it writes what the caching
allocator itself says (`torch.cuda.memory_stats`) and a probe of the cuBLAS workspaces: one matmul
forward and backward, then the bytes `clear_blas_workspaces` frees.
`--device cpu` (before `demo`) runs the same on gloo, to try the script on a machine without a GPU.

`guard` asks the launch guard about a run that cannot fit one GPU and one that can.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MIB = 1024**2


def _world_of_one() -> None:
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    from ddpfsdp.demos.launch.hardware import free_port

    os.environ["MASTER_PORT"] = str(free_port())


def _memory_stats(device: Any) -> dict[str, int]:
    import torch

    stats = torch.cuda.memory_stats(device)
    keys = ("allocated_bytes.all.peak", "active_bytes.all.peak", "reserved_bytes.all.peak",
            "allocated_bytes.all.current", "num_alloc_retries", "num_ooms")
    return {key: int(stats.get(key, 0)) for key in keys}


def workspace_probe(device: Any) -> dict[str, Any]:
    """What one matmul's forward and backward leave allocated once their tensors are gone, and what
    the clear frees of it: the workspaces of the forward's thread and of autograd's."""
    import torch

    from ddpfsdp.demos.measure.blas_workspaces import clear_blas_workspaces, cuda_blas_workspace_bytes

    cleared = clear_blas_workspaces(device)
    a = torch.randn(1024, 1024, device=device, requires_grad=True)
    b = torch.randn(1024, 1024, device=device)
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)
    (a @ b).sum().backward()
    a.grad = None
    torch.cuda.synchronize(device)
    held = torch.cuda.memory_allocated(device) - start
    clear_blas_workspaces(device)
    freed = held - (torch.cuda.memory_allocated(device) - start)
    size = getattr(torch.backends.cuda, "cublas_workspace_size", None)
    return {"clear_available": cleared, "held_bytes": held, "freed_bytes": freed,
            "bound_bytes": cuda_blas_workspace_bytes(device),
            "cublas_workspace_bytes": int(size()) if size is not None else None}


def run_demo(out_path: str, device_type: str, demo_name: str, args: list[str]) -> int:
    import torch
    import torch.distributed as dist

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch.context import DemoContext
    from ddpfsdp.demos.launch import request
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.train.spec import RunSpec

    _world_of_one()
    demo = registry.get(demo_name)
    asked = request.from_args(demo, args)
    if device_type == "cuda":
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    try:
        # Events go to stderr: the caller keeps stdout's tail for its report.
        ctx = DemoContext(rank=0, world_size=1, local_rank=0, device=device, placement=Placement(device.type, 1),
                          _stdout=sys.stderr)
        baseline = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
        if isinstance(asked, RunSpec):
            asked = asked.resolved(device.type)  # as the launcher resolves it for the device it places the run on
        result = demo.run_on_rank(ctx, asked)
        data: dict[str, Any] = {"result": result.to_json(), "baseline_bytes": baseline, "torch": torch.__version__}
        if device.type == "cuda":
            data["memory_stats"] = _memory_stats(device)
            data["workspace_probe"] = workspace_probe(device)
            data["device_name"] = torch.cuda.get_device_name(device)
        with open(out_path, "w") as out:
            json.dump(data, out)
    finally:
        dist.destroy_process_group()
    return 0


def run_guard(out_path: str) -> int:
    """The guard's verdicts on one GPU: a run far too big for it, and a tiny one."""
    from dataclasses import asdict

    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.launch.guard import check_launch

    refused = check_launch("ddp", {"model": "xl", "batch_size": 256}, Placement("cuda", 1), force=False)
    control = check_launch("ddp", {"model": "tiny", "batch_size": 4}, Placement("cuda", 1), force=False)
    with open(out_path, "w") as out:
        json.dump({"refused": asdict(refused), "control": asdict(control)}, out)
    return 0


def main(argv: list[str]) -> int:
    device_type = "cuda"
    if argv[:2] == ["--device", "cpu"]:
        device_type, argv = "cpu", argv[2:]
    if len(argv) >= 3 and argv[0] == "demo":
        return run_demo(argv[1], device_type, argv[2], argv[3:])
    if len(argv) == 2 and argv[0] == "guard":
        return run_guard(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the demo worker leaves: no interpreter teardown, where gloo's destructors can abort
