"""The claims a checkpoint-resume run bears out: a sharded checkpoint is 1/N of the state per rank, it loads
on another world exactly, training goes on as if it had never stopped, and a full state dict costs rank 0
the whole state.

Pure functions of numbers (the run's `schema.CheckpointResume` block and the analytic model's
`checkpoint` figures), so a test can hand them broken numbers and watch them fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddpfsdp.demos.base.units import format_iec
from ddpfsdp.demos.claims.training import LOSS_RTOL_FP32
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import CheckpointFile, CheckpointResume, StateComparison, StateDictMemory

COUNTER_BYTES = 8  # the most a scalar optimizer step counter weighs (the analytic model leaves them out)
FULL_SHARE = 0.9  # of the whole state, rank 0 must allocate at least this for a full state dict


def checkpoint_bytes_match_theory(files: Sequence[CheckpointFile | Mapping[str, Any]], state_bytes: int,
                                  state_tensors: int, theory_total_bytes: int, strategy: str,
                                  row_bytes: int) -> Check:
    """The ranks wrote the state once in all (the data of every item, summed over the ranks, is the state's
    bytes, which are the analytic model's but for the step counters), and each rank about 1/N of it.

    How far a rank may sit from 1/N, from how the items are spread: FSDP2 writes each rank's shard of every
    tensor, and a dim-0 split that does not come out even leaves a rank one row more or less of each
    (`row_bytes`: a row of every tensor); DDP's ranks hold whole replicas, and the save planner keeps each
    duplicated item on the rank whose plan is smallest so far (torch 2.13,
    checkpoint/_dedup_save_plans.py), a greedy spread that leaves no rank further from the mean than the
    largest item. The step counters are replicated under both, written once, on whichever rank.
    """
    files = [CheckpointFile.from_json(f) for f in files]
    world = len(files)
    data = [f.data_bytes or 0 for f in files]
    total = sum(data)
    counters = COUNTER_BYTES * state_tensors
    largest = max((f.largest_item_bytes or 0 for f in files), default=0)
    allowance = (row_bytes if strategy == "fsdp" else largest) + counters
    mean = total / world if world else 0.0
    misses = []
    if total != state_bytes:
        misses.append(f"the ranks wrote {total:,} B of data for a state of {state_bytes:,} B")
    if abs(state_bytes - theory_total_bytes) > counters:
        misses.append(f"the state is {state_bytes:,} B against the analytic model's {theory_total_bytes:,} B")
    far = [f"rank {f.rank} {format_iec(d)}" for f, d in zip(files, data) if abs(d - mean) > allowance]
    if far:
        misses.append(f"further than {format_iec(allowance)} from 1/{world}: {', '.join(far)}")
    if not files:
        misses.append("no rank's files were read")
    spread = "its shards" if strategy == "fsdp" else "whole tensors, each written by one rank"
    detail = (f"{world} ranks wrote {', '.join(format_iec(d) for d in data)} of data ({spread}): "
              f"{format_iec(total)} in all, the state measured before the save {format_iec(state_bytes)}; the "
              f"analytic model's checkpoint {format_iec(theory_total_bytes)} (parameters + optimizer state, no "
              f"gradients), {format_iec(theory_total_bytes / world if world else 0)} per rank; allowed "
              f"{format_iec(allowance)} from 1/{world} per rank")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("checkpoint_bytes_match_theory", not misses, detail,
                 {"data_bytes": data, "state_bytes": state_bytes, "theory_bytes": theory_total_bytes,
                  "allowance_bytes": allowance})


def resumed_state_equals_saved(compared: StateComparison | Mapping[str, Any] | None, saved_world: int,
                               resumed_world: int) -> Check:
    """Every parameter and optimizer entry after the resume, gathered whole, equals the one gathered before the
    save: a sharded checkpoint is resharded on load, not tied to its world."""
    compared = StateComparison() if compared is None else StateComparison.from_json(compared)
    entries, equal = compared.entries or 0, compared.equal or 0
    passed = entries > 0 and equal == entries and not compared.missing and compared.max_abs_diff == 0
    detail = (f"saved on {saved_world} ranks, loaded on {resumed_world}: {equal} of {entries} entries (parameters, "
              f"Adam's moments and steps, param_groups) equal, largest difference {compared.max_abs_diff}")
    if compared.missing:
        detail += f"; on one side only: {', '.join(compared.missing)}"
    if compared.differing:
        detail += f"; differing: {', '.join(compared.differing)}"
    return Check("resumed_state_equals_saved", passed, detail,
                 {"entries": entries, "equal": equal, "max_abs_diff": compared.max_abs_diff})


def resumed_loss_matches_uninterrupted(uninterrupted: Sequence[float], resumed: Sequence[float], saved_world: int,
                                       resumed_world: int) -> Check:
    """The resumed ranks' losses are those of the run that went on without stopping: bit for bit on the same
    world (the same sums in the same order), and to fp32 rounding on another, where each rank's share of
    the batch and the order of the gradients' sums change (the tolerance `losses_agree` holds strategies to)."""
    same_world = saved_world == resumed_world
    rtol = 0.0 if same_world else LOSS_RTOL_FP32
    pairs = list(zip(uninterrupted, resumed))
    worst = max((abs(a - b) / abs(a) if a else abs(b) for a, b in pairs), default=None)
    identical = bool(pairs) and all(a == b for a, b in pairs)
    passed = bool(pairs) and len(uninterrupted) == len(resumed) and worst is not None and worst <= rtol
    shown = ", ".join(f"{a:.7f}/{b:.7f}" for a, b in pairs)
    detail = (f"after the save, uninterrupted on {saved_world} ranks / resumed on {resumed_world}: {shown}; "
              + ("bit-identical" if identical else f"largest relative difference {worst:.1e}" if worst is not None
                 else "nothing to compare")
              + (" (the same world: bit for bit required)" if same_world else f" (allowed {rtol:g}: another world "
                 "sums the batch and the gradients in another order)"))
    if len(uninterrupted) != len(resumed):
        detail += f"; {len(resumed)} resumed steps for {len(uninterrupted)} uninterrupted"
    return Check("resumed_loss_matches_uninterrupted", passed, detail,
                 {"uninterrupted": list(uninterrupted), "resumed": list(resumed), "bit_identical": identical,
                  "max_rel_diff": worst, "rtol": rtol})


def full_state_dict_gathers_on_rank0(memory: Sequence[StateDictMemory | Mapping[str, Any]], state_bytes: int,
                                     world: int) -> Check:
    """Under FSDP a full state dict (full_state_dict=True, cpu_offload=True) makes the whole state on rank 0: it
    allocates at least FULL_SHARE of it, where the sharded one allocates under 1/N of it (its entries are
    the shards the rank holds already)."""
    memory = [StateDictMemory.from_json(m) for m in memory]
    rank0 = next((m for m in memory if m.rank == 0), None)
    full = rank0.full_bytes if rank0 else None
    sharded = rank0.sharded_bytes if rank0 else None
    misses = []
    if full is None or full < FULL_SHARE * state_bytes:
        misses.append(f"the full one allocated {format_iec(full)}, under {FULL_SHARE:.0%} of the state")
    if sharded is None or not world or sharded >= state_bytes / world:
        misses.append(f"the sharded one allocated {format_iec(sharded)}, not under 1/{world} of the state")
    detail = (f"rank 0 allocated {format_iec(sharded)} building the sharded state dict and {format_iec(full)} "
              f"building the full one (cpu_offload: only rank 0 keeps it, in host memory), for a state of "
              f"{format_iec(state_bytes)} over {world} ranks")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("full_state_dict_gathers_on_rank0", not misses, detail,
                 {"state_bytes": state_bytes, "sharded_bytes": sharded, "full_bytes": full, "world": world})


def resume_checks(block: CheckpointResume, theory: Mapping[str, Any], strategy: str) -> list[Check]:
    """The save's checks, and once the run has resumed, the resume's."""
    checks = [
        checkpoint_bytes_match_theory(block.files, block.state_bytes or 0, block.state_tensors or 0,
                                      theory["total_bytes"], strategy, block.shard_row_bytes or 0),
    ]
    if strategy == "fsdp":  # a DDP rank holds the whole state already: its full state dict is its own tensors
        checks.append(full_state_dict_gathers_on_rank0(block.memory, block.state_bytes or 0, block.saved_world or 0))
    if block.resumed_world is not None:
        checks += [resumed_state_equals_saved(block.compared, block.saved_world, block.resumed_world),
                   resumed_loss_matches_uninterrupted(block.losses_uninterrupted, block.losses_resumed,
                                                      block.saved_world, block.resumed_world)]
    return checks
