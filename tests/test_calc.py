"""The analytic model: the ZeRO paper's table, precision and optimizer accounting, sharding, HSDP,
communication wire factors, activations, a demo's own theory, and the quiz's answer functions."""

from __future__ import annotations

import inspect

import pytest

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.activations import gpt_activation_bytes
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.estimate import estimate
from ddpfsdp.demos.theory.gpt_layout import gpt_unit_params
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown
from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS
from ddpfsdp.demos.theory.run import theory_for_run
from ddpfsdp.demos.theory.sharding import resolve_group_size
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.working_set import working_set

from ddpfsdp.demos.base import shapes

PSI = 7_500_000_000  # the ZeRO paper's 7.5B example: N = 64, K = 12, mixed-precision Adam


# ----------------------------------------------------------------------------- the ZeRO paper


@pytest.mark.parametrize(
    ("strategy", "paper_gb", "exact_bytes"),
    [
        ("ddp", 120.0, 120_000_000_000),  # (2 + 2 + 12) * Psi
        ("zero1", 31.4, 31_406_250_000),  # 2 Psi + 2 Psi + 12 Psi / N
        ("zero2", 16.6, 16_640_625_000),  # 2 Psi + 14 Psi / N
        ("zero3", 1.9, 1_875_000_000),  # 16 Psi / N
    ],
)
def test_zero_paper_7_5b_table(strategy, paper_gb, exact_bytes):
    state = model_state(PSI, 64, strategy, "bf16-master", "adam")
    assert state["model_state_bytes"] == exact_bytes
    assert round(state["model_state_bytes"] / 1e9, 1) == paper_gb
    assert state["model_state_bytes"] == state["params_bytes"] + state["grads_bytes"] + state["optimizer_bytes"]


def test_zero_paper_table_through_estimate_and_quiz():
    result = estimate(params="7.5B", gpus=64, precision="bf16-master", optimizer="adam")
    table = {name: row["model_state_bytes"] for name, row in result["strategies"].items()}
    assert table["ddp"] == 120e9 and table["zero3"] == 1.875e9
    answer = QUIZ_FUNCTIONS["model_state_bytes"](
        params="7.5B", gpus=64, strategy="zero3", precision="bf16-master", optimizer="adam"
    )
    assert answer == 1_875_000_000


# ----------------------------------------------------------------------------- precision and optimizer


@pytest.mark.parametrize(
    ("precision", "optimizer", "expected"),
    [
        ("fp32", "adamw", (4, 4, 8)),
        ("fp32", "adam", (4, 4, 8)),
        ("fp32", "sgd-momentum", (4, 4, 4)),
        ("fp32", "sgd", (4, 4, 0)),
        ("bf16-mixed", "adamw", (4, 4, 8)),  # PyTorch keeps fp32 params, grads, state
        ("bf16-mixed", "sgd", (4, 4, 0)),
        ("bf16-master", "adam", (2, 2, 12)),  # fp32 master + two fp32 moments
        ("bf16-master", "sgd-momentum", (2, 2, 8)),
        ("bf16-master", "sgd", (2, 2, 4)),  # the master copy remains
        ("bf16", "adamw", (2, 2, 4)),
        ("bf16", "sgd", (2, 2, 0)),
    ],
)
def test_bytes_per_param(precision, optimizer, expected):
    breakdown = bytes_per_param_breakdown(precision, optimizer)
    assert (breakdown["params"], breakdown["grads"], breakdown["optimizer"]) == expected
    assert QUIZ_FUNCTIONS["bytes_per_param"](precision=precision, optimizer=optimizer) == sum(expected)


def test_mixed_precision_does_not_shrink_model_state():
    fp32 = model_state(10**9, 1, "ddp", "fp32", "adamw")
    mixed = model_state(10**9, 1, "ddp", "bf16-mixed", "adamw")
    assert fp32 == mixed


