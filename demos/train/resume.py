"""Failures and checkpoints on real ranks: a sharded save on N ranks, and a second launch that resumes on M.

    ddpfsdp demo checkpoint-resume --procs 4 --resume-on 2
    ddpfsdp demo checkpoint-resume --procs 2 --strategy ddp --dir ./ckpt     # then again, --resume-on 4

One run is two launches through the one launcher (`checkpoint_folder.launches`): the first ("save") trains
`save_after` steps, saves the model and optimizer with torch.distributed.checkpoint (`dcp.save` of
`get_state_dict(model, optimizer)`: each rank writes its own items, FSDP2 its shards, DDP's replicas once
over the ranks), gathers the same state whole on rank 0 (`full_state_dict=True, cpu_offload=True`) and
writes it with torch.save beside it, trains `save_after` more steps without stopping (the uninterrupted
run), and writes the folder's manifest last. The second ("resume") is a new process group of M ranks: a
model built from another seed, `dcp.load` into its own `get_state_dict` and `set_state_dict`, the state
gathered whole again and compared entry by entry with the saved one, then the same steps the
uninterrupted run trained after the save. Every step trains on the same global batch whatever the world
(step k's samples split evenly over the ranks), so the losses can be compared; the resumed run reports
the last result, with every check (`claims.resume`).

This is not the `checkpoint` demo, which is activation checkpointing (recomputing a block's forward in
backward to save memory).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from ddpfsdp.demos.result.schema import CheckpointFile, CheckpointResume, DemoResult, StateComparison, StateDictMemory
from ddpfsdp.demos.train.spec import RunSpec

REFERENCE = "full-state-dict.pt"  # rank 0's torch.save of the gathered state, beside the sharded checkpoint
RESUME_SEED_OFFSET = 1  # the resumed model is built from another seed: what it holds after the load is the checkpoint's
SHOWN_ENTRIES = 5  # entry names a comparison lists


class TrainingState(TypedDict):
    """What a checkpoint holds: `get_state_dict(model, optimizer)`'s two dicts (tensors by name; the optimizer's
    `state` by parameter name and its `param_groups`)."""

    model: dict[str, object]
    optim: dict[str, object]


Entries = dict[str, object]  # a state flattened: "optim.state.<fqn>.exp_avg" -> its tensor


@dataclass
class _SaveFigures:
    """What one saving rank measured, gathered to rank 0."""

    rank: int
    save_s: float
    sharded_bytes: int | None  # rank 0's only
    full_bytes: int | None
    peak_kind: str | None


class _Run:
    """One launch's model, optimizer and batches on this rank."""

    def __init__(self, ctx: Any, spec: RunSpec, seed: int, global_batch: int) -> None:
        import torch

        from ddpfsdp.demos.parallel.parallelize import World, parallelize
        from ddpfsdp.demos.train.data import make_dataset
        from ddpfsdp.demos.train.models import build_model, count_params

        self.ctx, self.spec, self.global_batch = ctx, spec, global_batch
        torch.manual_seed(seed)
        model = build_model(spec.arch, spec.model, seed=seed, **spec.overrides)
        self.shape, self.params = model.shape, count_params(model)
        self.prepared = parallelize(model, spec, World(ctx.world_size), ctx.device)
        self.model, self.optimizer = self.prepared.model, self.prepared.optimizer
        # The data of the saving run's seed, whatever seed built the model: step k reads samples
        # [k G, (k + 1) G) of one dataset, and this rank its own slice of them.
        self.dataset = make_dataset(spec.arch, self.shape, seed=spec.seed, num_samples=global_batch * spec.steps)
        self.per_rank = global_batch // ctx.world_size

    def step(self, k: int) -> float:
        """Step k on every rank; the global batch's mean token loss, summed in float64 over the ranks so the
        figure itself does not depend on how the batch was split."""
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.utils.data import default_collate

        first = k * self.global_batch + self.ctx.rank * self.per_rank
        inputs, targets = (t.to(self.ctx.device) for t in
                           default_collate([self.dataset[i] for i in range(first, first + self.per_rank)]))
        logits = self.model(inputs)
        per_token = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                    reduction="none")
        per_token.mean().backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.stack([per_token.detach().double().sum(), torch.tensor(per_token.numel(), dtype=torch.float64,
                                                                             device=per_token.device)])
        dist.all_reduce(total)
        self.ctx.step(k, self.spec.steps, phase=self.spec.phase, loss=float(total[0] / total[1]))
        return float(total[0] / total[1])

    def state_dict(self, **options: Any) -> TrainingState:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        model, optimizer = get_state_dict(self.model, self.optimizer,
                                          options=StateDictOptions(**options) if options else None)
        return TrainingState(model=model, optim=optimizer)


