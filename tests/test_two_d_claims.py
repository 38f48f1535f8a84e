"""The 2-D run's checks, fed numbers worked out by hand here: each passes on the right ones and
fails on numbers that break its claim."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.claims import two_d as c

# tiny GPT (4 blocks, d 128, vocab 512, seq 64) on dp 2 x tp 2, fp32 AdamW. Per TP rank: token
# embedding 256 x 128 + position 64 x 128; per block 12d^2 + 7d split over 2 (98,752) + 6d whole (768);
# head 256 x 128 + final LayerNorm 256: 472,064 parameters, split over dp 2: 236,032 per rank.
HELD = 236_032
THEORY = {
    "mesh": {"dp": 2, "tp": 2},
    "params_bytes": HELD * 4, "grads_bytes": HELD * 4, "optimizer_bytes": HELD * 8,
    "held_params": HELD, "ideal_params_per_rank": 932_608 / 4, "replicated_params": 64 * 128 + 4 * 768 + 256,
    "tp_comm": {"all_reduce": {"count": 21, "bytes": 18 * 131_072 + 3 * 4 * 64 * 4}},
    "dp_comm": {"all_gather": {"count": 12, "bytes": 2 * 2 * HELD * 4}, "reduce_scatter": {"count": 6, "bytes": 2 * HELD * 4}},
    # b*s*d fp32 = 4 x 64 x 128 x 4 bytes
    "block_terms": [{"op": "all_reduce", "count": 2, "bytes_each": 131_072, "where": "blocks, forward"},
                    {"op": "all_reduce", "count": 2, "bytes_each": 131_072, "where": "blocks, backward"}],
    # (2r + 2c) + 12c / 2 per element of b*s*d, fp32: 16 + 24 = 40 bytes x 32,768 elements
    "block_activation_bytes": 40 * 4 * 64 * 128,
}
RANK = {"params": HELD * 4, "grads": HELD * 4, "optimizer": HELD * 8}


def test_model_state_is_the_tp_shard_split_over_dp():
    check = c.two_d_shards_model_state([RANK] * 4, THEORY)
    assert check.passed, check.detail
    # 472,064 x 2 / 932,608 = 1.0124: what TP leaves whole is 1.2% of the tiny model.
    assert check.values["share_of_ideal"] == pytest.approx(HELD / (932_608 / 4))


def test_model_state_fails_when_a_rank_holds_its_full_tp_shard():
    unsharded = {"params": 2 * HELD * 4, "grads": HELD * 4, "optimizer": HELD * 8}
    assert not c.two_d_shards_model_state([RANK, unsharded, RANK, RANK], THEORY).passed


def test_comm_checks_compare_calls_and_bytes():
    tp = {"all_reduce": {"count": 21, "bytes": 18 * 131_072 + 3072}}
    dp = {"all_gather": {"count": 12, "bytes": 4 * HELD * 4}, "reduce_scatter": {"count": 6, "bytes": 2 * HELD * 4}}
    assert c.tp_comm_matches_theory(tp, THEORY).passed
    assert c.dp_comm_matches_theory(dp, THEORY).passed
    # One all-reduce short (a block that skipped its backward all-reduce), or bytes twice over.
    assert not c.tp_comm_matches_theory({"all_reduce": {"count": 20, "bytes": 17 * 131_072 + 3072}}, THEORY).passed
    assert not c.dp_comm_matches_theory({**dp, "all_gather": {"count": 12, "bytes": 8 * HELD * 4}}, THEORY).passed
    # An op theory does not expect: with SP the TP group would also all-gather.
    assert not c.tp_comm_matches_theory({**tp, "all_gather": {"count": 1, "bytes": 131_072}}, THEORY).passed


def _timeline(per_block: dict[str, list[str]], tp_group: str = "3", waits: bool = True) -> dict:
    """Two blocks, each forward then backward, with TP all-reduces issued inside their spans.

    Each span is 10 ms and each all-reduce is in flight for 2 ms while the block waits on it.
    """
    spans, collectives, seq, t, wait = [], [], 0, 0.0, []
    for phase in ("forward", "backward"):
        for unit in ("blocks.0", "blocks.1") if phase == "forward" else ("blocks.1", "blocks.0"):
            start, start_seq = t, seq
            seq += 1
            for op in per_block.get(phase, []):
                collectives.append({"op": op, "bytes": 131_072, "group": tp_group, "group_size": 2,
                                    "issued_s": t + 0.001, "completed_s": t + 0.003, "seq": seq})
                if waits:
                    wait.append([t + 0.001, t + 0.003])
                seq += 1
                t += 0.004
            t = start + 0.010
            spans.append({"name": f"{unit} {phase}", "phase": phase, "unit": unit, "start_s": start, "end_s": t,
                          "seq_start": start_seq, "seq_end": seq})
            seq += 1
    return {"spans": spans, "collectives": collectives, "waits": wait, "duration_s": t}


GOOD = {"forward": ["all_reduce", "all_reduce"], "backward": ["all_reduce", "all_reduce"]}


def test_per_block_counts_hold_on_every_rank():
    check = c.tp_collectives_per_block([_timeline(GOOD)] * 4, ["3"] * 4, THEORY)
    assert check.passed, check.detail
    assert check.values["blocks"] == 2


def test_per_block_counts_fail_for_a_missing_backward_all_reduce_or_the_wrong_group():
    short = {"forward": GOOD["forward"], "backward": ["all_reduce"]}
    assert not c.tp_collectives_per_block([_timeline(GOOD), _timeline(short)], ["3", "3"], THEORY).passed
    # Counted in the dp group's name: nothing was issued on tp.
    assert not c.tp_collectives_per_block([_timeline(GOOD, tp_group="1")], ["3"], THEORY).passed
    # Sequence parallelism's ops where theory expects all-reduces.
    sp = {"forward": ["all_gather", "reduce_scatter"] * 2, "backward": ["all_gather", "reduce_scatter"] * 2}
    assert not c.tp_collectives_per_block([_timeline(sp)], ["3"], THEORY).passed
    assert not c.tp_collectives_per_block([], [], THEORY).passed


def test_tp_collectives_are_on_the_critical_path_when_the_block_waits():
    check = c.tp_collectives_on_critical_path([_timeline(GOOD)] * 2, ["3", "3"], THEORY)
    assert check.passed, check.detail
    assert check.values["exposed_tp_share"] == [pytest.approx(1.0)] * 2


def test_critical_path_fails_when_nothing_waits_or_tp_runs_outside_the_blocks():
    # No waits recorded: the collectives would be hidden under the blocks' compute.
    assert not c.tp_collectives_on_critical_path([_timeline(GOOD, waits=False)], ["3"], THEORY).passed
    stray = _timeline(GOOD)
    stray["collectives"].append({"op": "all_reduce", "bytes": 131_072, "group": "3", "group_size": 2,
                                 "issued_s": 1.0, "completed_s": 1.002, "seq": 999})
    stray["waits"].append([1.0, 1.002])
    assert not c.tp_collectives_on_critical_path([stray], ["3"], THEORY).passed


def test_critical_path_is_judged_over_all_ranks_together():
    # Three ranks wait on every all-reduce and one computes through them (as a rank the scheduler set
    # aside mid-operation shows it): 3 of 4 in-flight milliseconds wait, and the check holds.
    waiting, computing = _timeline(GOOD), _timeline(GOOD, waits=False)
    check = c.tp_collectives_on_critical_path([waiting, waiting, waiting, computing], ["3"] * 4, THEORY)
    assert check.passed, check.detail
    assert check.values["exposed_tp_share"] == [pytest.approx(1.0)] * 3 + [pytest.approx(0.0)]
    assert check.values["pooled_share"] == pytest.approx(0.75)
    # Three of four ranks computing through them: a quarter waits, and it fails.
    mostly = c.tp_collectives_on_critical_path([computing, computing, computing, waiting], ["3"] * 4, THEORY)
    assert not mostly.passed and mostly.values["pooled_share"] == pytest.approx(0.25)


def test_critical_path_leaves_out_the_layernorm_gradient_all_reduces():
    # Sequence parallelism: a LayerNorm weight's gradient (d fp32 = 512 bytes) all-reduced in FSDP's
    # post-backward, after the block's compute, is not one of TP's activation collectives.
    norm = _timeline(GOOD)
    norm["collectives"].append({"op": "all_reduce", "bytes": 512, "group": "3", "group_size": 2,
                                "issued_s": 1.0, "completed_s": 1.002, "seq": 999})
    assert c.tp_collectives_on_critical_path([norm], ["3"], THEORY).passed


def test_activations_within_five_percent():
    assert c.tp_activations_match_theory(40 * 4 * 64 * 128 + 14_336, THEORY).passed  # + LayerNorm/attention stats
    # Every activation whole on each rank (no TP split): 2r + 14c = 64 bytes per element.
    assert not c.tp_activations_match_theory(64 * 4 * 64 * 128, THEORY).passed
    assert not c.tp_activations_match_theory(0, THEORY).passed


def test_loss_against_the_reference():
    reference = [6.3626, 6.4204, 6.4099]
    assert c.loss_matches_reference([6.36259, 6.42040, 6.40987], reference, 1e-4).passed
    # A TP plan that splits qkv across heads trains a different model: the loss leaves the reference.
    assert not c.loss_matches_reference([6.3626, 6.4310, 6.4350], reference, 1e-4).passed
    assert not c.loss_matches_reference([6.3626], reference, 1e-4).passed
