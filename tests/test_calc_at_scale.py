"""The at-scale analytic model against examples worked by hand: stragglers, checkpoints and their interval,
topology and hierarchical all-reduce, scaling, the 3-D plan, 8-bit Adam and LoRA. Each example's
arithmetic is written beside it."""

from __future__ import annotations

import math

import pytest

from ddpfsdp.demos.base.shapes import GPTShape
from ddpfsdp.demos.theory import (
    bandwidth,
    checkpointing,
    lora,
    optimizer_8bit,
    plan3d,
    stragglers,
    topology,
)
from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS

# ----------------------------------------------------------------------------- stragglers


def test_slow_step_probability_by_hand():
    # 1 - 0.999^100: ln 0.999 = -0.00100050033; x 100 = -0.100050033; e^that = 0.904792147; 1 - it = 0.095207853.
    assert stragglers.slow_step_probability(0.001, 100) == pytest.approx(0.095207853, rel=1e-8)
    # 1 - 0.999^10000: e^-10.0050033 = 4.51733e-5, so 0.9999548267.
    assert stragglers.slow_step_probability(0.001, 10_000) == pytest.approx(0.9999548267, rel=1e-9)
    # One rank: p itself; p = 0 or 1: never or always.
    assert stragglers.slow_step_probability(0.25, 1) == pytest.approx(0.25)
    assert stragglers.slow_step_probability(0, 10**6) == 0
    assert stragglers.slow_step_probability(1, 3) == 1
    # Tiny p without cancellation: 1 - (1 - 1e-12)^10 = 1e-11 - 45e-24 (the binomial's second term).
    assert stragglers.slow_step_probability(1e-12, 10) == pytest.approx(1e-11 - 4.5e-23, rel=1e-12)


def test_expected_step_and_a_persistent_straggler_by_hand():
    # 1 s + 0.3 s x 0.095207853 = 1.0285623559 s.
    assert stragglers.expected_step_s(1.0, 0.3, 0.001, 100) == pytest.approx(1.0285623559, rel=1e-9)
    # One node's backward takes 800 ms where the others take 500: every step 800, the others wait 300, 62.5%.
    slow = stragglers.persistent_straggler(0.5, 0.8)
    assert slow == pytest.approx({"step_s": 0.8, "others_wait_s": 0.3, "efficiency": 0.625})
    # Jitter: 1 + 0.01 x sqrt(2 ln 10000) = 1 + 0.01 x sqrt(18.420681) = 1 + 0.01 x 4.2919321 = 1.0429193.
    assert stragglers.jitter_bound_s(1.0, 0.01, 10_000) == pytest.approx(1.0429193, rel=1e-7)


