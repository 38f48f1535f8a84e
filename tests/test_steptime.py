"""The step-time model against examples worked by hand (each one's arithmetic is written beside it)."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.theory import overlap, planning, presets, steptime
from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels


def test_compute_time_is_six_flops_per_parameter_and_token():
    # 6 * 1e9 params * 1e6 tokens = 6e15 FLOPs; 8 GPUs * 1e15 FLOP/s * 0.5 MFU = 4e15 FLOP/s -> 1.5 s.
    assert steptime.compute_time_s(1e9, 1e6, 8, 1e15, 0.5) == pytest.approx(1.5)
    # 7e9 params, 2**22 tokens on 64 H100s at 40%: 6 * 7e9 * 4194304 = 1.76160768e17 FLOPs over
    # 64 * 989e12 * 0.4 = 2.531840e16 FLOP/s: 1.76160768 / 2.53184 * 10 = 6.957816 s.
    assert steptime.compute_time_s(7e9, 2**22, 64, 989e12, 0.4) == pytest.approx(6.957816, rel=1e-6)


@pytest.mark.parametrize("mfu", [0, -0.1, 1.5])
def test_compute_time_refuses_an_mfu_outside_its_range(mfu):
    with pytest.raises(ValueError, match="MFU"):
        steptime.compute_time_s(1e9, 1e6, 8, 1e15, mfu)


def test_ring_steps_inside_a_node_and_across_nodes():
    assert steptime.ring_steps("all_reduce", 4) == (6, 0)  # 2(n-1) = 6, all on NVLink
    assert steptime.ring_steps("all_gather", 8) == (7, 0)  # n-1 = 7
    assert steptime.ring_steps("all_reduce", 16, nodes=2) == (28, 2)  # 30 steps, 2(k-1) = 2 across
    assert steptime.ring_steps("reduce_scatter", 8, nodes=8) == (0, 7)  # one rank per node: every step crosses
    assert steptime.ring_steps("all_reduce", 1) == (0, 0)


def test_collective_time_is_latency_plus_bytes_over_bandwidth():
    # All-reduce of 1 GB over 4 ranks in 2 calls, 100 GB/s, 5 us a step:
    # latency 2 calls * 6 steps * 5 us = 60 us; wire 2 * 3/4 * 1e9 = 1.5e9 B / 1e11 B/s = 15 ms.
    timing = steptime.collective_time_s("all_reduce", 1e9, 4, bytes_per_s=100e9, intra_latency_s=5e-6, calls=2)
    assert timing["latency_s"] == pytest.approx(60e-6)
    assert timing["bandwidth_s"] == pytest.approx(0.015)
    assert timing["time_s"] == pytest.approx(0.01506)
    # 8 GB over 16 ranks on 2 nodes at 50 GB/s: 28 steps * 2 us + 2 steps * 10 us = 76 us;
    # wire 2 * 15/16 * 8e9 = 15e9 B -> 0.3 s.
    spanning = steptime.collective_time_s("all_reduce", 8e9, 16, bytes_per_s=50e9, intra_latency_s=2e-6,
                                          inter_latency_s=10e-6, nodes=2)
    assert spanning["latency_s"] == pytest.approx(76e-6)
    assert spanning["time_s"] == pytest.approx(0.300076)


def test_exposed_communication_window_by_window_with_and_without_overlap():
    # 1.5 s of compute: forward (2 of 6 FLOPs) 0.5 s, backward (4 of 6) 1.0 s.
    # 0.7 s of collectives in forward: 0.2 s shows; 0.8 s in backward: hidden; 0.3 s in no window: all shows.
    # Exposed 0.5 s, the step 2.0 s, 0.5/2.0 = 25%. Without overlap 1.5 + 1.8 = 3.3 s, 1.8/3.3 = 54.5%.
    shown = steptime.exposed(1.5, {"forward": 0.7, "backward": 0.8, "none": 0.3})
    assert shown["exposed_by_window_s"] == pytest.approx({"forward": 0.2, "backward": 0.0, "none": 0.3})
    assert shown["exposed_s"] == pytest.approx(0.5)
    assert shown["step_s"] == pytest.approx(2.0)
    assert shown["exposed_share"] == pytest.approx(0.25)
    assert shown["step_no_overlap_s"] == pytest.approx(3.3)
    assert shown["exposed_share_no_overlap"] == pytest.approx(1.8 / 3.3)
    # 1.2 s all in backward, hidden behind 1.0 s of it: 0.2 s shows, 0.2/1.7 = 11.76%.
    backward = steptime.exposed(1.5, {"backward": 1.2})
    assert backward["exposed_s"] == pytest.approx(0.2) and backward["exposed_share"] == pytest.approx(0.2 / 1.7)
    # The same 1.2 s in forward: it has only 0.5 s to hide behind, so 0.7 s shows.
    assert steptime.exposed(1.5, {"forward": 1.2})["exposed_s"] == pytest.approx(0.7)
    hidden = steptime.exposed(1.5, {"forward": 0.5, "backward": 1.0})
    assert hidden["exposed_s"] == 0 and hidden["exposed_share"] == 0 and hidden["step_s"] == 1.5
    with pytest.raises(ValueError, match="unknown overlap window optimizer"):
        steptime.exposed(1.5, {"optimizer": 0.1})


# Which window each strategy's collectives run in, read from the sources (1 s of each collective):
# DDP's reducer all-reduces buckets during backward (torch/nn/parallel/distributed.py, bucket_cap_mb);
# ZeroRedundancyOptimizer.step() broadcasts after the local step and waits (zero_redundancy_optimizer.py,
# _sync_params); DeepSpeed ZeRO-1/2 reduce in backward with overlap_comm and all-gather after the optimizer
# in step() (runtime/zero/stage_1_and_2.py, all_gather_dp_groups); FSDP2 gathers in forward (grad-op: only
# there) and again in backward, and reduce-scatters (and HSDP all-reduces) in backward
# (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py).
WINDOWS_OF_ONE_SECOND_EACH = {
    "ddp": ({"all_reduce": 1}, {"forward": 0, "backward": 1, "none": 0}),
    "zro": ({"all_reduce": 1, "broadcast": 1}, {"forward": 0, "backward": 1, "none": 1}),
    "zero1": ({"reduce_scatter": 1, "all_gather": 1}, {"forward": 0, "backward": 1, "none": 1}),
    "zero2": ({"reduce_scatter": 1, "all_gather": 1}, {"forward": 0, "backward": 1, "none": 1}),
    "grad-op": ({"all_gather": 1, "reduce_scatter": 1}, {"forward": 1, "backward": 1, "none": 0}),
    "zero3": ({"all_gather": 1, "reduce_scatter": 1}, {"forward": 0.5, "backward": 1.5, "none": 0}),
    "hsdp": ({"all_gather": 1, "reduce_scatter": 1, "all_reduce": 1}, {"forward": 0.5, "backward": 2.5, "none": 0}),
}


@pytest.mark.parametrize("strategy", WINDOWS_OF_ONE_SECOND_EACH)
def test_each_strategy_s_collectives_fall_in_the_windows_the_sources_give(strategy):
    ops, expected = WINDOWS_OF_ONE_SECOND_EACH[strategy]
    assert overlap.by_window(strategy, ops) == pytest.approx(expected)


def test_a_collective_a_strategy_does_not_issue_is_refused():
    with pytest.raises(ValueError, match="ddp issues no broadcast; it issues all_reduce"):
        overlap.by_window("ddp", {"broadcast": 1.0})


def _two_nodes(**kwargs):
    links = {"gpus_per_node": 8, "intra_bytes_per_s": 450e9, "intra_latency_s": 3.4e-6,
             "inter_bytes_per_s": 50e9, "inter_latency_s": 14e-6}
    return steptime.step_comm_times(**links, **kwargs)


SMALL_GPT = dict(layers=2, d_model=1024, vocab=8192, seq_len=1024)
"""43,020,288 parameters (gpt_layout.gpt_param_numels): its DDP buckets are worked by hand below."""


def test_ddp_on_two_nodes_runs_its_all_reduce_at_the_network_bandwidth():
    # 43,020,288 fp32 gradients = 172,081,152 B, all-reduced over 16 ranks on 2 nodes at 50 GB/s.
    # Calls: DDP's buckets, whole tensors in reverse registration order. The head (8192 x 1024 x 4 B =
    # 33.55 MB) alone passes the first bucket's 1 MiB; every later bucket closes once past 25 MiB
    # (26.21 MB): block 2's MLP (2 x 16.78 MB), block 2's attention with block 1's MLP down (4.19 + 12.58
    # + 16.78 MB), block 1's MLP up and attention (16.78 + 4.19 + 12.58 MB), the embeddings (4.19 + 33.55 MB):
    # 5 calls, where 25 MiB slices would make ceil(172,081,152 / 26,214,400) = 7.
    # Latency per call: 28 NVLink steps * 3.4 us + 2 network steps * 14 us = 123.2 us; * 5 = 616 us.
    # Bandwidth: 2 * 15/16 * 172,081,152 = 322,652,160 B / 50e9 B/s = 6.4530432 ms. Total 7.0690432 ms.
    ops = _two_nodes(params=43_020_288, gpus=16, strategy="ddp", precision="fp32", units=4, **SMALL_GPT)
    assert set(ops) == {"all_reduce"}
    ring = ops["all_reduce"]
    assert ring["calls"] == 5 and ring["bytes_per_s"] == 50e9
    assert ring["latency_s"] == pytest.approx(616e-6)
    assert ring["time_s"] == pytest.approx(7.0690432e-3)
    assert steptime.q_comm_time_s(params=43_020_288, gpus=16, strategy="ddp", precision="fp32", units=4,
                                  gpus_per_node=8, intra_bytes_per_s=450e9, intra_latency_s=3.4e-6,
                                  inter_bytes_per_s=50e9, inter_latency_s=14e-6, **SMALL_GPT) == pytest.approx(7.0690432e-3)


def test_collective_calls_follow_each_implementation():
    # A 7B GPT layout (32 layers, d 4096): every matrix passes 25 MiB, so DDP makes one bucket per matrix,
    # 1 + 4 * 32 + 2 = 131 (as q_ddp_buckets teaches), not the 1,026 slices of 25 MiB of its 26.9 GB of
    # fp32 gradients; in bf16 the same 131 (each matrix is still past the cap).
    seven = gpt_param_numels(32, 4096, 32000, 4096)
    args = dict(params=sum(seven), units=34, tensor_numels=seven)
    assert steptime.collective_calls("ddp", "all_reduce", precision="fp32", **args) == 131
    assert steptime.collective_calls("ddp", "all_reduce", precision="bf16-master", **args) == 131
    # ZeroRedundancyOptimizer broadcasts each parameter: 2 + 12 * 32 + 3 = 389 tensors.
    assert steptime.collective_calls("zro", "broadcast", precision="fp32", **args) == 389
    # DeepSpeed ZeRO-1/2: 6.72e9 gradient elements in reduce buckets of 5e8 -> 14 reductions; one all-gather
    # of the updated partitions per parameter group (all_gather_into_tensor_dp_groups).
    assert steptime.collective_calls("zero2", "reduce_scatter", precision="fp32", **args) == 14
    assert steptime.collective_calls("zero1", "all_gather", precision="fp32", **args) == 1
    # FSDP: one per unit per pass.
    assert steptime.collective_calls("zero3", "all_gather", precision="fp32", **args) == 68
    assert steptime.collective_calls("grad-op", "all_gather", precision="fp32", **args) == 34
    with pytest.raises(ValueError, match="layers, d_model"):
        steptime.collective_calls("ddp", "all_reduce", precision="fp32", params=10**9, units=10)


def test_hsdp_shards_over_nvlink_and_all_reduces_the_shard_over_the_network():
    # 1e9 params, bf16-mixed (gather in bf16 = 2 B, reduce in fp32 = 4 B), 16 GPUs, groups of 8, 10 units.
    # all-gather: 2 * 1e9 * 2 B = 4e9 B in the group of 8 over NVLink: 20 calls * 7 steps * 3.4 us = 476 us;
    #   7/8 * 4e9 = 3.5e9 B / 450e9 = 7.7778 ms.
    # reduce-scatter: 1e9 * 4 B = 4e9 B: 10 calls * 7 * 3.4 us = 238 us; 3.5e9 / 450e9 = 7.7778 ms.
    # all-reduce of each rank's 1/8 shard, 1.25e8 * 4 B = 5e8 B, across the 2 replicas on 2 nodes:
    #   10 calls * 2 network steps * 14 us = 280 us; 2 * 1/2 * 5e8 = 5e8 B / 50e9 = 10 ms.
    # Total: 0.476 + 7.7778 + 0.238 + 7.7778 + 0.280 + 10 = 26.5496 ms.
    ops = _two_nodes(params=10**9, gpus=16, strategy="hsdp", precision="bf16-mixed", units=10, group_size=8)
    assert ops["all_gather"]["calls"] == 20 and ops["all_gather"]["bytes_per_s"] == 450e9
    assert ops["all_gather"]["latency_s"] == pytest.approx(476e-6)
    assert ops["reduce_scatter"]["time_s"] == pytest.approx(238e-6 + 3.5e9 / 450e9)
    assert ops["all_reduce"]["ranks"] == 2 and ops["all_reduce"]["bytes_per_s"] == 50e9
    assert ops["all_reduce"]["time_s"] == pytest.approx(0.01028)
    assert sum(op["time_s"] for op in ops.values()) == pytest.approx(0.0265496, rel=1e-5)


def test_a_shard_group_larger_than_a_node_runs_at_the_network_bandwidth():
    ops = _two_nodes(params=10**9, gpus=32, strategy="hsdp", precision="bf16-mixed", units=10, group_size=16)
    assert ops["all_gather"]["nodes"] == 2 and ops["all_gather"]["bytes_per_s"] == 50e9


def test_exposed_share_and_step_time_put_the_pieces_together():
    # compute: 6 * 43,020,288 * 1e6 / (16 * 1e15 * 0.5) = 32.265216 ms; comm 7.0690432 ms (DDP above), hideable
    # 2/3 of the compute = 21.51 ms, so nothing shows: share 0; without overlap 7.0690432 / 39.3342592 = 17.97%.
    args = dict(params=43_020_288, gpus=16, strategy="ddp", precision="fp32", units=4, gpus_per_node=8,
                intra_bytes_per_s=450e9, intra_latency_s=3.4e-6, inter_bytes_per_s=50e9, inter_latency_s=14e-6,
                tokens=10**6, peak_flops_per_s=1e15, mfu=0.5, **SMALL_GPT)
    assert steptime.q_exposed_share(**args) == 0
    assert steptime.q_exposed_share(**args, overlap=False) == pytest.approx(7.0690432 / 39.3342592)
    assert steptime.q_step_time_s(**args) == pytest.approx(0.032265216)
    assert steptime.q_step_time_s(**args, overlap=False) == pytest.approx(0.0393342592)


TWO_NODES = dict(gpus_per_node=8, intra_bytes_per_s=450e9, intra_latency_s=3.4e-6, inter_bytes_per_s=50e9,
                 inter_latency_s=14e-6)


def test_zero2_s_all_gather_after_the_step_shows_whole_where_ddp_s_all_reduce_hides():
    # 1e9 params in fp32 on 2 nodes of 8; compute 6 * 1e9 * 1e6 / (16 * 1e15 * 0.5) = 0.75 s: forward 0.25 s,
    # backward 0.5 s. DeepSpeed ZeRO-2 in fp32 reduce-scatters 4e9 B of gradients and all-gathers 4e9 B of
    # parameters, each over 16 ranks on 2 nodes at 50 GB/s; each ring step costs 14 NVLink steps * 3.4 us +
    # 1 network step * 14 us = 61.6 us. The gradients go in reduce buckets of 5e8 elements: ceil(1e9 / 5e8) =
    # 2 calls, 123.2 us; the parameters in one all-gather per parameter group: 61.6 us.
    # Wire 15/16 * 4e9 = 3.75e9 B / 50e9 = 75 ms each: reduce-scatter 75.1232 ms, all-gather 75.0616 ms.
    # The reduce-scatter hides behind backward; the all-gather, after the optimizer step, shows whole:
    # the step takes 0.75 + 0.0750616 = 0.8250616 s, 0.0750616 / 0.8250616 = 9.098% exposed.
    # Without overlap: 0.75 + 0.1501848 = 0.9001848 s.
    args = dict(params=10**9, gpus=16, strategy="zero2", precision="fp32", units=10, **TWO_NODES,
                tokens=10**6, peak_flops_per_s=1e15, mfu=0.5)
    times = steptime.step_times(**args)
    assert times["ops"]["all_gather"]["time_s"] == pytest.approx(0.0750616)
    assert times["ops"]["reduce_scatter"]["time_s"] == pytest.approx(0.0751232)
    assert times["exposed_by_window_s"] == pytest.approx({"forward": 0.0, "backward": 0.0, "none": 0.0750616})
    assert steptime.q_step_time_s(**args) == pytest.approx(0.8250616)
    assert steptime.q_exposed_share(**args) == pytest.approx(0.0750616 / 0.8250616)
    assert steptime.q_step_time_s(**args, overlap=False) == pytest.approx(0.9001848)


def test_grad_op_s_single_gather_has_only_forward_to_hide_behind():
    # 1e9 params in fp32 on 2 nodes of 8, 10 FSDP units; 2e5 tokens: 6 * 1e9 * 2e5 / (16 * 1e15 * 0.5) = 0.15 s,
    # forward 0.05 s, backward 0.1 s. grad-op gathers each unit once (10 calls) and reduce-scatters once (10 calls),
    # 4e9 B each over 16 ranks at 50 GB/s: 10 * 61.6 us = 0.616 ms + 75 ms = 75.616 ms each.
    # Forward: 75.616 ms against 50 ms, 25.616 ms shows; backward: 75.616 ms against 100 ms, hidden.
    # The step takes 0.175616 s, 25.616 / 175.616 = 14.586% exposed. (Hiding all of it behind all the compute,
    # 151.232 ms against 150 ms, would have shown only 1.232 ms.)
    args = dict(params=10**9, gpus=16, strategy="grad-op", precision="fp32", units=10, **TWO_NODES,
                tokens=2 * 10**5, peak_flops_per_s=1e15, mfu=0.5)
    times = steptime.step_times(**args)
    assert times["ops"]["all_gather"]["calls"] == 10 and times["ops"]["reduce_scatter"]["calls"] == 10
    assert times["ops"]["all_gather"]["time_s"] == pytest.approx(0.075616)
    assert times["exposed_by_window_s"] == pytest.approx({"forward": 0.025616, "backward": 0.0, "none": 0.0})
    assert steptime.q_step_time_s(**args) == pytest.approx(0.175616)
    assert steptime.q_exposed_share(**args) == pytest.approx(0.025616 / 0.175616)


def test_zero3_under_bf16_mixed_fills_backward_before_forward():
    # 1e9 params, bf16-mixed on FSDP2: gathers in bf16 (2 B), reduces in fp32 (4 B); 2 nodes of 8, 10 units.
    # all-gather 2 * 1e9 * 2 B = 4e9 B in 20 calls: 20 * 61.6 us = 1.232 ms + 15/16 * 4e9 / 50e9 = 75 ms: 76.232 ms,
    #   half (38.116 ms) in forward, half in backward.
    # reduce-scatter 4e9 B in 10 calls: 0.616 ms + 75 ms = 75.616 ms, in backward.
    # With 1.2e5 tokens: 6 * 1e9 * 1.2e5 / 8e15 = 0.09 s, forward 0.03 s, backward 0.06 s.
    # Forward: 38.116 ms against 30 ms, 8.116 ms shows; backward: 38.116 + 75.616 = 113.732 ms against 60 ms,
    # 53.732 ms shows. Exposed 61.848 ms; the step 0.151848 s, 61.848 / 151.848 = 40.73%.
    args = dict(params=10**9, gpus=16, strategy="zero3", precision="bf16-mixed", units=10, **TWO_NODES,
                tokens=120_000, peak_flops_per_s=1e15, mfu=0.5)
    times = steptime.step_times(**args)
    assert times["comm_by_window_s"] == pytest.approx({"forward": 0.038116, "backward": 0.113732, "none": 0.0})
    assert times["exposed_by_window_s"] == pytest.approx({"forward": 0.008116, "backward": 0.053732, "none": 0.0})
    assert steptime.q_step_time_s(**args) == pytest.approx(0.151848)
    assert steptime.q_exposed_share(**args) == pytest.approx(0.061848 / 0.151848)


def test_presets_name_their_figures_per_direction():
    h100 = presets.CLUSTERS["DGX H100"]
    assert h100.gpu.bf16_flops_per_s == 989e12 and h100.gpu.memory_bytes == 80 * 10**9
    assert h100.intra.bytes_per_s == 450e9  # 900 GB/s both ways together
    assert h100.inter.bytes_per_s == 50e9  # 400 Gb/s
    assert presets.CLUSTERS["DGX A100 80GB"].intra.bytes_per_s == 300e9
    assert presets.find(presets.CLUSTERS, "dgx h100", "cluster") is h100
    with pytest.raises(ValueError, match="choose one of DGX H100"):
        presets.find(presets.CLUSTERS, "DGX Z9000", "cluster")


# --- plans the model picks (demos/theory/planning.py) ----------------------------------------------


@pytest.mark.parametrize("gpu_mem, stage", [(80e9, 1), (45e9, 2), (40e9, 3), (10e9, planning.NONE_FITS)])
def test_the_lowest_stage_that_fits(gpu_mem, stage):
    # 7B on 8 GPUs, bf16-mixed with AdamW (4 + 4 + 8 bytes): DDP 16 * 7 = 112 GB; ZeRO-1 and ZeRO-2 are
    # DeepSpeed's under torch_autocast, whose optimizer adds its own fp32 copy of the partition (4 bytes):
    # ZeRO-1 8 * 7 + 12 * 7 / 8 = 66.5 GB; ZeRO-2 4 * 7 + 16 * 7 / 8 = 42 GB; ZeRO-3 16 * 7 / 8 = 14 GB.
    assert planning.q_fit_stage(params=7e9, gpus=8, gpu_mem=gpu_mem, precision="bf16-mixed", optimizer="adamw") == stage


TINY = dict(params=113_920, gpus=2, strategy="ddp", precision="fp32", optimizer="adamw", layers=2, d_model=64,
            vocab=100, seq_len=16, micro_batch=1)


@pytest.mark.parametrize("gpu_mem, plan", [(2_500_000, "keep"), (2_400_000, "checkpoint"), (2_300_000, "smaller-batch")])
def test_whether_to_checkpoint(gpu_mem, plan):
    # A 2-layer GPT, d 64, vocabulary 100, sequence 16: embeddings 100*64 + 16*64 = 7,424; a block 12*64^2 + 13*64
    # = 49,984; the head 64*100 + 2*64 = 6,528: 113,920 parameters. DDP in fp32 with AdamW: 16 B each = 1,822,720;
    # its bucket copy of the gradients 4 B each = 455,680.
    # Activations of 1 x 16 tokens: a block saves 16*64*(2*4 + 14*4) = 65,536; the head 1,024*(4 + 4) + the
    # log-softmax 16*100*4 = 6,400, so 14,592; kept: 2*65,536 + 14,592 + 6,400 at the peak = 152,064.
    # Checkpointed: 2 block inputs 2*1,024*4 + 14,592 = 22,784, plus a recomputed block 65,536 = 88,320.
    figures = planning.memory_plan(**TINY, gpu_mem=gpu_mem)
    assert figures["model_state_bytes"] == 1_822_720 and figures["working_set_bytes"] == 455_680
    assert figures["activations_kept_bytes"] == 152_064 and figures["activations_checkpointed_bytes"] == 88_320
    assert figures["kept_total_bytes"] == 2_430_464 and figures["checkpointed_total_bytes"] == 2_366_720
    assert planning.q_checkpoint_plan(**TINY, gpu_mem=gpu_mem) == plan


HSDP = dict(params=10**9, gpus=16, precision="bf16-mixed", optimizer="adamw", tokens=16, peak_flops_per_s=1e15,
            mfu=0.5, units=10, gpus_per_node=8, intra_bytes_per_s=450e9, intra_latency_s=3.4e-6,
            inter_bytes_per_s=1e9, inter_latency_s=14e-6)


def test_the_best_hsdp_group_on_a_slow_network_is_a_node():
    # 1e9 params, bf16-mixed, 2 nodes of 8 with a 1 GB/s network, compute negligible (16 tokens).
    # G = 8: gathers and reductions on NVLink (0.476 + 7.7778 + 0.238 + 7.7778 ms, as above), then the 1/8 fp32 shard
    #   (5e8 B) all-reduced across 2 nodes: 10 * 2 * 14 us = 0.28 ms + 5e8 / 1e9 = 0.5 s; 0.51655 s in all.
    # G = 4: on NVLink 3/4 * 4e9 / 450e9 = 6.667 ms twice (+ 0.204 + 0.102 ms), then 1e9 B across 4 replicas on
    #   2 nodes: 2 * 3/4 * 1e9 / 1e9 = 1.5 s + 10 * (4 * 3.4 + 2 * 14) us = 0.416 ms; 1.5138 s.
    # G = 16: one group spanning both nodes at 1 GB/s: 15/16 * 4e9 / 1e9 = 3.75 s twice; 7.5018 s.
    rows = {row["group_size"]: row for row in planning.hsdp_groups(**HSDP, gpu_mem=10**12)}
    assert set(rows) == {2, 4, 8, 16}
    assert rows[8]["comm_s"] == pytest.approx(0.51655, rel=1e-4)
    assert rows[4]["comm_s"] == pytest.approx(1.5138, rel=1e-3)
    assert rows[16]["comm_s"] == pytest.approx(7.5018, rel=1e-4)
    assert planning.q_best_hsdp_group(**HSDP, gpu_mem=10**12) == 8
    # Model state per GPU: 16 B * 1e9 / G: 2 GB at G = 8, 1 GB at G = 16; with 1.5 GB only 16 fits.
    assert planning.q_best_hsdp_group(**HSDP, gpu_mem=1.5e9) == 16
    with pytest.raises(ValueError, match="no HSDP group size fits"):
        planning.q_best_hsdp_group(**HSDP, gpu_mem=0.5e9)
