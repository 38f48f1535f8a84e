"""`ddpfsdp calc --tp`: the 2-D configuration (FSDP over dp x tensor parallelism over tp) against
figures computed by hand here, from Megatron-LM's per-block all-reduces (Narayanan et al., 2021) and
the activation counts of Korthikanti et al. (2022)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ddpfsdp.quiz.cli import cli


def calc_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["calc", *args, "--json"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def two_d(*args: str) -> dict:
    return calc_json(*args)["strategies"]["2d"]


# The 70B GPT shape `--params 70B` names: 86 blocks, d_model 8192, 64 heads, seq 4096, vocab 50,304.
LAYERS, D, SEQ = 86, 8192, 4096


def test_70b_on_64_gpus_tp_8_by_hand():
    row = two_d("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16-mixed")
    assert row["mesh"] == {"dp": 8, "tp": 8}
    # Model state: 16 bytes per parameter (fp32 params 4 + grads 4 + Adam 8), split 64 ways.
    assert row["model_state_bytes"] == 16 * 70_000_000_000 // 64 == 17_500_000_000
    assert row["params_bytes"] == 4 * 70_000_000_000 // 64
    assert row["optimizer_bytes"] == 8 * 70_000_000_000 // 64
    # TP, per block and step: 2 all-reduces forward, 2 backward, of b*s*d bf16 activations.
    activation = 1 * 4096 * 8192 * 2  # 67,108,864 bytes
    block_all_reduces = 4 * 86  # 344
    # Outside the blocks: the token embedding's output (forward) and the head input's gradient
    # (backward), and the vocabulary-parallel loss's three fp32 all-reduces of b*s values.
    all_reduces = block_all_reduces + 2 + 3
    logical = (344 + 2) * 67_108_864 + 3 * 4096 * 4
    assert logical == 23_219_716_096
    tp_all_reduce = row["tp_comm"]["all_reduce"]
    assert tp_all_reduce["count"] == all_reduces == 349
    assert tp_all_reduce["bytes"] == logical
    # Ring all-reduce on 8: each rank sends 2 (8-1)/8 = 1.75 of the buffer.
    assert tp_all_reduce["wire_bytes_per_rank"] == 40_634_503_168 == logical * 7 // 4
    assert set(row["tp_comm"]) == {"all_reduce"}
    assert activation == 67_108_864
    # The blocks' share, the Megatron-LM term alone.
    blocks = next(t for t in row["tp_terms"] if t["where"].startswith("blocks, forward"))
    assert blocks == {"where": blocks["where"], "op": "all_reduce", "count": 2 * 86, "bytes_each": 67_108_864}


def test_70b_dp_traffic_is_fsdp_over_the_tp_shard():
    row = two_d("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16-mixed")
    # Each TP rank holds 70e9 / 8 = 8.75e9 parameters; FSDP over dp = 8 all-gathers them in bf16 twice
    # (forward, and backward after resharding) and reduce-scatters their gradients in fp32.
    assert row["comm"]["all_gather"]["bytes"] == 2 * 8_750_000_000 * 2 == 35_000_000_000
    assert row["comm"]["all_gather"]["wire_bytes_per_rank"] == 35_000_000_000 * 7 // 8
    assert row["comm"]["reduce_scatter"]["bytes"] == 8_750_000_000 * 4
    assert row["comm"]["reduce_scatter"]["wire_bytes_per_rank"] == 30_625_000_000
    assert row["dp_wire_bytes_per_rank"] == 61_250_000_000
    assert row["wire_bytes_per_rank"] == 61_250_000_000 + 40_634_503_168


def test_sequence_parallel_swaps_each_all_reduce_for_a_gather_and_a_scatter():
    row = two_d("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16-mixed", "--sequence-parallel")
    activation = 67_108_864
    # Per block: 2 all-gathers and 2 reduce-scatters forward, 2 of each backward; plus the head's
    # input gathered (forward) and the embedding's output gradient gathered (backward).
    assert row["tp_comm"]["all_gather"]["count"] == 4 * 86 + 2 == 346
    assert row["tp_comm"]["all_gather"]["bytes"] == 346 * activation
    assert row["tp_comm"]["reduce_scatter"]["count"] == 4 * 86 + 1 == 345
    # An all-gather or reduce-scatter on a ring of 8 sends 7/8 of the buffer: the pair sends what one
    # all-reduce sends.
    assert row["tp_comm"]["reduce_scatter"]["wire_bytes_per_rank"] == 345 * activation * 7 // 8
    # All-reduces left: the LayerNorms' weight and bias gradients (4 per block, 2 for the final one,
    # d bf16 values each), the embedding's output, the loss's three.
    assert row["tp_comm"]["all_reduce"]["count"] == (4 * 86 + 2) + 1 + 3
    assert row["tp_comm"]["all_reduce"]["bytes"] == 346 * 8192 * 2 + activation + 3 * 4096 * 4


def test_activations_against_korthikanti():
    # Pure bf16 (2 bytes everywhere): Korthikanti et al. count s*b*h*(10 + 24/t) per block with TP, of
    # which 2 are dropout masks (this model has none) and 5as/(ht) the attention scores (fused here).
    plain = two_d("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16")
    sp = two_d("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16", "--sequence-parallel")
    tp_2 = two_d("--params", "70B", "--gpus", "64", "--tp", "2", "--precision", "bf16")
    sbh = 1 * SEQ * D
    block_no_sp = sbh * (8 + 24 // 8)  # 10 - 2 dropout bytes
    # With sequence parallelism the paper reaches 34/t; torch's SequenceParallel keeps the two
    # all-gathered Linear inputs whole (4 bytes), and shards the rest: the 2 LayerNorm inputs.
    block_sp = sbh * 4 // 8 + sbh * 4 + sbh * 24 // 8
    head_no_sp = sbh * 2 + sbh * 2 + 1 * SEQ * 50304 * 2 // 8
    head_sp = sbh * 2 // 8 + sbh * 2 + 1 * SEQ * 50304 * 2 // 8
    log_softmax_grad = 1 * SEQ * 50304 * 2 // 8
    # A named size's activations are kept apart from the total, as the other columns leave theirs out.
    assert plain["shape_activation_bytes"] == LAYERS * block_no_sp + head_no_sp + log_softmax_grad
    assert sp["shape_activation_bytes"] == LAYERS * block_sp + head_sp + log_softmax_grad
    assert sp["shape_activation_bytes"] < plain["shape_activation_bytes"] < tp_2["shape_activation_bytes"]


def test_a_preset_counts_what_tp_leaves_whole():
    # tiny: 4 blocks, d 128, vocab 512, seq 64. Per block TP shards 12d^2 + 7d = 197,504 parameters
    # over 2 and leaves 6d = 768 whole (LayerNorms and the row-wise biases); the token embedding and
    # the head split by vocabulary, the position table (64 x 128) and the final LayerNorm stay whole.
    row = two_d("--model", "tiny", "--gpus", "4", "--tp", "2", "--precision", "fp32", "--batch-size", "8")
    per_rank = 256 * 128 + 64 * 128 + 4 * (197_504 // 2 + 768) + 256 * 128 + 256
    assert row["tp_local_params"] == per_rank == 472_064
    assert row["tp_replicated_params"] == 64 * 128 + 4 * 768 + 256
    assert row["model_state_bytes"] == 16 * per_rank // 2
    # fp32 TP traffic: b*s*d = 8 * 64 * 128 activations of 4 bytes = 262,144 bytes per collective.
    assert row["tp_comm"]["all_reduce"] == {"count": 4 * 4 + 2 + 3, "bytes": 18 * 262_144 + 3 * 8 * 64 * 4,
                                            "wire_bytes_per_rank": 18 * 262_144 + 3 * 8 * 64 * 4}


def test_batch_and_sequence_length_reach_the_tp_traffic():
    row = two_d("--params", "7B", "--gpus", "16", "--tp", "4", "--batch-size", "2", "--seq-len", "2048")
    # 7B: 32 blocks of d 4096; bf16-mixed activations are 2 bytes.
    block = next(t for t in row["tp_terms"] if t["where"].startswith("blocks, forward"))
    assert block["bytes_each"] == 2 * 2048 * 4096 * 2
    assert block["count"] == 2 * 32


def test_rule_of_thumb_names_a_tp_group_wider_than_a_node():
    inside = calc_json("--params", "70B", "--gpus", "64", "--tp", "8")["notes"]
    across = calc_json("--params", "70B", "--gpus", "64", "--tp", "16")["notes"]
    assert any("TP inside a node" in note and "fits in a node of 8" in note for note in inside)
    assert any("does not fit in a node of 8" in note for note in across)


def test_a_bare_count_without_a_shape_has_no_tp_traffic():
    row = two_d("--params", "6e10", "--gpus", "16", "--tp", "4")
    assert row["model_state_bytes"] == 16 * 60_000_000_000 // 16
    assert row["tp_comm"] is None and row["activation_bytes"] is None


@pytest.mark.parametrize("args, fragment", [
    (("--params", "70B", "--gpus", "64", "--tp", "5"), "tp 5 does not divide the 64 GPUs"),
    (("--params", "70B", "--gpus", "12", "--tp", "5"), "choose one of 2, 4\n"),  # 64 heads
    (("--params", "70B", "--gpus", "48", "--tp", "3"), "must divide the 64 attention heads"),
    (("--params", "7B", "--tp", "1"), "1 is not in the range x>=2"),
    (("--params", "7B", "--sequence-parallel"), "add --tp"),
    (("--params", "7B", "--tp", "2", "--offload", "all"), "no offload"),
    (("--params", "7B", "--tp", "2", "--accounting", "deepspeed"), "ddpfsdp accounting"),
])
def test_bad_tp_input_is_refused_with_what_to_do(args, fragment):
    result = CliRunner().invoke(cli, ["calc", *args], terminal_width=200)
    assert result.exit_code == 2
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_table_shows_the_2d_column_and_its_groups():
    result = CliRunner().invoke(cli, ["calc", "--params", "70B", "--gpus", "64", "--tp", "8", "--explain"],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "2-D tp=8" in result.output and "parallelize_module over tp" in result.output
    assert "all_reduce (tp)" in result.output and "all_gather (dp)" in result.output
    assert "--tp 8" in result.output  # the simulated run that measures it
