"""Initialisation faults under FSDP2: an optimizer built before fully_shard, ranks built from different seeds.

fully_shard replaces each parameter of the module with a new one, a DTensor holding this rank's
shard of the tensor the rank had; it broadcasts nothing (FSDP1's sync_module_states did). An
optimizer built before it holds tensors the model no longer uses, and a model built from a
different seed on each rank becomes a stitch of different initialisations.
"""

from __future__ import annotations


from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.faults.collectives import FSDP_IMPORTS
from ddpfsdp.demos.faults.fault import Fault, FaultBlock, FaultContext, PhaseBlock, measured
from ddpfsdp.demos.faults.steps import mesh_for, train_step

OPTIMIZER_STEPS = 3
INIT_FEATURES = 8  # rows of the weight that fully_shard splits across ranks


# --- optimizer-before-shard ---------------------------------------------------------------------------


def run_optimizer_order(ctx: FaultContext) -> None:
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    mesh = mesh_for(ctx.group)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    if ctx.broken:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if not ctx.broken:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    held = optimizer.param_groups[0]["params"]
    ctx.measured["optimizer_tensors_in_model"] = sum(any(p is q for q in model.parameters()) for p in held)
    ctx.measured["optimizer_tensors"] = len(held)
    start = [p.detach().to_local().clone() for p in model.parameters()]
    batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    ctx.measured["losses"] = [round(float(train_step(model, optimizer, batch)), 6) for _ in range(OPTIMIZER_STEPS)]
    moved = [float((p.detach().to_local() - s).abs().max()) for p, s in zip(model.parameters(), start) if s.numel()]
    ctx.measured["largest_parameter_change"] = max(moved, default=0.0)


def _describe_optimizer(phase: PhaseBlock) -> list[str]:
    losses, moved = measured(phase, "losses"), measured(phase, "largest_parameter_change")
    held, total = measured(phase, "optimizer_tensors_in_model"), measured(phase, "optimizer_tensors")
    return [
        f"rank 0 loss over {OPTIMIZER_STEPS} steps on the same batch: {losses[0] if losses else None}",
        "largest change of any parameter per rank: " + ", ".join(f"rank {r} {m:.6f}" for r, m in enumerate(moved) if m is not None),
        f"rank 0's optimizer holds {held[0] if held else None} of its {total[0] if total else None} tensors among the model's parameters",
    ]


def _judge_optimizer(block: FaultBlock) -> list[Check]:
    broken, fixed = block.get("broken") or {}, block.get("fixed") or {}
    still = measured(broken, "largest_parameter_change")
    moved = measured(fixed, "largest_parameter_change")
    flat = all(bool(ls) and len(set(ls)) == 1 for ls in measured(broken, "losses"))
    falls = all(bool(ls) and ls[-1] < ls[0] for ls in measured(fixed, "losses"))
    passed = (len(still) >= 2 and all(m == 0.0 for m in still) and flat
              and len(moved) >= 2 and all(isinstance(m, float) and m > 0 for m in moved) and falls)
    return [Check(
        "optimizer_before_shard_trains_nothing",
        passed,
        f"largest parameter change per rank: broken {still}, fixed {moved}; "
        f"rank 0 losses: broken {measured(broken, 'losses')[:1]}, fixed {measured(fixed, 'losses')[:1]}",
        {"broken_change": still, "fixed_change": moved, "broken_losses": measured(broken, "losses"), "fixed_losses": measured(fixed, "losses")},
    )]


OPTIMIZER_BEFORE_SHARD = Fault(
    name="optimizer-before-shard",
    summary="an optimizer built on the parameters before fully_shard: the parameters never change, the loss stays flat",
    broken=f"an SGD optimizer is built on model.parameters(), then fully_shard wraps each layer and the root; "
           f"{OPTIMIZER_STEPS} steps on one batch",
    fixed="fully_shard first, then the optimizer on model.parameters()",
    cause="fully_shard replaces every parameter with a new sharded DTensor parameter; the optimizer built "
          "before holds the old tensors, which never get a gradient, so each step updates nothing.",
    fix="Apply fully_shard to the layers and the root first, then build the optimizer from model.parameters().",
    program=run_optimizer_order,
    claims={"optimizer_before_shard_trains_nothing": "broken: no parameter changes and the loss on one batch stays the same; fixed: parameters change and the loss falls"},
    judge=_judge_optimizer,
    describe=_describe_optimizer,
    imports=FSDP_IMPORTS,
)


# --- init-seeds --------------------------------------------------------------------------------------


