"""DistributedSampler on real ranks: which samples each rank's DataLoader yields, epoch by epoch.

Every rank builds its own DataLoader over the same dataset of `--dataset-size` samples whose values
are their indices, so what a rank loads is exactly which samples it trains on. Rank 0 gathers them:
  - with a DistributedSampler and set_epoch(e): disjoint shards, a new order every epoch;
  - without set_epoch: the same order every epoch (the classic bug: every epoch repeats epoch 0);
  - a dataset that does not divide by the world size: padded by repeating samples, or trimmed
    with drop_last;
  - no sampler at all: every rank loads the whole dataset, so N ranks train N times on the same data.
"""

from __future__ import annotations

import math
from typing import Any

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, SEED
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import DemoResult

OPTIONS = [
    click.Option(["--dataset-size"], type=click.IntRange(4, 10_000), default=10, show_default=True,
                 help="Samples in the dataset."),
    click.Option(["--epochs"], type=click.IntRange(2, 20), default=3, show_default=True,
                 help="Epochs to iterate (at least 2, to see whether the order changes)."),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=2, show_default=True,
                 help="DataLoader batch size per rank."),
    click.Option(["--shuffle/--no-shuffle"], default=True, show_default=True,
                 help="Shuffle inside DistributedSampler (set_epoch only matters when it shuffles)."),
    click.Option(["--drop-last/--no-drop-last"], default=False, show_default=True,
                 help="Trim the tail instead of padding when the dataset does not divide by the world size."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Sampler seed (same on every rank)."),
]


