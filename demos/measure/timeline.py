"""Record one training step in time, on one rank: compute spans per unit, collectives, live memory.

`TimelineRecorder` is a `CommCounter` (so the step it records is also the step whose collectives are
counted) that also keeps, for that one step:
  spans        forward and backward of every unit (block), and the optimizer's own update, each
               with its start and end and the order in which the host reached them (`seq`)
  collectives  every c10d collective as issued (op, bytes, process group) and as completed: as its
               Work's future reports, or a thread waiting on a Work without one (gloo's
               reduce-scatter), or for a send or recv without one (gloo's), a thread that sees its
               caller's wait return; a functional collective (DTensor's, so tensor parallelism's) when
               the host waits on its result (`wait_tensor`), the first moment anything can use it
  waits        the time the step sat blocked in those waits: not compute
  memory       live bytes over the step; parameter bytes held (unsharded or shard) at unit edges

Where a unit's edges are taken, with FSDP's own hooks in mind (torch 2.13):
  FSDP2 registers its pre-forward hook with prepend=True and its post-forward hook without, and
  registers its pre-backward as a tensor hook on the unit's outputs inside that post-forward hook
  (torch/distributed/fsdp/_fully_shard/_fsdp_state.py). Its post-backward is the backward of
  RegisterPostBackwardFunction, applied to the unit's inputs in pre-forward (_fsdp_param_group.py).
  So: forward compute starts in a plain pre-hook (after FSDP's unshard and wait) and ends in a
  prepended forward hook (before FSDP's reshard); the parameter bytes after the unit are read in a
  plain forward hook (after the reshard); backward compute starts in a tensor hook on the outputs
  registered after FSDP's (after its unshard and wait, and after it issued the prefetch), and ends
  in an identity autograd function placed on the input FSDP handed the unit (so before its
  post-backward reduce-scatter, and before the previous unit's pre-backward hooks).
  FSDP1 does all of this in FullyShardedDataParallel.forward around the wrapped module, so the
  compute edges come from the wrapped module and the "after the unit" edges from the wrapper.
  The end of backward compute is an engine callback queued from a hook on the loss: callbacks run
  in queue order once the graph is done, so it runs before DDP's reducer finalises (and waits for
  its last all-reduce) and before FSDP's root post-backward callback.

Clocks: on CPU, `time.time_ns()`, the clock the profiler stamps its allocation events with, so the
live-bytes curve (the same tracker PeakMemory uses) lines up with the spans. On CUDA every edge is
a CUDA event recorded on the current stream and a collective's completion an event recorded in its
future's callback (which runs on streams that wait for the collective), read after the step;
memory there is `torch.cuda.memory_allocated` at each edge.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from ddpfsdp.demos.measure.comm import Collective, CommCounter, classify, issued_by_dtensor
from ddpfsdp.demos.measure.memory import (
    cpu_allocation_events,
    live_tensor_bytes,
    param_bytes_held,
    resting_params,
    state_optimizers,
)
from ddpfsdp.demos.result.step_record import CollectiveSpan, MemorySamples, RankStep, Span

MAX_MEMORY_SAMPLES = 400  # enough for a chart's width; peaks and troughs of each slice are kept


def _first_grad_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value if value.requires_grad else None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_grad_tensor(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        return _first_grad_tensor(list(value.values()))
    return None


class _BackwardEdge(torch.autograd.Function):
    """Identity whose backward marks the moment the gradient of a unit's input is ready.

    A hook on the input tensor itself would not do: that tensor is the previous unit's output, and
    FSDP1 registers the previous unit's pre-backward (its all-gather) on it first.
    """

    @staticmethod
    def forward(ctx, tensor, mark):
        ctx.mark = mark
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        ctx.mark()
        return grad, None


def _mark_input(args: tuple, mark: Any) -> tuple | None:
    """`args` with the first tensor needing a gradient passed through _BackwardEdge; None if none does."""
    for i, value in enumerate(args):
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return (*args[:i], _BackwardEdge.apply(value, mark), *args[i + 1:])
    return None


def _work_of(result: Any) -> Any:
    """The Work a c10d op returned ((tensors, work) or work), unboxed; None when there is none."""
    candidates = result if isinstance(result, (list, tuple)) else (result,)
    for item in candidates:
        if isinstance(item, torch.ScriptObject):
            try:
                return torch._C._distributed_c10d.Work.unbox(item)
            except Exception:  # noqa: BLE001
                return None
    return None


def completion_source(work: Any, cuda: bool) -> str:
    """How a collective's completion can be stamped: "future" (its Work's future calls back),
    "watcher" (a thread waits on a CPU Work that has no future: gloo's reduce-scatter, torch 2.13
    "Work::getFuture not implemented"), "stream" (a CUDA collective that returned no Work), or
    "none" (nothing says when it finished).

    "stream" is right for NCCL called with async_op=False: ProcessGroupNCCL runs it on the caller's
    current stream and returns no Work (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, `collective`:
    "in asyncOp=false [default] mode, we use currentStream as ncclStream"; seen on an H100 with torch
    2.11), so the next event recorded on that stream fires when it is done. FSDP1 issues its all-gathers, reduce-scatters
    and NO_SHARD all-reduces this way. A CUDA Work without a future runs on a stream of its own,
    which a host thread's clock cannot stamp: "none".
    """
    if work is None:
        return "stream" if cuda else "none"
    try:
        work.get_future()
    except Exception:  # noqa: BLE001 - a backend without futures
        return "none" if cuda else "watcher"
    return "future"


WATCH_JOIN_S = 10.0  # at the step's end, how long a Work without a future may still take to finish
P2P_OPS = ("send", "recv")
POLL_S = 0.0005  # how often a point-to-point Work is looked at until its caller's wait has returned


def _storage_of(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


@dataclass
class _Edged:
    """A span as recorded, on the step's raw clock (ns, or a CUDA event); `to_dict` turns it to seconds."""

    name: str
    phase: str
    unit: str | None
    start: Any
    end: Any
    seq_start: int
    seq_end: int


