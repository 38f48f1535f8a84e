"""Pieces the fault programs share: a training step, seeded per-rank data, the one-process reference.

Run on ranks only (torch is imported inside each function).
"""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.faults.fr_table import FlightEntry

ACCUMULATION_STEPS = 4  # micro-batches per optimizer step (K)
MICRO_BATCH = 2
FEATURES = 8
STRAGGLE_S = 1.0


def train_step(model: Any, optimizer: Any, batch: Any) -> Any:
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def micro_batches(rank: int, count: int = ACCUMULATION_STEPS) -> list[Any]:
    """Rank `rank`'s micro-batches: each drawn from its own seed, so any rank can rebuild any other's."""
    import torch

    return [torch.randn(MICRO_BATCH, FEATURES, generator=torch.Generator().manual_seed(1000 * rank + k)) for k in range(count)]


def linear_model(seed: int = 0) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    return nn.Linear(FEATURES, 4)


def reference_grad(world_size: int, seed: int = 0) -> Any:
    """The weight gradient one process gets from the mean loss over every rank's micro-batches."""
    import torch

    model = linear_model(seed)
    everything = torch.cat([batch for rank in range(world_size) for batch in micro_batches(rank)])
    model(everything).pow(2).mean().backward()
    return model.weight.grad.detach().clone()


def versus_reference(grad: Any, reference: Any) -> dict[str, float]:
    """|g| / |ref| and |g - ref| / |ref| (Frobenius norms)."""
    scale = float(reference.norm())
    return {"norm_ratio": float(grad.norm()) / scale, "relative_difference": float((grad - reference).norm()) / scale}


def mesh_for(group: Any) -> Any:
    """A 1-D CPU device mesh over `group`, named after it.

    DeviceMesh equality ignores the process group (torch/distributed/device_mesh.py `__eq__`), and
    DTensor caches by mesh: an unnamed mesh equal to an earlier program's would send this program's
    collectives to the earlier program's group. A name per group keeps each program on its own.
    """
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(group, "cpu", mesh_dim_names=(f"group{group.group_name}",))


def straggle(ctx: Any, late_rank: int) -> None:
    """`late_rank` reaches the next collective STRAGGLE_S after the others, as a slower rank would.

    Ranks never reach a collective at the same instant. In a hang, the rank that waits first times
    out first and gloo closes its connections, so the others fail with "Connection closed by peer"
    unless their own timeout fires first; a fixed lead makes which rank sees which the same every run.
    """
    import time

    if ctx.rank == late_rank:
        time.sleep(STRAGGLE_S)


def count_ops(entries: list[FlightEntry], op: str) -> int:
    return sum(1 for entry in entries if entry.get("op") == op)
