"""The pipeline's analytic model (demos/theory/pipeline.py) against hand-computed examples."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.theory import pipeline
from ddpfsdp.demos.theory.pipeline import (
    bubble,
    check_pipeline,
    in_flight,
    microbatches_for_bubble,
    pipeline_figures,
    stage_layers,
    stage_params,
    step_time_s,
)
from ddpfsdp.demos.base.shapes import GPT_PRESETS, GPT_SIZES


def test_bubble_gpipe_and_1f1b_by_hand():
    # p = 4, m = 8: fill and drain take p - 1 = 3 slots of t; the step is 8 + 3 = 11 slots.
    # ratio 3/8 = 0.375 (the papers' (p-1)/m), fraction 3/11 (idle over the whole step).
    for schedule in ("gpipe", "1f1b"):
        shown = bubble(4, 8, schedule)
        assert shown["bubble_ratio"] == pytest.approx(3 / 8)
        assert shown["bubble_fraction"] == pytest.approx(3 / 11)


def test_bubble_interleaved_divides_by_v():
    # p = 4, m = 8, V = 2: each chunk is t/2, so fill and drain take 3 x t/2 = 1.5 t.
    # ratio 1.5/8 = (p-1)/(V m) = 3/16; fraction 1.5/9.5 = 3/19 = (p-1)/(V m + p - 1).
    shown = bubble(4, 8, "interleaved", 2)
    assert shown["bubble_ratio"] == pytest.approx(3 / 16)
    assert shown["bubble_fraction"] == pytest.approx(3 / 19)
    assert shown["bubble_ratio"] == pytest.approx(bubble(4, 8, "1f1b")["bubble_ratio"] / 2)


def test_zero_bubble_states_the_papers_third():
    # ZB-H1 (Qi et al.): a third of 1F1B's bubble: 3 t / 3 = 1 t; ratio 1/8, fraction 1/9.
    shown = bubble(4, 8, "zero-bubble")
    assert shown["bubble_ratio"] == pytest.approx(1 / 8)
    assert shown["bubble_fraction"] == pytest.approx(1 / 9)


def test_microbatches_for_a_target_bubble():
    # 1F1B, p = 8, at most 10%: 7/(m + 7) <= 0.1  <=>  m >= 63.
    assert microbatches_for_bubble(8, 0.10) == 63
    assert bubble(8, 62, "1f1b")["bubble_fraction"] > 0.10
    # p = 4, 20%: 3/(m + 3) <= 0.2  <=>  m >= 12.
    assert microbatches_for_bubble(4, 0.20) == 12
    # Interleaved V = 2, p = 4, 20%: 1.5/(m + 1.5) <= 0.2  <=>  m >= 6; torch's rounds max(1, 6 // 4) = 1 divide it.
    assert microbatches_for_bubble(4, 0.20, "interleaved", 2) == 6
    # 1F1B never goes below pp micro-batches, whatever the target: p = 4 at 50% would need m >= 3, torch wants 4.
    assert microbatches_for_bubble(4, 0.50) == 4


def test_activations_in_flight_by_hand():
    # GPipe holds every micro-batch; 1F1B rank r holds min(m, p - r) (torch: warm-up forwards, then backward).
    assert [in_flight(4, 8, "gpipe", 1, r)["microbatches"] for r in range(4)] == [8, 8, 8, 8]
    assert [in_flight(4, 8, "1f1b", 1, r)["microbatches"] for r in range(4)] == [4, 3, 2, 1]
    assert [in_flight(4, 2, "gpipe", 1, r)["microbatches"] for r in range(4)] == [2, 2, 2, 2]
    # Interleaved p = 4, V = 2, m = 8: rounds 2, 4 per round; warm-up (V-1)·4 + 2(3 - r) chunks, one more forward
    # before the first backward: rank 0 11 chunks = 5.5 micro-batches = p + (p-1)/V (Korthikanti et al.).
    assert [in_flight(4, 8, "interleaved", 2, r)["chunks"] for r in range(4)] == [11, 9, 7, 5]
    assert in_flight(4, 8, "interleaved", 2, 0)["microbatches"] == pytest.approx(4 + 3 / 2)


def test_stages_split_the_blocks_larger_first():
    # 10 blocks over 4 stages: 3, 3, 2, 2. Interleaved over 2 ranks x 2: chunks 3,3,2,2 -> rank 0 has chunks 0 and 2.
    assert stage_layers(10, 4) == [[3], [3], [2], [2]]
    assert stage_layers(10, 2, 2) == [[3, 2], [3, 2]]
    shape = GPT_PRESETS["small"]  # 10 blocks
    params = stage_params(shape, 2)
    assert params[0] == 5 * shape.block_params + shape.embedding_params
    assert params[1] == 5 * shape.block_params + shape.head_params
    assert sum(params) == shape.params


def test_per_stage_figures_by_hand():
    # small: 10 blocks, d 256, seq 128, vocab 4096. pp 2, 1F1B, m 4, 2 GPUs (dp 1, tp 1), fp32 with AdamW.
    shape = GPT_PRESETS["small"]
    figures = pipeline_figures(shape, check_pipeline(2, 4, "1f1b"), gpus=2, batch_size=2, precision="fp32",
                               optimizer="adamw")
    first, last = figures["ranks"]
    # Model state: 16 bytes per parameter of the stage, nothing sharded.
    assert first["model_state_bytes"] == 16 * (5 * shape.block_params + shape.embedding_params)
    # Saved per micro-batch on rank 0: 5 blocks x b·s·d·(2·4 + 14·4) = 5 x 2·128·256·64 bytes.
    assert first["activation_bytes_per_microbatch"] == 5 * 2 * 128 * 256 * 64
    assert first["in_flight_microbatches"] == 2 and last["in_flight_microbatches"] == 1
    assert first["activation_bytes"] == 2 * 5 * 2 * 128 * 256 * 64
    # Boundary tensor b·s·d·4 = 2·128·256·4 bytes; rank 0 sends 4 forward, rank 1 sends 4 gradients back.
    boundary = 2 * 128 * 256 * 4
    assert figures["boundary_bytes"] == boundary
    assert first["p2p"]["forward_bytes"] == 4 * boundary and first["p2p"]["backward_bytes"] == 0
    assert last["p2p"]["backward_bytes"] == 4 * boundary and last["p2p"]["forward_bytes"] == 0
    assert figures["p2p_bytes_per_step"] == 2 * 4 * 1 * boundary
    assert figures["global_batch"] == 1 * 4 * 2


def test_three_d_composes_pp_tp_and_fsdp():
    # 70B shape (86 blocks) on 64 GPUs: pp 4 x tp 8 x dp 2. Rank 0 holds 22 blocks and the embeddings;
    # TP splits them 8 ways, FSDP 2 ways: 16 bytes x ceil(params / 8) / 2 under bf16-mixed with AdamW.
    shape = GPT_SIZES["70B"]
    figures = pipeline_figures(shape, check_pipeline(4, 8, "1f1b", layers=86), gpus=64, tp=8)
    assert figures["mesh"] == {"pp": 4, "dp": 2, "tp": 8}
    first = figures["ranks"][0]
    assert first["layers"] == 22
    local = -(-(22 * shape.block_params + shape.embedding_params) // 8)
    assert first["model_state_bytes"] == 16 * -(-local // 2)
    # FSDP under PP gathers once and reduce-scatters once per step (grad-op's pattern) over dp = 2.
    assert first["dp_comm"]["all_gather"]["wire_bytes_per_rank"] == local * 2 // 2


def test_step_time_with_the_bubble():
    # 1 s of bubble-free work, ratio 3/8: 1.375 s; plus 2 (S-1) hops of 64 MB at 25 GB/s with 10 us each.
    shown = step_time_s(1.0, 3 / 8, stages=4, boundary=64 * 10**6, bytes_per_s=25e9, latency_s=10e-6)
    assert shown["hop_s"] == pytest.approx(10e-6 + 64e6 / 25e9)
    assert shown["step_s"] == pytest.approx(1.375 + 6 * (10e-6 + 64e6 / 25e9))


@pytest.mark.parametrize("args,words", [
    ((4, 0, "1f1b"), "at least 1"),
    ((1, 8, "1f1b"), "pp 1 is no pipeline"),
    ((4, 8, "dualpipe"), "choose one of gpipe, 1f1b, interleaved, zero-bubble"),
    ((4, 2, "1f1b"), "at least as many micro-batches as stages"),
    ((4, 9, "interleaved"), "multiple of its rounds"),
    ((4, 8, "gpipe", 2), "one stage per rank"),
    ((4, 8, "interleaved", 1), "V >= 2"),
    ((4, 8, "zero-bubble", 2), "ZB-H1 claim for one stage per rank"),
    ((4, 8.5, "1f1b"), "whole number"),
    ((4, "many", "1f1b"), "whole number"),
])
def test_bad_pipelines_are_refused_with_what_to_do(args, words):
    with pytest.raises(ValueError, match=words):
        check_pipeline(*args)


def test_more_stages_than_blocks_is_refused():
    with pytest.raises(ValueError, match="each stage needs at least one"):
        check_pipeline(8, 8, "1f1b", layers=4)
    # torch's interleaved schedule accepts 6 micro-batches on 4 ranks (rounds = 1), as its docstring says.
    assert check_pipeline(4, 6, "interleaved").stages == 8


def test_quiz_functions_agree_with_the_model():
    assert pipeline.QUIZ_FUNCTIONS["pipeline_bubble_fraction"](pp=4, microbatches=8) == pytest.approx(3 / 11)
    assert pipeline.QUIZ_FUNCTIONS["pipeline_microbatches_for_bubble"](pp=8, target_fraction=0.1) == 63
    assert pipeline.QUIZ_FUNCTIONS["pipeline_in_flight"](pp=4, microbatches=8, schedule="1f1b", stage=1) == 3
    assert pipeline.QUIZ_FUNCTIONS["pipeline_p2p_bytes"](
        pp=4, microbatches=8, batch_size=1, seq_len=4096, d_model=8192, precision="bf16-mixed") == 2 * 8 * 3 * 4096 * 8192 * 2


def _torch_interleaved_peak(pp: int, m: int, v: int, rank: int) -> int:
    """Chunk micro-batches in flight at the peak of rank `rank`, walking the action list torch 2.13's
    ScheduleInterleaved1F1B builds for it (`_calculate_single_rank_operations`, from the module's own
    `_get_warmup_ops` and `_get_1f1b_rank_ops`): +1 per forward, -1 per backward."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    if not hasattr(schedules, "_get_warmup_ops") or not hasattr(schedules, "_get_1f1b_rank_ops"):
        pytest.skip("this torch builds the interleaved order another way")
    rounds = max(1, m // pp)
    per_round = m // rounds
    warmup = schedules._get_warmup_ops(rank, v, per_round, pp, m)
    fwd_bwd = v * m - warmup
    ops = schedules._get_1f1b_rank_ops(
        v, pp, warmup, fwd_bwd, v * m - fwd_bwd, rank,
        lambda step: ((step // per_round) % v) * pp + rank,
        lambda step: (v - 1 - ((step - warmup) // per_round) % v) * pp + rank,
    )
    held = peak = 0
    for action in ops:
        if action is None:
            continue
        held += 1 if action.computation_type == schedules._ComputationType.FORWARD else -1
        peak = max(peak, held)
    assert held == 0
    return peak


@pytest.mark.parametrize("pp,m,v", [(4, 8, 2), (4, 6, 2), (4, 12, 3), (2, 8, 4), (8, 16, 2), (4, 3, 2)])
def test_interleaved_in_flight_matches_torchs_own_action_order(pp, m, v):
    for rank in range(pp):
        assert in_flight(pp, m, "interleaved", v, rank)["chunks"] == _torch_interleaved_peak(pp, m, v, rank), rank