@dataclass
class _Issued:
    """A collective as issued; `completed` is stamped when it is seen done (by another thread, for some)."""

    collective: Collective
    issued: Any
    seq: int
    completed: Any = None


def _mark_when_done(work: Any, event: _Issued) -> None:
    """Wait on a CPU Work and stamp its completion (time.time_ns, the CPU timeline's clock). The
    stamp can trail the completion by the time this thread takes to get the GIL back."""
    try:
        work.wait()
    except Exception:  # noqa: BLE001 - a failed collective did not complete; its caller reports why
        return
    event.completed = time.time_ns()


def _mark_when_seen_done(work: Any, event: _Issued, stop: threading.Event) -> None:
    """Stamp a point-to-point Work's completion when its caller's own wait has returned, by looking at
    `is_completed()` (time.time_ns, the CPU timeline's clock), until `stop` is set.

    A second wait would not do: gloo's send and recv Works (ProcessGroupGloo's SendWork and RecvWork)
    wait on an unbound buffer that counts completions and takes one per wait (gloo's
    UnboundBuffer::waitSend and waitRecv), so a watcher's wait would take the caller's, and the
    caller would wait for ever. `is_completed()` turns true when the caller's wait returns: the moment
    what was received can be used."""
    while not stop.is_set():
        if work.is_completed():
            event.completed = time.time_ns()
            return
        time.sleep(POLL_S)