def test_zero1_saves_what_its_optimizer_owns():
    def saving(strategy, precision):
        ddp = model_state(PSI, 8, "ddp", precision, "adam")["model_state_bytes"]
        zero1 = model_state(PSI, 8, strategy, precision, "adam")["model_state_bytes"]
        return 1 - zero1 / ddp

    # DeepSpeed under bf16-master: 12 of 16 bytes live in the optimizer, 7/8 of them go.
    assert saving("zero1", "bf16-master") == pytest.approx(0.75 * 7 / 8)
    # ZeroRedundancyOptimizer under bf16-mixed: 8 of 16 bytes (the fp32 weights are the parameters).
    assert saving("zro", "bf16-mixed") == pytest.approx(0.50 * 7 / 8)
    # DeepSpeed under torch_autocast: 4 + 4 + 12/8 = 9.5 bytes against DDP's 16 (its own fp32 copy).
    assert saving("zero1", "bf16-mixed") == pytest.approx(1 - 9.5 / 16)


@pytest.mark.parametrize("bad", [{"precision": "fp16"}, {"optimizer": "lion"}, {"strategy": "zero4"}])
def test_unknown_names_are_refused_with_the_choices(bad):
    args = {"strategy": "ddp", "precision": "fp32", "optimizer": "adam"} | bad
    with pytest.raises(ValueError) as error:
        model_state(10, 2, args["strategy"], args["precision"], args["optimizer"])
    assert "choose one of" in str(error.value)


# ----------------------------------------------------------------------------- sharding and HSDP


def test_shards_round_up_like_fsdp_padding():
    state = model_state(10, 4, "zero3", "fp32", "adam")  # ceil(10 / 4) = 3 elements per rank
    assert (state["params_bytes"], state["grads_bytes"], state["optimizer_bytes"]) == (12, 12, 24)


def test_what_each_strategy_shards():
    # fp32 with Adam: 4 + 4 + 8 bytes per parameter, and DeepSpeed's ZeRO-1/2 step their own fp32
    # copy of the partition (4 more bytes in the optimizer).
    for strategy, divided, optimizer_bytes in [
        ("ddp", (), 8),
        ("zro", ("optimizer",), 8),
        ("zero1", ("optimizer",), 12),
        ("zero2", ("grads", "optimizer"), 12),
        ("grad-op", ("params", "grads", "optimizer"), 8),
        ("zero3", ("params", "grads", "optimizer"), 8),
    ]:
        state = model_state(8000, 8, strategy, "fp32", "adam")
        for kind, per_param in (("params", 4), ("grads", 4), ("optimizer", optimizer_bytes)):
            expected = 8000 * per_param // (8 if kind in divided else 1)
            assert state[f"{kind}_bytes"] == expected, (strategy, kind)


def test_hsdp_shards_within_the_group_only():
    hsdp = model_state(PSI, 64, "hsdp", "bf16-master", "adam", group_size=8)
    zero3_on_8 = model_state(PSI, 8, "zero3", "bf16-master", "adam")
    assert hsdp == zero3_on_8
    assert model_state(PSI, 8, "hsdp", "fp32", "adam", group_size=8) == model_state(
        PSI, 8, "zero3", "fp32", "adam"
    )


