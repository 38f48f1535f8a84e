"""The at-scale demos' checks are pure functions of numbers: each passes on numbers that bear its claim out
and fails on numbers that break it, saying why in its detail. No rank is started here."""

from __future__ import annotations

import copy

import pytest

from ddpfsdp.demos.claims import local_sgd, resume, straggler
from ddpfsdp.demos.result.schema import CheckpointResume, Straggler

MS = 1e-3


def _rank(rank: int, base_ms: float, slowed_ms: float, issued_ms: float, wait_ms: float | None,
          spread_ms: float = 10.0) -> dict:
    return {"rank": rank, "base_step_s": {"median": base_ms * MS, "min": (base_ms - spread_ms / 2) * MS,
                                          "max": (base_ms + spread_ms / 2) * MS},
            "slowed_step_s": {"median": slowed_ms * MS, "min": slowed_ms * MS, "max": slowed_ms * MS},
            "first_op": "all_reduce", "first_issued_s": issued_ms * MS,
            "first_wait_s": None if wait_ms is None else wait_ms * MS}


# A measured run of 2 ranks (rank 1 slow, 200 ms): steps of 100 ms become 300 ms; rank 0 issues its first
# all-reduce 95 ms into the recorded step and waits 205 ms in it, until rank 1 joins at 300 ms (its 200 ms
# sleep and 100 ms of work), which waits 3 ms. Tolerance: 0.25 x 200 + the 10 ms spread = 60 ms.
GOOD = {"slow_rank": 1, "delay_s": 0.2, "steps_each": 3,
        "ranks": [_rank(0, 100, 300, 95, 205), _rank(1, 100, 302, 300, 3)]}


def _with(**ranks: dict) -> dict:
    block = copy.deepcopy(GOOD)
    for index, changes in ranks.items():
        block["ranks"][int(index[1:])].update(changes)
    return block


def test_the_tolerance_is_a_quarter_of_the_delay_plus_the_spread_held_to_half_the_delay():
    assert straggler.tolerance_s(GOOD) == pytest.approx(0.06)
    wide = _with(r0={"base_step_s": {"median": 0.1, "min": 0.0, "max": 0.3}})
    assert straggler.tolerance_s(wide) == pytest.approx(0.1)  # the spread counted up to a quarter of the delay
    assert straggler.tolerance_s({**GOOD, "delay_s": 0.0}) == pytest.approx(0.01)  # no delay: the spread alone


def test_a_measured_straggler_passes_every_check():
    checks = straggler.straggler_checks(Straggler.from_json(GOOD))
    assert [c.name for c in checks] == ["straggler_sets_every_step", "others_wait_in_first_collective",
                                        "slow_rank_does_not_wait"]
    assert all(c.passed for c in checks), [c.detail for c in checks]


def test_a_step_that_grew_by_the_mean_delay_or_not_at_all_fails():
    # averaging, every step + delay / N as if the others did not wait, on steps short against the delay
    short_steps = {"median": 0.02, "min": 0.015, "max": 0.025}
    mean = straggler.straggler_sets_every_step(_with(r0={"base_step_s": short_steps, "slowed_step_s": {"median": 0.12}},
                                                     r1={"base_step_s": short_steps, "slowed_step_s": {"median": 0.12}}))
    assert not mean.passed and "shorter than the delay" in mean.detail
    assert not straggler.straggler_sets_every_step(_with(r0={"slowed_step_s": {"median": 0.1}})).passed
    # more than base + delay: something else slowed the step
    over = straggler.straggler_sets_every_step(_with(r0={"slowed_step_s": {"median": 0.45}}))
    assert not over.passed and "over" in over.detail


def test_a_step_shorter_than_the_slow_ranks_own_fails():
    # the fast rank's step cannot end before the slow rank's: it waits in the same collective
    off = straggler.straggler_sets_every_step(_with(r0={"slowed_step_s": {"median": 0.23}}))
    assert not off.passed and "not the slow rank's" in off.detail


