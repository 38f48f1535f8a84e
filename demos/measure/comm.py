"""Count the collectives a piece of code issues, per op, with the bytes a ring sends per rank.

`CommCounter` is a TorchDispatchMode: every c10d collective (what DDP's reducer, FSDP2 and
ZeroRedundancyOptimizer call) and every functional collective (what DTensor calls) passes through
the dispatcher, so the counter sees them without patching anything. Each op's own process group
gives the group size n that sets its wire factor, so HSDP's replicate and shard groups (smaller
than the world) are counted with their own n.

Per op: `count`; `bytes`, the logical size of the full buffer (all_reduce and broadcast: the
tensor; all_gather: the gathered output; reduce_scatter: the unreduced input); and
`wire_bytes_per_rank`, what one rank sends on a ring (`collectives.wire_factor`).
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ddpfsdp.demos.base.collectives import OPS, wire_factor

# c10d op name -> (our op name, which argument holds the full buffer)
_C10D = {
    "allreduce_": ("all_reduce", "tensors"),
    "allreduce_coalesced_": ("all_reduce", "tensors"),
    "allgather_": ("all_gather", "output_tensors"),
    "_allgather_base_": ("all_gather", "output_tensor"),
    "allgather_coalesced_": ("all_gather", "output_lists"),
    "allgather_into_tensor_coalesced_": ("all_gather", "outputs"),
    "reduce_scatter_": ("reduce_scatter", "input_tensors"),
    "_reduce_scatter_base_": ("reduce_scatter", "input_tensor"),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", "inputs"),
    "broadcast_": ("broadcast", "tensors"),
    "alltoall_": ("all_to_all", "input_tensors"),
    "alltoall_base_": ("all_to_all", "input"),
    "send": ("send", "tensors"),
    "recv_": ("recv", "tensors"),
    "recv_any_source_": ("recv", "tensors"),
}

# functional collective name -> (our op name, whether the full buffer is the input times group size)
_FUNCTIONAL = {
    "all_reduce": ("all_reduce", False),
    "all_reduce_": ("all_reduce", False),
    "all_reduce_coalesced": ("all_reduce", False),
    "all_reduce_coalesced_": ("all_reduce", False),
    "all_gather_into_tensor": ("all_gather", True),
    "all_gather_into_tensor_out": ("all_gather", True),
    "all_gather_into_tensor_coalesced": ("all_gather", True),
    "reduce_scatter_tensor": ("reduce_scatter", False),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", False),
    "broadcast": ("broadcast", False),
    "broadcast_": ("broadcast", False),
    "all_to_all_single": ("all_to_all", False),
}


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def _process_group(group: Any) -> Any:
    if isinstance(group, str):
        return dist.distributed_c10d._resolve_process_group(group)
    if isinstance(group, torch.ScriptObject):
        return dist.ProcessGroup.unbox(group)
    return group


@dataclass(frozen=True)
class Collective:
    op: str
    group_size: int
    bytes: int
    group: str = ""  # the process group's name: tells a 2-D mesh's dp and tp groups apart at equal sizes

    @property
    def wire_bytes_per_rank(self) -> float:
        return self.bytes * wire_factor(self.op, self.group_size)


def classify(func: Any, args: tuple, kwargs: dict) -> Collective | None:
    """The collective a dispatched op is, or None when it is not one."""
    namespace = func.namespace
    name = func._schema.name.split("::", 1)[-1]
    if namespace == "c10d" and name in _C10D:
        op, buffer_arg = _C10D[name]
        bound = _bind(func, args, kwargs)
        group = _process_group(bound["process_group"])
        return Collective(op, group.size(), _tensor_bytes(bound[buffer_arg]), str(group.group_name))
    if namespace == "_c10d_functional" and name in _FUNCTIONAL:
        op, times_group = _FUNCTIONAL[name]
        bound = _bind(func, args, kwargs)
        group = _process_group(bound["group_name"])
        size = group.size()
        buffer_bytes = _tensor_bytes(bound.get("input", bound.get("inputs")))
        return Collective(op, size, buffer_bytes * size if times_group else buffer_bytes, str(group.group_name))
    return None


def issued_by_dtensor(types: Any) -> bool:
    """Whether an op is dispatched on DTensors, which must be let through to see their collectives.

    DTensor turns some ops into collectives inside its own dispatch (`loss_parallel`'s log-softmax,
    a redistribution an op's sharding needs), and an AsyncCollectiveTensor waits for its collective
    inside its own; a mode that handled such an op itself would never see them. Declining it
    (NotImplemented) lets the subclass run and its collectives and waits come back through the mode
    on plain tensors, as torch's CommDebugMode does (tensor/debug/_comm_mode.py).
    """
    subclasses = _dtensor_types()
    return any(issubclass(t, subclasses) for t in types)


@functools.cache
def _dtensor_types() -> tuple[type, ...]:
    from torch.distributed._functional_collectives import AsyncCollectiveTensor
    from torch.distributed.tensor import DTensor

    return (DTensor, AsyncCollectiveTensor)


def _bind(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """An op's arguments by the names its schema gives them (each collective's own)."""
    bound = {arg.name: value for arg, value in zip(func._schema.arguments, args)}
    bound.update(kwargs)
    return bound


# One step's collectives per op: {op: {"count", "bytes", "wire_bytes_per_rank"}} (result.CommOp's JSON form).
PerOp = dict[str, dict[str, float]]


def _per_op(collectives: list[Collective]) -> PerOp:
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "bytes": 0, "wire_bytes_per_rank": 0.0})
    for c in collectives:
        entry = totals[c.op]
        entry["count"] += 1
        entry["bytes"] += c.bytes
        entry["wire_bytes_per_rank"] += c.wire_bytes_per_rank
    return {op: totals[op] for op in OPS if op in totals}


def per_dimension(names: dict[str, str], by_group: dict[str, PerOp]) -> dict[str, PerOp]:
    """A 2-D run's collectives by mesh dimension ("dp", "tp"), from those by process-group name."""
    return {dim: by_group.get(name, {}) for dim, name in names.items()}


