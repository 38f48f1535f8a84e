"""Each concept check is a pure function of numbers: it passes on numbers that bear the claim out
and fails on numbers that break it, and says why in its detail."""

from __future__ import annotations

from ddpfsdp.demos.concepts import (
    allreduce,
    checkpoint,
    comm,
    equivalence,
    no_sync,
    reduce_scatter,
    reshard,
    sampler,
    wrap,
)


# sampler ---------------------------------------------------------------------------------------

def test_disjoint_and_covering():
    good = sampler.check_disjoint_and_covering([[0, 2, 4], [1, 3, 5]], 6)
    assert good.passed and good.name == "sampler_disjoint_and_covering"
    overlap = sampler.check_disjoint_and_covering([[0, 1, 2], [2, 3, 4]], 6)
    assert not overlap.passed and overlap.values["duplicates"] == 1 and overlap.values["missing"] == 1
    assert "1 index(es) on more than one rank" in overlap.detail


def test_set_epoch_reshuffles():
    same = [[[0, 1], [2, 3]]] * 3
    moved = [[[0, 1], [2, 3]], [[3, 0], [1, 2]], [[2, 1], [0, 3]]]
    assert sampler.check_set_epoch_reshuffles(same, moved).passed
    # set_epoch that changes nothing (e.g. shuffle off) breaks the claim
    assert not sampler.check_set_epoch_reshuffles(same, same).passed
    # an order that changes without set_epoch breaks it too
    failed = sampler.check_set_epoch_reshuffles(moved, moved)
    assert not failed.passed and failed.values["changed_without_set_epoch"] == 2


def test_pads_or_drops():
    padded = [[0, 2, 4], [1, 3, 0]]
    dropped = [[0, 2], [1, 3]]
    assert sampler.check_pads_or_drops(5, 2, padded, dropped).passed
    # a sampler that silently loses the sample instead of padding
    assert not sampler.check_pads_or_drops(5, 2, [[0, 2, 4], [1, 3]], dropped).passed
    # drop_last that still repeats a sample
    assert not sampler.check_pads_or_drops(5, 2, padded, [[0, 2], [0, 3]]).passed
    # an even dataset shows neither padding nor dropping, so it cannot illustrate the claim
    assert not sampler.check_pads_or_drops(4, 2, [[0, 2], [1, 3]], [[0, 2], [1, 3]]).passed


def test_no_sampler_duplicates():
    assert sampler.check_no_sampler_duplicates([[2, 0, 1], [2, 0, 1]], 3).passed
    sharded = sampler.check_no_sampler_duplicates([[0, 2], [1]], 3)
    assert not sharded.passed and sharded.values["ranks_loading_everything"] == 0


def test_even_and_uneven_sizes():
    assert sampler.sizes_for(10, 2) == (10, 11)
    assert sampler.sizes_for(10, 4) == (12, 10)


# allreduce ---------------------------------------------------------------------------------------

def test_ring_equals_all_reduce():
    assert allreduce.check_ring_equals_all_reduce([0.0, 0.0], 30.0).passed
    wrong = allreduce.check_ring_equals_all_reduce([0.0, 3.0], 30.0)
    assert not wrong.passed and "3" in wrong.detail


def test_ring_sends_two_n_minus_one_over_n():
    # 4 ranks, 48-byte buffer: 2 * 3/4 * 48 = 72 bytes each
    assert allreduce.check_ring_sends([72, 72, 72, 72], 48, 4, 4, 12).passed
    # a naive all-to-all that sends the whole buffer to every peer: 3 x 48 bytes
    naive = allreduce.check_ring_sends([144, 144, 144, 144], 48, 4, 4, 12)
    assert not naive.passed and naive.values["expected_bytes"] == 72
    # uneven chunks are allowed one element per send, no more
    assert allreduce.check_ring_sends([68, 72, 68], 52, 3, 4, 13).passed
    assert not allreduce.check_ring_sends([68, 90, 68], 52, 3, 4, 13).passed
    # a missing rank is a failure, not a pass on the ranks that reported
    assert not allreduce.check_ring_sends([72, 72], 48, 4, 4, 12).passed