def test_a_step_that_fell_short_by_the_slow_ranks_own_work_passes_and_says_why():
    # on shared cores the slow rank computes faster alone: 220 ms instead of 300, never below the delay
    short = straggler.straggler_sets_every_step(_with(r0={"slowed_step_s": {"median": 0.22}},
                                                      r1={"slowed_step_s": {"median": 0.22}}))
    assert short.passed and "computed alone" in short.detail
    below = straggler.straggler_sets_every_step(_with(r0={"slowed_step_s": {"median": 0.12}},
                                                      r1={"slowed_step_s": {"median": 0.12}}))
    assert not below.passed and "shorter than the delay" in below.detail


def test_others_that_did_not_wait_for_the_slow_rank_or_waited_past_it_fail():
    # an asynchronous collective that completed without the slow rank
    early = straggler.others_wait_in_first_collective(_with(r0={"first_wait_s": 0.004}))
    assert not early.passed and "the slow rank joined 205 ms after it" in early.detail
    assert not straggler.others_wait_in_first_collective(_with(r0={"first_wait_s": 0.4})).passed
    unseen = straggler.others_wait_in_first_collective(_with(r0={"first_wait_s": None}))
    assert not unseen.passed and "no completed collective" in unseen.detail


def test_others_that_issued_late_on_shared_cores_wait_that_much_less():
    # 4 ranks on 2 cores: rank 0 computed slower while it shared the cores, issued at 250 ms, waited 50 ms
    late = straggler.others_wait_in_first_collective(_with(r0={"first_issued_s": 0.25, "first_wait_s": 0.05}))
    assert late.passed and "its 200 ms sleep and 100 ms of its own work" in late.detail


def test_a_slow_rank_that_waits_fails():
    assert not straggler.slow_rank_does_not_wait(_with(r1={"first_wait_s": 0.2})).passed
    missing = straggler.slow_rank_does_not_wait({**GOOD, "slow_rank": 5})
    assert not missing.passed and "not among the ranks" in missing.detail


# --- checkpoint-resume ---------------------------------------------------------------------------------------

# A tiny model's checkpoint worked by hand: 1,000 fp32 parameters in 4 tensors with AdamW is 12,000 B of
# parameters and moments (the analytic model's 12 B per parameter) and 4 step counters of 4 B: 12,016 B in 16
# tensors. Sharded over 2 ranks: 6,008 B each; a row of every tensor is 96 B.
STATE_BYTES, TENSORS, THEORY, ROWS = 12_016, 16, 12_000, 96


def _files(*data: int, largest: int = 4_000) -> list[dict]:
    return [{"rank": r, "items": 8, "data_bytes": d, "file_bytes": d + 8 * 1_500, "largest_item_bytes": largest,
             "save_s": 0.1} for r, d in enumerate(data)]


def test_sharded_bytes_match_theory_and_break_when_a_rank_writes_everything():
    good = resume.checkpoint_bytes_match_theory(_files(6_008, 6_008), STATE_BYTES, TENSORS, THEORY, "fsdp", ROWS)
    assert good.passed, good.detail
    # one row over on one rank and under on the other (an uneven split) is allowed
    assert resume.checkpoint_bytes_match_theory(_files(6_100, 5_916), STATE_BYTES, TENSORS, THEORY, "fsdp",
                                                ROWS).passed
    # rank 0 writes the whole state, rank 1 nothing: the total holds, the split does not
    lopsided = resume.checkpoint_bytes_match_theory(_files(12_016, 0), STATE_BYTES, TENSORS, THEORY, "fsdp", ROWS)
    assert not lopsided.passed and "further than" in lopsided.detail
    # replicas written by every rank (no deduplication): twice the state
    twice = resume.checkpoint_bytes_match_theory(_files(12_016, 12_016), STATE_BYTES, TENSORS, THEORY, "ddp", ROWS)
    assert not twice.passed and "of data for a state of" in twice.detail
    # a state that is not the analytic model's (a gradient saved as well)
    grads = resume.checkpoint_bytes_match_theory(_files(8_008, 8_008), 16_016, TENSORS, THEORY, "fsdp", ROWS)
    assert not grads.passed and "analytic model's" in grads.detail