def test_hsdp_comm_all_reduces_the_shard_across_groups():
    params, gpus, group = 8_000_000, 16, 4
    ops = step_comm("hsdp", params, gpus, "fp32", group_size=group)
    replicas = gpus // group
    assert ops["all_reduce"]["bytes"] == params // group * 4
    assert ops["all_reduce"]["wire_bytes_per_rank"] == round(params // group * 4 * 2 * (replicas - 1) / replicas)
    assert ops["reduce_scatter"]["wire_bytes_per_rank"] == round(params * 4 * (group - 1) / group)
    assert ops["all_gather"]["wire_bytes_per_rank"] == round(2 * params * 4 * (group - 1) / group)
    one_group = step_comm("hsdp", params, gpus, "fp32", group_size=gpus)
    assert "all_reduce" not in one_group
    assert one_group == step_comm("zero3", params, gpus, "fp32")


@pytest.mark.parametrize(("gpus", "group"), [(12, 5), (8, 16), (8, 0), (8, "x")])
def test_hsdp_group_size_must_divide_the_gpus(gpus, group):
    with pytest.raises(ValueError):
        model_state(100, gpus, "hsdp", "fp32", "adam", group_size=group)


def test_hsdp_default_group_is_a_node_of_eight():
    assert resolve_group_size("hsdp", 64) == 8
    assert resolve_group_size("hsdp", 6) == 6


# ----------------------------------------------------------------------------- communication


@pytest.mark.parametrize(
    ("op", "ranks", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("broadcast", 2, 0.5),
        ("all_reduce", 1, 0.0),
    ],
)
def test_ring_wire_factors(op, ranks, factor):
    assert wire_factor(op, ranks) == pytest.approx(factor)
    assert QUIZ_FUNCTIONS["wire_bytes_per_rank"](op=op, bytes="1GB", ranks=str(ranks)) == round(1e9 * factor)


def test_unknown_collective_is_refused():
    # The model answers about the four collectives data parallelism issues; all_to_all is not one.
    with pytest.raises(ValueError, match="choose one of all_reduce, all_gather, reduce_scatter, broadcast$"):
        QUIZ_FUNCTIONS["wire_bytes_per_rank"](op="all_to_all", bytes="1GB", ranks=4)
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        wire_factor("allreduce", 4)


@pytest.mark.parametrize("gpus", [2, 4, 8, 64])
def test_fsdp_full_sends_one_and_a_half_times_ddp(gpus):
    assert QUIZ_FUNCTIONS["comm_ratio"](strategy="zero3", gpus=gpus) == pytest.approx(1.5)
    assert QUIZ_FUNCTIONS["comm_ratio"](strategy="zero1", gpus=gpus) == pytest.approx(1.0)
    assert QUIZ_FUNCTIONS["comm_ratio"](strategy="zero2", gpus=gpus) == pytest.approx(1.0)


def test_ddp_all_reduces_and_fsdp_reduce_scatters():
    ddp = step_comm("ddp", 1000, 4, "fp32")
    assert set(ddp) == {"all_reduce"}
    zero3 = step_comm("zero3", 1000, 4, "fp32")
    assert set(zero3) == {"all_gather", "reduce_scatter"}
    assert zero3["all_gather"]["bytes"] == 2 * zero3["reduce_scatter"]["bytes"]


def test_bf16_mixed_gathers_bf16_and_reduces_fp32():
    ops = step_comm("zero3", 1000, 4, "bf16-mixed")
    assert ops["all_gather"]["bytes"] == 2 * 1000 * 2
    assert ops["reduce_scatter"]["bytes"] == 1000 * 4
    assert step_comm("ddp", 1000, 4, "bf16-mixed")["all_reduce"]["bytes"] == 4000


def test_fsdp_counts_follow_the_units():
    units = [300, 100, 100, 200, 0]  # embeddings, two blocks, head, an empty root
    ops = step_comm("zero3", sum(units), 4, "fp32", unit_params=units)
    assert ops["reduce_scatter"]["count"] == 4
    assert ops["all_gather"]["count"] == 8  # forward and backward for every resharded unit
    # A root that holds parameters is not resharded after forward: one gather, not two.
    root_only = step_comm("zero3", 700, 4, "fp32", unit_params=[700])
    assert root_only["all_gather"]["count"] == 1
    assert root_only["all_gather"]["bytes"] == 700 * 4
    assert step_comm("ddp", 700, 4, "fp32")["all_reduce"]["count"] is None


# ----------------------------------------------------------------------------- working set and activations


def test_fsdp_working_set_is_the_largest_unit_times_units_alive():
    work = working_set("zero3", 1000, "fp32", [300, 100, 100, 200, 0])
    assert work["largest_unit_params"] == 300
    assert work["working_set_bytes"] == 2 * 300 * (4 + 4)
    mixed = working_set("zero3", 1000, "bf16-mixed", [300, 100, 100, 200, 0])
    assert mixed["parts"]["unsharded_unit_params"] == 2 * 300 * 2


def test_ddp_working_set_counts_buckets_and_autocast_copies():
    assert working_set("ddp", 1000, "fp32")["working_set_bytes"] == 4000
    assert working_set("ddp", 1000, "fp32", gradient_as_bucket_view=True)["working_set_bytes"] == 0
    assert working_set("ddp", 1000, "bf16-mixed")["parts"]["autocast_weight_copies"] == 2000


def test_gpt_units_cover_the_model():
    for preset in shapes.GPT_PRESETS:
        for wrap in ("block", "layer", "model"):
            assert sum(gpt_unit_params(preset, wrap=wrap)) == shapes.model_params("gpt", preset)


def test_activations_follow_the_stated_formula():
    # tiny: 4 layers, d 128, seq 64, vocab 512; batch 2 -> b*s*d = 16384 elements per tensor.
    elements = 2 * 64 * 128
    block = elements * (2 * 4 + 14 * 4)  # fp32: residual 4 bytes, compute 4 bytes
    log_softmax = 2 * 64 * 512 * 4
    head = elements * (4 + 4) + log_softmax
    plain = gpt_activation_bytes("tiny", 2, precision="fp32")
    assert plain["block_bytes"] == block
    assert plain["saved_bytes"] == 4 * block + head
    assert plain["activation_bytes"] == 4 * block + head + log_softmax  # + its gradient
    checkpointed = gpt_activation_bytes("tiny", 2, checkpoint_activations=True, precision="fp32")
    assert checkpointed["saved_bytes"] == 4 * elements * 4 + head
    assert checkpointed["activation_bytes"] == 4 * elements * 4 + head + max(block, log_softmax)


def test_activations_scale_with_batch_and_shrink_with_checkpointing_and_bf16():
    one = gpt_activation_bytes("base", 1)["activation_bytes"]
    four = gpt_activation_bytes("base", 4)["activation_bytes"]
    assert four == 4 * one
    assert gpt_activation_bytes("base", 4, checkpoint_activations=True)["activation_bytes"] < four / 2
    assert gpt_activation_bytes("base", 4, precision="bf16")["activation_bytes"] < four * 0.6
    # Under autocast the residual stream stays fp32: 36 bytes per block element, not 32.
    mixed = gpt_activation_bytes("base", 1, precision="bf16-mixed")["block_bytes"]
    assert mixed == 1024 * 768 * 36


# ----------------------------------------------------------------------------- estimate()


def test_estimate_document_shape():
    result = estimate(params="7B", gpus=8, gpu_mem="80GB")
    assert result["schema"] == "ddpfsdp.calc/1"
    assert result["theory"] is True
    for key in ("params", "gpus", "group_size", "precision", "optimizer", "batch_size", "seq_len", "checkpoint_activations"):
        assert key in result["inputs"]
    assert list(result["strategies"]) == ["ddp", "zro", "zero1", "zero2", "grad-op", "zero3", "hsdp"]
    for row in result["strategies"].values():
        for key in (
            "implementation", "bytes_per_param", "params_bytes", "grads_bytes", "optimizer_bytes", "model_state_bytes", "working_set_bytes",
            "activation_bytes", "total_bytes", "fits", "comm",
        ):
            assert key in row
        assert row["activation_bytes"] is None  # no shape without a model
        assert row["total_bytes"] == row["model_state_bytes"] + row["working_set_bytes"]
        for op in row["comm"].values():
            assert set(op) == {"count", "bytes", "wire_bytes_per_rank"}
    # 7B with Adam under bf16-mixed: 112 GB of model state does not fit one 80 GB GPU; ZeRO-3 on 8 does.
    assert result["strategies"]["ddp"]["fits"] is False
    assert result["strategies"]["zero3"]["fits"] is True


def test_estimate_from_a_preset_adds_activations():
    result = estimate(model="base", gpus=4, batch_size=2)
    assert result["inputs"]["params"] == shapes.model_params("gpt", "base")
    assert result["inputs"]["seq_len"] == 1024
    fp32 = estimate(model="base", gpus=4, batch_size=2, precision="fp32")
    activations = {row["activation_bytes"] for row in fp32["strategies"].values()}
    assert len(activations) == 1 and activations.pop() > 0  # data parallelism does not shard activations
    # Under bf16-mixed the dtype differs: DDP's autocast keeps an fp32 residual stream, FSDP2's param_dtype a bf16 one.
    mixed = estimate(model="base", gpus=4, batch_size=2, precision="bf16-mixed")["strategies"]
    assert mixed["ddp"]["activation_bytes"] == mixed["zero1"]["activation_bytes"]
    assert mixed["zero3"]["activation_bytes"] == mixed["grad-op"]["activation_bytes"] == mixed["hsdp"]["activation_bytes"]
    assert mixed["zero3"]["activation_bytes"] < mixed["ddp"]["activation_bytes"]
    assert result["strategies"]["ddp"]["fits"] is None  # no gpu_mem given


def test_estimate_notes_teach_precision():
    notes = " ".join(estimate(params="1B", gpus=8, precision="bf16-master", optimizer="adam")["notes"])
    assert "does not shrink model state" in notes
    assert "12 of 16" in notes and "8 of 16" in notes
    assert "Theory" in notes and "GiB = 2**30" in notes


@pytest.mark.parametrize(
    "kwargs",
    [
        {"params": "7Q", "gpus": 8},
        {"params": "-3", "gpus": 8},
        {"params": "7B", "gpus": 0},
        {"params": "7B", "gpus": 12, "group_size": 5},
        {"params": "7B", "gpus": 8, "precision": "fp8"},
        {"gpus": 8},
        {"params": "7B", "model": "tiny", "gpus": 8},
        {"model": "huge", "gpus": 8},
    ],
)
def test_estimate_refuses_bad_input(kwargs):
    with pytest.raises(ValueError):
        estimate(**kwargs)


# ----------------------------------------------------------------------------- a demo's own run


def test_theory_for_ddp_and_zro_runs():
    ddp = theory_for_run(strategy="ddp", params=1000, world_size=2, precision="fp32", optimizer="adamw")
    assert ddp["strategy"] == "ddp"
    assert (ddp["params_bytes"], ddp["grads_bytes"], ddp["optimizer_bytes"]) == (4000, 4000, 8000)
    assert ddp["comm"]["all_reduce"]["wire_bytes_per_rank"] == 4000
    zro = theory_for_run(strategy="zro", params=1000, world_size=2, precision="fp32", optimizer="adamw")
    # The zro demo is PyTorch's ZeroRedundancyOptimizer, calc's zro column, not DeepSpeed's ZeRO-1 (zero1).
    assert zro["strategy"] == "zro" and "ZeroRedundancyOptimizer" in zro["implementation"]
    assert zro["optimizer_bytes"] == 4000 and zro["params_bytes"] == 4000
    # ZeroRedundancyOptimizer: DDP's all-reduce, then each rank broadcasts what it updated.
    assert set(zro["comm"]) == {"all_reduce", "broadcast"}
    assert zro["comm"]["broadcast"]["wire_bytes_per_rank"] == 2000


def test_theory_for_fsdp_full_and_grad_op():
    units = [400, 250, 250, 100, 0]
    common = dict(params=1000, world_size=2, precision="fp32", optimizer="adamw", unit_params=units)
    full = theory_for_run(strategy="fsdp", sharding="full", **common)
    grad_op = theory_for_run(strategy="fsdp", sharding="SHARD_GRAD_OP", **common)
    assert full["strategy"] == "zero3"
    assert grad_op["strategy"] == "grad-op" and "reshard_after_forward=False" in grad_op["implementation"]
    assert full["model_state_bytes"] == 16 * 1000 // 2
    # grad-op rests like ZeRO-3 and keeps the full parameters through forward and backward.
    assert grad_op["model_state_bytes"] == full["model_state_bytes"]
    assert grad_op["working_set_bytes"] >= 1000 * 4
    assert full["comm"]["all_gather"]["count"] == 8
    assert grad_op["comm"]["all_gather"]["count"] == 4
    assert full["comm"]["all_gather"]["wire_bytes_per_rank"] == 2 * grad_op["comm"]["all_gather"]["wire_bytes_per_rank"]
    assert full["comm"]["reduce_scatter"] == grad_op["comm"]["reduce_scatter"]
    assert "all_reduce" not in full["comm"]


def test_theory_for_hybrid_sharding():
    run = theory_for_run(
        strategy="fsdp", sharding="hybrid", params=1200, world_size=4, replicas=2, precision="fp32", optimizer="sgd"
    )
    assert run["strategy"] == "hsdp"
    assert run["params_bytes"] == 600 * 4  # sharded over a group of 2
    assert run["comm"]["all_reduce"]["bytes"] == 600 * 4
    with pytest.raises(ValueError):
        theory_for_run(strategy="fsdp", sharding="hybrid", params=1, world_size=4, replicas=3, precision="fp32", optimizer="sgd")
    with pytest.raises(ValueError, match="grad-op"):
        theory_for_run(strategy="fsdp", sharding="half", params=1, world_size=2, precision="fp32", optimizer="sgd")


# ----------------------------------------------------------------------------- quiz functions

STRING_ARGS = {
    "param_count": {"model": "tiny"},
    "bytes_per_param": {"precision": "bf16-master", "optimizer": "adam"},
    "model_state_bytes": {"params": "7B", "gpus": "8", "strategy": "zero3", "precision": "bf16-mixed", "optimizer": "adamw"},
    "params_bytes": {"params": "7B", "gpus": "8", "strategy": "zero1", "precision": "fp32", "optimizer": "adam"},
    "grads_bytes": {"params": "350M", "gpus": "4", "strategy": "zero2", "precision": "bf16", "optimizer": "sgd"},
    "optimizer_bytes": {"params": "7.5e9", "gpus": "64", "strategy": "hsdp", "precision": "bf16-master", "optimizer": "adam", "group_size": "8"},
    "activation_bytes": {"model": "small", "batch_size": "4", "seq_len": "128", "checkpoint_activations": "true", "precision": "bf16-mixed"},
    "wire_bytes_per_rank": {"op": "all_gather", "bytes": "1GiB", "ranks": "8"},
    "step_wire_bytes": {"params": "7B", "gpus": "16", "strategy": "hsdp", "precision": "bf16", "group_size": "8"},
    "comm_ratio": {"strategy": "zero3", "baseline": "ddp", "gpus": "8"},
    "max_params": {"gpu_mem": "80GB", "gpus": "8", "strategy": "zero3", "precision": "bf16-mixed", "optimizer": "adamw"},
    "min_gpus": {"params": "70B", "gpu_mem": "80GB", "strategy": "zero3", "precision": "bf16-mixed", "optimizer": "adamw"},
    "min_zero_stage": {"params": "7B", "gpus": "16", "gpu_mem": "40GB", "precision": "bf16-mixed", "optimizer": "adamw"},
    "ddp_buckets": {"layers": "24", "d_model": "2048", "vocab": "50257", "seq_len": "2048", "grad_bytes": "4", "bucket_cap_mb": "50"},
    "sampler_index": {"dataset_len": "10", "num_replicas": "4", "rank": "3", "position": "3", "drop_last": "false"},
    "sampler_count": {"dataset_len": "10", "num_replicas": "4", "drop_last": "true"},
    "transformer_activation_bytes": {"layers": "32", "d_model": "4096", "vocab": "32000", "seq_len": "4096", "batch_size": "1", "precision": "bf16-mixed", "checkpoint_activations": "yes"},
    "host_bytes": {"params": "7B", "gpus": "16", "strategy": "zero3", "precision": "bf16-mixed", "optimizer": "adamw", "offload": "all", "gpus_per_node": "8"},
    "pcie_bytes_per_step": {"params": "7B", "gpus": "16", "strategy": "zero3", "precision": "bf16-mixed", "offload": "all", "units": "32"},
    "deepspeed_gpu_bytes": {"params": "2851M", "gpus": "8", "strategy": "zero3", "offload": "optimizer", "largest_layer": "32M"},
    "deepspeed_host_bytes": {"params": "2851M", "gpus": "8", "strategy": "zero2", "offload": "none", "gpus_per_node": "8", "zero_init": "true"},
    "tp_block_wire_bytes": {"layers": "86", "d_model": "8192", "seq_len": "4096", "batch_size": "1", "tp": "8", "precision": "bf16-mixed", "sequence_parallel": "no"},
    "pipeline_bubble_fraction": {"pp": "4", "microbatches": "8", "schedule": "interleaved", "stages_per_rank": "2"},
    "pipeline_bubble_ratio": {"pp": "4", "microbatches": "8", "schedule": "GPipe"},
    "pipeline_microbatches_for_bubble": {"pp": "8", "target_fraction": "0.1", "schedule": "1f1b", "stages_per_rank": "1"},
    "pipeline_in_flight": {"pp": "4", "microbatches": "8", "schedule": "1f1b", "stage": "1"},
    "pipeline_p2p_bytes": {"pp": "4", "microbatches": "8", "batch_size": "1", "seq_len": "4096", "d_model": "8192",
                           "precision": "bf16-mixed"},
    "pipeline_step_time_s": {"params": "70B", "gpus": "32", "pp": "4", "microbatches": "27", "micro_batch": "2",
                             "seq_len": "8192", "d_model": "8192", "precision": "bf16-mixed",
                             "peak_flops_per_s": "989e12", "mfu": "0.35", "bytes_per_s": "6.25e9", "latency_s": "14e-6"},
    "cp_slowest_share": {"cp": "8", "balanced": "no"},
    "cp_ring_bytes_per_step": {"layers": "32", "batch_size": "1", "seq_len": "128K", "cp": "8", "kv_dim": "4096",
                               "precision": "bf16-mixed", "recompute": "yes"},
    "cp_ulysses_bytes_per_step": {"layers": "32", "batch_size": "1", "seq_len": "128K", "cp": "8", "d_model": "4096",
                                  "kv_dim": "1024", "precision": "bf16", "heads": "32"},
    "cp_min_tokens_per_rank": {"d_model": "4096", "kv_dim": "4096", "precision": "bf16-mixed",
                               "peak_flops_per_s": "989e12", "bytes_per_s": "50e9", "backward": "true"},
    "cp_activation_bytes": {"layers": "32", "d_model": "4096", "vocab": "32000", "seq_len": "32768", "batch_size": "1",
                            "cp": "4", "precision": "bf16-mixed", "checkpoint_activations": "yes", "rotation": "allgather"},
    "ep_capacity": {"tokens": "4096", "experts": "64", "top_k": "2", "capacity_factor": "1.25"},
    "ep_dropped": {"loads": ["10", "2", "6", "6"], "tokens": "12", "top_k": "2", "capacity_factor": "1.0"},
    "ep_all_to_all_bytes_per_step": {"tokens": "4096", "top_k": "2", "d_model": "4096", "precision": "bf16-mixed",
                                     "ep": "8", "layers": "32", "experts": "64", "capacity_factor": "1.25"},
    "ep_expert_params_per_rank": {"layers": "32", "d_model": "4096", "experts": "64", "ep": "8"},
    "ep_switch_aux_loss": {"fractions": ["0.5", "0.5"], "probs": ["0.6", "0.4"], "alpha": "0.01"},
    "ep_fsdp_over_ep": {"tokens": "4096", "top_k": "2", "d_model": "4096", "precision": "bf16-mixed", "ep": "8",
                        "layers": "32", "experts": "64"},
    "slow_step_probability": {"p": "0.001", "ranks": "10K"},
    "straggler_expected_step_s": {"step_s": "1", "delay_s": "0.3", "p": "0.001", "ranks": "100"},
    "straggler_expected_step_ms": {"step_ms": "1000", "delay_ms": "300", "p": "0.001", "ranks": "100"},
    "persistent_straggler_efficiency": {"step_s": "0.5", "slow_step_s": "0.8"},
    "checkpoint_bytes": {"params": "175B", "precision": "bf16-master", "optimizer": "adam", "gpus": "512"},
    "checkpoint_write_s": {"params": "175B", "precision": "bf16-master", "optimizer": "adam", "gpus": "512",
                           "rank_bytes_per_s": "2GB/s", "storage_bytes_per_s": "500GB/s"},
    "job_mtbf_hours": {"gpu_mtbf_hours": "50000", "gpus": "10K"},
    "young_interval_min": {"checkpoint_min": "5", "mtbf_hours": "1"},
    "young_interval_min_for_gpus": {"checkpoint_min": "2", "gpu_mtbf_hours": "50000", "gpus": "16384"},
    "checkpoint_lost_share": {"interval_min": "60", "checkpoint_min": "5", "mtbf_hours": "10", "restart_min": "10"},
    "checkpoint_lost_share_at_young": {"checkpoint_min": "5", "mtbf_hours": "1"},
    "hierarchical_all_reduce_ms": {"size_bytes": "28GB", "gpus": "1024", "gpus_per_node": "8",
                                   "intra_bytes_per_s": "450GB/s", "inter_bytes_per_s": "400Gbps",
                                   "oversubscription": "2", "rack_nodes": "4", "intra_latency_s": "3.4e-6",
                                   "inter_latency_s": "14e-6"},
    "flat_ring_all_reduce_ms": {"size_bytes": "28GB", "gpus": "1024", "gpus_per_node": "8",
                                "intra_bytes_per_s": "450GB/s", "inter_bytes_per_s": "400Gbps"},
    "hierarchical_inter_bytes": {"size_bytes": "28GB", "gpus": "1024", "gpus_per_node": "8"},
    "scaling_efficiency": {"gpus_before": "512", "gpus_after": "1024", "throughput_ratio": "1.1"},
    "strong_scaling_fixed_share": {"gpus_before": "512", "gpus_after": "1024", "throughput_ratio": "1.1"},
    "adam8bit_model_state_bytes": {"params": "7B", "gpus": "8", "strategy": "zero3", "precision": "bf16-mixed"},
    "lora_bytes_per_gpu": {"layers": "80", "d_model": "8192", "vocab": "32000", "seq_len": "4096", "rank": "16",
                           "gpus": "2", "base": "nf4", "targets": "all", "strategy": "fsdp", "double_quant": "yes"},
}


def test_quiz_functions_cover_the_contract():
    assert set(QUIZ_FUNCTIONS) == set(STRING_ARGS)


@pytest.mark.parametrize("name", sorted(STRING_ARGS))
def test_every_quiz_function_takes_string_keywords(name):
    function = QUIZ_FUNCTIONS[name]
    parameters = inspect.signature(function).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    value = function(**STRING_ARGS[name])
    assert isinstance(value, (int, float)) and value > 0


def test_quiz_answers():
    q = QUIZ_FUNCTIONS
    assert q["param_count"](model="base") == shapes.model_params("gpt", "base")
    assert q["model_state_bytes"](**STRING_ARGS["model_state_bytes"]) == 16 * 7 * 10**9 // 8
    # 70B at 16 B/param = 1.12 TB; 80 GB GPUs under ZeRO-3 need ceil(1120/80) = 14.
    assert q["min_gpus"](**STRING_ARGS["min_gpus"]) == 14
    # ZeRO-1 with bf16-master: 4 B/param replicated + 12/N: 7B fits 80 GB from N = 2 (28 + 42 GB).
    assert q["min_gpus"](params="7B", gpu_mem="80GB", strategy="zero1", precision="bf16-master", optimizer="adam") == 2
    assert q["min_gpus"](params="1B", gpu_mem="80GB", strategy="ddp", precision="fp32", optimizer="adam") == 1
    with pytest.raises(ValueError):
        q["min_gpus"](params="7B", gpu_mem="80GB", strategy="ddp", precision="fp32", optimizer="adam")
    # 80 GB / 16 B per param = 5B params on one GPU with DDP; ZeRO-3 on 8 GPUs: 40B.
    assert q["max_params"](gpu_mem="80GB", gpus=1, strategy="ddp", precision="bf16-mixed", optimizer="adam") == 5 * 10**9
    assert q["max_params"](**STRING_ARGS["max_params"]) == 40 * 10**9
    assert q["step_wire_bytes"](params="1B", gpus=4, strategy="ddp", precision="fp32") == 6 * 10**9
    assert q["comm_ratio"](strategy="hsdp", gpus=16, group_size=16) == pytest.approx(1.5)


def test_max_params_is_the_edge_of_fitting():
    args = dict(gpus=8, strategy="zero1", precision="bf16-master", optimizer="adam")
    largest = QUIZ_FUNCTIONS["max_params"](gpu_mem="80GB", **args)
    fits = lambda n: model_state(n, 8, "zero1", "bf16-master", "adam")["model_state_bytes"] <= 80e9  # noqa: E731
    assert fits(largest) and not fits(largest + 1)


def test_ddp_broadcasts_module_buffers_every_forward():
    common = dict(params=1000, world_size=4, precision="fp32", optimizer="sgd")
    assert "broadcast" not in theory_for_run(strategy="ddp", **common)["comm"]
    ddp = theory_for_run(strategy="ddp", buffer_bytes=800, **common)
    assert ddp["comm"]["broadcast"] == {"count": None, "bytes": 800, "wire_bytes_per_rank": 600}
    zro = theory_for_run(strategy="zro", buffer_bytes=800, **common)
    assert zro["comm"]["broadcast"]["bytes"] == 4000 + 800