def test_format_chunks():
    assert allreduce.format_chunks([1.0, 2.0, 3.0, 4.5], 2) == "[1 2 | 3 4.5]"


# reduce-scatter ---------------------------------------------------------------------------------

def test_rs_then_ag_equals_all_reduce():
    assert reduce_scatter.check_rs_then_ag_equals_all_reduce([0.0, 0.0], [0.0, 0.0], 20.0).passed
    assert not reduce_scatter.check_rs_then_ag_equals_all_reduce([0.0, 1.0], [0.0, 0.0], 20.0).passed
    assert not reduce_scatter.check_rs_then_ag_equals_all_reduce([0.0, 0.0], [0.5, 0.0], 20.0).passed


def _rs_numbers(rs_wire: float, ring: float, logical: int = 48, count: int = 1):
    sent = {
        "reduce_scatter (CommCounter)": [rs_wire] * 4,
        "all_gather (CommCounter)": [36.0] * 4,
        "ring reduce-scatter phase (send/recv)": [ring] * 4,
        "ring all-gather phase (send/recv)": [36] * 4,
    }
    logical_bytes = {"reduce_scatter": [logical] * 4, "all_gather": [48] * 4}
    counts = {"reduce_scatter": [count] * 4, "all_gather": [1] * 4}
    return sent, logical_bytes, counts


def test_rs_ag_send_n_minus_one_over_n():
    assert reduce_scatter.check_rs_ag_send(*_rs_numbers(36.0, 36), 48, 4).passed
    # an all-reduce's traffic where a reduce-scatter's was claimed
    assert not reduce_scatter.check_rs_ag_send(*_rs_numbers(72.0, 36), 48, 4).passed
    # a ring that sent every chunk instead of N-1 of them
    assert not reduce_scatter.check_rs_ag_send(*_rs_numbers(36.0, 48), 48, 4).passed
    # the counter saw a different buffer, or two ops
    assert not reduce_scatter.check_rs_ag_send(*_rs_numbers(36.0, 36, logical=96), 48, 4).passed
    assert not reduce_scatter.check_rs_ag_send(*_rs_numbers(36.0, 36, count=2), 48, 4).passed


# wrap ------------------------------------------------------------------------------------------

def test_per_block_peak_below_root_only():
    assert wrap.check_per_block_peak_below_root_only([20_000_000, 20_100_000], [15_000_000, 15_200_000]).passed
    # one rank whose per-block peak is not lower is enough to break the claim
    failed = wrap.check_per_block_peak_below_root_only([20_000_000, 20_000_000], [15_000_000, 20_500_000])
    assert not failed.passed and failed.values["saved_bytes"] == [5_000_000, -500_000]


def _rows(block_ag: int = 12, block_rs: int = 6, layer_ag: int = 28):
    return [
        {"label": "root only", "units": 1, "all_gather": 2, "reduce_scatter": 1},
        {"label": "per block", "units": 6, "all_gather": block_ag, "reduce_scatter": block_rs},
        {"label": "per layer", "units": 14, "all_gather": layer_ag, "reduce_scatter": 14},
    ]


def test_collectives_scale_with_units():
    assert wrap.check_collectives_scale_with_units(_rows()).passed
    # counts that do not grow with the units
    assert not wrap.check_collectives_scale_with_units(_rows(layer_ag=12)).passed
    # a reduce-scatter count that is not one per unit
    assert not wrap.check_collectives_scale_with_units(_rows(block_rs=3)).passed
    # more than two all-gathers per unit
    assert not wrap.check_collectives_scale_with_units(_rows(block_ag=13)).passed


# reshard ---------------------------------------------------------------------------------------

