"""Measure what a rank holds and how fast it trains, from the tensors and clocks themselves.

- `model_state_bytes`: params, grads and optimizer state a rank holds, counted from the tensors
  (a DTensor counts its local shard; a storage shared by several tensors counts once, so FSDP1's
  flat parameter and DDP's tied weights are not double counted; padding of a shard counts, since
  the rank really holds it).
- `PeakMemory`: the peak of one step. CUDA: the caching allocator's own peak counters. CPU: the
  bytes alive at the start plus the highest running total of the allocations the profiler records
  during the step (the profiler is slow, so it is used on one dedicated step only; `ru_maxrss` is
  useless here: spawned ranks inherit their parent's). What is alive at the start is a set of
  storages, each counted once by its address, however it was found: reachable from Python, or
  handed to a collective during the step without being allocated in it (DDP's gradient buckets,
  which its C++ reducer owns: Python reaches them only once some dispatch mode has wrapped them).
  On CUDA the cuBLAS workspaces are freed before a run's baseline (`blas_workspaces`), so every
  run in a process allocates its own and pays for them in its peak.
- `StepTimer`: wall time of the timed steps and of each step (CUDA events on GPU, so no step
  waits for the GPU to be timed).
- `environment`: the `env` block of every result.
"""

from __future__ import annotations

import gc
import itertools
import platform
import socket
import statistics
import time
import warnings
from typing import Any, Iterable, Iterator, TypedDict

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ddpfsdp.demos.measure.blas_workspaces import clear_blas_workspaces, cuda_blas_workspace_bytes

GiB = 1024**3
MiB = 1024**2


def _local(tensor: torch.Tensor) -> torch.Tensor:
    to_local = getattr(tensor, "to_local", None)  # DTensor: the shard this rank holds
    return to_local() if to_local is not None else tensor


def _storage_key_and_bytes(tensor: torch.Tensor) -> tuple[tuple, int] | None:
    tensor = _local(tensor)
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # wrapper subclasses without storage
        return None
    nbytes = storage.nbytes()
    if nbytes == 0:
        return None
    # A fake tensor's storage (a simulated run's) is a meta one with no address, and torch warns when it
    # is asked for one: it is told apart by identity, as torch keeps one Python object per storage for as
    # long as the storage lives.
    address = ("storage", id(storage)) if storage.device.type == "meta" else storage.data_ptr()
    return (tensor.device.type, tensor.device.index, address), nbytes


def storages(tensors: Iterable[Any]) -> dict[tuple, int]:
    """{(device type, index, address): bytes} of the distinct storages behind `tensors`."""
    seen: dict[tuple, int] = {}
    held = []  # every tensor counted stays alive to the end, so no storage's identity can be reused
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            continue
        held.append(tensor)
        found = _storage_key_and_bytes(tensor)
        if found is not None:
            seen[found[0]] = found[1]
    return seen


def unique_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (each storage once, whole)."""
    return sum(storages(tensors).values())


def resting_params(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's parameters as they rest between steps (FSDP: this rank's shards), held by alias.

    In a unit's forward FSDP swaps its unsharded parameters in (FSDP2 `FSDPParam.to_unsharded`, FSDP1
    `_use_unsharded_views`), while the shards stay allocated: `param_bytes_held` counts both."""
    return [p.detach() for p in model.parameters()]


def param_bytes_held(resting: Iterable[torch.Tensor], model: torch.nn.Module) -> int:
    """Parameter bytes held now: the resting parameters and whatever the model holds in their place.

    The model's current parameters alone would miss the shards while a unit is gathered, and under
    bf16-mixed on a group of 2 a unit's bf16 unsharded copy weighs what its fp32 shard does: the
    bytes would not seem to fall when FSDP frees the copy, nor grad-op to hold more than full."""
    return unique_storage_bytes(itertools.chain(resting, model.parameters()))


def state_optimizers(optimizer: Any) -> list[torch.optim.Optimizer]:
    """The optimizer, and the inner one in which ZeroRedundancyOptimizer keeps this rank's shard of the state."""
    inner = getattr(optimizer, "optim", None)
    return [optimizer, inner] if isinstance(inner, torch.optim.Optimizer) else [optimizer]