@pytest.mark.parametrize("call, message", [
    (lambda: stragglers.slow_step_probability(1.5, 10), "from 0 to 1"),
    (lambda: stragglers.slow_step_probability(-0.1, 10), "from 0 to 1"),
    (lambda: stragglers.slow_step_probability(0.1, 0), "at least 1"),
    (lambda: stragglers.expected_step_s(1.0, -0.2, 0.1, 10), "cannot be negative"),
    (lambda: stragglers.expected_step_s(1.0, 600, 0.1, 10), "time-out"),
    (lambda: stragglers.expected_step_s(0, 0.1, 0.1, 10), "more than 0"),
    (lambda: stragglers.persistent_straggler(0.8, 0.5), "swap them"),
])
def test_straggler_bad_input_says_what_to_give(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_size_by_hand():
    # 175B with bf16-master Adam: bf16 params 2 + fp32 master 4 + two fp32 moments 8 = 14 bytes, no gradients.
    assert checkpointing.checkpoint_bytes(175 * 10**9, "bf16-master", "adam") == 2_450_000_000_000
    # Over 512 ranks: 2.45e12 / 512 = 4,785,156,250 bytes each.
    assert QUIZ_FUNCTIONS["checkpoint_bytes"](params="175B", precision="bf16-master", optimizer="adam",
                                              gpus=512) == 4_785_156_250
    # bf16-mixed AdamW (fp32 params 4 + moments 8 = 12): 7B -> 84 GB; pure bf16 Adam 2 + 4 = 6.
    assert checkpointing.checkpoint_bytes(7 * 10**9, "bf16-mixed", "adamw") == 84 * 10**9
    assert checkpointing.checkpoint_bytes_per_param("bf16", "adam") == 6


def test_write_time_is_the_slower_of_the_rank_and_the_storage():
    # 4.785e9 B at 2 GB/s per rank = 2.392578125 s; 2.45e12 B at 500 GB/s aggregate = 4.9 s: the storage bounds it.
    assert checkpointing.write_time_s(4_785_156_250, 2.45e12, 2e9, 500e9) == pytest.approx(4.9)
    assert checkpointing.write_time_s(4_785_156_250, 2.45e12, 2e9, None) == pytest.approx(2.392578125)


def test_mtbf_and_the_young_daly_interval_by_hand():
    # Llama 3: 54 days x 24 h x 16,384 GPUs / 419 interruptions = 21,233,664 / 419 = 50,677.0 GPU-hours.
    assert checkpointing.GPU_MTBF_HOURS == pytest.approx(50_677.0, abs=0.1)
    # A GPU MTBF of 50,000 h over 10,000 GPUs: 5 h = 18,000 s.
    assert checkpointing.job_mtbf_s(50_000 * 3600, 10_000) == pytest.approx(18_000)
    # Young: C = 300 s, M = 3,600 s: sqrt(2 x 300 x 3600) = sqrt(2,160,000) = 1,469.6938 s = 24.495 min.
    assert checkpointing.young_interval_s(300, 3600) == pytest.approx(1469.6938, rel=1e-7)
    assert QUIZ_FUNCTIONS["young_interval_min"](checkpoint_min=5, mtbf_hours=1) == pytest.approx(24.494897, rel=1e-7)
    # Daly: C/2M = 300/7200 = 0.0416667, its root 0.2041241; 1 + 0.0680414 + 0.0046296 = 1.0726710;
    # 1469.6938 x 1.0726710 = 1469.6938 + 106.8042 = 1576.4980; minus C: 1276.4980 s.
    assert checkpointing.daly_interval_s(300, 3600) == pytest.approx(1276.4980, rel=1e-6)
    # Beyond C >= 2M Daly's interval is M.
    assert checkpointing.daly_interval_s(8000, 3600) == 3600


def test_goodput_lost_by_hand():
    # 5 minutes every hour with a 10 h job MTBF: C/tau = 300/3600 = 8.333%, tau/2M = 3600/72000 = 5%: 13.333%.
    shares = checkpointing.lost_shares(3600, 300, 36_000)
    assert shares["checkpoint"] == pytest.approx(1 / 12) and shares["rework"] == pytest.approx(0.05)
    assert shares["total"] == pytest.approx(0.133333, rel=1e-5) and shares["goodput"] == pytest.approx(0.866667, rel=1e-5)
    # 10x the GPUs, MTBF 1 h: tau/2M = 50%, 58.3% lost at the same interval.
    assert QUIZ_FUNCTIONS["checkpoint_lost_share"](interval_min=60, checkpoint_min=5, mtbf_hours=1) == pytest.approx(
        7 / 12)
    # At Young's interval the two shares are equal and sum to sqrt(2C/M) = sqrt(600/3600) = 0.4082483.
    assert QUIZ_FUNCTIONS["checkpoint_lost_share_at_young"](checkpoint_min=5, mtbf_hours=1) == pytest.approx(
        0.4082483, rel=1e-6)
    # A 10-minute restart with a 10 h MTBF: R/M = 600/36000 = 1.667% more.
    assert checkpointing.lost_shares(3600, 300, 36_000, 600)["restart"] == pytest.approx(1 / 60)


@pytest.mark.parametrize("call, message", [
    (lambda: checkpointing.job_mtbf_s(0, 8), "more than 0"),
    (lambda: checkpointing.job_mtbf_s(-5, 8), "more than 0"),
    (lambda: checkpointing.write_time_s(1, 1, 0, None), "more than 0"),
    (lambda: checkpointing.write_time_s(1, 1, None, None), "needs a bandwidth"),
    (lambda: checkpointing.lost_shares(0, 300, 3600), "interval"),
])
def test_checkpoint_bad_input_says_what_to_give(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- bandwidths


@pytest.mark.parametrize("text, expected", [
    ("50GB/s", 50e9), ("400Gbps", 50e9), ("400Gb/s", 50e9), ("25GiB/s", 25 * 2**30), ("1.5e10", 1.5e10), ("2 GB/s", 2e9),
])
def test_rates_are_read_in_bytes_per_second(text, expected):
    assert bandwidth.parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [("90s", 90), ("5min", 300), ("2h", 7200), ("300ms", 0.3), ("1.5", 1.5)])
def test_durations_are_read_in_seconds(text, expected):
    assert bandwidth.parse_duration_s(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["fast", "-3GB/s", "0GB/s", "10 parsecs"])
def test_a_bad_rate_or_duration_names_the_format(bad):
    with pytest.raises(ValueError, match="write it like"):
        bandwidth.parse_rate(bad) if "GB" in bad or bad == "fast" else bandwidth.parse_duration_s(bad)


# ----------------------------------------------------------------------------- topology


def _two_nodes(**changes) -> topology.Topology:
    # 16 GPUs in 2 nodes of 8, 100 GB/s inside, 10 GB/s between, no latency.
    figures = {"gpus": 16, "gpus_per_node": 8, "intra_bytes_per_s": 100e9, "inter_bytes_per_s": 10e9,
               "intra_latency_s": 0.0, "inter_latency_s": 0.0, **changes}
    return topology.check_topology(**figures)


def test_flat_and_hierarchical_all_reduce_by_link_by_hand():
    topo = _two_nodes()
    # Flat ring of 16 over 8 GB: 2 x 15/16 x 8e9 = 15e9 B through every GPU, paced by the 10 GB/s hop: 1.5 s.
    flat = topology.flat_ring_all_reduce(8e9, topo)
    assert flat["wire_bytes_per_gpu"] == pytest.approx(15e9) and flat["time_s"] == pytest.approx(1.5)
    assert flat["link"] == "inter"
    # Hierarchical: reduce-scatter in the node 7/8 x 8e9 = 7e9 B / 100 GB/s = 0.07 s; all-reduce of 8e9/8 = 1e9 B
    # across 2 nodes, 2 x 1/2 x 1e9 = 1e9 B / 10 GB/s = 0.1 s; all-gather 0.07 s: 0.24 s.
    tree = topology.hierarchical_all_reduce(8e9, topo)
    assert [(p["op"], p["link"]) for p in tree["phases"]] == [
        ("reduce_scatter", "intra"), ("all_reduce", "inter"), ("all_gather", "intra")]
    assert [p["time_s"] for p in tree["phases"]] == pytest.approx([0.07, 0.1, 0.07])
    assert tree["time_s"] == pytest.approx(0.24)
    assert tree["by_link"]["intra"]["wire_bytes_per_gpu"] == pytest.approx(14e9)
    assert tree["by_link"]["inter"]["wire_bytes_per_gpu"] == pytest.approx(1e9)
    # 2:1 oversubscribed with a node per rack: 5 GB/s between, the all-reduce 0.2 s, the total 0.34 s; flat 3 s.
    over = _two_nodes(oversubscription=2)
    assert topology.hierarchical_all_reduce(8e9, over)["time_s"] == pytest.approx(0.34)
    assert topology.flat_ring_all_reduce(8e9, over)["time_s"] == pytest.approx(3.0)
    # Both nodes under one leaf: the rack runs at full speed again.
    assert topology.hierarchical_all_reduce(8e9, _two_nodes(oversubscription=2, rack_nodes=2))["time_s"] == \
        pytest.approx(0.24)


def test_hierarchical_latency_by_hand():
    # 1,024 GPUs in 128 nodes of 8 at NCCL's 3.4 us (NVLink) and 14 us (network) per ring step, 1 byte:
    # reduce-scatter 7 x 3.4 = 23.8 us; all-reduce over 128 nodes 2 x 127 x 14 = 3,556 us; all-gather 23.8 us.
    topo = topology.check_topology(gpus=1024, gpus_per_node=8)
    assert topology.hierarchical_all_reduce(1, topo)["time_s"] == pytest.approx(3603.6e-6, rel=1e-3)
    # A GPU's NIC carries 2 x 127/128 x S/8: for 28 GB, 6,945,312,500 bytes.
    assert QUIZ_FUNCTIONS["hierarchical_inter_bytes"](size_bytes=28e9, gpus=1024, gpus_per_node=8) == \
        pytest.approx(6_945_312_500)


def test_hsdp_by_link_by_hand():
    # 1e9 params, bf16-mixed, 16 GPUs, groups of a node: all-gather 2 x 1e9 x 2 B = 4e9 B x 7/8 = 3.5e9 on NVLink;
    # reduce-scatter 1e9 x 4 B = 4e9 x 7/8 = 3.5e9 on NVLink; all-reduce of the shard 1e9/8 x 4 B = 5e8 over 2
    # replicas, 2 x 1/2 x 5e8 = 5e8 between nodes. At 100 and 10 GB/s: 0.035 + 0.035 s inside, 0.05 s between.
    hsdp = topology.hsdp_by_link(10**9, _two_nodes(), "bf16-mixed")
    assert hsdp["by_link"]["intra"]["wire_bytes_per_gpu"] == pytest.approx(7e9)
    assert hsdp["by_link"]["inter"]["wire_bytes_per_gpu"] == pytest.approx(5e8)
    assert hsdp["by_link"]["intra"]["time_s"] == pytest.approx(0.07)
    assert hsdp["by_link"]["inter"]["time_s"] == pytest.approx(0.05)


def test_scaling_by_hand():
    # 512 -> 1,024 GPUs, throughput x 1.1: efficiency 1.1 / 2 = 55%. Strong: (1/1.1 - 1/2) / (1 - 1/2) =
    # (0.9090909 - 0.5) / 0.5 = 0.8181818 of the step did not shrink. Weak: the step took 2 / 1.1 = 1.818182x.
    scaled = topology.scaling(512, 1024, 1.1)
    assert scaled["efficiency"] == pytest.approx(0.55)
    assert scaled["strong_fixed_share_before"] == pytest.approx(0.8181818, rel=1e-7)
    assert scaled["weak_step_ratio"] == pytest.approx(1.818182, rel=1e-6)
    # Amdahl, forward: 1 / (0.1818182 / 2 + 0.8181818) = 1 / 0.9090909 = 1.1.
    assert topology.strong_scaling_speedup(2, scaled["strong_fixed_share_before"]) == pytest.approx(1.1)


@pytest.mark.parametrize("call, message", [
    (lambda: topology.check_topology(gpus=1020, gpus_per_node=8), "1,016 or 1,024"),
    (lambda: topology.check_topology(gpus=16, gpus_per_node=8, oversubscription=0.5), "1 \\(non-blocking\\)"),
    (lambda: topology.check_topology(gpus=16, gpus_per_node=8, inter_bytes_per_s=0), "more than 0"),
    (lambda: topology.scaling(1024, 512, 1.1), "larger count second"),
    (lambda: topology.scaling(512, 1024, 0), "more than 0"),
])
def test_topology_bad_input_says_what_to_give(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- the 3-D plan


def _megatron_job(**changes) -> plan3d.Job:
    # 1,024 A100-80GB in DGX nodes of 8: NVLink 3 at 300 GB/s, HDR at 25 GB/s per GPU, 312 TFLOP/s bf16.
    topo = topology.check_topology(gpus=1024, gpus_per_node=8, intra_bytes_per_s=300e9, inter_bytes_per_s=25e9)
    return plan3d.check_job(shape=plan3d.plan_shape("175B"), topo=topo, gpu_mem_bytes=80 * 10**9,
                            peak_flops_per_s=312e12, **changes)


def test_the_plan_for_175b_on_1024_gpus_is_megatrons_by_hand():
    job = _megatron_job()
    plan = plan3d.plan(job)
    first = plan["candidates"][0]
    assert (first["tp"], first["pp"], first["dp"], first["microbatches"]) == (8, 8, 16, 96)
    assert [(c["tp"], c["pp"]) for c in plan["candidates"]] == [(8, 8), (8, 16), (8, 32)]
    assert not first["checkpoint_activations"]
    # Memory, rank 0: 12 blocks of 12d^2 + 13d = 1,812,099,072 params, plus the embeddings (50,257 + 2,048) x
    # 12,288 = 642,723,840: 22,387,912,704; TP 8: 2,798,489,088 each. ZeRO-1 under bf16-master: 2 + 2 bytes
    # whole, 12 over dp 16 (174,905,568 each): 5,596,978,176 x 2 + 2,098,866,816 = 13,292,823,168 bytes.
    memory = first["memory"]
    assert memory["rank"] == 0 and memory["local_params"] == 2_798_489_088
    assert memory["model_state_bytes"] == 13_292_823_168
    # Activations: a block saves b·s·d (2·2 + 2·2 + 12·2/8) = 11 b·s·d = 11 x 25,165,824 bytes under TP 8; 12
    # blocks per micro-batch, 8 in flight on rank 0 (1F1B: min(m, pp)): 96 x 11 x 25,165,824 = 26,575,110,144.
    assert memory["activation_bytes"] == 26_575_110_144
    assert memory["total_bytes"] == 13_292_823_168 + 26_575_110_144
    # Compute: 6 x P x 1,536 x 2,048 / (1,024 x 312e12 x 0.5); the bubble (pp-1)/m = 7/96 of it.
    compute = 6 * job.shape.params * 1536 * 2048 / (1024 * 312e12 * 0.5)
    assert first["terms"]["compute_s"] == pytest.approx(compute)
    assert first["terms"]["bubble_s"] == pytest.approx(compute * 7 / 96)
    # TP: 4 all-reduces x 12 blocks x 96 micro-batches = 4,608, each of 2,048 x 12,288 x 2 = 50,331,648 bytes,
    # 2 x 7/8 on the wire: 405,874,409,472 B / 300 GB/s = 1.352915 s; latency 4,608 x 14 steps x 3.4 us = 0.219341 s.
    assert first["comm"]["tp"]["link"] == "intra" and first["comm"]["tp"]["calls"] == 4608
    assert first["terms"]["tp_s"] == pytest.approx(1.352915 + 0.219341, rel=1e-5)
    # PP: 2 x 7 hops of (14 us + 50,331,648 / 25e9 s = 2.027266 ms) = 28.3817 ms, over the network.
    assert first["terms"]["pp_s"] == pytest.approx(0.0283817, rel=1e-5)
    # DP (ZeRO-1): reduce-scatter and all-gather of 2,798,489,088 x 2 bytes over 16 ranks, 15/16 each on the wire:
    # 10,494,334,080 B / 25 GB/s = 0.4197734 s, plus 2 x 15 x 14 us = 0.00042 s.
    assert first["terms"]["dp_s"] == pytest.approx(0.4197734 + 0.00042, rel=1e-5)
    assert first["step_s"] == pytest.approx(sum(first["terms"].values()))


def test_why_the_others_lose():
    plan = plan3d.plan(_megatron_job())
    by_degrees = {(o["tp"], o["pp"], o["dp"]): o for o in plan["others"]}
    # No pipeline and TP 8: 175B x 4.75 bytes / 8 = 103.9 GB of model state alone: does not fit 80 GB.
    assert by_degrees[(8, 1, 128)]["loses_by"] == "memory" and not by_degrees[(8, 1, 128)]["fits"]
    # TP 16 spans two nodes: its all-reduces cross the 25 GB/s network.
    assert by_degrees[(16, 8, 8)]["loses_by"] == "tp-across-nodes"
    # TP 1 puts a whole block's matrices on each GPU: it fits only with deep pipelines and their bubble.
    assert by_degrees[(1, 32, 32)]["loses_by"] == "bubble"
    assert sum(plan["loses_by"].values()) == len(plan["others"])
    # tp 1 x pp 1 x dp 1,024 cannot split 1,536 sequences evenly.
    assert plan["invalid"] == [{"tp": 1, "pp": 1, "dp": 1024, "reason": plan["invalid"][0]["reason"]}]
    assert "not a whole number" in plan["invalid"][0]["reason"]
    # With only the first shown, tp 8 x pp 16 (24.155 s) is faster than tp 8 x pp 8 (24.234 s) by 0.3%: within
    # 1% of the fastest they tie, and the fewer stages rank first; the other is said to lose on the tie.
    tied = {(o["tp"], o["pp"]): o for o in plan3d.plan(_megatron_job(), top=1)["others"]}[(8, 16)]
    assert tied["loses_by"] == "tie" and "16 pipeline stages against 8" in tied["reason"]


def test_a_plan_that_cannot_fit_says_what_to_do():
    topo = topology.check_topology(gpus=8, gpus_per_node=8)
    job = plan3d.check_job(shape=plan3d.plan_shape("175B"), topo=topo, gpu_mem_bytes=80 * 10**9,
                           peak_flops_per_s=989e12, global_batch=64)
    with pytest.raises(ValueError, match="add GPUs"):
        plan3d.plan(job)
    with pytest.raises(ValueError, match="needs their shape"):
        plan3d.plan_shape("123B")


def test_plan_degrees_answers_the_interview():
    args = {"model": "175B", "gpus": 1024, "gpus_per_node": 8, "gpu_mem": "80GB", "peak_flops_per_s": 312e12,
            "intra_bytes_per_s": 300e9, "inter_bytes_per_s": 25e9}
    assert plan3d.QUIZ_FUNCTIONS["plan_degrees"](**args) == "tp 8 x pp 8 x dp 16"
    assert plan3d.QUIZ_FUNCTIONS["plan_degrees"](**args, rank=2) == "tp 8 x pp 16 x dp 8"
    # A choice, not a number: the bank's numeric functions do not offer it.
    assert "plan_degrees" not in QUIZ_FUNCTIONS


# ----------------------------------------------------------------------------- 8-bit Adam and LoRA


def test_eight_bit_adam_by_hand():
    # A tensor of 4,096 x 4,096 = 16,777,216: 2 uint8 states and 2 fp32 absmax per 2,048 (8,192 blocks):
    # 2 x (16,777,216 + 4 x 8,192) = 33,619,968 bytes; a LayerNorm of 4,096 keeps fp32 states: 2 x 4 x 4,096 = 32,768.
    assert optimizer_8bit.tensor_state_bytes(4096 * 4096) == 33_619_968
    assert optimizer_8bit.tensor_state_bytes(4095) == 2 * 4 * 4095
    assert optimizer_8bit.state_bytes([4096 * 4096, 4095]) == 33_619_968 + 32_760 + 2048
    assert optimizer_8bit.state_bytes_per_param() == pytest.approx(2 + 8 / 2048)
    # 7B under ZeRO-3 on 8 GPUs, bf16-mixed: fp32 params and grads 8 B x 875,000,000 = 7e9; state 2 x (875,000,000 +
    # 4 x 427,247 blocks) = 1,753,417,976: 8,753,417,976 bytes, against 32-bit Adam's 8 x 875e6 = 7e9 of state.
    row = optimizer_8bit.model_state_8bit(7 * 10**9, 8, "zero3", "bf16-mixed")
    assert row["optimizer_bytes"] == 1_753_417_976 and row["model_state_bytes"] == 8_753_417_976
    assert row["adam32_optimizer_bytes"] == 7 * 10**9 and row["saved_bytes"] == 7 * 10**9 - 1_753_417_976


def test_lora_and_qlora_by_hand():
    shape = GPTShape(layers=80, d_model=8192, heads=64, seq_len=4096, vocab=32000)
    # Adapters of rank 16 on all four Linears: 16 r d per block = 16 x 16 x 8,192 x 80 = 167,772,160.
    assert lora.adapter_params(shape, 16, "all") == 167_772_160
    assert lora.adapter_params(shape, 16, "attention") == 6 * 16 * 8192 * 80
    # NF4 with double quantization: 0.5 + 1/64 + 4/(64 x 256) bytes = 0.5159302 a weight (0.127 bit of constants).
    assert lora.base_bytes_per_param("nf4") == pytest.approx(0.5 + 1 / 64 + 4 / 16384)
    assert (lora.base_bytes_per_param("nf4") - 0.5) * 8 == pytest.approx(0.127, abs=5e-4)
    memory = lora.lora_memory(shape, rank=16, gpus=8)
    # Quantized: 12 d^2 x 80 = 64,424,509,440 weights x 0.5159302 = 33,238,286,336 bytes (rounded up); the other
    # params stay bf16; adapters 167,772,160 x 16 = 2,684,354,560.
    quantized = 12 * 8192 * 8192 * 80
    base = math.ceil(quantized * (0.5 + 1 / 64 + 4 / 16384)) + (shape.params - quantized) * 2
    assert memory["base_bytes"] == base and memory["adapter_state_bytes"] == 2_684_354_560
    assert memory["fsdp_bytes_per_gpu"] == math.ceil((base + 2_684_354_560) / 8)
    assert memory["ddp_bytes_per_gpu"] == base + 2_684_354_560
    with pytest.raises(ValueError, match="base weights"):
        lora.base_bytes_per_param("fp8")
