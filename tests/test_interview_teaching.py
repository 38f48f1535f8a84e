"""What the design interview teaches, held against scenarios worked by hand: calls counted the way each
implementation issues them, activations in the dtype each strategy's precision gives them, the talking
points that follow, ties and tolerances that grade what the step means to teach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpfsdp.quiz.interview import answers, debrief, generate


def _step(scenario, kind: str, nth: int = 0):
    return [step for step in scenario.steps if step.kind == kind][nth]


def test_ddp_s_calls_are_its_buckets_not_25_mib_slices():
    # Seed 1492: GPT-3-XL-like (24 layers, d 2048, vocabulary 50257, seq 2048) on one DGX A100 node, under DDP,
    # bf16-mixed: fp32 gradients.
    # Every matrix of a d=2048 block is 16.8 to 67.1 MB, past DDP's 25 MiB cap, so each closes a bucket of its
    # own with the small tensors before it: 4 per block = 96, the head, the embeddings... 74 in all, as
    # q_ddp_buckets counts them (never splitting a tensor), where 25 MiB slices of 5.26 GB made 199.
    scenario = generate.generate(1492)
    assert scenario.plan == "ddp"
    step = _step(scenario, "comm-time")
    assert "74 buckets" in step.prompt and "never splitting a tensor" in step.prompt
    assert "74 calls ×" in step.working
    # Latency 74 * 14 ring steps * 3.4 us = 3.522 ms; bandwidth 2 * 7/8 * 5.2 GB over 300 GB/s = 30.33 ms.
    assert step.answer == pytest.approx(0.0338566, rel=1e-4)


def test_deepspeed_s_calls_are_its_reduce_buckets_and_one_all_gather():
    # Seed 3: Llama-2-13B-like, 512 GPUs, DeepSpeed ZeRO-1 in bf16-master. 1.297e10 gradient elements in
    # reduce buckets of 5e8: 26 reductions; one all-gather of the updated partitions (one parameter group).
    # Each call costs 448 NVLink steps * 3.4 us + 63 network steps * 14 us = 2.4052 ms.
    # reduce-scatter 26 * 2.4052 ms = 62.54 ms + 25.95 GB / 25 GB/s (1.038 s) = 1.101 s;
    # all-gather 2.405 ms + 1.038 s = 1.040 s. Total 2.141 s (992 calls of 25 MiB made it 6.85 s).
    scenario = generate.generate(3)
    assert scenario.plan == "zero1"
    step = _step(scenario, "comm-time")
    assert "26 here" in step.prompt and "1 here" in step.prompt
    assert step.answer == pytest.approx(2.141, rel=2e-3)
    points = _step(scenario, "explain-faster").talking_points
    # The largest cost is bandwidth now, not latency from a thousand calls.
    largest = next(point for point in points if point.startswith("The largest cost"))
    assert "reduce-scatter" in largest and "1.101 s" in largest


def test_the_reduce_dtype_talking_point_holds_only_where_gradients_are_fp32():
    bf16_master = _step(generate.generate(3), "explain-faster").talking_points
    assert not any("halves the gradient bytes" in point for point in bf16_master)
    assert any("already reduced in bf16" in point for point in bf16_master)
    # Seed 4: FSDP2 under bf16-mixed reduces in fp32 (reduce_dtype=fp32).
    points = _step(generate.generate(4), "explain-faster").talking_points
    assert any("reduced in fp32 here" in point and "halves the gradient bytes" in point for point in points)


def test_fsdp2_s_activations_have_a_bf16_residual_stream():
    # Seed 4: Llama-2-70B-like (80 layers, d 8192, vocabulary 32000), seq 4096, micro-batch 1, ZeRO-3 as FSDP2
    # with MixedPrecisionPolicy(param_dtype=bf16): r = c = 2.
    # block 1*4096*8192*(2*2 + 14*2) = 2^30 B = 1 GiB; 80 blocks = 80 GiB; head 4096*8192*(2 + 2) = 0.125 GiB
    # + fp32 log-softmax 4096*32000*4 = 0.4883 GiB; the peak adds its gradient: 81.10 GiB (autocast's r = 4
    # would make 91.2 GiB).
    scenario = generate.generate(4)
    assert scenario.plan == "zero3" and scenario.setup.precision == "bf16-mixed"
    step = _step(scenario, "activations")
    assert step.answer / 2**30 == pytest.approx(81.1016, rel=1e-5)
    assert "r = 2" in step.prompt and "MixedPrecisionPolicy" in step.prompt
    assert "(2·2 + 14·2) = 1 GiB" in step.working


def test_ddp_s_activations_keep_an_fp32_residual_stream():
    scenario = generate.generate(1492)  # DDP under bf16-mixed: autocast
    step = _step(scenario, "activations")
    assert "r = 4" in step.prompt and "torch.autocast" in step.prompt


STORED_SIMULATION = Path(__file__).parent / "data" / "interview_sim_13b_world8.json"


def _debrief_rows(result: dict):
    scenario = generate.generate(0, family="scale", model="Llama-2-13B-like", cluster="DGX A100 40GB")
    return {row.figure.split(" (")[0]: row for row in debrief.compare(scenario, {}, result)}


def test_every_difference_the_debrief_shows_is_explained():
    rows = _debrief_rows(json.loads(STORED_SIMULATION.read_text()))
    for row in rows.values():
        if row.difference is not None and abs(row.difference) > 0.01:
            assert row.why, row.figure
    # The simulated FSDP2 run holds a bf16 residual stream: the model for what was simulated counts it so.
    # 13B shape (38 layers, d 5120, vocabulary 100,352, seq 4096, micro-batch 1): block 4096*5120*32 =
    # 671,088,640 B; 38 blocks 25,501,368,320; head 4096*5120*4 = 83,886,080 + log-softmax 4096*100352*4 =
    # 1,644,167,168; the peak adds the gradient again: 28,873,588,736 B.
    assert rows["activations at the peak"].simulated_theory == 28_873_588_736
    peak = rows["peak per GPU"]
    assert "zero_grad(set_to_none=True)" in peak.why and "temporaries 3.288 GB" in peak.why


def test_an_activation_figure_from_a_peak_after_backward_is_not_set_against_the_model():
    result = json.loads(STORED_SIMULATION.read_text())
    rank = result["memory"]["ranks"][0]
    rank["peak_phase"], rank["peak_module"] = "optimizer step", None
    rank["peak_breakdown"]["activations"] = 4
    row = _debrief_rows(result)["activations at the peak"]
    assert row.difference is None and row.measured == 4
    assert "peaks in its optimizer step" in row.why


def test_the_hsdp_tie_break_is_in_the_prompt_and_ties_are_what_a_reader_sees():
    # Seed 3: G = 4 and G = 8 both step 8.192 s (overlap hides all their communication); G = 8 communicates
    # less (2.352 s against 4.416 s). Seed 4: G = 16 and G = 32 step 89.2996 s and 89.2998 s, both read
    # 89.3 s, and communicate as much; G = 32 holds less (35 GB against 70 GB).
    for seed, best in ((3, 8), (4, 32)):
        step = _step(generate.generate(seed), "hsdp-group")
        assert "Ties (to 4 figures) go to the G that sends least, then holds least" in step.prompt
        assert step.options[int(step.answer) - 1].value == best, seed


def test_the_exposed_share_is_graded_relative_with_a_floor():
    # Seed 5: DDP on one node, the key 2.5% (a few ms of the last buckets' all-reduce show). Believing
    # everything hides (0%) is 2.5 points off, beyond the 1-point floor: it fails.
    step = _step(generate.generate(5), "exposed-share")
    assert step.answer == pytest.approx(0.025, abs=0.001)
    assert not answers.grade(step, "0").correct
    assert answers.grade(step, f"{step.answer * 100 + 0.9:.3f}").correct  # within the 1-point floor
    # Seed 3's 11.3% key takes a fifth of itself: 2.26 points either way (9.04 to 13.56).
    large = _step(generate.generate(3), "exposed-share")
    assert large.answer == pytest.approx(0.113, abs=0.001)
    assert answers.grade(large, "9.2").correct and not answers.grade(large, "8.8").correct
    assert "within 20% of it, or 1 point" in large.tolerance_text


def test_the_activation_step_s_cast_follows_the_implementation_graded():
    # Seeds 2 and 3 grade ZeRO-3 and ZeRO-1 as DeepSpeed's, in bf16-master: DeepSpeed casts the model itself
    # to bf16; nothing of FSDP2's policy applies there.
    from ddpfsdp.demos.theory.implementations import implementation

    for seed in (2, 3):
        step = _step(generate.generate(seed), "activations")
        assert "(as DeepSpeed ZeRO stage" in step.prompt
        assert "MixedPrecisionPolicy" not in step.prompt and "FSDP2" not in step.prompt
        assert "DeepSpeed with bf16 enabled casts the model itself to bf16" in step.prompt
    seen = set()
    for seed in range(80):
        scenario = generate.generate(seed)
        for step in [s for s in scenario.steps if s.kind == "activations"]:
            held = implementation(step.args["strategy"], step.args["precision"])
            reason = step.prompt.split(f"(as {held.name}): ", 1)[1].split(". Use the analytic model")[0]
            precision = step.args["precision"]
            seen.add((held.name.split(",")[0], precision))
            assert ("DeepSpeed" in reason) == (held.name.startswith("DeepSpeed") and precision != "fp32"), reason
            assert ("MixedPrecisionPolicy" in reason) == ("FSDP2" in held.name and precision == "bf16-mixed"), reason
            assert ("torch.autocast" in reason) == (held.cast == "autocast" and precision == "bf16-mixed"), reason
            # The residual stream's dtype the reason names is the one the step's r counts.
            r = 4 if "stays in the held dtype (fp32)" in reason or "everything is fp32" in reason else 2
            assert f"(r = {r}," in step.prompt, reason
    assert len({name for name, _ in seen}) >= 4 and len({p for _, p in seen}) == 3, seen


def test_the_pipeline_explanation_prices_interleaving_at_torch_s_send_count():
    scenario = generate.generate(0, family="pipeline")
    points = " ".join(_step(scenario, "explain-pipeline").talking_points)
    assert "(pV-1)/(p-1) times the boundary sends (2V-1 times on the first and last ranks)" in points
    assert "for V times the boundary sends" not in points


def test_the_debrief_calls_zro_by_its_name_not_zero1():
    note = debrief.DEMOS["zero1"][2]
    assert "PyTorch's ZeRO-1" not in note and "runs zro, PyTorch's ZeroRedundancyOptimizer" in note