def test_ddp_s_whole_tensors_may_sit_a_largest_item_from_the_mean():
    # greedy deduplication: no rank further from the mean than the largest item
    assert resume.checkpoint_bytes_match_theory(_files(8_008, 4_008), STATE_BYTES, TENSORS, THEORY, "ddp",
                                                ROWS).passed
    assert not resume.checkpoint_bytes_match_theory(_files(8_008, 4_008, largest=100), STATE_BYTES, TENSORS, THEORY,
                                                    "ddp", ROWS).passed


def test_a_resumed_state_must_equal_the_saved_one_entry_by_entry():
    equal = {"entries": 20, "equal": 20, "max_abs_diff": 0.0, "missing": [], "differing": []}
    assert resume.resumed_state_equals_saved(equal, 4, 2).passed
    off = resume.resumed_state_equals_saved({**equal, "equal": 19, "max_abs_diff": 1e-7,
                                             "differing": ["optim.state.w.exp_avg"]}, 4, 2)
    assert not off.passed and "optim.state.w.exp_avg" in off.detail
    assert not resume.resumed_state_equals_saved({**equal, "missing": ["model.w"]}, 4, 2).passed
    assert not resume.resumed_state_equals_saved(None, 4, 2).passed


def test_resumed_losses_bit_for_bit_on_the_same_world_and_to_rounding_on_another():
    saved = [5.21533, 5.34347]
    assert resume.resumed_loss_matches_uninterrupted(saved, list(saved), 2, 2).values["bit_identical"]
    rounding = [5.21533, 5.34347 * (1 + 3e-9)]
    assert resume.resumed_loss_matches_uninterrupted(saved, rounding, 2, 4).passed
    same_world = resume.resumed_loss_matches_uninterrupted(saved, rounding, 2, 2)
    assert not same_world.passed and "bit for bit required" in same_world.detail
    # a resume that lost the optimizer state trains on from fresh moments: the loss moves far off
    assert not resume.resumed_loss_matches_uninterrupted(saved, [5.21533, 5.9], 2, 4).passed
    assert not resume.resumed_loss_matches_uninterrupted(saved, saved[:1], 2, 4).passed
    assert not resume.resumed_loss_matches_uninterrupted([], [], 2, 4).passed


def test_a_full_state_dict_must_put_the_state_on_rank_0():
    good = [{"rank": 0, "sharded_bytes": 0, "full_bytes": 12_500, "peak_kind": "cpu"}]
    assert resume.full_state_dict_gathers_on_rank0(good, STATE_BYTES, 2).passed
    # rank 0 allocated half the state: the gather did not bring it all there
    assert not resume.full_state_dict_gathers_on_rank0([{**good[0], "full_bytes": 6_000}], STATE_BYTES, 2).passed
    # the sharded state dict copied the shards
    copied = resume.full_state_dict_gathers_on_rank0([{**good[0], "sharded_bytes": 6_008}], STATE_BYTES, 2)
    assert not copied.passed and "sharded one" in copied.detail
    assert not resume.full_state_dict_gathers_on_rank0([], STATE_BYTES, 2).passed


def test_a_save_carries_the_save_s_checks_and_a_resume_all_four():
    block = CheckpointResume.from_json({
        "saved_world": 2, "state_bytes": STATE_BYTES, "state_tensors": TENSORS, "shard_row_bytes": ROWS,
        "files": _files(6_008, 6_008), "memory": [{"rank": 0, "sharded_bytes": 0, "full_bytes": 12_500}],
        "losses_uninterrupted": [5.0, 4.9]})
    theory = {"total_bytes": THEORY}
    assert [c.name for c in resume.resume_checks(block, theory, "fsdp")] == [
        "checkpoint_bytes_match_theory", "full_state_dict_gathers_on_rank0"]
    assert [c.name for c in resume.resume_checks(block, theory, "ddp")] == ["checkpoint_bytes_match_theory"]
    block.resumed_world, block.losses_resumed = 4, [5.0, 4.9]
    block.compared = CheckpointResume.NESTED["compared"][1].from_json({"entries": 3, "equal": 3, "max_abs_diff": 0.0})
    checks = resume.resume_checks(block, theory, "fsdp")
    assert len(checks) == 4 and all(c.passed for c in checks), [c.detail for c in checks]


