"""Wrapping a model for data-parallel training: DDP, zro (ZeroRedundancyOptimizer), FSDP2 (`fully_shard`) and FSDP1.

The steps `parallel.parallelize` composes, with tensor parallelism before them: `shard` (FSDP: the
model's units, then its root), `wrap_ddp` (DDP and zro) and `build_optimizer`; `Prepared` holds
the result: the wrapped model and its optimizer, plus the facts a demo reports about the wrapping
(the FSDP units and the parameters each one all-gathers).

What each strategy does in a step:
  ddp    every rank holds everything; gradients are all-reduced in buckets during backward.
  zro    PyTorch's ZeroRedundancyOptimizer (calc's `zro`; not DeepSpeed's ZeRO-1, calc's `zero1`): DDP's
         all-reduce, but each rank keeps the optimizer state of the whole parameters it owns only,
         steps them, and broadcasts them as held.
  fsdp   parameters are sharded per unit and all-gathered just before the unit runs; gradients are
         reduce-scattered in backward, so each rank keeps and steps only its shard.
         full     = reshard after forward (ZeRO-3): all-gather again in backward;
         grad-op  = keep the unsharded parameters from forward until backward ends (SHARD_GRAD_OP:
                    sharded at rest, unlike DeepSpeed's ZeRO-2), saving the second all-gather;
         hybrid   = HSDP on a 2-D mesh (replicate x shard): full sharding inside a shard group,
                    then an all-reduce of the gradient shards across the replicas;
         no-shard = every rank holds everything, as DDP does.

Every rank must start from the same weights: FSDP shards what each rank holds without a broadcast
(`ddpfsdp.demos.train.models.build_model` is seeded per model, never per rank).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.train.spec import RunSpec

ROOT_UNIT = "<root>"


@dataclass
class Prepared:
    """A parallelized model, its optimizer, and what the parallelizing did."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    strategy: str
    device: torch.device
    world_size: int
    precision: str
    optimizer_name: str
    lr: float
    sharding: str | None = None  # fsdp only
    wrap: str | None = None  # fsdp only
    fsdp_api: int | None = None  # fsdp only
    mesh: Any = None  # the DeviceMesh FSDP2 / HSDP shards over
    units: list[str] = field(default_factory=list)  # FSDP unit names in forward order, root last
    unit_params: list[int] = field(default_factory=list)  # unsharded parameters each unit manages
    bucket_mb: float | None = None  # ddp / zro only
    dims: ParallelDims | None = None  # the run's parallel degrees
    two_d: Any = None  # tensor_parallel.TwoD of a --tp run
    context: Any = None  # context_parallel.ContextParallel of a --cp run
    facts: dict[str, int] = field(default_factory=dict)  # models.model_facts, read before FSDP sharded it
    optimizer_impl: str = "foreach"  # fused | foreach | for-loop: how the optimizer steps
    compiled: Any = None  # compiled.Compiled of a --compile run: the backend and what torch recorded
    experts: Any = None  # expert_parallel.ExpertParallel of an MoE run: its experts, mesh and groups

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's autocast: bf16 for DDP / zro in bf16-mixed, nothing otherwise.

        FSDP casts by itself (its mixed-precision policy), and fp32 / bf16 need no casting.
        """
        if self.strategy in ("ddp", "zro") and self.precision == "bf16-mixed":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def loss_context(self) -> contextlib.AbstractContextManager:
        """Where the loss and its backward run: a 2-D run's logits are split by vocabulary, so under
        `loss_parallel`; nothing otherwise."""
        return self.two_d.loss_context() if self.two_d is not None else contextlib.nullcontext()

    def describe(self) -> str:
        optimizer = ("AdamW" if self.optimizer_name == "adamw" else "SGD") + f" ({self.optimizer_impl})"
        if self.strategy == "ddp":
            what = f"DDP, {self.world_size} replicas, {self.bucket_mb:g} MB gradient buckets"
        elif self.strategy == "zro":
            what = (f"ZeroRedundancyOptimizer (zro) under DDP, {self.world_size} ranks, optimizer state "
                    f"sharded, {self.bucket_mb:g} MB buckets")
        else:
            api = "FSDP2 fully_shard" if self.fsdp_api == 2 else "FSDP1 FullyShardedDataParallel"
            # the run's degrees by name: FSDP's own mesh is only its data-parallel part ((2,) of dp 2 x tp 2)
            shape = self.dims.describe() if self.dims is not None else tuple(self.mesh.shape) if self.mesh is not None else None
            mesh = f", mesh {shape}" if shape is not None else ""
            units = f"{len(self.units)} unit{'s' if len(self.units) != 1 else ''}"
            what = f"{api}, sharding {self.sharding}, wrap {self.wrap}: {units}{mesh}"
        tensor_parallel = f"; {self.two_d.describe()}" if self.two_d is not None else ""
        context = f"; {self.context.describe()}" if self.context is not None else ""
        compiled = f"; {self.compiled.describe()}" if self.compiled is not None else ""
        experts = f"; {self.experts.describe()}" if self.experts is not None else ""
        return (f"{what}; precision {self.precision}; {optimizer} lr {self.lr:g}{tensor_parallel}{context}{compiled}"
                f"{experts}")


def shard(model: nn.Module, run: RunSpec, device: torch.device, dims: ParallelDims, mesh: Any,
          ignored: set[nn.Parameter] | None = None) -> tuple[nn.Module, Any, list[str], list[int]]:
    """FSDP2 or FSDP1 over `run`'s units: (wrapped model, the mesh it shards over, unit names, parameters
    per unit). `mesh` is the run's world mesh (`ParallelDims.build_mesh`); FSDP takes its data-parallel part.
    FSDP2 leaves the `ignored` parameters as they are (an MoE's experts, held whole by expert parallelism)."""
    sharding = run.sharding
    unit_modules = _unit_modules(model, run.wrap)
    fsdp_mesh = dims.fsdp_mesh(mesh)
    if run.fsdp_api == 2:
        if run.prefetch == "off":
            raise ValueError("FSDP2 always prefetches the next unit in backward (torch has no switch for it); "
                             "prefetch 'off' needs FSDP1 (fsdp_api 1)")
        units, unit_params = _unit_report(model, unit_modules, ignored or set())
        wrapped = _wrap_fsdp2(model, unit_modules, fsdp_mesh, sharding, run.precision, ignored)
        if run.prefetch == "forward":
            _forward_prefetch_fsdp2(model, unit_modules)
        return wrapped, fsdp_mesh, units, unit_params
    # FSDP1 takes a mesh only for its hybrid strategies; otherwise it shards over the default group.
    fsdp1_mesh = fsdp_mesh if dims.hybrid else None
    wrapped = _wrap_fsdp1(model, device, run.wrap, sharding, run.precision, fsdp1_mesh, run.prefetch)
    return (wrapped, fsdp1_mesh, *_fsdp1_unit_report(wrapped))


# Devices torch has fused AdamW and SGD kernels for, of those a demo runs on: CUDA, and the CPU since
# torch 2.4 (torch/utils/_foreach_utils.py, _get_fused_kernels_supported_devices). torch itself defaults to
# foreach on CUDA and to the for-loop on the CPU (optimizer.py, _default_to_fused_or_foreach: fused only
# when asked for), so a run that leaves the choice to torch is not the fastest it could be.
FUSED_DEVICES = ("cuda", "cpu")
IMPL_FLAGS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False, "fused": False}}


