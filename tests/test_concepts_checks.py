"""Each concept check is a pure function of numbers: it passes on numbers that bear the claim out
and fails on numbers that break it, and says why in its detail."""

from __future__ import annotations

from ddpfsdp.demos.concepts import allreduce, reduce_scatter, sampler


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
