"""One implementation per strategy name: what each column holds, gathers and reduces under each precision.

The expected bytes are written out from the sources, not from the analytic model:
- PyTorch (torch 2.13): DDP all-reduces the gradients of the parameters it holds (nn/parallel/distributed.py;
  under autocast they are fp32); ZeroRedundancyOptimizer broadcasts `param.data` from each owner
  (distributed/optim/zero_redundancy_optimizer.py, `_broadcast_params_from_rank`); FSDP2 keeps the original
  dtype in its shards, all-gathers `param_dtype` (`FSDPParam.all_gather_inputs`) and reduce-scatters in
  `reduce_dtype` (`foreach_reduce`); `reshard_after_forward=False` skips the post-forward reshard, so each
  unit is gathered once per step (distributed/fsdp/_fully_shard/_fsdp_param_group.py, `reshard`).
- DeepSpeed 0.19 (runtime/zero/stage_1_and_2.py): ZeRO-1/2 step a `.clone()` of the rank's partition in
  the master dtype (fp32 unless bf16_master_weights_and_grads) and all-gather the model's own tensors after
  the step; the model is cast to bf16 only in bf16 mode (runtime/engine.py), so under torch_autocast it stays
  fp32 and only the Linear layers' gradients are reduced in bf16 (runtime/torch_autocast.py); ZeRO-3 under
  bf16 holds 16-bit shards and an fp32 master partition (runtime/zero/stage3.py).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.estimate import estimate
from ddpfsdp.demos.theory.state import bytes_per_param
from ddpfsdp.demos.theory.working_set import working_set
from ddpfsdp.quiz.cli import cli

# (strategy, precision) -> (params, grads, optimizer) bytes per parameter with AdamW, before sharding.
HELD = {
    ("ddp", "fp32"): (4, 4, 8), ("ddp", "bf16-mixed"): (4, 4, 8), ("ddp", "bf16-master"): (2, 2, 12),
    ("ddp", "bf16"): (2, 2, 4),
    ("zro", "fp32"): (4, 4, 8), ("zro", "bf16-mixed"): (4, 4, 8), ("zro", "bf16-master"): (2, 2, 12),
    ("zro", "bf16"): (2, 2, 4),
    # DeepSpeed's own copy of the partition: fp32 (4) beside fp32 moments; bf16 (2) beside bf16 ones.
    ("zero1", "fp32"): (4, 4, 12), ("zero1", "bf16-mixed"): (4, 4, 12), ("zero1", "bf16-master"): (2, 2, 12),
    ("zero1", "bf16"): (2, 2, 6),
    ("zero2", "fp32"): (4, 4, 12), ("zero2", "bf16-mixed"): (4, 4, 12), ("zero2", "bf16-master"): (2, 2, 12),
    ("zero2", "bf16"): (2, 2, 6),
    ("grad-op", "fp32"): (4, 4, 8), ("grad-op", "bf16-mixed"): (4, 4, 8), ("grad-op", "bf16-master"): (2, 2, 12),
    ("grad-op", "bf16"): (2, 2, 4),
    ("zero3", "fp32"): (4, 4, 8), ("zero3", "bf16-mixed"): (4, 4, 8), ("zero3", "bf16-master"): (2, 2, 12),
    ("zero3", "bf16"): (2, 2, 4),
}


@pytest.mark.parametrize(("strategy", "precision"), sorted(HELD))
def test_each_implementation_holds_what_its_source_allocates(strategy, precision):
    per = bytes_per_param(strategy, precision, "adamw")
    assert (per["params"], per["grads"], per["optimizer"]) == HELD[(strategy, precision)]


def test_deepspeed_zero3_offloading_the_optimizer_copies_the_partition_to_the_host():
    # FSDP has no optimizer-only offload, so the row is DeepSpeed ZeRO-3's, which clones an fp32 master.
    assert bytes_per_param("zero3", "bf16-mixed", "adamw", "optimizer")["optimizer"] == 4 + 8
    assert bytes_per_param("zero3", "bf16-mixed", "adamw")["optimizer"] == 8


P, N = 70 * 10**9, 32

# 70B on 32 GPUs under bf16-mixed: op -> logical bytes per step (count where FSDP knows it, 32 equal units).
TRAFFIC = {
    "ddp": {"all_reduce": P * 4},
    "zro": {"all_reduce": P * 4, "broadcast": P * 4},  # fp32 gradients, then the fp32 parameters
    "zero1": {"reduce_scatter": P * 2, "all_gather": P * 4},  # bf16 (Linear) gradients; fp32 weights
    "zero2": {"reduce_scatter": P * 2, "all_gather": P * 4},
    "grad-op": {"all_gather": P * 2, "reduce_scatter": P * 4},  # bf16 once per unit; fp32 reduce_dtype
    "zero3": {"all_gather": 2 * P * 2, "reduce_scatter": P * 4},  # forward and backward (32 units, no root)
}


@pytest.mark.parametrize("strategy", sorted(TRAFFIC))
def test_each_implementation_sends_its_own_element_sizes(strategy):
    units = [P // 32] * 32 + [0]
    ops = step_comm(strategy, P, N, "bf16-mixed", unit_params=units)
    assert {op: figures["bytes"] for op, figures in ops.items()} == TRAFFIC[strategy]


def test_under_bf16_master_deepspeed_gathers_and_reduces_in_bf16():
    for strategy in ("zero1", "zero2"):
        ops = step_comm(strategy, P, N, "bf16-master")
        assert (ops["reduce_scatter"]["bytes"], ops["all_gather"]["bytes"]) == (P * 2, P * 2)
    fp32 = step_comm("zero2", P, N, "fp32")
    assert (fp32["reduce_scatter"]["bytes"], fp32["all_gather"]["bytes"]) == (P * 4, P * 4)


def test_the_grad_op_entry_for_70b_on_32_gpus():
    """`ddpfsdp calc --params 70B --gpus 32 --precision bf16-mixed --json`: fp32 shards of 70e9 / 32 x 4 bytes
    = 8.75 GB at rest, and one bf16 all-gather of 70e9 x 2 bytes = 140 GB per step, one call per unit."""
    result = CliRunner().invoke(cli, ["calc", "--params", "70B", "--gpus", "32", "--precision", "bf16-mixed", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["strategies"]["grad-op"]
    assert row["params_bytes"] == 8_750_000_000
    assert row["model_state_bytes"] == 35_000_000_000  # 16 bytes x 70e9 / 32
    assert row["comm"]["all_gather"] == {"count": 32, "bytes": 140_000_000_000,
                                         "wire_bytes_per_rank": 135_625_000_000}  # x 31/32
    assert "reshard_after_forward=False" in row["implementation"] and "bf16" in row["implementation"]
    # Every unit's full bf16 parameters (140 GB) plus two units' fp32 gradients (2 x 70e9/32 x 4 = 17.5 GB).
    assert row["working_set_bytes"] == 140_000_000_000 + 17_500_000_000


def test_grad_op_working_set_holds_every_gathered_unit():
    units = [400, 250, 250, 100, 0]
    # fp32: 1000 parameters gathered (4 bytes each) and the two largest-unit gradients awaiting reduce (2 x 400 x 4).
    assert working_set("grad-op", 1000, "fp32", units)["working_set_bytes"] == 4000 + 3200
    # DeepSpeed's ZeRO-1/2: a 5e8-element bucket in the held dtype, one per communication dtype (two under
    # torch_autocast), plus autocast's bf16 copy of every weight (2 bytes).
    assert working_set("zero2", 1000, "bf16-mixed", units)["parts"] == {
        "gradient_buckets": 2 * 500_000_000 * 4, "autocast_weight_copies": 2000}


def test_every_column_names_its_implementation_and_the_note_says_where_they_differ():
    document = estimate(params="70B", gpus=32, precision="bf16-mixed")
    names = {key: row["implementation"] for key, row in document["strategies"].items()}
    assert names["zro"].startswith("PyTorch ZeroRedundancyOptimizer") and "DeepSpeed" in names["zero2"]
    assert "torch_autocast" in names["zero1"] and "FSDP2 fully_shard" in names["zero3"]
    note = next(n for n in document["notes"] if n.startswith("What each column follows under bf16-mixed"))
    for title in ("DDP", "ZeroRedundancyOptimizer", "ZeRO-1", "ZeRO-2", "FSDP grad-op", "ZeRO-3 / FSDP full", "HSDP"):
        assert f"{title} follows" in note
    assert "8.75 GB of fp32 parameters as shards" in note and "in bf16 once per step" in note
    assert "280.00 GB of fp32 parameters whole" in note
    master = estimate(params="70B", gpus=32, precision="bf16-master")["strategies"]
    assert master["zero3"]["implementation"].startswith("DeepSpeed ZeRO stage 3")
    assert "MiCS" in master["hsdp"]["implementation"]


def test_the_text_table_names_each_implementation_within_80_columns():
    result = CliRunner().invoke(cli, ["calc", "--params", "70B", "--gpus", "32", "--explain"],
                                env={"COLUMNS": "80", "NO_COLOR": "1", "FORCE_COLOR": None, "TTY_COMPATIBLE": None})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("Measure it:")]  # one plain echo
    assert max(len(line) for line in lines) <= 80
    table = result.output.split("What each column follows")[1].split("Communication per step")[0]
    words = " ".join(line.strip("│ ┌┐└┘─┬┴├┤┼") for line in table.splitlines())
    for phrase in ("ZeroRedundancyOptimizer under DDP", "DeepSpeed ZeRO stage 2", "torch_autocast",
                   "reshard_after_forward=False", "MixedPrecisionPolicy"):
        assert phrase in words.replace("│ ", "").replace("  ", " ")
    assert "…" not in table