def fused_unsupported(run: RunSpec) -> str | None:
    """Why torch has no fused step for `run`'s parameters, or None where it has one: DTensor (FSDP2's
    shards) registers sharding strategies for the fused Adam and AdamW ops but not for fused SGD
    (torch/distributed/tensor/_ops/_pointwise_ops.py)."""
    if run.optimizer == "sgd" and run.strategy == "fsdp" and run.fsdp_api == 2:
        return "DTensor has no sharding strategy for the fused SGD op (aten._fused_sgd_) that FSDP2's shards need"
    return None


def optimizer_impl(run: RunSpec, device: torch.device) -> str:
    """The implementation `run`'s optimizer steps with on `device`: its own choice, or for auto fused
    where torch has the kernel for these parameters and foreach elsewhere."""
    if run.optimizer_impl != "auto":
        return run.optimizer_impl
    fused = torch.device(device).type in FUSED_DEVICES and fused_unsupported(run) is None
    return "fused" if fused else "foreach"


def build_optimizer(run: RunSpec, wrapped: nn.Module, impl: str = "foreach") -> torch.optim.Optimizer:
    """`run`'s optimizer over the wrapped model's parameters, stepping with `impl` (fused, foreach or
    for-loop); zro's (ZeroRedundancyOptimizer) shards its state over the ranks."""
    flags = IMPL_FLAGS[impl]
    if run.strategy == "zro":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=_optimizer_class(run.optimizer),
                                       lr=run.lr, **flags)
    return _optimizer_class(run.optimizer)(param_groups(wrapped), lr=run.lr, **flags)


