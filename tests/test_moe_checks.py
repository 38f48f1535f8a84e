"""`demo moe`'s named checks, fed numbers worked out by hand here and then broken one at a time; the
routing's pieces (capacity, the bytes the routers imply, the load per layer) against hand calculations.

The run written out below: 2 ranks, one ep group of 2, one MoE layer of 2 experts (rank r holds expert r),
top-1, d = 2, fp32, 4 tokens per rank at capacity factor 1.0, so ceil(1.0 x 4 x 1 / 2) = 2 slots per expert.
  rank 0 routes 3 slots to expert 0 and 1 to expert 1: expert 0 keeps 2 (1 dropped); it dispatches 2 to
         itself and 1 to rank 1 (S = 3) and receives 2 + 2 (R = 4)
  rank 1 routes 2 and 2, keeps all: dispatches 2 to rank 0 and 2 to itself (S = 4), receives 1 + 2 (R = 3)
A row is d x 4 = 8 bytes, the counts all-to-all 2 x 8 = 16 bytes; rank 0's five calls: counts 16,
dispatch 3 x 8 = 24, combine 4 x 8 = 32, then backward the combine's gradient 24 and the dispatch's 32.
"""

from __future__ import annotations

import copy

import pytest

from ddpfsdp.demos.claims import expert_parallel as ep
from ddpfsdp.demos.measure import expert_load
from ddpfsdp.demos.registry import DEMOS


def _layer(tokens, loads, kept, probs, aux, sent, received, computed, done, back):
    return {"tokens": tokens, "capacity": 2, "loads": loads, "kept": kept, "probs": probs, "aux": aux,
            "sent": sent, "received": received, "computed": computed, "experts_done_s": done,
            "combine_done_s": back}


def _run() -> dict:
    # aux: alpha·E·sum f·P = 0.01 x 2 x (0.75 x 0.6 + 0.25 x 0.4) = 0.011 and 0.01 x 2 x (0.5 x 0.5 x 2) = 0.01
    return {
        "experts": 2, "top_k": 1, "capacity_factor": 1.0, "ep": 2, "layers": 1, "d_model": 2, "element_bytes": 4,
        "count_bytes": 8, "expert_params": 8 * 2 * 2 + 5 * 2, "dense_params": 100, "shard_row_bytes": 16,
        "ranks": [
            {"rank": 0, "ep_group": 0, "ep_rank": 0, "experts": [0], "expert_param_bytes": 42 * 4,
             "dense_param_bytes": 200, "all_to_all_bytes": [16, 24, 32, 24, 32],
             "layers": [_layer(4, [3, 1], [2, 1], [0.6, 0.4], 0.011, [2, 1], [2, 2], 4, 0.10, 0.30)]},
            {"rank": 1, "ep_group": 0, "ep_rank": 1, "experts": [1], "expert_param_bytes": 42 * 4,
             "dense_param_bytes": 200, "all_to_all_bytes": [16, 32, 24, 32, 24],
             "layers": [_layer(4, [2, 2], [2, 2], [0.5, 0.5], 0.01, [2, 2], [1, 2], 3, 0.20, 0.31)]},
        ],
        "reference": {"losses": [6.0, 5.5], "logits_max_diff": 1e-7, "logits_max_abs": 1.0,
                      "grads": [{"name": "blocks.0.mlp.router.weight", "max_diff": 1e-9, "max_abs": 0.1}],
                      "own_choices_agree": 8, "slots": 8},
    }


def _broken(edit) -> dict:
    run = copy.deepcopy(_run())
    edit(run)
    return run


def _layer0(run: dict, rank: int) -> dict:
    return run["ranks"][rank]["layers"][0]


# ----------------------------------------------------------------------------- by hand


def test_the_routers_imply_each_call_s_bytes_in_issue_order():
    assert ep.routed_all_to_all_bytes(_run()) == {0: [16, 24, 32, 24, 32], 1: [16, 32, 24, 32, 24]}


def test_off_rank_bytes_and_load_per_layer_by_hand():
    # rank 0 sends 1 slot to rank 1 and gets 2 back (x2 for backward): 2 x (1 + 2) x 8 = 48, and rank 1 the same
    assert expert_load.off_rank_bytes(_run()) == {0: 48, 1: 48}
    layer = expert_load.load_per_layer(_run())[0]
    assert layer["loads"] == [5, 3] and layer["computed"] == [4, 3] and layer["dropped"] == 1
    assert layer["expert_imbalance"] == pytest.approx(5 / 4) and layer["rank_imbalance"] == pytest.approx(4 / 3.5)
    assert layer["aux"] == pytest.approx((0.011 + 0.01) / 2)


def test_capacity_keeps_first_choices_first_each_in_token_order():
    torch = pytest.importorskip("torch")
    from ddpfsdp.demos.train.moe_layer import capacity_keep

    # 3 experts, 2 slots each. First choices: tokens 0, 1, 2 to expert 0 (token 2's is the third: dropped),
    # token 3 to expert 1. Second choices: token 0 to expert 1 (its second slot), token 1 to expert 2,
    # token 2 to expert 1 (a third: dropped), token 3 to expert 0 (a fourth: dropped).
    choices = torch.tensor([[0, 1], [0, 2], [0, 1], [1, 0]])
    assert capacity_keep(choices, 3, 2).tolist() == [[True, True], [True, True], [False, False], [True, False]]


