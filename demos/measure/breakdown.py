"""What the peak of one step is made of, and where in the step it happens.

    with PeakBreakdown(model, optimizer, strategy="ddp", device=device, held=buckets) as breakdown:
        train_step()
    breakdown.to_dict()  # {"peak_breakdown": {category: bytes}, "peak_phase", "peak_module", ...}

torch's own trackers do the attribution, run on the same step as the project's peak measurement:
`FSDPMemTracker` for FSDP2 (sharded and unsharded params, all-gather and reduce-scatter buffers)
and `MemTracker` for every other model. Both are TorchDispatchModes in the private package
`torch.distributed._tools` (mem_tracker.py, fsdp2_mem_tracker.py), added in 2024 and so in
every torch this project supports (2.6 on); private means they may change, so they are imported when used and, if missing or
failing, the breakdown falls back to the project's own accounting and says so (`breakdown_source`).

A tracker counts a tensor from the moment it sees it. State created before the step is handed to
it: the model and optimizer (MemTracker.track_external; FSDPMemTracker reads them itself) and DDP's
gradient buckets (`held`: C++ tensors Python reaches only through the collectives that used them),
which MemTracker files as "Other" and this module names `ddp_buckets`.

The phase (forward, backward, optimizer) and the innermost module running are recorded when the
tracker's total for the run's device reaches a new high: the moment of peak as the tracker sees it.

Both trackers follow modules with ModTracker, which registers multi-grad hooks on the step's
tensors and drops their handles. A hook of register_multi_grad_hook's "all" mode holds the grad_fns
it watches, and sits on one of them: a cycle through C++ that gc cannot see, which keeps the step's
autograd graph, and through it the model's parameters (and DDP's reducer), alive after the run.
The handles are kept here and removed after the step, which breaks the cycle.
"""

from __future__ import annotations

from typing import Any, Iterable, TypedDict

import torch

from ddpfsdp.demos.measure.memory import state_optimizers
from ddpfsdp.demos.result.schema import PEAK_CATEGORY_NAMES

# torch's category names (the `value` of its _MemRefType / _FSDPRefType members) -> ours
TORCH_CATEGORIES = {
    "Parameter": "params",
    "Sharded Param": "params",
    "Unsharded Param": "unsharded_params",
    "Buffer": "buffers",
    "Gradient": "grads",
    "Sharded Grad": "grads",
    "Unsharded Grad": "grads",
    "Activation": "activations",
    "Temp": "temporaries",
    "All Gather": "all_gather",
    "Reduce Scatter": "reduce_scatter",
    "Optstate": "optimizer",
    "OptState": "optimizer",
    "Inputs": "inputs",
    "Other": "ddp_buckets",  # the only tensors handed to MemTracker as external are DDP's buckets
}