def param_groups(wrapped: nn.Module) -> list[dict[str, list[nn.Parameter]]]:
    """The parameters in one group per kind of tensor: a fused or foreach step takes one kind per call
    ("got mixed torch.Tensor and DTensor"), and FSDP2's DTensor shards may sit beside parameters it leaves
    whole (an MoE's experts, `parallel.expert_parallel`)."""
    from torch.distributed.tensor import DTensor

    kinds: dict[bool, list[nn.Parameter]] = {}
    for param in wrapped.parameters():
        kinds.setdefault(isinstance(param, DTensor), []).append(param)
    return [{"params": params} for params in kinds.values()]


def _optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    # Plain SGD (no momentum) keeps no optimizer state, as the analytic model's "sgd" assumes.
    return torch.optim.AdamW if name == "adamw" else torch.optim.SGD


def _optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    return _optimizer_class(name)(params, lr=lr)


def wrap_ddp(model: nn.Module, device: torch.device, bucket_mb: float | None, init_sync: bool = True) -> nn.Module:
    """DDP over the default group, `bucket_mb` per gradient bucket, None: torch's default (zro trains
    under DDP too).

    `init_sync`: DDP's check of parameter shapes across ranks and its broadcast of rank 0's weights at
    wrap time; a simulated world has one rank and weights without data, so it turns them off."""
    from torch.nn.parallel import DistributedDataParallel

    # A model already there stays as it is: moving fake tensors to their own device fails.
    if any(p.device != device for p in model.parameters()):
        model = model.to(device)
    # One device per process: device_ids names it on CUDA and must be left out on CPU.
    device_ids = None
    if device.type == "cuda":
        device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
    return DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=bucket_mb, init_sync=init_sync)


def _unit_modules(model: nn.Module, wrap: str) -> list[nn.Module]:
    """Modules to shard, innermost first, without the root (which is always sharded last)."""
    if wrap == "model":
        return []
    units = list(model.units())
    if wrap == "layer":
        return [*model.layers(), *units]
    return units


def _unit_report(model: nn.Module, unit_modules: list[nn.Module],
                 ignored: set[nn.Parameter] = frozenset()) -> tuple[list[str], list[int]]:
    """Unit names in forward order (root last) and the parameters each one manages itself.

    A parameter belongs to the innermost unit that contains it, as in FSDP; the root keeps what
    no unit claims.
    """
    chosen = {id(m) for m in unit_modules}
    owner: dict[int, str] = {}
    order: list[str] = []
    for name, module in model.named_modules():  # pre-order: outer units before inner ones
        if id(module) in chosen:
            order.append(name)
            for p in module.parameters():
                owner[id(p)] = name  # later (inner) units overwrite
    counts = dict.fromkeys(order, 0)
    counts[ROOT_UNIT] = 0
    for p in model.parameters():
        if p not in ignored:
            counts[owner.get(id(p), ROOT_UNIT)] += p.numel()
    names = [*order, ROOT_UNIT]
    return names, [counts[n] for n in names]


def _wrap_fsdp2(model: nn.Module, unit_modules: list[nn.Module], mesh, sharding: str, precision: str,
                ignored: set[nn.Parameter] | None = None) -> nn.Module:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    reshard = sharding in ("full", "hybrid")
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if precision == "bf16-mixed" else MixedPrecisionPolicy())
    for module in unit_modules:  # innermost first: a unit must be sharded before the unit around it
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy, ignored_params=ignored)
    # The root is left to FSDP's default (None): it keeps its parameters after forward, since backward
    # needs them first thing, so resharding them would only buy an immediate second all-gather.
    fully_shard(model, mesh=mesh, reshard_after_forward=None if reshard else False, mp_policy=policy,
                ignored_params=ignored)
    return model