# ----------------------------------------------------------------------------- each check, whole and broken


def test_the_hand_made_run_passes_every_check():
    checks = ep.run_checks(_run(), [6.0, 5.5])
    assert [c.name for c in checks] == [name for name in DEMOS["moe"].checks if name != "timeline_records_every_collective"]
    assert all(c.passed for c in checks), [c.detail for c in checks if not c.passed]


def test_moe_matches_single_process_fails_on_a_loss_an_output_or_a_gradient_apart():
    assert not ep.moe_matches_single_process([6.0, 5.51], _run()["reference"]).passed
    assert not ep.moe_matches_single_process([6.0], _run()["reference"]).passed
    far = _run()["reference"] | {"logits_max_diff": 1e-3}
    assert not ep.moe_matches_single_process([6.0, 5.5], far).passed
    grads = _run()["reference"] | {"grads": [{"name": "w", "max_diff": 1e-4, "max_abs": 0.1}]}
    check = ep.moe_matches_single_process([6.0, 5.5], grads)
    assert not check.passed and "gradients off: w" in check.detail
    assert not ep.moe_matches_single_process([6.0, 5.5], None).passed


def test_all_to_all_bytes_fail_on_a_call_off_or_a_backward_not_swapped():
    one_off = _broken(lambda run: run["ranks"][1]["all_to_all_bytes"].__setitem__(1, 40))
    assert not ep.all_to_all_bytes_match_routed_tokens(one_off).passed
    # backward handing on what the forward sent rather than what it received: the same bytes, the wrong order
    unswapped = _broken(lambda run: run["ranks"][0].__setitem__("all_to_all_bytes", [16, 24, 32, 32, 24]))
    check = ep.all_to_all_bytes_match_routed_tokens(unswapped)
    assert not check.passed and "first apart at call 3" in check.detail
    # a router's kept count that the calls do not bear out
    assert not ep.all_to_all_bytes_match_routed_tokens(_broken(lambda run: _layer0(run, 1)["kept"].__setitem__(0, 1))).passed


def test_all_to_all_bytes_reports_theory_beside_the_run():
    values = ep.all_to_all_bytes_match_routed_tokens(_run()).values
    # theory: T·k·d·c·(ep-1)/ep = 4 x 1 x 2 x 4 / 2 = 16 bytes off-rank per dispatch; measured (8 + 16) / 2
    assert values["theory_off_rank_bytes"] == 16 and values["off_rank_mean_bytes"] == 12


def test_dropped_tokens_fail_when_the_experts_computed_other_rows_or_kept_past_capacity():
    assert not ep.dropped_tokens_match_router(_broken(lambda run: _layer0(run, 0).__setitem__("computed", 5))).passed
    past = _broken(lambda run: _layer0(run, 0).__setitem__("kept", [3, 1]))
    assert not ep.dropped_tokens_match_router(past).passed
    assert ep.dropped_tokens_match_router(_run()).values["dropped"] == 1


def test_aux_loss_fails_when_torch_s_value_is_not_the_measured_load_s():
    assert not ep.aux_loss_matches_measured_load(_broken(lambda run: _layer0(run, 0).__setitem__("aux", 0.0115))).passed
    values = ep.aux_loss_matches_measured_load(_run()).values
    assert values["recomputed"] == pytest.approx([0.011, 0.01]) and values["worst_over_even"] == pytest.approx(1.1)


def test_a_combine_back_before_the_last_experts_finished_fails():
    early = _broken(lambda run: _layer0(run, 0).__setitem__("combine_done_s", 0.15))
    check = ep.all_to_all_waits_for_slowest_rank(early)
    assert not check.passed and "before rank 1's experts finished" in check.detail
    assert ep.all_to_all_waits_for_slowest_rank(_run()).values["waits_s"] == [[pytest.approx(0.2),
                                                                              pytest.approx(0.11)]]


def test_ep_holds_experts_per_rank_fails_on_experts_or_a_dense_shard_off():
    assert not ep.ep_holds_experts_per_rank(_broken(lambda run: run["ranks"][0].__setitem__("experts", [1]))).passed
    assert not ep.ep_holds_experts_per_rank(
        _broken(lambda run: run["ranks"][1].__setitem__("expert_param_bytes", 2 * 42 * 4))).passed
    assert not ep.ep_holds_experts_per_rank(_broken(lambda run: run["ranks"][1].__setitem__("dense_param_bytes", 400))).passed
    # within one dim-0 row of every dense parameter (16 bytes) of 1/N: FSDP's padding
    assert ep.ep_holds_experts_per_rank(_broken(lambda run: run["ranks"][1].__setitem__("dense_param_bytes", 212))).passed