class CommCounter(TorchDispatchMode):
    """Counts every collective issued inside `with CommCounter() as comm:`; read `comm.per_op()`."""

    def __init__(self) -> None:
        super().__init__()
        self.collectives: list[Collective] = []
        self._buffers: list[weakref.ref] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if issued_by_dtensor(types):
            return NotImplemented
        kwargs = kwargs or {}
        collective = classify(func, args, kwargs)
        if collective is not None:
            self.count(collective, args, kwargs)
        return func(*args, **kwargs)

    def count(self, collective: Collective, args: Any, kwargs: dict[str, Any]) -> None:
        """Record one collective and, weakly, the tensors it was handed (see `live_buffers`)."""
        self.collectives.append(collective)
        # Weakly: counting must not keep a transient buffer (FSDP's all-gather output) alive.
        self._buffers.extend(weakref.ref(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))

    def live_buffers(self) -> list[torch.Tensor]:
        """The tensors the counted collectives used that are still alive: buffers that outlive a
        step, such as the gradient buckets DDP's C++ reducer owns and Python cannot reach otherwise."""
        alive = {}
        for ref in self._buffers:
            tensor = ref()
            if tensor is not None:
                alive[id(tensor)] = tensor
        return list(alive.values())

    def per_op(self) -> PerOp:
        """{op: {"count", "bytes", "wire_bytes_per_rank"}} for the ops seen, in a fixed order."""
        return _per_op(self.collectives)

    def per_group(self) -> dict[str, PerOp]:
        """`per_op` for each process group by name: a 2-D mesh's dp and tp groups apart."""
        by_group: dict[str, list[Collective]] = defaultdict(list)
        for c in self.collectives:
            by_group[c.group].append(c)
        return {name: _per_op(found) for name, found in by_group.items()}

    def group_sizes(self) -> dict[str, list[int]]:
        """The distinct group sizes each op ran on (HSDP shows two)."""
        sizes: dict[str, set[int]] = defaultdict(set)
        for c in self.collectives:
            sizes[c.op].add(c.group_size)
        return {op: sorted(s) for op, s in sizes.items()}