def _forward_prefetch_fsdp2(model: nn.Module, unit_modules: list[nn.Module]) -> None:
    """Each unit issues the next unit's all-gather from its own pre-forward, before it computes."""
    chosen = {id(m) for m in unit_modules}
    in_forward_order = [m for m in model.modules() if id(m) in chosen]
    for current, following in zip(in_forward_order, in_forward_order[1:]):
        current.set_modules_to_forward_prefetch([following])


def _wrap_fsdp1(model: nn.Module, device: torch.device, wrap: str, sharding: str, precision: str, mesh,
                prefetch: str = "default") -> nn.Module:
    from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    classes: set[type[nn.Module]] = set()
    if wrap in ("block", "layer"):
        classes |= set(model.unit_classes)
    if wrap == "layer":
        classes |= set(model.layer_classes)
    strategy = {
        "full": ShardingStrategy.FULL_SHARD,
        "grad-op": ShardingStrategy.SHARD_GRAD_OP,
        "hybrid": ShardingStrategy.HYBRID_SHARD,
        "no-shard": ShardingStrategy.NO_SHARD,
    }[sharding]
    mixed = (MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
             if precision == "bf16-mixed" else None)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    # FSDP1 looks for an accelerator unless told the device: naming the CPU (with the default gloo
    # group) is what lets it run on CPU processes; on CUDA it moves each unit to the GPU as it wraps.
    return FSDP(
        model,
        auto_wrap_policy=ModuleWrapPolicy(classes) if classes else None,
        sharding_strategy=strategy,
        backward_prefetch=None if prefetch == "off" else BackwardPrefetch.BACKWARD_PRE,
        forward_prefetch=prefetch == "forward",
        mixed_precision=mixed,
        device_id=device,
        device_mesh=mesh,
        use_orig_params=True,
    )


def _fsdp1_unit_report(wrapped: nn.Module) -> tuple[list[str], list[int]]:
    """Names and managed parameter counts of FSDP1's instances, read from their flat parameters."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    wrapper = "_fsdp_wrapped_module."
    names, counts = [], []
    for name, module in wrapped.named_modules():
        if not isinstance(module, FSDP):
            continue
        flat = module._flat_param  # the one flattened parameter this instance all-gathers
        numel = sum(flat._numels) if flat is not None else 0
        clean = name.replace(wrapper, "").removesuffix("._fsdp_wrapped_module")
        names.append(clean or ROOT_UNIT)
        counts.append(numel)
    # named_modules lists the root first; report it last, as for FSDP2.
    return [*names[1:], names[0]], [*counts[1:], counts[0]]


def timeline_units(model: torch.nn.Module, prepared: Prepared) -> list[tuple[str, nn.Module, nn.Module]]:
    """(name, compute module, outer module) for every unit the step's timeline follows.

    FSDP: its units but the root (the root spans the whole model, so it is followed only when it is
    the one unit); DDP and zro: the model's
    blocks with its entry and head, the same modules FSDP would shard with --wrap block.
    """
    if prepared.strategy == "fsdp":
        names = [n for n in prepared.units if n != ROOT_UNIT]
        if not names:  # --wrap model: the root is the one unit; its edges are the model's own
            outer = prepared.model
            return [(ROOT_UNIT, getattr(outer, "_fsdp_wrapped_module", outer), outer)]
    else:
        chosen = {id(m) for m in model.units()}
        names = [n for n, m in model.named_modules() if id(m) in chosen]
    outer_of: dict[int, Any] = {}
    if prepared.strategy == "fsdp" and prepared.fsdp_api == 1:
        for wrapper in prepared.model.modules():
            inner = getattr(wrapper, "_fsdp_wrapped_module", None)
            if inner is not None:
                outer_of[id(inner)] = wrapper
    units = []
    for name in names:
        module = model.get_submodule(name)
        inner = getattr(module, "_fsdp_wrapped_module", None)  # FSDP1 wrapped it in place
        if inner is not None:
            units.append((name, inner, module))
        else:
            units.append((name, module, outer_of.get(id(module), module)))
    return units
