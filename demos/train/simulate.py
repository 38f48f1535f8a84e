"""Simulated training: the demos' own strategy code on fake tensors over a fake process group.

    ddpfsdp demo fsdp --simulate --world 64 --params 7B --precision bf16-mixed

One process plays rank 0 of a world of N. Its tensors are `FakeTensor`s (shapes, dtypes and devices,
no storage: torch._subclasses.fake_tensor), and its process group is the "fake" backend
(torch.testing._internal.distributed.fake_pg), which accepts every collective and moves nothing. The
model is built on the meta device and parallelized by `parallel.parallelize`, the code the real demos
run, over a `FakeWorld`, which gives it fake tensors with `to_empty` at the one point `parallelize`
leaves for it (after FSDP has sharded the model on meta, before DDP and zro wrap it); then it is
trained for one step:

  warm-up         leaves what a first training step leaves behind, so the measured step starts
                  where a real second one does: the optimizer state, and FSDP's gather buffers
                  (see `_warm_up`); it runs no forward or backward, so DDP's first synced
                  iteration, and its only one, is the measured step
  measured step   forward, backward and optimizer step, under CommCounter (every collective issued)
                  and torch's memory tracker (FSDPMemTracker for FSDP, MemTracker otherwise), which
                  follows every fake allocation and free and knows which module and phase is running

What this measures is real: how the strategy shards (rank 0's own shards, counted from its tensors),
which collectives it issues and how large they are, and the pattern of allocations in one step.
What it cannot measure: time (nothing computes), NCCL (nothing is sent) and allocator fragmentation
(nothing is allocated). Fake tensors live on the CPU device: FSDP2 on a CUDA mesh needs CUDA streams,
which a machine without a GPU cannot make, so allocations are counted exactly as requested, without
the 512-byte rounding of the CUDA caching allocator.

Two of the strategies' steps cannot read a fake process group's results, and are replaced by the
same collective issued another way: DDP's built-in C++ all-reduce hook expects a result tensor from
the backend, so a Python comm hook all-reduces each bucket instead (`register_comm_hook`, one
all_reduce per bucket as before); and DDP's first iteration puts every gradient in one bucket (it
rebuilds buckets in gradient order only from the second synced iteration on), so its all-reduce
count is 1 here while its bytes are those of every step.
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Mapping

import torch
import torch.distributed as dist

from ddpfsdp.demos.measure.breakdown import TORCH_CATEGORIES
from ddpfsdp.demos.measure.memory import model_state_bytes, param_bytes_held, resting_params, state_optimizers
from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.result.build import build
from ddpfsdp.demos.result.schema import Comm, Config, DemoResult, Env, JsonObject, LargestUnit, Memory
from ddpfsdp.demos.base.shapes import describe_gpt_shape
from ddpfsdp.demos.parallel.parallelize import World, parallelize
from ddpfsdp.demos.train.spec import COMPARE_RUNS, RunSpec

if TYPE_CHECKING:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.parallel.strategies import Prepared
    from ddpfsdp.demos.parallel.context_parallel import ContextParallel
    from ddpfsdp.demos.parallel.tensor_parallel import TwoD

FAKE_DEVICE = torch.device("cpu")
SIMULATED_RANK = 0
PHASES = ("forward", "backward", "optimizer step")


# ----------------------------------------------------------------------------- the fake world


@contextlib.contextmanager
def fake_world(world_size: int) -> Iterator[None]:
    """A default process group of `world_size` ranks on the fake backend, as rank 0, for the block."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already running in this process; simulate in a fresh one")
    dist.init_process_group("fake", store=FakeStore(), rank=SIMULATED_RANK, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- where the peak is


def _locating(base: type) -> type:
    """`base` (MemTracker or FSDPMemTracker), also recording where in the step its peak happened.

    torch's trackers refresh every known module's local peak on every operation, which is slow on a
    model of hundreds of modules; this one records the step's peak, its categories and the modules
    and phase running at that moment, and leaves per-module peaks alone. It also lets device queries
    through without the per-op bookkeeping they cannot need (see `__torch_dispatch__`).
    """

    from torch._guards import active_fake_mode
    from torch.distributed.tensor import DTensor

    device_query = torch.ops.prim.device.default

    class Locating(base):  # type: ignore[misc, valid-type]
        peak_modules: tuple[str, ...] = ()
        peak_phase: str | None = None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            # A fake tensor answers "which device?" through the dispatcher, and the autograd engine
            # and the kernels ask it of every tensor they touch: half the ops of a 70B step. Such a
            # query allocates and frees nothing, so of torch's bookkeeping only the peak check is
            # left, run where torch runs it; everything else takes torch's own path.
            if func is device_query and DTensor not in types:
                result = func(*args, **(kwargs or {}))
                if active_fake_mode() is self._fake_mode_on_entry:
                    self._update_peak_stats(None)
                return result
            return super().__torch_dispatch__(func, types, args, kwargs)

        def _update_peak_stats(self, peak_state: Any) -> None:
            for device, snapshot in self._curr_mem_snap.items():
                total = snapshot["Total"]
                if self._peak_mem.get(device, 0) < total:
                    self._peak_mem[device] = total
                    self._peak_mem_snap[device] = dict(snapshot)
                    self.peak_modules = tuple(sorted(self._mod_tracker.parents - {"Global"}))
                    self.peak_phase = ("optimizer step" if self._in_opt
                                       else "backward" if self._mod_tracker.is_bw else "forward")

    Locating.__name__ = f"Locating{base.__name__}"
    return Locating


def _innermost(names: Iterable[str]) -> str | None:
    names = list(names)
    return max(names, key=lambda n: (n.count("."), len(n))) if names else None


def _unit_of(module: str | None, units: list[str]) -> str | None:
    """The FSDP unit a module path belongs to: the longest unit name that is a prefix of it."""
    if module is None:
        return None
    found = [u for u in units if module == u or module.startswith(u + ".")]
    return max(found, key=len) if found else ("<root>" if "<root>" in units else None)


def _relative(path: str | None, root: str) -> str | None:
    """A ModTracker name ("GPT.blocks.3.mlp", "DistributedDataParallel.module.head") as the model's own."""
    if path is None:
        return None
    parts = path.split(".")[1:]  # the tracker names the root by its class
    if parts[:1] == ["module"]:  # DDP's wrapped model
        parts = parts[1:]
    return ".".join(parts) or root


# ----------------------------------------------------------------------------- one simulated run


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _fake_batch(arch: str, shape: Any, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if arch == "gpt":
        tokens = torch.zeros(batch_size, shape.seq_len, dtype=torch.long, device=FAKE_DEVICE)
        return tokens, tokens.clone()
    images = torch.zeros(batch_size, shape.channels, shape.image_size, shape.image_size, device=FAKE_DEVICE)
    return images, torch.zeros(batch_size, dtype=torch.long, device=FAKE_DEVICE)


def _all_reduce_hook(world_size: int) -> Callable:
    """A DDP comm hook that all-reduces each bucket and averages it, as DDP's built-in hook does."""

    # No annotations: DDP checks them against its own types, and they are strings in this module.
    def hook(state, bucket):  # noqa: ANN001, ANN202
        buffer = bucket.buffer()
        dist.all_reduce(buffer)
        done: torch.futures.Future = torch.futures.Future()
        done.set_result(buffer.div_(world_size))
        return done

    return hook


def _unit_gathers(tracker: Any) -> dict[str, int]:
    """Bytes of unsharded parameters each FSDP unit's pre-forward brought into being, by unit.

    Read from the tracker's "Unsharded Param" category just before and just after the unit's
    pre-forward (FSDP2's all-gather and copy-out); all-gather buffers are left out, since FSDP2
    frees them on its own schedule.
    """
    from torch.distributed._tools.fsdp2_mem_tracker import _FSDPModState, _FSDPRefType

    def unsharded(snapshot: dict) -> int:
        return sum(device.get(_FSDPRefType.UNSHARDED_PARAM, 0) for device in snapshot.values())

    gathered: dict[str, int] = {}
    for stats in tracker.memory_tracking.values():
        before = stats.snapshots.get(_FSDPModState.BEF_PRE_FW) or []
        after = stats.snapshots.get(_FSDPModState.AFT_PRE_FW) or []
        if before and after:
            gathered[stats.mod_fqn] = unsharded(after[0]) - unsharded(before[0])
    return gathered


@dataclass(frozen=True)
class FakeWorld(World):
    """A world of `size` ranks on the fake backend, whose model lives on meta until `parallelize` asks
    for its tensors, and then gets fake ones.

    The model is built on the meta device (shapes and dtypes, no values, no initialisation to run)
    and made fake with `to_empty` inside `fake_mode`, after FSDP has sharded it on meta: sharding
    splits each parameter into one chunk per rank of its group, a tensor object per rank, and a fake
    one costs some fifty times a meta one (512 chunks of an 8192 x 8192 tensor: 27 ms fake, 0.5 ms
    meta; sharding a 70B model on 512 ranks on fake tensors took most of a simulation's time), and
    `_build` has FSDP make only the chunks it reads (`RankChunks`).
    `to_empty` then swaps each shard for a fake tensor in place (`torch.utils.swap_tensors`, as
    `nn.Module._apply` does for DTensor parameters), and FSDP re-reads and if needed re-pads them
    (`FSDPModule._apply`). DDP and zro wrap the fake model, and every optimizer is built over
    fake parameters: `to_empty` gives a plain parameter a new object, which a reducer or an optimizer
    made before it would not see.
    """

    fake_mode: FakeTensorMode | None = None
    init_sync: ClassVar[bool] = False  # one rank, and weights without data: nothing to check or broadcast

    @contextlib.contextmanager
    def materialized(self, model: torch.nn.Module) -> Iterator[None]:
        with self.fake_mode:
            _make_fake(model, self.fake_mode)
            yield


class RankChunks(Sequence):
    """`torch.chunk(tensor, num_chunks, dim)` padded with empty chunks to `num_chunks`, as FSDP2's
    `_chunk_with_empty` returns it, with each chunk made only when it is read.

    FSDP2 cuts each parameter into one chunk per rank of its group and reads two of them: its own rank's
    (its shard) and the first (the padded shard size). A real rank makes the other chunks, views without
    storage of their own, and drops them; one process playing rank 0 of 8192 would make 8192 views per
    parameter, most of a 70B simulation's time. The chunks read here are the views `torch.chunk` makes
    (it splits with `narrow`, as here): the same sizes, strides and offsets, so FSDP2's own code shards
    as it would (tests/test_simulate_chunks.py holds each chunk to torch's).
    """

    def __init__(self, tensor: torch.Tensor, num_chunks: int, dim: int) -> None:
        self.tensor, self.num_chunks, self.dim = tensor, num_chunks, dim
        self.dim_size = tensor.size(dim)
        self.split_size = -(-self.dim_size // num_chunks)  # torch.chunk's: the ceiling
        self.nonempty = -(-self.dim_size // self.split_size)  # torch.chunk may return fewer than asked

    def __len__(self) -> int:
        return self.num_chunks

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.num_chunks))]
        i = operator.index(index)
        i += self.num_chunks if i < 0 else 0
        if not 0 <= i < self.num_chunks:
            raise IndexError(f"chunk {index} of {self.num_chunks}")
        if i >= self.nonempty:
            return self[0].new_empty(0)  # as `_chunk_with_empty` pads the list
        start = i * self.split_size
        return self.tensor.narrow(self.dim, start, min(self.split_size, self.dim_size - start))


def _rank_chunks(tensor: torch.Tensor, num_chunks: int, dim: int) -> Sequence[torch.Tensor]:
    if tensor.size(dim) == 0:  # torch.chunk's own special case: left to it
        from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty

        return _chunk_with_empty(tensor, num_chunks, dim)
    return RankChunks(tensor, num_chunks, dim)


@contextlib.contextmanager
def chunks_made_when_read() -> Iterator[None]:
    """FSDP2 cuts parameters with `RankChunks` in the block (see it); torch's own helper outside it."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param

    original = getattr(_fsdp_param, "_chunk_with_empty", None)
    if original is None:  # a torch that cuts parameters another way: left as it is
        yield
        return
    _fsdp_param._chunk_with_empty = _rank_chunks
    try:
        yield
    finally:
        _fsdp_param._chunk_with_empty = original


def _make_fake(model: torch.nn.Module, fake_mode: FakeTensorMode) -> None:
    """`model.to_empty` on the fake device: every meta parameter and buffer becomes a fake tensor.

    Fake mode refuses tensors it did not make unless told otherwise; it is told so only here, where
    the tensors it is handed are the model's meta ones.
    """
    before = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True
    try:
        model.to_empty(device=FAKE_DEVICE)
    finally:
        fake_mode.allow_non_fake_inputs = before


@dataclass(frozen=True)
class Built:
    """A simulated run's set-up: the model as the run names it, parallelized, and a fake batch."""

    arch: str
    model_name: str
    overrides: Mapping[str, Any]  # the shape's fields changed from the preset's (--layers, ...)
    shape: Any  # the architecture's shape: GPTShape, ViTShape, ...
    model: torch.nn.Module  # the model as built, before any wrapper
    params: int
    prepared: Prepared
    batch: tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Step:
    """What the measured step left: rank 0's model state, memory and collectives."""

    held: Mapping[str, int]  # model-state bytes by kind, from the tensors rank 0 holds
    params_after_forward: int
    comm: CommCounter
    tracker: Any  # the Locating tracker (MemTracker or FSDPMemTracker) that followed the step
    peak_snapshot: Mapping[Any, Mapping[Any, int]]  # device -> category -> bytes, at the peak
    gathers: Mapping[str, int]  # FSDP unit -> bytes of unsharded parameters its pre-forward made


def _build(run: RunSpec, world: FakeWorld) -> Built:
    """Set-up: the model as the run names it, parallelized by `parallelize` as a real run's is, and a
    batch, all of it fake. What is the simulation's own: the meta model, the fake world, and DDP's
    comm hook (see the module's docstring)."""
    from ddpfsdp.demos.train.models import build_model, count_params

    arch, model_name, overrides, shape = run.simulated_model()
    # Built in its final dtype (the default dtype the caller set), so `parallelize` has nothing to cast;
    # on meta no weights are drawn, so the seed is never used.
    model = build_model(arch, "base" if run.params else model_name, seed=0, device="meta", **overrides)
    params = count_params(model)
    with chunks_made_when_read():
        prepared = parallelize(model, run, world, FAKE_DEVICE)
    if run.strategy in ("ddp", "zro"):
        prepared.model.register_comm_hook(None, _all_reduce_hook(world.size))
    with world.fake_mode:
        batch = _fake_batch(arch, shape, run.batch_size)
        if prepared.context is not None:
            batch = prepared.context.local_batch(batch)  # rank 0's tokens of every sequence
    return Built(arch=arch, model_name=model_name, overrides=overrides, shape=shape, model=model, params=params,
                 prepared=prepared, batch=batch)


def _forward(built: Built) -> torch.Tensor:
    from ddpfsdp.demos.train.data import compute_loss

    prepared = built.prepared
    with prepared.autocast():
        return compute_loss(built.arch, prepared.model, built.batch)


def _warm_up(built: Built, strategy: str) -> None:
    """Leave the model and its optimizer as a first training step leaves them, without its forward
    and backward, which would only repeat the measured step's work untracked.

    What a first step makes that the measured step starts from:
      the optimizer state     AdamW's step count and two moments per parameter (zro: of its
                              share), made by its first `step()`: here from a zero gradient per
                              parameter, which has the parameter's shape, dtype and placement, as a
                              real gradient does
      FSDP's gather buffers   each unit's all-gather destinations and unsharded parameters, made by
                              its first unshard and kept with their storage freed when it reshards:
                              here by one `unshard()` and `reshard()` per unit
    Nothing else a first forward and backward make outlives them: FSDP's root set-up (`_lazy_init`:
    which state is the root, the names, the shared communication state, then each group's checks
    and mixed-precision dtypes) allocates nothing on rank 0, whose shard is already the padded one,
    and runs in the measured forward; DDP made its buckets when it wrapped the model, and a forward
    and backward under `no_sync` (the only kind a fake run can take before the measured step)
    record nothing in its reducer, so the measured step is its first synced iteration either way;
    gradients end as None either way.
    """
    from torch.distributed.fsdp import FSDPModule

    wrapped, optimizer = built.prepared.model, built.prepared.optimizer
    with torch.no_grad():
        for param in wrapped.parameters():
            param.grad = torch.zeros_like(param)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if strategy == "fsdp":
        for module in wrapped.modules():
            if isinstance(module, FSDPModule):
                module.unshard()
                module.reshard()


def _measured_step(built: Built, strategy: str) -> Step:
    """Forward, backward and optimizer step under the collective counter and torch's memory tracker."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    from ddpfsdp.demos.measure.comm import CommCounter

    prepared, batch = built.prepared, built.batch
    wrapped, optimizer = prepared.model, prepared.optimizer
    if strategy == "fsdp":
        tracker = _locating(FSDPMemTracker)(wrapped, optimizer)
        tracker.track_inputs(batch)
    else:
        tracker = _locating(MemTracker)()
        # MemTracker reads `optimizer.state`; ZeroRedundancyOptimizer keeps its shard's state in its inner
        # optimizer, so that one is tracked too, or the state would be missing from every figure until step().
        tracker.track_external(wrapped, *state_optimizers(optimizer), *batch)
    held: dict[str, int] = {}
    resting = resting_params(wrapped)  # FSDP2's shards, kept by FSDP while a unit is gathered
    with CommCounter() as comm, tracker:
        with prepared.loss_context():
            loss = _forward(built)
            params_after_forward = param_bytes_held(resting, wrapped)
            loss.backward()
        optimizer.step()
        held.update(model_state_bytes(wrapped, optimizer))
        optimizer.zero_grad(set_to_none=True)
    return Step(held=held, params_after_forward=params_after_forward, comm=comm, tracker=tracker,
                peak_snapshot=tracker.get_tracker_snapshot("peak"),
                gathers=_unit_gathers(tracker) if strategy == "fsdp" else {})


def simulate_run(run: RunSpec, world_size: int, *, label: str | None = None,
                 log: Callable[[str], None] | None = None) -> DemoResult:
    """One simulated step of `run` on rank 0 of a fake world; the default group must exist."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    started = time.perf_counter()
    log = log or (lambda message: None)
    name = label or run.strategy
    # The meshes are made by `parallelize` before fake mode starts: their set-up reads a real rank table.
    world = FakeWorld(world_size, fake_mode=FakeTensorMode())
    with _default_dtype(torch.bfloat16 if run.precision == "bf16" else torch.float32):
        how = "sharding it over" if run.strategy == "fsdp" else "wrapping it for"
        log(f"{name}: building the model on meta and {how} a fake world of {world_size}")
        built = _build(run, world)
        with world.fake_mode:
            log(f"{name}: warm-up (creates the optimizer state and FSDP's gather buffers); "
                f"set-up took {time.perf_counter() - started:.0f} s")
            _warm_up(built, run.strategy)
            log(f"{name}: measured step on a fake world of {world_size}")
            step = _measured_step(built, run.strategy)
    return DemoResult(
        config=Config.from_json(_simulated_config(run, world_size, built)),
        memory=Memory.from_json(_simulated_memory(run, built, step)),
        comm=Comm.from_json({"per_step": step.comm.per_op(), "group_sizes": step.comm.group_sizes(), "step": 2,
                             **_per_group(step.comm, built.prepared.two_d or built.prepared.context)}),
        wall_s=time.perf_counter() - started,
        extra={"label": label, **_ring(step.comm, built.prepared.context)},
        order=("label", "config", "memory", "comm", "wall_s"),
    )


def _per_group(counter: CommCounter, plan: TwoD | ContextParallel | None) -> JsonObject:
    """A 2-D or cp run's collectives by group, as a real run reports them (rank 0's groups)."""
    if plan is None:
        return {}
    return {"per_group": plan.traffic(counter), "groups": [plan.group_names()]}


def _ring(counter: CommCounter, context: ContextParallel | None) -> JsonObject:
    """A cp run's ring on rank 0: every call, its sends and scored pairs, as a real run reports them."""
    if context is None:
        return {}
    return {"ring": [context.figures(context.traffic(counter))]}


def _simulated_config(run: RunSpec, world_size: int, built: Built) -> JsonObject:
    from ddpfsdp.demos.base.units import parse_bytes

    prepared, shape = built.prepared, built.shape
    fsdp = run.strategy == "fsdp"
    return {
        "strategy": run.strategy,
        "sharding": run.sharding,
        "wrap": run.wrap if fsdp else None,
        "fsdp_api": run.fsdp_api if fsdp else None,
        "arch": built.arch,
        "model": built.model_name,
        "shape": describe_gpt_shape(shape) if built.arch == "gpt" else repr(shape),
        **built.overrides,
        "params": built.params,
        "seq_len": getattr(shape, "seq_len", getattr(shape, "tokens", None)),
        "world_size": world_size,
        "replicas": run.replicas,
        "device": FAKE_DEVICE.type,
        "backend": "fake",
        "simulated": True,
        "precision": run.precision,
        "optimizer": run.optimizer,
        "optimizer_impl": prepared.optimizer_impl,
        "batch_size": run.batch_size,
        "checkpoint_activations": run.checkpoint_activations,
        "bucket_mb": run.bucket_mb,
        **({"tp": run.tp, "sequence_parallel": run.sequence_parallel} if run.tp else {}),
        **({"cp": run.cp, "cp_split": run.cp_split} if run.cp else {}),
        "gpu_mem_bytes": parse_bytes(run.gpu_mem) if run.gpu_mem else None,
        "steps": 1,
        "description": prepared.describe(),
        "units": list(prepared.units),
        "unit_params": list(prepared.unit_params),
    }


def _peak_categories(peak_snapshot: Mapping[Any, Mapping[Any, int]]) -> dict[str, int]:
    """The tracker's categories at the peak, summed over devices, by torch's own names."""
    categories: dict[str, int] = {}
    for snap in peak_snapshot.values():
        for kind, value in snap.items():
            if kind != "Total" and value:
                name = getattr(kind, "value", str(kind))
                categories[name] = categories.get(name, 0) + value
    return categories


def _largest_unit(gathers: Mapping[str, int], root: str, prepared: Prepared) -> JsonObject | None:
    if not gathers:
        return None
    named = {(_relative(name, root) if "." in name else "<root>"): size for name, size in gathers.items()}
    name, size = max(named.items(), key=lambda item: item[1])
    return {"name": name, "unsharded_bytes": size, "params": dict(zip(prepared.units, prepared.unit_params)).get(name)}


def _simulated_memory(run: RunSpec, built: Built, step: Step) -> JsonObject:
    """Rank 0's memory in the schema of a real run's rank, with where the step's peak was."""
    tracker, units = step.tracker, list(built.prepared.units)
    peak_bytes = sum(snap["Total"] for snap in step.peak_snapshot.values())
    categories = _peak_categories(step.peak_snapshot)
    root = type(built.model).__name__.removeprefix("FSDP")
    module = _relative(_innermost(tracker.peak_modules), root)
    tracker_name = "FSDPMemTracker" if run.strategy == "fsdp" else "MemTracker"
    # The same schema as a real run's rank: categories in the project's names. "Other" here is not
    # DDP's buckets (the real demos' only external tensors) but whatever the tracker could not place.
    breakdown: dict[str, int] = {}
    for name, value in categories.items():
        ours = "temporaries" if name == "Other" else TORCH_CATEGORIES.get(name, "temporaries")
        breakdown[ours] = breakdown.get(ours, 0) + value
    rank = {
        **step.held,
        "peak": peak_bytes,
        "peak_breakdown": breakdown,
        "peak_phase": tracker.peak_phase,
        "peak_module": module,
        "tracker_peak": peak_bytes,
        "breakdown_source": f"torch.distributed._tools {tracker_name} (fake tensors)",
        "peak_kind": f"simulated: live tensor bytes of one step ({tracker_name} on fake tensors)",
        "params_after_forward": step.params_after_forward,
    }
    return {
        "ranks": [rank],
        "rank": SIMULATED_RANK,
        "peak": {"bytes": peak_bytes, "module": module, "unit": _unit_of(module, units) if units else None,
                 "phase": tracker.peak_phase, "categories": categories},
        "largest_unit": _largest_unit(step.gathers, root, built.prepared),
        **built.prepared.facts,
    }


# ----------------------------------------------------------------------------- the demos


def _judge(run: DemoResult) -> DemoResult:
    """A simulated run with the analytic model's figures, the differences and its checks: the checks a
    real run of the same strategy makes (`train.demo`), and those only a simulation makes."""
    from ddpfsdp.demos.claims import simulated as sc
    from ddpfsdp.demos.train.demo import allowance, strategy_checks, theory_checks, theory_of

    theory = run.theory = theory_of(run)
    config, memory, per_op = run.config, run.memory or Memory(), run.comm.per_step
    rank0 = memory.ranks[0]
    run.versus_theory = sc.versus_theory(rank0, per_op, theory)
    if config.tp:
        run.checks = _two_d_checks(run, theory)
        return run
    padding = allowance(run)
    checks = [
        sc.simulated_model_state_matches_calc(rank0, theory, padding),
        sc.simulated_wire_matches_calc(per_op, theory["comm"], _padding_wire_bytes(run, theory)),
        *theory_checks(run, theory, padding),
        *strategy_checks(run, padding),
    ]
    if config.strategy == "fsdp" and config.sharding == "full":
        unit = memory.largest_unit or LargestUnit()
        checks.append(sc.simulated_peak_holds_largest_unit(rank0.peak, rank0.model_state, unit.unsharded_bytes or 0,
                                                           unit.name))
    run.checks = checks
    return run


def _two_d_checks(run: DemoResult, theory: Mapping[str, Any]) -> list[Any]:
    """A simulated 2-D run against the analytic model, whose per-tensor figures include FSDP's padding:
    rank 0's model state and every collective's wire bytes (1%), then per group, calls exact."""
    from ddpfsdp.demos.claims import simulated as sc
    from ddpfsdp.demos.claims import two_d as td

    ranks, comm = (run.memory or Memory()).ranks, run.comm
    per_group = comm.per_group or {}
    return [
        sc.simulated_model_state_matches_calc(ranks[0], theory),
        sc.simulated_wire_matches_calc(comm.per_step, theory["comm"]),
        td.two_d_shards_model_state(ranks, theory),
        td.tp_comm_matches_theory(per_group.get("tp", {}), theory),
        td.dp_comm_matches_theory(per_group.get("dp", {}), theory),
    ]


def _padding_wire_bytes(run: DemoResult, theory: Mapping[str, Any]) -> int:
    """Wire bytes FSDP sends for dim-0 padding, which the analytic model leaves out.

    FSDP2 pads each parameter's dim 0 to a multiple of its shard group and all-gathers and
    reduce-scatters the padded tensors, so its traffic grows by the padded fraction of the model.
    """
    padded = (run.memory or Memory()).fsdp_padding_elements
    if run.config.strategy != "fsdp" or not padded:
        return 0
    sharded = sum(op["wire_bytes_per_rank"] for name, op in theory["comm"].items() if name != "all_reduce")
    return round(sharded * padded / run.config.params)


def _environment() -> Env:
    import platform
    import socket

    from ddpfsdp.demos.base.host import cpu_count

    return Env(torch=torch.__version__, python=platform.python_version(), device_names=[], cpu_count=cpu_count(),
               hostname=socket.gethostname(), extra={"torch_threads": torch.get_num_threads()})


def simulate(demo: str, spec: RunSpec | Mapping[str, Any], log: Callable[[str], None] | None = None) -> DemoResult:
    """The result of a simulated `ddp`, `zro`, `fsdp`, `compare` or `cp` demo (schema ddpfsdp.demo/1) from its spec
    (or the options that make it)."""
    from ddpfsdp.demos.train.options import spec_of, validate_simulated

    spec = spec_of(demo, spec)
    validate_simulated(demo, spec)
    if spec.batch_size is None:  # a simulated run has no device to resolve for: only its batch is left open
        spec = replace(spec, batch_size=spec.batch_size_default())
    runs = spec.runs(demo)
    world = runs[0].world
    started = time.perf_counter()
    with fake_world(world):
        if demo == "compare":
            judged = {name: _judge(simulate_run(run, world, label=name, log=log))
                      for (name, _, _), run in zip(COMPARE_RUNS, runs)}
        elif spec.is_context_parallel:
            from ddpfsdp.demos.train.context import judge_simulated

            one = judge_simulated(simulate_run(runs[0], world, log=log), spec, log)
        else:
            one = _judge(simulate_run(runs[0], world, log=log))
    wall_s = time.perf_counter() - started
    placement = Placement("fake", world)
    if demo == "compare":
        return _compared(judged, placement, wall_s)
    fields = {key: one.value(key) for key in one.keys() if key not in ("config", "label", "checks", "wall_s")}
    return build(demo, placement, _environment(), one.config, one.checks, **fields, wall_s=wall_s)


def _compared(runs: dict[str, DemoResult], placement: Placement, wall_s: float) -> DemoResult:
    """compare's result across the four simulated runs: its config, the runs and its own checks."""
    from ddpfsdp.demos.train.demo import compare_checks, compare_config

    config = compare_config(runs["ddp"], ("strategy", "sharding", "description", "units", "unit_params", "wrap",
                                          "fsdp_api"))
    return build("compare", placement, _environment(), config, compare_checks(runs, placement.world_size), runs=runs,
                 wall_s=wall_s)