def _timed_barrier_s(action: Any) -> float:
    """This rank's wall time of `action`, started together on every rank."""
    import torch.distributed as dist

    dist.barrier()
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _allocated(action: Any, measured: bool) -> tuple[Any, int | None, str | None]:
    """`action()`'s value and, where `measured`, the host bytes it allocated above what was held (the peak of the
    call): the project's CPU tracker, which a full state dict offloaded to the CPU lands in on a GPU run too.
    Only rank 0 measures: it is the rank a full state dict lands on, and the tracker walks every live object."""
    from ddpfsdp.demos.measure.memory import PeakMemory

    if not measured:
        return action(), None, None
    with PeakMemory("cpu") as peak:
        value = action()
    return value, peak.peak_bytes - peak.start_bytes, peak.peak_kind


def state_entries(state: object, prefix: str = "") -> Entries:
    """A nested state dict flattened to `model.<fqn>`, `optim.state.<fqn>.exp_avg`, ... -> value."""
    if isinstance(state, dict):
        out: Entries = {}
        for key, value in state.items():
            out.update(state_entries(value, f"{prefix}{key}."))
        return out
    if isinstance(state, list) and any(isinstance(v, dict) for v in state):
        out = {}
        for index, value in enumerate(state):
            out.update(state_entries(value, f"{prefix}{index}."))
        return out
    return {prefix.rstrip("."): state}


def compare_states(saved: TrainingState, resumed: TrainingState) -> StateComparison:
    """Every entry of two gathered state dicts: equal or not, and the largest difference of a tensor's."""
    import torch

    before, after = state_entries(saved), state_entries(resumed)
    missing = sorted(set(before) ^ set(after))
    differing, largest, equal = [], 0.0, 0
    for name in sorted(set(before) & set(after)):
        a, b = before[name], after[name]
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            same = a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
            if a.shape == b.shape and a.numel():
                largest = max(largest, float((a.double() - b.double()).abs().max()))
        else:
            same = a == b
        equal += bool(same)
        if not same:
            differing.append(name)
    return StateComparison(entries=len(before), equal=equal, max_abs_diff=largest, missing=missing[:SHOWN_ENTRIES],
                           differing=differing[:SHOWN_ENTRIES])


def _state_size(state: TrainingState) -> tuple[int, int]:
    """(bytes, tensors) of the whole state (a DTensor by its global shape): what a checkpoint must hold."""
    import torch

    tensors = [v for v in state_entries(state).values() if isinstance(v, torch.Tensor)]
    return sum(math.prod(t.shape) * t.element_size() for t in tensors), len(tensors)


def _row_bytes(state: TrainingState) -> int:
    """One dim-0 row of every tensor: how far an uneven shard may sit from 1/N of it."""
    import torch

    return sum(math.prod(t.shape[1:]) * t.element_size()
               for t in state_entries(state).values() if isinstance(t, torch.Tensor) and t.dim() > 0)


def run_checkpoint_resume(ctx: Any, spec: RunSpec) -> DemoResult | None:
    if spec.phase == "save":
        return _save(ctx, spec)
    if spec.phase == "resume":
        return _resume(ctx, spec)
    raise ValueError("checkpoint-resume runs as the launcher plans it, a save then a resume (its phase is unset)")