# --- local-sgd ---------------------------------------------------------------------------------------------

PARAM_B = 3_730_432  # the tiny GPT's parameters in fp32: a DDP step's gradient buckets, and an averaging


def _local_sgd_block(period: int = 4, warmup: int = 2, steps: int = 15, ranks: int = 2) -> dict:
    """A run as torch's rules make it, with the figures a 2-rank run of the tiny GPT measured."""
    averaged = set(range(warmup, steps, period))
    ddp_steps, local_steps = [], []
    for step in range(steps):
        ddp_steps.append({"step": step, "loss": 6.0 - 0.1 * step, "all_reduces": [1] * ranks,
                          "all_reduce_bytes": [PARAM_B] * ranks, "other_collectives": [0] * ranks,
                          "other_bytes": [0] * ranks, "replica_diff": [0.0] * ranks})
        talks = step < warmup or step in averaged
        local_steps.append({"step": step, "loss": 6.0 - 0.1 * step + (0.0 if step <= warmup else 0.01),
                            "all_reduces": [1 if talks else 0] * ranks,
                            "all_reduce_bytes": [PARAM_B if talks else 0] * ranks, "other_collectives": [0] * ranks,
                            "other_bytes": [0] * ranks,
                            "replica_diff": [0.0] + [0.0 if talks else 2e-3] * (ranks - 1)})
    return {"period": period, "warmup": warmup, "steps": steps, "averaged_steps": sorted(averaged),
            "param_bytes": PARAM_B, "runs": [{"name": "ddp", "steps": ddp_steps},
                                             {"name": "local-sgd", "steps": local_steps}]}


def _local_step(block: dict, run: int, step: int, **changes) -> dict:
    broken = copy.deepcopy(block)
    broken["runs"][run]["steps"][step].update(changes)
    return broken


def test_torch_s_averaging_steps_are_w_then_every_h():
    # averagers.py: step >= warmup_steps and (step - warmup_steps) % period == 0, the counter from 0
    assert local_sgd.averaging_steps(4, 2, 15) == [2, 6, 10, 14]
    assert local_sgd.averaging_steps(3, 0, 7) == [0, 3, 6]
    assert local_sgd.averaging_steps(8, 20, 15) == []
    assert local_sgd.synchronous_steps(2, 15) == [0, 1] and local_sgd.synchronous_steps(20, 3) == [0, 1, 2]
    assert local_sgd.bytes_ratio(4, 2, 15) == pytest.approx(6 / 15)
    with pytest.raises(ValueError):
        local_sgd.averaging_steps(0, 2, 15)


@pytest.mark.parametrize("period, warmup, steps, ranks", [(4, 2, 15, 2), (2, 0, 7, 4), (5, 3, 19, 3)])
def test_a_local_sgd_run_as_torch_makes_it_passes_every_check(period, warmup, steps, ranks):
    checks = local_sgd.local_sgd_checks(_local_sgd_block(period, warmup, steps, ranks))
    assert [c.passed for c in checks] == [True] * 4, [c.detail for c in checks]


def test_all_reduces_off_torch_s_schedule_fail():
    good = _local_sgd_block()
    # an averaging H steps after the warm-up instead of at its end (the common misreading), on step 6 only
    late = _local_step(_local_step(good, 1, 2, all_reduces=[0, 0], all_reduce_bytes=[0, 0]), 1, 5,
                       all_reduces=[1, 1], all_reduce_bytes=[PARAM_B] * 2)
    # gradients still all-reduced on a local step (subgroup=None's intra-node all-reduce on one machine)
    chatty = _local_step(good, 1, 3, all_reduces=[1, 1], all_reduce_bytes=[PARAM_B] * 2)
    # one rank that skipped its averaging
    skipped = _local_step(good, 1, 6, all_reduces=[1, 0], all_reduce_bytes=[PARAM_B, 0])
    # DDP that skipped a step's all-reduce (no_sync)
    silent = _local_step(good, 0, 4, all_reduces=[0, 0], all_reduce_bytes=[0, 0])
    # a block whose schedule is not torch's rule
    named = {**copy.deepcopy(good), "averaged_steps": [5, 9, 13]}
    for broken in (late, chatty, skipped, silent, named):
        check = local_sgd.all_reduces_follow_torch_schedule(broken)
        assert check.passed is False and "off:" in check.detail
    assert local_sgd.all_reduces_follow_torch_schedule({**good, "runs": good["runs"][:1]}).passed is False