def test_reshard_lowers_peak():
    assert reshard.check_reshard_lowers_peak([16_000_000, 16_100_000], [19_000_000, 19_000_000]).passed
    assert not reshard.check_reshard_lowers_peak([19_000_000, 16_100_000], [19_000_000, 19_000_000]).passed


def test_reshard_adds_all_gathers():
    assert reshard.check_reshard_adds_all_gathers(12, 6, 6).passed
    # a version that keeps the root unit unsharded for backward re-gathers one unit fewer
    assert reshard.check_reshard_adds_all_gathers(11, 6, 6).passed
    # no extra all-gathers: resharding did not happen
    assert not reshard.check_reshard_adds_all_gathers(6, 6, 6).passed
    # grad-op gathering more than once per unit
    assert not reshard.check_reshard_adds_all_gathers(18, 12, 6).passed


# comm --------------------------------------------------------------------------------------------

def _op(wire: float, count: int = 1) -> dict:
    return {"count": count, "bytes": wire * 2, "wire_bytes_per_rank": wire}


def test_ddp_traffic_is_2psi():
    # 2 ranks, 1000 gradient bytes: 2 * 1/2 * 1000 = 1000 bytes sent
    assert comm.check_ddp_traffic_is_2psi({"all_reduce": _op(1000.0)}, 1000, 2).passed
    # all-reducing only half of the gradients
    assert not comm.check_ddp_traffic_is_2psi({"all_reduce": _op(500.0)}, 1000, 2).passed
    # extra collectives in a DDP step
    assert not comm.check_ddp_traffic_is_2psi({"all_reduce": _op(1000.0), "broadcast": _op(10.0)}, 1000, 2).passed


def test_fsdp_traffic_is_3psi():
    # 4 ranks, 1000 parameter bytes: all-gather 2 * 3/4 * 1000, reduce-scatter 3/4 * 1000
    good = {"all_gather": _op(1500.0, 12), "reduce_scatter": _op(750.0, 6)}
    assert comm.check_fsdp_traffic_is_3psi(good, 1000, 4).passed
    # grad-op's traffic (no re-gather in backward) is not full sharding's 3 parts
    assert not comm.check_fsdp_traffic_is_3psi({"all_gather": _op(750.0, 6), "reduce_scatter": _op(750.0, 6)},
                                               1000, 4).passed
    # gradients all-reduced instead of reduce-scattered
    assert not comm.check_fsdp_traffic_is_3psi({"all_gather": _op(1500.0, 12), "all_reduce": _op(1500.0, 6)},
                                               1000, 4).passed


# no-sync ---------------------------------------------------------------------------------------

def test_no_sync_cuts_collectives():
    assert no_sync.check_no_sync_cuts_collectives({"ddp": (4, 1), "fsdp": (24, 6)}, 4).passed
    # no_sync that did nothing
    assert not no_sync.check_no_sync_cuts_collectives({"ddp": (4, 4), "fsdp": (24, 6)}, 4).passed
    # no sync at all is not "one per step"
    assert not no_sync.check_no_sync_cuts_collectives({"ddp": (0, 0), "fsdp": (24, 6)}, 4).passed


def test_no_sync_same_gradients():
    assert no_sync.check_no_sync_same_gradients({"ddp": 6e-8, "fsdp": 6e-8}, {"ddp": 0.7, "fsdp": 0.7}).passed
    # gradients off by the missing 1/k scaling on one micro-batch
    failed = no_sync.check_no_sync_same_gradients({"ddp": 0.05, "fsdp": 6e-8}, {"ddp": 0.7, "fsdp": 0.7})
    assert not failed.passed and "ddp: 0.05" in failed.detail


# equivalence -----------------------------------------------------------------------------------