# Wrappers' attribute names that a module path carries but a reader does not need.
_WRAPPER_PARTS = ("module", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


def readable_module(fqn: str | None) -> str | None:
    """'DistributedDataParallel.module.blocks.0.mlp' -> 'blocks.0.mlp'; the root alone -> its class."""
    if not fqn:
        return None
    parts = fqn.split(".")
    root, rest = parts[0], [p for p in parts[1:] if p not in _WRAPPER_PARTS]
    return ".".join(rest) if rest else root


def _innermost(parents: Iterable[str]) -> str | None:
    names = [p for p in parents if p != "Global"]
    return max(names, key=lambda name: name.count("."), default=None)


def _storage_keys(tensors: Iterable[torch.Tensor]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors if isinstance(t, torch.Tensor)}


class PeakFields(TypedDict):
    """What the breakdown adds to a rank's memory in the result (result.RankMemory's fields of these names)."""

    peak_breakdown: dict[str, int] | None  # category -> bytes at the peak, in PEAK_CATEGORIES' order
    peak_phase: str | None
    peak_module: str | None
    tracker_peak: int | None  # the sum of the categories, as torch's tracker saw the peak
    breakdown_source: str


class PeakBreakdown:
    """Runs torch's memory tracker over one step and keeps the categories, phase and module of its peak."""

    def __init__(self, model: torch.nn.Module, optimizer: Any, *, strategy: str, device: Any,
                 held: Iterable[torch.Tensor] = ()) -> None:
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.device = torch.device(device)
        self.held = list(held)
        self.source: str | None = None
        self.error: str | None = None
        self.categories: dict[str, int] | None = None
        self.phase: str | None = None
        self.module: str | None = None
        self._tracker: Any = None
        self._where: dict[str, str | None] = {}
        self._hook_handles: list[Any] = []
        self._restore_hooks: Any = None

    def _make_tracker(self) -> tuple[Any, str]:
        from torch.distributed._tools.mem_tracker import MemTracker
        from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

        if any(isinstance(m, FullyShardedDataParallel) for m in self.model.modules()):
            # MemTracker hooks every parameter's gradient accumulation; FSDP1's original parameters
            # are views into its flat parameter, not leaves, and the hook would fail mid-step.
            raise NotImplementedError("torch's trackers do not follow FSDP1's flat parameters")

        if isinstance(self.model, FSDPModule):
            from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

            return FSDPMemTracker(self.model, self.optimizer), "torch FSDPMemTracker"
        tracker = MemTracker()
        tracker.track_external(self.model, *state_optimizers(self.optimizer))
        # Only buffers that are not model state: handing MemTracker a parameter as external
        # would re-file it as "Other".
        state = _storage_keys(self.model.parameters())
        buckets = [t for t in self.held if t.untyped_storage().data_ptr() not in state]
        if buckets:
            tracker.track_external(*buckets)
        return tracker, "torch MemTracker"

    def _watch_peak(self, tracker: Any) -> None:
        """Record the phase and module each time the tracker's total on our device reaches a new high."""
        original = tracker._update_peak_stats
        modules = tracker._mod_tracker
        where = self._where
        device_type = self.device.type

        def device_peak() -> int:
            return max((total for device, total in tracker._peak_mem.items() if device.type == device_type),
                       default=0)

        def update(peak_state: Any) -> None:
            before = device_peak()
            original(peak_state)
            if device_peak() > before:
                if tracker._in_opt:
                    where["phase"] = "optimizer"
                else:
                    where["phase"] = "backward" if modules.is_bw else "forward"
                where["module"] = _innermost(modules.parents)

        tracker._update_peak_stats = update

    def _keep_hook_handles(self) -> None:
        from torch.distributed._tools import mod_tracker

        original = mod_tracker.register_multi_grad_hook
        handles = self._hook_handles

        def register(*args: Any, **kwargs: Any) -> Any:
            handle = original(*args, **kwargs)
            handles.append(handle)
            return handle

        mod_tracker.register_multi_grad_hook = register

        def restore() -> None:
            mod_tracker.register_multi_grad_hook = original

        self._restore_hooks = restore

    def _drop_hook_handles(self) -> None:
        if self._restore_hooks is not None:
            self._restore_hooks()
            self._restore_hooks = None
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []

    def __enter__(self) -> PeakBreakdown:
        try:
            tracker, self.source = self._make_tracker()
            self._watch_peak(tracker)
            self._keep_hook_handles()
            tracker.__enter__()
        except NotImplementedError as exc:
            self._drop_hook_handles()
            self.error = str(exc)
            self.source = None
            return self
        except Exception as exc:  # noqa: BLE001 - a private tool that changed must not stop the run
            self._drop_hook_handles()
            self.error = f"torch's tracker could not start: {type(exc).__name__}: {exc}"
            self.source = None
            return self
        self._tracker = tracker
        return self

    def __exit__(self, *exc: Any) -> None:
        self._drop_hook_handles()
        tracker, self._tracker = self._tracker, None
        # The breakdown outlives the step in the result only: let the model, its buffers and the
        # tracker go, so a later run in the same process (compare) does not find them alive.
        self.model = self.optimizer = None
        self.held = []
        if tracker is None:
            return
        tracker.__exit__(*exc)
        del tracker._update_peak_stats  # the instance's wrapper, which refers back to the tracker
        self.phase = self._where.get("phase")
        self.module = readable_module(self._where.get("module"))
        if exc[0] is not None:
            return
        snapshot = tracker.get_tracker_snapshot("peak")
        per_device = [snap for device, snap in snapshot.items() if device.type == self.device.type]
        categories: dict[str, int] = {}
        for snap in per_device:
            for kind, nbytes in snap.items():
                name = TORCH_CATEGORIES.get(getattr(kind, "value", kind))
                if name is not None and nbytes:
                    categories[name] = categories.get(name, 0) + int(nbytes)
        self.categories = {name: categories[name] for name in PEAK_CATEGORY_NAMES if name in categories}

    def to_dict(self, *, peak_bytes: int | None = None, held: dict[str, int] | None = None,
                ddp_bucket_bytes: int = 0) -> PeakFields:
        """The result's fields. Without a tracker's figures, the project's own accounting: the model
        state held after the step and DDP's buckets, and the rest of the peak by difference."""
        if self.categories is not None:
            return PeakFields(peak_breakdown=self.categories, peak_phase=self.phase, peak_module=self.module,
                              tracker_peak=sum(self.categories.values()), breakdown_source=self.source)
        fallback: dict[str, int] = {}
        if held and peak_bytes is not None:
            for kind in ("params", "grads", "optimizer"):
                fallback[kind] = int(held.get(kind) or 0)
            if ddp_bucket_bytes:
                fallback["ddp_buckets"] = int(ddp_bucket_bytes)
            fallback["transient"] = max(0, peak_bytes - sum(fallback.values()))
        source = "project accounting: model state after the step, the rest of the peak by difference"
        if self.error:
            source += f" ({self.error})"
        return PeakFields(peak_breakdown=fallback or None, peak_phase=None, peak_module=None, tracker_peak=None,
                          breakdown_source=source)