def _loaded(dataset_size: int, batch_size: int, sampler: Any = None, epoch: int | None = None,
            shuffle: bool = False, seed: int = 0) -> list[int]:
    """The sample indices a DataLoader yields for one epoch, in order."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.arange(dataset_size))
    if sampler is not None and epoch is not None:
        sampler.set_epoch(epoch)
    if sampler is None:
        # Without a sampler, ranks that share a seed shuffle identically, as they would in a script
        # that seeds every process the same way.
        generator = torch.Generator().manual_seed(seed)
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator)
    else:
        loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    return [int(i) for (batch,) in loader for i in batch]


def _sampler(dataset_size: int, ctx: Any, shuffle: bool, seed: int, drop_last: bool) -> Any:
    import torch
    from torch.utils.data import DistributedSampler, TensorDataset

    dataset = TensorDataset(torch.arange(dataset_size))
    return DistributedSampler(dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=shuffle,
                              seed=seed, drop_last=drop_last)


def sizes_for(dataset_size: int, world_size: int) -> tuple[int, int]:
    """(an evenly dividing size, an unevenly dividing size) close to the one asked for."""
    remainder = dataset_size % world_size
    even = dataset_size if remainder == 0 else dataset_size + world_size - remainder
    uneven = dataset_size if remainder else dataset_size + 1
    return even, uneven


def run(ctx: Any, *, dataset_size: int, epochs: int, batch_size: int, shuffle: bool, drop_last: bool,
        seed: int) -> DemoResult | None:
    even_size, uneven_size = sizes_for(dataset_size, ctx.world_size)

    with_epoch_sampler = _sampler(dataset_size, ctx, shuffle, seed, drop_last)
    without_epoch_sampler = _sampler(dataset_size, ctx, shuffle, seed, drop_last)
    with_set_epoch, without_set_epoch = [], []
    for epoch in range(epochs):
        ctx.step(epoch, epochs, phase="epoch")
        with_set_epoch.append(_loaded(dataset_size, batch_size, with_epoch_sampler, epoch))
        without_set_epoch.append(_loaded(dataset_size, batch_size, without_epoch_sampler))
    mine = {
        "with_set_epoch": with_set_epoch,
        "without_set_epoch": without_set_epoch,
        "even": _loaded(even_size, batch_size, _sampler(even_size, ctx, shuffle, seed, False), 0),
        "padded": _loaded(uneven_size, batch_size, _sampler(uneven_size, ctx, shuffle, seed, False), 0),
        "dropped": _loaded(uneven_size, batch_size, _sampler(uneven_size, ctx, shuffle, seed, True), 0),
        "no_sampler": _loaded(dataset_size, batch_size, None, shuffle=shuffle, seed=seed),
    }
    gathered = ctx.gather(mine)
    if not ctx.is_main:
        return None

    ranks = range(ctx.world_size)
    # epoch -> rank -> indices
    with_by_epoch = [[gathered[r]["with_set_epoch"][e] for r in ranks] for e in range(epochs)]
    without_by_epoch = [[gathered[r]["without_set_epoch"][e] for r in ranks] for e in range(epochs)]
    even = [gathered[r]["even"] for r in ranks]
    padded = [gathered[r]["padded"] for r in ranks]
    dropped = [gathered[r]["dropped"] for r in ranks]
    no_sampler = [gathered[r]["no_sampler"] for r in ranks]

    _log_view(ctx, dataset_size, shuffle, seed, drop_last, with_by_epoch, without_by_epoch,
              even_size, even, uneven_size, padded, dropped, no_sampler)

    checks = [
        check_disjoint_and_covering(even, even_size),
        check_set_epoch_reshuffles(without_by_epoch, with_by_epoch),
        check_pads_or_drops(uneven_size, ctx.world_size, padded, dropped),
        check_no_sampler_duplicates(no_sampler, dataset_size),
    ]
    return ctx.result(
        "sampler",
        {"dataset_size": dataset_size, "epochs": epochs, "batch_size": batch_size, "shuffle": shuffle,
         "drop_last": drop_last, "seed": seed, "even_size": even_size, "uneven_size": uneven_size},
        checks,
        indices={
            "with_set_epoch": with_by_epoch,
            "without_set_epoch": without_by_epoch,
            "even": even,
            "padded": padded,
            "dropped": dropped,
            "no_sampler": no_sampler,
        },
        samples_per_rank_per_epoch={
            "with_sampler": len(with_by_epoch[0][0]),
            "without_sampler": len(no_sampler[0]),
        },
    )


def _log_view(ctx, dataset_size, shuffle, seed, drop_last, with_by_epoch, without_by_epoch, even_size,
              even, uneven_size, padded, dropped, no_sampler) -> None:
    world = len(even)

    def show(title: str, by_rank: list[list[int]]) -> None:
        ctx.log(title)
        for rank, indices in enumerate(by_rank):
            ctx.log(f"  rank {rank} loads {indices}")

    ctx.log(f"DistributedSampler on {world} ranks: dataset of {dataset_size} samples, shuffle={shuffle}, "
            f"seed={seed}, drop_last={drop_last}")
    for epoch, by_rank in enumerate(with_by_epoch):
        show(f"epoch {epoch}, sampler.set_epoch({epoch}) called:", by_rank)
    for epoch, by_rank in enumerate(without_by_epoch):
        show(f"epoch {epoch}, set_epoch never called:", by_rank)
    if even_size != dataset_size or drop_last:
        show(f"{even_size} samples (divides by {world}): each rank gets its own 1/{world}", even)
    else:
        ctx.log(f"{dataset_size} divides by {world}: epoch 0 above shows each rank its own 1/{world}, "
                f"no sample on two ranks")
    pad = math.ceil(uneven_size / world) * world - uneven_size
    show(f"{uneven_size} samples (does not divide by {world}), drop_last=False: {pad} sample(s) "
         f"repeated so every rank gets {math.ceil(uneven_size / world)}", padded)
    show(f"{uneven_size} samples, drop_last=True: {uneven_size % world} sample(s) left out, "
         f"every rank gets {uneven_size // world}", dropped)
    show("no sampler: every rank's DataLoader yields the whole dataset", no_sampler)


def _duplicates(indices: list[int]) -> int:
    return len(indices) - len(set(indices))


def check_disjoint_and_covering(indices_by_rank: list[list[int]], dataset_size: int) -> Check:
    seen = [i for indices in indices_by_rank for i in indices]
    duplicates = _duplicates(seen)
    missing = sorted(set(range(dataset_size)) - set(seen))
    outside = sorted(set(seen) - set(range(dataset_size)))
    passed = duplicates == 0 and not missing and not outside
    counts = [len(indices) for indices in indices_by_rank]
    return Check(
        "sampler_disjoint_and_covering",
        passed,
        f"{dataset_size} samples over {len(indices_by_rank)} ranks: per-rank counts {counts}, "
        f"{duplicates} index(es) on more than one rank, {len(missing)} never loaded",
        {"dataset_size": dataset_size, "per_rank_counts": counts, "duplicates": duplicates,
         "missing": len(missing), "outside": len(outside)},
    )


def _changed_epochs(by_epoch: list[list[list[int]]]) -> int:
    """How many epochs after the first load a different order from epoch 0 (on any rank)."""
    return sum(1 for epoch in by_epoch[1:] if epoch != by_epoch[0])


def check_set_epoch_reshuffles(without_by_epoch: list[list[list[int]]],
                               with_by_epoch: list[list[list[int]]]) -> Check:
    epochs = len(with_by_epoch)
    changed_without = _changed_epochs(without_by_epoch)
    changed_with = _changed_epochs(with_by_epoch)
    passed = epochs >= 2 and len(without_by_epoch) >= 2 and changed_without == 0 and changed_with >= 1
    return Check(
        "sampler_set_epoch_reshuffles",
        passed,
        f"of {epochs - 1} later epoch(s), {changed_without} differ from epoch 0 without set_epoch "
        f"(expect 0) and {changed_with} with set_epoch (expect at least 1)",
        {"epochs": epochs, "changed_without_set_epoch": changed_without, "changed_with_set_epoch": changed_with},
    )


def check_pads_or_drops(dataset_size: int, world_size: int, padded_by_rank: list[list[int]],
                        dropped_by_rank: list[list[int]]) -> Check:
    per_rank_padded = math.ceil(dataset_size / world_size)
    per_rank_dropped = dataset_size // world_size
    padded = [i for indices in padded_by_rank for i in indices]
    dropped = [i for indices in dropped_by_rank for i in indices]
    repeats = _duplicates(padded)
    left_out = dataset_size - len(set(dropped))
    expected_repeats = per_rank_padded * world_size - dataset_size
    expected_left_out = dataset_size - per_rank_dropped * world_size
    passed = (
        dataset_size % world_size != 0
        and all(len(indices) == per_rank_padded for indices in padded_by_rank)
        and set(padded) == set(range(dataset_size))
        and repeats == expected_repeats
        and all(len(indices) == per_rank_dropped for indices in dropped_by_rank)
        and _duplicates(dropped) == 0
        and set(dropped) <= set(range(dataset_size))
        and left_out == expected_left_out
    )
    return Check(
        "sampler_pads_or_drops",
        passed,
        f"{dataset_size} samples on {world_size} ranks: padding gives per-rank counts "
        f"{[len(x) for x in padded_by_rank]} with {repeats} repeated (expect {per_rank_padded} each, "
        f"{expected_repeats} repeated); drop_last gives {[len(x) for x in dropped_by_rank]} with "
        f"{left_out} left out (expect {per_rank_dropped} each, {expected_left_out} left out)",
        {"dataset_size": dataset_size, "world_size": world_size, "repeated": repeats,
         "expected_repeated": expected_repeats, "left_out": left_out, "expected_left_out": expected_left_out,
         "padded_counts": [len(x) for x in padded_by_rank], "dropped_counts": [len(x) for x in dropped_by_rank]},
    )


def check_no_sampler_duplicates(samples_by_rank: list[list[int]], dataset_size: int) -> Check:
    full = set(range(dataset_size))
    whole_dataset_ranks = sum(1 for samples in samples_by_rank if sorted(samples) == sorted(full))
    shared = set.intersection(*(set(samples) for samples in samples_by_rank)) if samples_by_rank else set()
    passed = len(samples_by_rank) >= 2 and whole_dataset_ranks == len(samples_by_rank)
    return Check(
        "no_sampler_duplicates_data",
        passed,
        f"without a sampler {whole_dataset_ranks} of {len(samples_by_rank)} ranks load all {dataset_size} "
        f"samples; {len(shared)} samples are loaded by every rank",
        {"dataset_size": dataset_size, "ranks_loading_everything": whole_dataset_ranks,
         "world_size": len(samples_by_rank), "shared_by_all_ranks": len(shared)},
    )
