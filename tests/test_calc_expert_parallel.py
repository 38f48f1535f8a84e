"""Expert parallelism's theory (demos/theory/expert_parallel.py) and `ddpfsdp calc --ep`: every figure
against a hand calculation written here, the all-to-all's backward against torch 2.13's own, and bad input."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.theory import expert_parallel as ep_theory
from ddpfsdp.quiz.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], terminal_width=200)


def document(*args: str) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- routing ------------------------------------------------------------------------------------------


def test_capacity_by_hand():
    # Switch, top-1: 1024 tokens over 8 experts at factor 1.0 is 128 slots each.
    assert ep_theory.expert_capacity(1024, 8, 1, 1.0) == 128
    # Top-2: 4096 tokens make 8192 slots; over 64 experts at 1.25, 160 each.
    assert ep_theory.expert_capacity(4096, 64, 2, 1.25) == 160
    # 1.1 x 8192 / 64 = 140.8, rounded up to 141 (1.1 read as 11/10, not the nearest double).
    assert ep_theory.expert_capacity(4096, 64, 2, 1.1) == 141
    assert ep_theory.q_capacity(tokens=4096, experts=64, top_k=2, capacity_factor="1.25") == 160


def test_dropped_slots_by_hand():
    # 12 tokens top-2 over 4 experts at factor 1.0: capacity 6; loads 10, 2, 6, 6 drop 4 slots.
    assert ep_theory.dropped_slots([10, 2, 6, 6], 6) == 4
    assert ep_theory.q_dropped(loads=[10, 2, 6, 6], tokens=12, top_k=2, capacity_factor=1.0) == 4
    # At factor 2.0 capacity is 12: nothing drops.
    assert ep_theory.q_dropped(loads=[10, 2, 6, 6], tokens=12, top_k=2, capacity_factor=2.0) == 0
    with pytest.raises(ValueError, match="not the 12 x 2 = 24 routed slots"):
        ep_theory.q_dropped(loads=[10, 2, 6, 5], tokens=12, top_k=2, capacity_factor=1.0)
    # 8 experts on 4 ranks, two each, in order.
    assert ep_theory.rank_loads([5, 1, 2, 2, 0, 4, 3, 3], 4) == [6, 4, 4, 6]


def test_aux_and_z_loss_by_hand():
    # Uniform routing: f_i = P_i = 1/E, so alpha·E·E·(1/E²) = alpha.
    assert ep_theory.switch_aux_loss([0.25] * 4, [0.25] * 4) == pytest.approx(0.01)
    # Two experts, every slot to the first with mean probability 0.9: 0.01·2·(1·0.9 + 0·0.1) = 0.018.
    assert ep_theory.q_switch_aux_loss(fractions=[1, 0], probs=[0.9, 0.1]) == pytest.approx(0.018)
    # z-loss of one token with logits (0, 0): (log 2)²; of (10, 10): (10 + log 2)².
    assert ep_theory.router_z_loss([[0.0, 0.0]]) == pytest.approx(math.log(2) ** 2)
    assert ep_theory.router_z_loss([[0.0, 0.0], [10.0, 10.0]], weight=1e-3) == pytest.approx(
        1e-3 * (math.log(2) ** 2 + (10 + math.log(2)) ** 2) / 2)


# --- bytes --------------------------------------------------------------------------------------------


def test_expert_params_and_all_to_all_bytes_by_hand():
    # An expert is the GPT's MLP: 4096 x 16384 + 16384 + 16384 x 4096 + 4096 = 8d² + 5d.
    assert ep_theory.expert_params(4096) == 2 * 4096 * 16384 + 16384 + 4096 == 134_238_208
    # 4096 tokens top-2 in bf16 at d 4096 over ep 8: 8192 slots, 7/8 of them leave the rank.
    per_call = 8192 * 4096 * 2 * 7 // 8
    assert ep_theory.all_to_all_bytes(4096, 2, 4096, 2, 8) == per_call == 58_720_256
    step = ep_theory.moe_step_all_to_all(4096, 2, 4096, 2, 8, 32)
    assert step == {"calls": 128, "bytes_per_call": per_call, "bytes": 128 * per_call}
    # Recomputed under checkpointing: dispatch and combine again, 6 per layer.
    assert ep_theory.moe_step_all_to_all(4096, 2, 4096, 2, 8, 32, recompute=True)["calls"] == 192
    # Padded to capacity 160 for each of 64 experts: 64 x 160 x 4096 x 2 x 7/8 whatever the routing.
    assert ep_theory.all_to_all_bytes(4096, 2, 4096, 2, 8, experts=64, capacity=160) == 64 * 160 * 4096 * 2 * 7 // 8
    assert ep_theory.q_all_to_all_bytes_per_step(tokens=4096, top_k=2, d_model=4096, precision="bf16-mixed", ep=8,
                                                 layers=32, experts=64) == 128 * per_call
    assert ep_theory.q_expert_params_per_rank(layers=32, d_model=4096, experts=64, ep=8) == 32 * 8 * 134_238_208


def test_link_shares_by_hand():
    # ep 16 over nodes of 8: of the 15 slices a rank sends, 7 stay in its node and 8 cross.
    shares = ep_theory.all_to_all_link_shares(16, 8)
    assert (shares["intra"], shares["inter"]) == (pytest.approx(7 / 15), pytest.approx(8 / 15))
    assert ep_theory.all_to_all_link_shares(8, 8)["inter"] == 0


def test_fsdp_moves_the_weights_ep_the_tokens():
    # FSDP over 8 ranks, bf16-mixed: 2 all-gathers (2 bytes) + 1 reduce-scatter (4 bytes) of every expert,
    # 7/8 sent: 8 x 7/8 bytes per expert parameter. EP: 4 all-to-alls of 8192 slots x 4096 x 2 x 7/8 per layer.
    experts_total = 32 * 64 * 134_238_208
    assert ep_theory.fsdp_expert_bytes(experts_total, 8, "bf16-mixed") == pytest.approx(8 * experts_total * 7 / 8)
    ratio = ep_theory.q_fsdp_over_ep(tokens=4096, top_k=2, d_model=4096, precision="bf16-mixed", ep=8, layers=32,
                                     experts=64)
    # = E·P_e / (T·k·d) = 64 x 134,238,208 / (8192 x 4096)
    assert ratio == pytest.approx(64 * 134_238_208 / (8192 * 4096), rel=1e-6)


def test_the_all_to_alls_backward_sends_back_what_its_forward_received():
    """torch 2.13's functional all_to_all_single differentiates as an all-to-all with the splits swapped:
    recorded from the ops it dispatches, forward and backward, on a fake world of 4."""
    import torch
    import torch.distributed._functional_collectives as funcol
    from test_calc_context_parallel import fake_world
    from torch.utils._python_dispatch import TorchDispatchMode

    calls = []

    class Recording(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops._c10d_functional.all_to_all_single.default:
                calls.append((list(args[1]), list(args[2])))
            return func(*args, **(kwargs or {}))

    with fake_world(0, 4) as group:
        tokens = torch.randn(10, 3, requires_grad=True)
        with Recording():
            received = funcol.all_to_all_single_autograd(tokens, [1, 2, 3, 4], [4, 3, 2, 1], group)
            funcol.wait_tensor(received).sum().backward()
    assert calls == [([1, 2, 3, 4], [4, 3, 2, 1]), ([4, 3, 2, 1], [1, 2, 3, 4])]
    assert tokens.grad.shape == tokens.shape


# --- calc --ep ----------------------------------------------------------------------------------------


def test_calc_json_section_by_hand():
    # The 7B shape (32 layers, d 4096, seq 4096) with 64 experts per layer over ep 8 on 64 GPUs, b 1, top-2.
    doc = document("--params", "7B", "--gpus", "64", "--ep", "8", "--experts", "64", "--capacity-factor", "1.25")
    section = doc["expert_parallel"]
    assert section["theory"] is True and section["top_k"] == 2 and section["experts_per_rank"] == 8
    assert section["expert_params_per_rank"] == 32 * 8 * 134_238_208
    assert section["capacity_per_expert"] == 160
    assert section["all_to_all"]["bytes"] == 128 * 58_720_256
    # Eight ranks in a node of 8: everything they send stays in the node.
    assert section["all_to_all"]["inter_bytes"] == 0 and section["all_to_all"]["intra_bytes"] == 128 * 58_720_256
    assert section["all_to_all_padded"]["bytes"] == 128 * (64 * 160 * 4096 * 2 * 7 // 8)
    assert section["fsdp_over_ep"] == pytest.approx(64 * 134_238_208 / (8192 * 4096), rel=1e-6)
    # Model state with the dense part whole: 16 bytes per parameter under bf16-mixed AdamW.
    assert section["model_state_bytes_per_rank"] == 16 * section["params_per_rank"]


def test_calc_ep_with_cp_routes_each_ranks_share_of_the_sequence():
    doc = document("--params", "7B", "--gpus", "64", "--seq-len", "32768", "--cp", "4", "--ep", "16",
                   "--experts", "64", "--top-k", "1")
    section = doc["expert_parallel"]
    assert section["tokens_per_rank"] == 32768 // 4 and section["routed_slots_per_rank"] == 8192
    # ep 16 over nodes of 8: 8 of 15 slices cross the network.
    assert section["all_to_all"]["inter_bytes"] == round(section["all_to_all"]["bytes"] * 8 / 15)
    result = invoke("--params", "7B", "--gpus", "64", "--ep", "16", "--experts", "64")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Expert parallelism (theory)" in text and "dropless" in text and "FSDP over the same 16 ranks" in text


@pytest.mark.parametrize("args, hint, words", [
    (("--ep", "8", "--experts", "12"), "--ep", "12 experts do not split evenly over ep 8"),
    (("--ep", "4", "--experts", "8", "--top-k", "9"), "--top-k", "top-k 9 must be from 1 to the 8 experts"),
    (("--ep", "4", "--experts", "8", "--top-k", "0"), "--top-k", "top-k 0"),
    (("--ep", "4", "--experts", "8", "--capacity-factor", "0"), "--capacity-factor", "leaves no slot"),
    (("--ep", "4", "--experts", "8", "--capacity-factor", "-1"), "--capacity-factor", "give a positive factor"),
    (("--ep", "3", "--experts", "9"), "--ep", "does not divide the 8 GPUs"),
    (("--ep", "4",), None, "add --experts E"),
    (("--experts", "8",), None, "add --ep N"),
    (("--capacity-factor", "1.25",), None, "add --ep N"),
])
def test_bad_ep_is_a_usage_error_naming_the_option(args, hint, words):
    result = invoke("--params", "7B", "--gpus", "8", *args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert words in text
    if hint:
        assert f"Invalid value for {hint}" in text
    assert "Traceback" not in result.output


def test_a_bare_count_has_no_expert_shape():
    result = invoke("--params", "3B", "--gpus", "8", "--ep", "4", "--experts", "8")
    assert result.exit_code == 2 and "needs the model's shape" in result.output


def test_every_calc_command_an_expert_parallel_answer_quotes_runs_as_it_says():
    from test_calc_context_parallel import quoted_calc_commands

    quoted = quoted_calc_commands("ep-")
    assert len(quoted) >= 8
    for answer, args, refused in quoted:
        result = invoke(*args.split())
        assert result.exit_code == (2 if refused else 0), (answer, args, result.output[-300:])


def test_the_figures_the_answers_quote_are_the_ones_calc_prints():
    at_8k = document("--params", "7B", "--gpus", "64", "--seq-len", "8192", "--ep", "8", "--experts", "64",
                     "--capacity-factor", "1.25")["expert_parallel"]
    assert at_8k["capacity_per_expert"] == 320
    assert round(at_8k["all_to_all"]["bytes"] / 1e9, 2) == 15.03
    assert round(at_8k["fsdp_expert_bytes_per_step"] / 1e9) == 1924 and round(at_8k["fsdp_over_ep"]) == 128
    assert round(at_8k["dense_params"] / 1e9, 1) == 2.7 or round(at_8k["dense_params"] / 1e9, 1) == 2.8