def test_matches_single_process():
    ref = [6.2323551, 5.5138164, 4.9713821]
    check = equivalence.check_matches_single_process
    assert check("ddp_matches_single_process", "DDP", [6.2323551, 5.5138159, 4.9713821], ref, 7e-9, 0.068).passed
    # summed instead of averaged gradients: same first loss, then drifting, and weights off by lr-sized steps
    summed = check("ddp_matches_single_process", "DDP", [6.2323551, 5.31, 4.52], ref, 0.03, 0.068)
    assert not summed.passed and summed.values["loss_diffs"][0] == 0
    # losses agree but the weights do not
    assert not check("fsdp_matches_single_process", "FSDP", ref, ref, 1e-3, 0.068).passed
    # a run that trained nothing cannot show agreement
    assert not check("fsdp_matches_single_process", "FSDP", ref, ref, 0.0, 0.0).passed


# checkpoint ------------------------------------------------------------------------------------

def test_checkpoint_lowers_peak():
    assert checkpoint.check_checkpoint_lowers_peak([26_000_000, 26_100_000], [17_000_000, 18_000_000]).passed
    assert not checkpoint.check_checkpoint_lowers_peak([26_000_000, 26_100_000], [17_000_000, 26_200_000]).passed


def _counts(matmuls: tuple[int, int], block: tuple[int, int], calls: tuple[int, int]) -> dict:
    return {"matmuls": dict(zip(("forward", "backward"), matmuls)),
            "block_matmuls": dict(zip(("forward", "backward"), block)),
            "block_forward_calls": dict(zip(("forward", "backward"), calls))}


def test_checkpoint_recomputes_forward():
    off = _counts((21, 34), (20, 0), (4, 0))
    on = _counts((21, 50), (20, 16), (4, 4))
    assert checkpoint.check_checkpoint_recomputes_forward(off, on, 4).passed
    # checkpointing that never recomputed: the backward is unchanged
    assert not checkpoint.check_checkpoint_recomputes_forward(off, _counts((21, 34), (20, 0), (4, 0)), 4).passed
    # only some blocks recomputed
    assert not checkpoint.check_checkpoint_recomputes_forward(off, _counts((21, 42), (20, 8), (4, 2)), 4).passed
    # backward ran more extra work than the recomputation explains
    assert not checkpoint.check_checkpoint_recomputes_forward(off, _counts((21, 60), (20, 16), (4, 4)), 4).passed


def test_checkpoint_frees_the_first_trial_before_the_second_measures(tmp_path, monkeypatch):
    """The "on" trial's peak is measured with nothing of the "off" trial alive: weak references to
    the first trial's blocks are dead by the time the second trial measures (one gloo process).

    What is alive is the question, not what the measurement finds, so a probe stands in for the
    trial's measurement (the profiled steps are the slow part) and returns figures of the same form.
    """
    import gc
    import io
    import weakref

    import torch
    import torch.distributed as dist

    from ddpfsdp.demos.concepts import trial
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.launch.context import DemoContext

    first_blocks: list[weakref.ref] = []
    alive_at_second: list[int] = []

    def probe(ctx, s, **kwargs):
        if not first_blocks:
            first_blocks.extend(weakref.ref(block) for block in s.blocks)
        else:
            gc.collect()
            alive_at_second.append(sum(ref() is not None for ref in first_blocks))
        trial.train_step(s)  # what measure does first: the optimizer state exists from here on
        return {"comm": {}, "peak_bytes": 2 - len(alive_at_second), "peak_kind": "probe", "model_state": {},
                "step_time_s": {"median": 1.0, "min": 1.0, "max": 1.0}}

    monkeypatch.setattr(trial, "measure", probe)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny kernels: on a busy machine, thread hand-offs cost more than the work
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        ctx = DemoContext(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"),
                          placement=Placement("cpu", 1), _stdout=io.StringIO())
        result = checkpoint.run(ctx, model="tiny", strategy="ddp", batch_size=2, steps=1, seed=0)
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(threads)
    assert result is not None and len(first_blocks) == 4
    assert alive_at_second == [0], f"{alive_at_second[0]} of the first trial's blocks outlived it"