def downsample(samples: list[tuple[int, int]], limit: int = MAX_MEMORY_SAMPLES) -> list[tuple[int, int]]:
    """At most `limit` points; each slice of time keeps its lowest and highest sample, in order."""
    if len(samples) <= limit:
        return samples
    per = max(1, len(samples) * 2 // limit)
    kept: list[tuple[int, int]] = []
    for i in range(0, len(samples), per):
        chunk = samples[i:i + per]
        low = min(chunk, key=lambda s: s[1])
        high = max(chunk, key=lambda s: s[1])
        kept.extend(sorted({low, high}))
    return kept


class TimelineRecorder(CommCounter):
    """Counts collectives as CommCounter does, and records the step's timeline; read `to_dict()`.

    units: [(name, compute_module, outer_module)] in forward order; the outer module is the one
    whose hooks run around FSDP's own work (the FSDP1 wrapper; the module itself otherwise).
    """

    def __init__(self, device: Any, model: torch.nn.Module, units: list[tuple[str, Any, Any]],
                 optimizer: Any = None, hidden_bytes: int = 0) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.model = model
        self._resting = resting_params(model)
        self.units = units
        self.optimizer = optimizer
        self.hidden_bytes = hidden_bytes
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._handles: list[Any] = []
        self._watchers: list[threading.Thread] = []
        self._stop_polling = threading.Event()
        # output storage -> (output, event). By storage, not by tensor: a view of the output (DTensor's
        # to_local, an AsyncCollectiveTensor's view ops) is what is waited on, and it shares the storage;
        # the output is held here, so its storage cannot be reused while the collective is pending.
        self._functional: dict[int, tuple[torch.Tensor, _Issued]] = {}
        self.waits: list[tuple[Any, Any]] = []  # (start, end) of each wait on a functional collective
        self._open: dict[tuple[str, str], tuple[Any, int]] = {}
        self.spans: list[_Edged] = []
        self.events: list[_Issued] = []  # collectives, in issue order
        self.params: list[tuple[Any, int, str]] = []
        self.cuda_memory: list[tuple[Any, int]] = []
        self._profiler = None
        self._start: Any = None
        self._end: Any = None
        self._start_live_bytes = 0
        self._allocations: list[tuple[int, int]] = []

    # --- clock ---------------------------------------------------------------------------------

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.time_ns()

    def _stamp(self) -> tuple[Any, int]:
        with self._lock:
            return self._now(), next(self._seq)

    def _seconds(self, mark: Any) -> float | None:
        if mark is None:
            return None
        if self.cuda:
            return self._start.elapsed_time(mark) / 1000.0
        return (mark - self._start) / 1e9

    # --- marks ---------------------------------------------------------------------------------

    def begin(self, name: str, phase: str, unit: str | None = None) -> None:
        self._open[(name, phase)] = self._stamp()
        if self.cuda:
            self.cuda_memory.append((self._open[(name, phase)][0], torch.cuda.memory_allocated(self.device)))

    def end(self, name: str, phase: str, unit: str | None = None) -> None:
        opened = self._open.pop((name, phase), None)
        if opened is None:  # an edge that fired twice (a unit called twice): keep the first span
            return
        closed = self._stamp()
        self.spans.append(_Edged(name, phase, unit, opened[0], closed[0], opened[1], closed[1]))
        if self.cuda:
            self.cuda_memory.append((closed[0], torch.cuda.memory_allocated(self.device)))

    def sample_params(self, label: str) -> None:
        mark, _ = self._stamp()
        self.params.append((mark, param_bytes_held(self._resting, self.model), label))

    def before_backward(self, loss: torch.Tensor) -> None:
        """Mark the start of backward, and queue the mark of its compute end from inside it."""
        from torch.autograd import Variable

        self.begin("backward", "backward")

        def finish() -> None:
            # A unit whose inputs need no gradient (the embedding) has no edge after its backward:
            # it has computed by the time the engine runs callbacks.
            for name, phase in [key for key in self._open if key[1] == "backward" and key[0] != "backward"]:
                self.end(name, phase, name)
            self.end("backward", "backward")

        def queue_end(grad: torch.Tensor) -> torch.Tensor:
            Variable._execution_engine.queue_callback(finish)
            return grad

        if loss.requires_grad:
            loss.register_hook(queue_end)

    # --- hooks ---------------------------------------------------------------------------------

    def _install(self) -> None:
        for name, module, outer in self.units:
            self._handles += self._unit_hooks(name, module, outer)
        optimizer = state_optimizers(self.optimizer)[-1]  # zro: the inner optimizer runs the update
        if optimizer is not None and hasattr(optimizer, "register_step_pre_hook"):
            self._handles.append(optimizer.register_step_pre_hook(lambda *a: self.begin("optimizer", "optimizer")))
            self._handles.append(optimizer.register_step_post_hook(lambda *a: self.end("optimizer", "optimizer")))

    def _unit_hooks(self, name: str, module: torch.nn.Module, outer: torch.nn.Module) -> list[Any]:
        def backward_end() -> None:
            self.end(name, "backward", name)

        def backward_start(grad: torch.Tensor) -> torch.Tensor:
            self.begin(name, "backward", name)
            return grad

        def after_backward(grad: torch.Tensor) -> torch.Tensor:
            self.sample_params(f"{name} after backward")
            return grad

        def outer_pre(mod, args):
            tensor = _first_grad_tensor(args)
            if tensor is not None:
                tensor.register_hook(after_backward)

        def compute_pre(mod, args):
            self.begin(name, "forward", name)
            self.sample_params(f"{name} forward")
            return _mark_input(args, backward_end)

        def compute_post(mod, args, output):
            self.end(name, "forward", name)

        def outer_post(mod, args, output):
            self.sample_params(f"{name} after forward")
            tensor = _first_grad_tensor(output)
            if tensor is not None:
                tensor.register_hook(backward_start)

        return [
            outer.register_forward_pre_hook(outer_pre, prepend=True),
            module.register_forward_pre_hook(compute_pre),
            module.register_forward_hook(compute_post, prepend=True),
            outer.register_forward_hook(outer_post),
        ]

    # --- collectives ---------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if issued_by_dtensor(types):
            return NotImplemented
        kwargs = kwargs or {}
        collective = classify(func, args, kwargs)
        if collective is None:
            return self._maybe_wait(func, args, kwargs)
        self.count(collective, args, kwargs)
        issued, seq = self._stamp()
        event = _Issued(collective, issued, seq)
        self.events.append(event)
        if self.cuda:
            self.cuda_memory.append((issued, torch.cuda.memory_allocated(self.device)))
        result = func(*args, **kwargs)
        if func.namespace == "_c10d_functional" and isinstance(result, torch.Tensor):
            # A functional collective returns at once; it is complete when its tensor is waited on.
            self._functional[_storage_of(result)] = (result, event)
            return result
        self._watch_completion(_work_of(result), event)
        return result

    def _watch_completion(self, work: Any, event: _Issued) -> None:
        """Stamp `event.completed` when the collective is done, by whichever means it offers."""
        how = completion_source(work, self.cuda)
        if how == "future":
            def completed(fut):
                # CPU: gloo runs this on its own thread when the work is done. CUDA: it runs on
                # streams made to wait for the collective, so the event fires when it is done.
                event.completed = self._now()
                return None

            work.get_future().then(completed)
        elif how == "watcher" and event.collective.op in P2P_OPS:
            watcher = threading.Thread(target=_mark_when_seen_done, args=(work, event, self._stop_polling), daemon=True)
            watcher.start()
            self._watchers.append(watcher)
        elif how == "watcher":
            watcher = threading.Thread(target=_mark_when_done, args=(work, event), daemon=True)
            watcher.start()
            self._watchers.append(watcher)
        elif how == "stream":
            # On the current stream: an event recorded there now fires once the collective is done.
            event.completed = self._now()
        # "none": nothing says when it finished, so it stays not completed and
        # `timeline_records_every_collective` names it, rather than showing it done at issue.

    def _maybe_wait(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run a non-collective op. A `wait_tensor` is time the step spends blocked on a functional
        collective (recorded in `waits`, which is not compute), and completes the collective."""
        if not (func.namespace == "_c10d_functional" and func._schema.name.endswith("wait_tensor") and args):
            return func(*args, **kwargs)
        start = self._now()
        result = func(*args, **kwargs)
        end = self._now()
        self.waits.append((start, end))
        pending = self._functional.pop(_storage_of(args[0]), None) if isinstance(args[0], torch.Tensor) else None
        if pending is not None:
            pending[1].completed = end
        return result

    # --- context -------------------------------------------------------------------------------

    def __enter__(self) -> TimelineRecorder:
        self._install()
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self._start = self._now()
        else:
            from torch.profiler import ProfilerActivity, profile

            self._start_live_bytes = live_tensor_bytes("cpu") + self.hidden_bytes
            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profiler.__enter__()
            self._start = time.time_ns()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._end = self._now()
        give_up = time.monotonic() + WATCH_JOIN_S
        for watcher in self._watchers:  # the step has waited on its collectives; the watchers follow
            watcher.join(max(0.0, give_up - time.monotonic()))
        self._stop_polling.set()  # a send or recv its caller never waited on stays not completed
        self._watchers = []
        if self.cuda:
            torch.cuda.synchronize(self.device)
        elif self._profiler is not None:
            self._profiler.__exit__(*exc)
            self._allocations = _allocation_series(self._profiler) if exc[0] is None else []
            self._profiler = None

    def release(self) -> None:
        self._functional = {}
        self.model = None
        self._resting = []
        self.units = []
        self.optimizer = None

    def to_dict(self, rank: int) -> RankStep:
        """This rank's timeline, in seconds from the start of the step."""
        sec = self._seconds
        spans = [Span(name=s.name, phase=s.phase, unit=s.unit, start_s=sec(s.start), end_s=sec(s.end),
                      seq_start=s.seq_start, seq_end=s.seq_end)
                 for s in sorted(self.spans, key=lambda s: s.seq_start)]
        collectives = [CollectiveSpan(op=e.collective.op, bytes=e.collective.bytes,
                                      group_size=e.collective.group_size, group=e.collective.group,
                                      issued_s=sec(e.issued), completed_s=sec(e.completed), seq=e.seq)
                       for e in self.events]
        if self.cuda:
            memory = sorted((sec(mark), allocated) for mark, allocated in self.cuda_memory)
            kind = "cuda memory_allocated at each edge"
        else:
            memory = [((t - self._start) / 1e9, self._start_live_bytes + total) for t, total in self._allocations]
            memory = [(0.0, self._start_live_bytes), *memory]
            kind = "cpu live tensor bytes (profiler)"
        return RankStep(
            rank=rank,
            clock="cuda events" if self.cuda else "host",
            duration_s=sec(self._end),
            spans=spans,
            collectives=collectives,
            waits=[[sec(start), sec(end)] for start, end in self.waits],
            memory=MemorySamples(kind=kind, samples=[[t, b] for t, b in downsample(memory)]),
            params=[[sec(mark), held, label] for mark, held, label in self.params],
        )


def _allocation_series(prof: Any) -> list[tuple[int, int]]:
    """(time ns, bytes allocated above the level at the profiler's start) at every CPU allocation or free."""
    events = cpu_allocation_events(prof)
    if not events:
        return []
    baseline = events[0][1] - events[0][2]
    return [(t, total - baseline) for t, total, _, _ in events]