def optimizer_state_tensors(optimizer: Any) -> Iterator[torch.Tensor]:
    """Every tensor of the optimizer's state on this rank (zro: its shard)."""
    for opt in state_optimizers(optimizer):
        for state in opt.state.values():
            yield from (value for value in state.values() if isinstance(value, torch.Tensor))


class PeakRecord(TypedDict):
    """What `PeakMemory` measured of one step (bytes; None where its device does not say)."""

    peak: int | None
    peak_kind: str
    reserved: int | None
    start: int | None
    untracked_free: int | None
    found: int | None
    blas_workspaces: int | None


class Environment(TypedDict):
    """A rank's machine, as the result's env records it."""

    torch: str
    python: str
    device_names: list[str]
    cpu_count: int
    hostname: str
    torch_threads: int


def model_state_bytes(model: torch.nn.Module, optimizer: Any) -> dict[str, int]:
    """{"params", "grads", "optimizer"}: bytes this rank holds, measured from its tensors."""
    params = list(model.parameters())
    return {
        "params": unique_storage_bytes(params),
        "grads": unique_storage_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": unique_storage_bytes(optimizer_state_tensors(optimizer)),
    }


def ddp_reducer_bytes(model: torch.nn.Module) -> int:
    """Bytes of the gradient buckets DDP's reducer holds in C++, from its own logging data.

    They are as large as the gradients (a second copy unless gradient_as_bucket_view) and live as
    long as the model. Reported beside the peak as a cross-check; the peak itself finds the
    buckets' storages (see `PeakMemory`), so they are never added twice.
    """
    logging_data = getattr(model, "_get_ddp_logging_data", None)
    if logging_data is None:
        return 0
    data = logging_data()
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
    return sum(int(s) for s in str(sizes).replace(",", " ").split())


def live_tensor_bytes(device_type: str = "cpu") -> int:
    """Bytes of the distinct storages of every tensor Python can reach on this device type."""
    return sum(live_storages(device_type).values())


def live_storages(device_type: str = "cpu") -> dict[tuple, int]:
    """{storage key: bytes} of every tensor Python can reach whose storage is on this device type."""
    seen: dict[tuple, int] = {}
    # A process with torch imported tracks some 300,000 objects of a few thousand types: asking once
    # per type whether it is a tensor's takes about a third off the walk, against an isinstance per object.
    is_tensor: dict[type, bool] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # touching some objects' attributes warns
        for obj in gc.get_objects():
            kind = type(obj)
            tensor = is_tensor.get(kind)
            if tensor is None:
                tensor = is_tensor[kind] = issubclass(kind, torch.Tensor)
            if not tensor:
                continue
            try:
                # A FakeTensor reports the device it stands for, but its storage is a meta tensor's and
                # holds no memory (torch/_subclasses/fake_tensor.py): inductor keeps hundreds of MiB of
                # them alive, the patterns its fx passes trace once per process (pattern_matcher.py,
                # init_once_fakemode), and they are no part of what a rank holds.
                if _local(obj).untyped_storage().device.type != device_type:
                    continue
                found = _storage_key_and_bytes(obj)
            except Exception:  # noqa: BLE001 - a half-built or exotic tensor is not ours to count
                continue
            if found is not None and found[0][0] == device_type:
                seen[found[0]] = found[1]
    return seen