def _ddp_checksums(ctx: FaultContext) -> tuple[float, float]:
    """The same per-rank seed under DDP: the weight's sum before and after DDP's construction."""
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(ctx.rank)
    replica = nn.Linear(INIT_FEATURES, INIT_FEATURES)
    before = float(replica.weight.detach().sum())
    model = DDP(replica, process_group=ctx.group)
    return before, float(model.module.weight.detach().sum())


def run_init_seeds(ctx: FaultContext) -> None:
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(ctx.rank if ctx.broken else 0)
    model = nn.Linear(INIT_FEATURES, INIT_FEATURES)
    fully_shard(model, mesh=mesh_for(ctx.group))
    full = model.weight.full_tensor().detach()
    torch.manual_seed(0)
    reference = nn.Linear(INIT_FEATURES, INIT_FEATURES).weight.detach()
    ctx.measured["rows_matching_seed_0"] = [i for i in range(INIT_FEATURES) if torch.equal(full[i], reference[i])]
    if ctx.broken:
        ctx.measured["ddp_sum_before"], ctx.measured["ddp_sum_after"] = _ddp_checksums(ctx)


def _describe_seeds(phase: PhaseBlock) -> list[str]:
    rows = measured(phase, "rows_matching_seed_0")
    lines = [f"FSDP2 weight rows equal to the seed-0 model's: {rows[0] if rows else None} of {INIT_FEATURES}"]
    before, after = measured(phase, "ddp_sum_before"), measured(phase, "ddp_sum_after")
    if any(v is not None for v in before):
        lines.append("DDP with the same per-rank seeds, weight sum per rank: before DDP() "
                     + ", ".join(f"rank {r} {v:.4f}" for r, v in enumerate(before))
                     + "; after " + ", ".join(f"rank {r} {v:.4f}" for r, v in enumerate(after)))
    return lines


def _judge_seeds(block: FaultBlock) -> list[Check]:
    broken, fixed = block.get("broken") or {}, block.get("fixed") or {}
    broken_rows, fixed_rows = measured(broken, "rows_matching_seed_0"), measured(fixed, "rows_matching_seed_0")
    before, after = measured(broken, "ddp_sum_before"), measured(broken, "ddp_sum_after")
    stitched = (len(broken_rows) >= 2 and all(isinstance(r, list) and len(r) < INIT_FEATURES for r in broken_rows)
                and len(fixed_rows) >= 2 and all(r == list(range(INIT_FEATURES)) for r in fixed_rows))
    ddp_hides = (len(before) >= 2 and None not in before and len(set(before)) == len(before)
                 and None not in after and len(set(after)) == 1)
    return [
        Check(
            "init_seeds_fsdp2_stitches_different_inits",
            stitched,
            f"weight rows equal to the seed-0 model's, as rank 0 gathered them: broken {broken_rows[:1]}, "
            f"fixed {fixed_rows[:1]} (of {INIT_FEATURES})",
            {"broken_rows": broken_rows, "fixed_rows": fixed_rows},
        ),
        Check(
            "init_seeds_ddp_broadcast_hides_it",
            ddp_hides,
            f"DDP with per-rank seeds, weight sum per rank: before DDP() {before}, after {after}",
            {"ddp_sum_before": before, "ddp_sum_after": after},
        ),
    ]


INIT_SEEDS = Fault(
    name="init-seeds",
    summary="ranks initialised with different seeds: DDP's broadcast hides it, FSDP2 keeps a stitched model",
    broken="each rank seeds torch with its rank, builds the model and applies fully_shard; the same seeds under DDP for contrast",
    fixed="every rank seeds torch with 0 before building the model, then fully_shard",
    cause="fully_shard keeps on each rank that rank's rows of the tensor it was given and broadcasts nothing, "
          "so a model built from a different seed per rank is stitched from different initialisations; "
          "DDP broadcasts rank 0's parameters at construction, which hides the same mistake.",
    fix="Seed every rank the same before building the model (or load rank 0's weights with "
        "set_model_state_dict(..., options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))).",
    program=run_init_seeds,
    claims={
        "init_seeds_fsdp2_stitches_different_inits": "broken: the FSDP2 weight, gathered, matches the seed-0 model only in rank 0's rows; fixed: in every row",
        "init_seeds_ddp_broadcast_hides_it": "the same per-rank seeds under DDP: the replicas differ before DDP() and are equal after it",
    },
    judge=_judge_seeds,
    describe=_describe_seeds,
    imports=(*FSDP_IMPORTS, "torch.nn.parallel"),
)

FAULTS = (OPTIMIZER_BEFORE_SHARD, INIT_SEEDS)