def _save(ctx: Any, spec: RunSpec) -> DemoResult | None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    folder = Path(spec.checkpoint_folder)
    global_batch = spec.batch_size * ctx.world_size
    ctx.log(f"checkpoint-resume: {spec.strategy} on {ctx.world_size} ranks trains {spec.save_after} steps, saves to "
            f"{folder}, trains {spec.save_after} more")
    run = _Run(ctx, spec, spec.seed, global_batch)
    before = [run.step(k) for k in range(spec.save_after)]
    state, sharded_bytes, kind = _allocated(run.state_dict, ctx.is_main)
    writer = dcp.FileSystemWriter(str(folder), overwrite=False)  # never over another checkpoint
    save_s = _timed_barrier_s(lambda: dcp.save(state, storage_writer=writer))
    full, full_bytes, _ = _allocated(lambda: run.state_dict(full_state_dict=True, cpu_offload=True), ctx.is_main)
    reference_s = None
    if ctx.is_main:
        started = time.perf_counter()
        torch.save(full, folder / REFERENCE)
        reference_s = time.perf_counter() - started
        state_bytes, state_tensors = _state_size(full)
        rows = _row_bytes(full)
    del full
    after = [run.step(k) for k in range(spec.save_after, 2 * spec.save_after)]
    figures = ctx.gather(_SaveFigures(ctx.rank, save_s, sharded_bytes, full_bytes, kind))
    dist.barrier()
    if not ctx.is_main:
        return None
    from ddpfsdp.demos.measure.checkpoint_files import rank_files

    written, metadata_bytes = rank_files(folder)
    by_rank = {w.rank: w for w in written}
    block = CheckpointResume(
        folder=str(folder), temporary=spec.dir is None, saved_world=ctx.world_size, global_batch=global_batch,
        save_after=spec.save_after, state_bytes=state_bytes, state_tensors=state_tensors, shard_row_bytes=rows,
        files=[CheckpointFile(rank=f.rank, items=by_rank[f.rank].items if f.rank in by_rank else 0,
                              data_bytes=by_rank[f.rank].data_bytes if f.rank in by_rank else 0,
                              file_bytes=by_rank[f.rank].file_bytes if f.rank in by_rank else 0,
                              largest_item_bytes=by_rank[f.rank].largest_item_bytes if f.rank in by_rank else 0,
                              save_s=f.save_s) for f in figures],
        metadata_bytes=metadata_bytes, write_s=max(f.save_s for f in figures),
        full_file_bytes=(folder / REFERENCE).stat().st_size, full_write_s=reference_s,
        memory=[StateDictMemory(rank=f.rank, sharded_bytes=f.sharded_bytes, full_bytes=f.full_bytes,
                                peak_kind=f.peak_kind) for f in figures if f.full_bytes is not None],
        losses_before=before, losses_uninterrupted=after)
    _write_manifest(folder, spec, ctx.world_size, global_batch, block)
    return _result(ctx, spec, block, run.params)


def _write_manifest(folder: Path, spec: RunSpec, world: int, global_batch: int, block: CheckpointResume) -> None:
    import torch

    from ddpfsdp.demos.train.checkpoint_folder import Manifest, shaping_options, write_manifest

    write_manifest(folder, Manifest(options=shaping_options(spec), world_size=world, global_batch=global_batch,
                                    saved=block.to_json(), torch=torch.__version__))


def _resume(ctx: Any, spec: RunSpec) -> DemoResult | None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    from ddpfsdp.demos.train.checkpoint_folder import differences, read_manifest

    folder = Path(spec.checkpoint_folder)
    manifest = read_manifest(folder)
    if manifest is None:
        raise ValueError(f"{folder} holds no checkpoint of this demo to resume from (no manifest): the save did not "
                         "finish")
    global_batch = spec.batch_size * ctx.world_size
    differ = differences(manifest, spec, global_batch)
    if differ:
        raise ValueError(f"the checkpoint in {folder} was saved with other options: {'; '.join(differ)}")
    ctx.log(f"checkpoint-resume: resuming on {ctx.world_size} ranks from {manifest.world_size} ranks' checkpoint")
    run = _Run(ctx, spec, spec.seed + RESUME_SEED_OFFSET, global_batch)
    state = run.state_dict()  # the shapes this world holds, optimizer state included, for dcp.load to fill

    def load() -> None:
        dcp.load(state, checkpoint_id=str(folder))
        set_state_dict(run.model, run.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])

    load_s = _timed_barrier_s(load)
    full = run.state_dict(full_state_dict=True, cpu_offload=True)
    compared = None
    if ctx.is_main:
        compared = compare_states(torch.load(folder / REFERENCE, weights_only=False), full)
    del full
    resumed = [run.step(k) for k in range(spec.save_after, 2 * spec.save_after)]
    slowest = ctx.gather(load_s)
    dist.barrier()
    if not ctx.is_main:
        return None
    from ddpfsdp.demos.result.schema import CheckpointResume as Block

    block = Block.from_json(manifest.saved)
    block.resumed_world, block.load_s, block.compared, block.losses_resumed = (ctx.world_size, max(slowest), compared,
                                                                               resumed)
    return _result(ctx, spec, block, run.params)


def _result(ctx: Any, spec: RunSpec, block: CheckpointResume, params: int) -> DemoResult:
    from ddpfsdp.demos.claims import resume as claims
    from ddpfsdp.demos.theory.checkpointing import checkpoint_figures

    theory = checkpoint_figures(params=params, gpus=block.saved_world, precision=spec.precision,
                                optimizer=spec.optimizer)
    checks = claims.resume_checks(block, theory, spec.strategy)
    config = {**spec.reported(), "params": params, "save_after": spec.save_after, "phase": spec.phase,
              "resume_on": spec.resume_on}
    losses = [*block.losses_before, *(block.losses_resumed or block.losses_uninterrupted)]
    return ctx.result("checkpoint-resume", config, checks, checkpoint_resume=block, loss=losses, theory=theory)