def test_bytes_off_the_expected_ratio_fail():
    good = _local_sgd_block()
    # an averaging that all-reduced the parameters and the optimizer's moments (three times the bytes)
    fat = _local_step(good, 1, 6, all_reduce_bytes=[3 * PARAM_B] * 2)
    # local SGD that moved as much as DDP: every step all-reduced
    full = copy.deepcopy(good)
    full["runs"][1]["steps"] = copy.deepcopy(good["runs"][0]["steps"])
    for broken in (fat, full):
        check = local_sgd.local_sgd_all_reduces_fewer_bytes(broken)
        assert check.passed is False and "off:" in check.detail
    assert "0.4000" in local_sgd.local_sgd_all_reduces_fewer_bytes(good).detail


def test_replicas_equal_off_an_averaging_or_apart_after_one_fail():
    good = _local_sgd_block()
    # an averaging that left the replicas a rounding apart
    rounded = _local_step(good, 1, 6, replica_diff=[0.0, 1e-9])
    # replicas that never drifted (every rank read the same batch, or nothing stepped)
    frozen = copy.deepcopy(good)
    for step in frozen["runs"][1]["steps"]:
        step["replica_diff"] = [0.0, 0.0]
    # DDP replicas that differ
    ddp_apart = _local_step(good, 0, 3, replica_diff=[0.0, 1e-7])
    # a step not compared at all
    unmeasured = _local_step(good, 1, 4, replica_diff=[])
    # a rank whose difference is not a number, on a local step and after an averaging (max() skips a nan first)
    nan_local = _local_step(good, 1, 4, replica_diff=[0.0, float("nan")])
    nan_averaged = _local_step(good, 1, 6, replica_diff=[float("nan"), 0.0])
    for broken in (rounded, frozen, ddp_apart, unmeasured, nan_local, nan_averaged):
        check = local_sgd.replicas_drift_and_are_reaveraged(broken)
        assert check.passed is False and "off:" in check.detail


def test_warm_up_losses_apart_from_ddp_s_fail_and_the_gap_after_is_only_reported():
    good = _local_sgd_block()
    passed = local_sgd.loss_matches_ddp_until_local_steps(good)
    assert passed.passed and "bitwise equal" in passed.detail and "+0.0100 at the last" in passed.detail
    # another seed or other data: the first step's loss already differs
    other_seed = _local_step(good, 1, 0, loss=6.2)
    # local from the start: the first local step's loss (computed on the warm-up's weights) differs
    early = _local_step(good, 1, 2, loss=5.85)
    missing = _local_step(good, 1, 1, loss=None)
    diverged = _local_step(good, 1, 0, loss=float("nan"))  # nan compares false with every bound
    for broken in (other_seed, early, missing, diverged):
        check = local_sgd.loss_matches_ddp_until_local_steps(broken)
        assert check.passed is False and "off:" in check.detail
    # a gap of any size or sign after the first local step is this run's measurement, not a failure
    worse = copy.deepcopy(good)
    for step in worse["runs"][1]["steps"][3:]:
        step["loss"] += 1.0
    assert local_sgd.loss_matches_ddp_until_local_steps(worse).passed
    assert local_sgd.loss_gap(worse)[-1] == pytest.approx(1.01)


def test_the_registry_names_exactly_the_local_sgd_checks():
    from ddpfsdp.demos.registry import LOCAL_SGD_CHECKS

    assert [c.name for c in local_sgd.local_sgd_checks(_local_sgd_block())] == list(LOCAL_SGD_CHECKS)
