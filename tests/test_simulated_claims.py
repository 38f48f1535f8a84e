"""The simulated runs' checks pass on right numbers and fail on broken ones."""

from __future__ import annotations

from ddpfsdp.demos.claims import simulated as sc

THEORY = {"params_bytes": 1000, "grads_bytes": 1000, "optimizer_bytes": 2000, "model_state_bytes": 4000,
          "comm": {"all_gather": {"wire_bytes_per_rank": 1750}, "reduce_scatter": {"wire_bytes_per_rank": 875}}}
RANK = {"params": 1000, "grads": 1000, "optimizer": 2000}
PER_OP = {"all_gather": {"count": 4, "bytes": 2000, "wire_bytes_per_rank": 1750.0},
          "reduce_scatter": {"count": 2, "bytes": 1000, "wire_bytes_per_rank": 875.0}}


def test_model_state_within_1_percent_passes_and_beyond_fails():
    assert sc.simulated_model_state_matches_calc(RANK, THEORY).passed
    assert sc.simulated_model_state_matches_calc({**RANK, "optimizer": 2039}, THEORY).passed
    broken = sc.simulated_model_state_matches_calc({**RANK, "optimizer": 2100}, THEORY)
    assert not broken.passed and "+2.50%" in broken.detail
    # Unsharded where theory shards: far off.
    assert not sc.simulated_model_state_matches_calc({"params": 8000, "grads": 8000, "optimizer": 16000}, THEORY).passed


def test_model_state_allowance_covers_whole_tensors_and_no_more():
    rank = {**RANK, "optimizer": 2200}
    assert sc.simulated_model_state_matches_calc(rank, THEORY, {"optimizer": 200}).passed
    assert not sc.simulated_model_state_matches_calc(rank, THEORY, {"optimizer": 100}).passed


def test_wire_bytes_within_1_percent_pass_and_beyond_or_nothing_sent_fail():
    assert sc.simulated_wire_matches_calc(PER_OP, THEORY["comm"]).passed
    # An all-reduce of the gradients instead of a reduce-scatter: twice the bytes for that op.
    broken = {**PER_OP, "reduce_scatter": {"count": 2, "bytes": 1000, "wire_bytes_per_rank": 1750.0}}
    assert not sc.simulated_wire_matches_calc(broken, THEORY["comm"]).passed
    assert not sc.simulated_wire_matches_calc({}, {}).passed


def test_peak_must_hold_the_largest_unit_above_the_model_state():
    assert sc.simulated_peak_holds_largest_unit(10_000, 4000, 6000, "blocks.0").passed
    failed = sc.simulated_peak_holds_largest_unit(9_999, 4000, 6000, "blocks.0")
    assert not failed.passed and "blocks.0" in failed.detail
    assert not sc.simulated_peak_holds_largest_unit(None, 4000, 6000).passed
    assert not sc.simulated_peak_holds_largest_unit(10_000, 4000, 0).passed  # no unit measured: no claim


def test_versus_theory_rows_carry_the_difference_in_percent():
    rows = {row.figure: row for row in sc.versus_theory({**RANK, "params": 1010}, PER_OP, THEORY)}
    assert rows["params"].diff_percent == 1.0
    assert rows["model state"].simulated == 4010
    assert rows["wire bytes per step"].theory == 2625 and rows["wire bytes per step"].diff_percent == 0
    assert sc.diff_percent(5, 0) is None


def test_wire_padding_allowance_covers_fsdp_padding_and_no_more():
    padded = {op: {**v, "wire_bytes_per_rank": v["wire_bytes_per_rank"] * 1.07} for op, v in PER_OP.items()}
    assert not sc.simulated_wire_matches_calc(padded, THEORY["comm"]).passed
    check = sc.simulated_wire_matches_calc(padded, THEORY["comm"], padding_bytes=round(2625 * 0.07))
    assert check.passed and "padding" in check.detail
    assert not sc.simulated_wire_matches_calc(padded, THEORY["comm"], padding_bytes=round(2625 * 0.03)).passed