class _CollectiveStorages(TorchDispatchMode):
    """Records the storages every c10d collective of the measured code reads or writes.

    A collective's buffers pass through the dispatcher even when they belong to C++ (DDP's reducer
    hands its buckets to `allreduce_`), so this is where storages Python cannot reach show up.
    """

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type
        self.seen: dict[tuple, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace == "c10d":
            for key, nbytes in storages(tree_leaves((args, kwargs))).items():
                if key[0] == self.device_type:
                    self.seen[key] = nbytes
        return out


class PeakMemory:
    """Peak memory of the code inside `with PeakMemory(device) as peak:`; read `peak.peak_bytes`.

    On CPU, `start_bytes` counts every storage alive at the start once: those Python reaches, and
    those a collective touched during the step that the step did not allocate (`found_bytes` of
    them were out of Python's reach). `peak_kind` names the method, so a reader knows what the
    number means.
    """

    def __init__(self, device: Any, *, since: Any = None) -> None:
        self.device = torch.device(device)
        self.since = since
        self.found_bytes: int | None = None
        self.peak_bytes: int | None = None
        self.reserved_bytes: int | None = None
        self.start_bytes: int | None = None
        self.alloc_retries: int | None = None
        self.ooms: int | None = None
        self.untracked_free_bytes: int | None = None
        self.blas_workspace_bytes: int | None = None
        self._profiler = None
        self._collectives: _CollectiveStorages | None = None
        self._start: dict[tuple, int] = {}

    @staticmethod
    def before_run(device: Any) -> Any:
        """What the process holds before a run builds anything, for `since=`: a later run in the same
        process (compare) then measures its own memory, not what earlier runs left behind.

        On CUDA the cuBLAS workspaces are freed first, so that every run allocates its own during its
        warm-up and its peak holds them (`blas_workspace_bytes` says how much), the first run as
        much as the later ones."""
        device = torch.device(device)
        if device.type == "cuda":
            clear_blas_workspaces(device)
            return torch.cuda.memory_allocated(device)
        return live_storages("cpu")

    @property
    def peak_kind(self) -> str:
        if self.device.type == "cuda":
            return "cuda max_memory_allocated"
        return "cpu live tensor bytes (profiler)"

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start_bytes = torch.cuda.memory_allocated(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile

            self._start = live_storages("cpu")
            earlier = self.since or {}
            self.start_bytes = sum(nbytes for key, nbytes in self._start.items() if key not in earlier)
            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profiler.__enter__()
            self._collectives = _CollectiveStorages("cpu")
            self._collectives.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - (self.since or 0)
            self.start_bytes -= self.since or 0
            self.reserved_bytes = torch.cuda.max_memory_reserved(self.device)
            stats = torch.cuda.memory_stats(self.device)
            self.alloc_retries = stats.get("num_alloc_retries", 0)
            self.ooms = stats.get("num_ooms", 0)
            self.blas_workspace_bytes = cuda_blas_workspace_bytes(self.device)
            return
        self._collectives.__exit__(*exc)
        self._profiler.__exit__(*exc)
        if exc[0] is None:
            highest, last, allocated = running_totals(self._profiler, with_addresses=True)
            # A storage a collective used that was neither reachable at the start nor allocated
            # in the step was alive all along out of Python's sight. Keyed by address, it counts
            # once whether or not an earlier dispatch mode had already made it reachable.
            found = {key: nbytes for key, nbytes in self._collectives.seen.items()
                     if key not in self._start and key[2] not in allocated}
            self.found_bytes = sum(found.values())
            self.start_bytes += self.found_bytes
            self.peak_bytes = self.start_bytes + max(0, highest)
            # The profiler records frees on the thread it profiles only; a block that a collective
            # backend's thread let go of last is never seen freed. What the tracker believes is
            # alive at the end, less what is alive, bounds how far the peak may sit too high.
            earlier = self.since or {}
            alive_bytes = sum(nbytes for key, nbytes in {**live_storages("cpu"), **found}.items() if key not in earlier)
            self.untracked_free_bytes = max(0, self.start_bytes + last - alive_bytes)
        self._profiler = None
        self._collectives = None

    def to_dict(self) -> PeakRecord:
        return {
            "peak": self.peak_bytes,
            "peak_kind": self.peak_kind,
            "reserved": self.reserved_bytes,
            "start": self.start_bytes,
            "untracked_free": self.untracked_free_bytes,
            "found": self.found_bytes,
            "blas_workspaces": self.blas_workspace_bytes,
        }


def cpu_allocation_events(prof: Any) -> list[tuple[int, int, int, int]]:
    """(time ns, running total, size, address) of every CPU allocation (size > 0) and free (size < 0)
    the profiler recorded, in time order.

    The running total is the allocator reporter's process-wide counter, which persists across
    profiling sessions: the level before the first event is the baseline of a session.
    """
    from torch._C._profiler import _EventType

    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            fields = node.extra_fields
            events.append((node.start_time_ns, fields.total_allocated, fields.alloc_size, fields.ptr))
    events.sort()
    return events


def running_totals(prof: Any, with_addresses: bool = False) -> tuple:
    """(highest, last) bytes allocated above the level at the profiler's start, from its events.

    `with_addresses` adds a third item: the addresses of the blocks allocated while profiling.
    """
    events = cpu_allocation_events(prof)
    addresses = {ptr for _, _, size, ptr in events if size > 0}
    if not events:
        return (0, 0, addresses) if with_addresses else (0, 0)
    _, first_total, first_size, _ = events[0]
    baseline = first_total - first_size
    totals = (max(total for _, total, _, _ in events) - baseline, events[-1][1] - baseline)
    return (*totals, addresses) if with_addresses else totals


class StepTimer:
    """Wall time of a run of steps, and of each step, at no cost to the steps themselves.

    `start()` and `stop()` synchronise CUDA once each, so `wall_s` covers all queued work. Per-step
    times come from CUDA events on GPU (recorded in the stream, read after `stop()`, so no step
    waits for the GPU) and from perf_counter on CPU.

        timer.start()
        for batch in batches:
            with timer.step():
                train_step(batch)
        timer.stop()
    """

    def __init__(self, device: Any) -> None:
        self.device = torch.device(device)
        self.wall_s: float | None = None
        self._cuda = self.device.type == "cuda"
        self._marks: list[tuple[Any, Any]] = []
        self._times_s: list[float] | None = None
        self._start = 0.0

    def _sync(self) -> None:
        if self._cuda:
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self._sync()
        self._start = time.perf_counter()

    def stop(self) -> None:
        self._sync()
        self.wall_s = time.perf_counter() - self._start
        if self._cuda:
            self._times_s = [begin.elapsed_time(end) / 1000.0 for begin, end in self._marks]
        else:
            self._times_s = [end - begin for begin, end in self._marks]

    def step(self) -> _Step:
        return _Step(self)

    def _mark(self) -> Any:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    @property
    def times_s(self) -> list[float]:
        if self._times_s is None:
            raise ValueError("the timer has not been stopped")
        return self._times_s

    def summary(self) -> dict[str, float]:
        """{"median", "min", "max"} of the step times, in seconds."""
        times = self.times_s
        if not times:
            raise ValueError("no steps were timed")
        return {"median": statistics.median(times), "min": min(times), "max": max(times)}


class _Step:
    def __init__(self, timer: StepTimer) -> None:
        self.timer = timer
        self.begin: Any = None

    def __enter__(self) -> None:
        self.begin = self.timer._mark()

    def __exit__(self, *exc: Any) -> None:
        self.timer._marks.append((self.begin, self.timer._mark()))


# Dense peak FLOP/s per GPU from the vendors' data sheets: (bf16 tensor cores, fp32 without TF32).
# Matched on the device name, most specific first; a GPU not listed gets no MFU rather than a guess.
PEAK_FLOPS_PER_S: list[tuple[str, float, float]] = [
    ("H200 NVL", 835e12, 60e12),  # the PCIe card, lower clocks than the SXM part
    ("H200", 989e12, 67e12),  # SXM; also GH200, whose GPU has the H100 SXM's peaks
    ("H100 NVL", 835e12, 60e12),
    ("H100 PCIE", 756e12, 51e12),
    ("H100", 989e12, 67e12),  # SXM5
    ("A100", 312e12, 19.5e12),  # SXM4 and PCIe share the dense peaks
]


def peak_flops_per_s(device: Any, precision: str) -> float | None:
    """The GPU's dense peak for the precision its matmuls run in, or None where it is not known.

    fp32 counts only when matmuls really run in fp32 (`torch.get_float32_matmul_precision()` is
    "highest"); with TF32 allowed the fp32 peak would understate the hardware and MFU could pass 100%.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).upper()
    for key, bf16, fp32 in PEAK_FLOPS_PER_S:
        if key in name:
            if precision in ("bf16", "bf16-mixed"):
                return bf16
            if precision == "fp32" and torch.get_float32_matmul_precision() == "highest":
                if torch.backends.cuda.matmul.allow_tf32:
                    return None
                return fp32
            return None
    return None


def environment(ctx: Any = None) -> Environment:
    """torch and python versions, device names, CPU count and hostname of this rank's machine."""
    from ddpfsdp.demos.base.host import cpu_count

    device = getattr(ctx, "device", None)
    if device is not None and torch.device(device).type == "cuda":
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    else:
        names = [platform.processor() or platform.machine() or "cpu"]
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device_names": names,
        "cpu_count": cpu_count(),
        "hostname": socket.gethostname(),
        "torch_threads": torch.get_num_threads(),
    }
