"""Offload and host RAM in the analytic model, and DeepSpeed's estimator as a second accounting.

The DeepSpeed figures come from DeepSpeed itself: the worked examples of its memory-requirements
page (docs/code-docs/source/memory.rst) and the formulas of
`estimate_zero2_model_states_mem_needs` (deepspeed/runtime/zero/stage_1_and_2.py) and
`estimate_zero3_model_states_mem_needs` (deepspeed/runtime/zero/stage3.py), read at v0.19.5 (the
two functions are the same from v0.19.0 to v0.19.5). DeepSpeed prints bytes / 2**30 with two
decimals under the label "GB"; the tests compare at that precision.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.theory.estimate import estimate
from ddpfsdp.demos.theory.gpt_layout import gpt_shape_of
from ddpfsdp.demos.theory.offload import offload_refusal, offload_strategies
from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS
from ddpfsdp.demos.theory.sharding import STRATEGIES
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.working_set import DEFAULT_UNITS
from ddpfsdp.demos.theory import deepspeed_accounting as ds
from ddpfsdp.quiz.cli import cli

GIB = 2**30


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], terminal_width=200)


def gib(n: int) -> float:
    return round(n / GIB, 2)


# ----------------------------------------------------------------------------- DeepSpeed 0.19

# (offload, zero_init) -> (per CPU, per GPU) as printed by estimate_zero3_model_states_mem_needs_all_cold(
# total_params=2851e6, largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1).
T5_3B_ZERO3 = {
    ("all", True): (71.69, 0.12),
    ("all", False): (127.45, 0.12),
    ("optimizer", True): (63.72, 0.78),
    ("optimizer", False): (127.45, 0.78),
    ("none", True): (1.43, 6.09),
    ("none", False): (127.45, 6.09),
}


@pytest.mark.parametrize(("offload", "zero_init"), sorted(T5_3B_ZERO3))
def test_deepspeed_zero3_t5_3b_table(offload, zero_init):
    """DeepSpeed v0.19.5, docs/code-docs/source/memory.rst, ZeRO3 example (t5-3b, 2851M params, 32M
    largest layer, 1 node of 8 GPUs), as computed by deepspeed/runtime/zero/stage3.py
    estimate_zero3_model_states_mem_needs: every offload_param/offload_optimizer/zero_init row."""
    per_cpu, per_gpu = T5_3B_ZERO3[(offload, zero_init)]
    host, gpu, layer = ds.zero3_mem_needs(
        2851 * 10**6, 32 * 10**6, 8, 1,
        cpu_offload=offload != "none", cpu_offload_params=offload == "all", zero_init=zero_init,
    )
    assert (gib(host), gib(gpu)) == (per_cpu, per_gpu)
    assert layer == 4 * 32 * 10**6
    document = estimate(params="2851M", gpus=8, accounting="deepspeed", largest_layer="32M",
                             offload=offload, zero_init=zero_init, strategies=["zero3"])
    row = document["strategies"]["zero3"]
    # With no activations the table's total is DeepSpeed's per-GPU figure, to the byte.
    assert row["total_bytes"] == gpu and row["deepspeed_gpu_bytes"] == gpu
    assert row["host_bytes"] == host


def test_deepspeed_zero2_t5_3b_with_optimizer_offload():
    """DeepSpeed v0.19.5, docs/code-docs/source/memory.rst, ZeRO2 example (t5-3b, 2851M params, 1 node of
    8 GPUs), row offload_optimizer=cpu: 127.45 per CPU, 5.31 per GPU; deepspeed/runtime/zero/
    stage_1_and_2.py estimate_zero2_model_states_mem_needs: 2P on the GPU, max(4N, 16) * P * 1.5 host."""
    host, gpu = ds.zero2_mem_needs(2851 * 10**6, 8, 1, cpu_offload=True)
    assert (gib(host), gib(gpu)) == (127.45, 5.31)
    row = estimate(params="2851M", gpus=8, accounting="deepspeed", offload="optimizer")["strategies"]["zero2"]
    assert (row["total_bytes"], row["host_bytes"]) == (gpu, host)


def test_deepspeed_zero2_without_offload_follows_the_code_not_the_older_page():
    """DeepSpeed v0.19.5, deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs,
    offload_optimizer=none: 2P + int(18P/N) per GPU (16-bit params, then 16-bit and fp32 gradients,
    fp32 master and two moments per shard), 4P * n * 1.5 host. For t5-3b on 8 GPUs that is 11.28,
    where memory.rst still prints 15.93 = 4P + 16P/N, the formula before v0.14.3 (#5099)."""
    params = 2851 * 10**6
    host, gpu = ds.zero2_mem_needs(params, 8, 1, cpu_offload=False)
    assert gpu == 2 * params + int(18 * params / 8)
    assert (gib(host), gib(gpu)) == (127.45, 11.28)
    assert gib(4 * params + 16 * params // 8) == 15.93  # the page's stale figure, for the record
    document = estimate(params="2851M", gpus=8, accounting="deepspeed")
    assert document["strategies"]["zero2"]["total_bytes"] == gpu


@pytest.mark.parametrize(("offload", "mib"), [("none", 3291), ("all", 125), ("optimizer", 477)])
def test_deepspeed_zero3_t5_large_cases(offload, mib):
    """DeepSpeed v0.19.5, docs/code-docs/source/memory.rst, GPU RAM example for ZeRO-3 (t5-large:
    737.67M params, 32.90M largest layer, 4 GPUs): case1 3291MB, case2 125MB, case3 477MB (bytes >> 20),
    the formulas of deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs."""
    gpu = QUIZ_FUNCTIONS["deepspeed_gpu_bytes"](
        params="737.67M", gpus="4", strategy="zero3", offload=offload, largest_layer="32.90M", gpus_per_node="4"
    )
    assert gpu >> 20 == mib


def test_deepspeed_zero3_across_nodes_divides_the_host_share():
    """DeepSpeed v0.19.5, deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs: host RAM
    per node with zero.Init is 18P (offload_param) or 16P (offload_optimizer) / nodes, x 1.5."""
    params = 70 * 10**9
    for offload, per_param in (("all", 18), ("optimizer", 16)):
        host = QUIZ_FUNCTIONS["deepspeed_host_bytes"](
            params="70B", gpus="32", strategy="zero3", offload=offload, largest_layer="1B", gpus_per_node="8"
        )
        assert host == int(params * per_param / 4 * 1.5)


def test_deepspeed_parts_add_up_to_its_figure():
    for strategy, offloads in (("zero2", ("none", "optimizer")), ("zero3", ("none", "optimizer", "all"))):
        for offload in offloads:
            row = estimate(params="7B", gpus=64, accounting="deepspeed", offload=offload,
                                strategies=[strategy])["strategies"][strategy]
            assert row["params_bytes"] + row["grads_bytes"] + row["optimizer_bytes"] == row["model_state_bytes"]
            assert row["model_state_bytes"] + row["working_set_bytes"] == row["deepspeed_gpu_bytes"]


def test_the_two_accountings_differ_by_the_fp32_gradient_copy():
    """ZeRO-3, no offload, same largest term removed: DeepSpeed 18P/N against ours 16P/N (bf16-master);
    ZeRO-2: 2P + 18P/N against 2P + 14P/N."""
    params, gpus = 8 * 10**9, 64
    ours = estimate(params=params, gpus=gpus, precision="bf16-master", optimizer="adam")["strategies"]
    theirs = estimate(params=params, gpus=gpus, accounting="deepspeed")["strategies"]
    assert ours["zero3"]["model_state_bytes"] == 16 * params // gpus
    assert theirs["zero3"]["model_state_bytes"] == 18 * params // gpus
    assert ours["zero2"]["model_state_bytes"] == 2 * params + 14 * params // gpus
    assert theirs["zero2"]["model_state_bytes"] == 2 * params + 18 * params // gpus
    # Working term: one layer's 16-bit params and grads against two units' params and grads.
    unit = params // DEFAULT_UNITS
    assert theirs["zero3"]["working_set_bytes"] == 4 * unit
    assert ours["zero3"]["working_set_bytes"] == 2 * unit * (2 + 2)


def test_deepspeed_largest_layer_of_a_preset_is_its_largest_module():
    shape = gpt_shape_of("large")
    document = estimate(model="large", gpus=8, accounting="deepspeed")
    # The token embedding (vocab x d) outweighs any Linear of a block (4d x d).
    assert document["inputs"]["largest_layer_params"] == shape.vocab * shape.d_model
    assert document["strategies"]["zero3"]["working_set_bytes"] == 4 * shape.vocab * shape.d_model
    given = estimate(params="7B", gpus=8, accounting="deepspeed", largest_layer="100M")
    assert given["inputs"]["largest_layer_params"] == 100 * 10**6
    default = estimate(params="7B", gpus=8, accounting="deepspeed", units=7)
    assert default["inputs"]["largest_layer_params"] == 10**9


def test_deepspeed_accounting_shows_only_what_it_covers_and_counts_its_precision():
    document = estimate(params="7B", gpus=8, accounting="deepspeed")
    assert set(document["strategies"]) == {"zero2", "zero3"}
    assert document["inputs"]["precision"] == "bf16-master"
    with pytest.raises(ValueError, match="mixed-precision Adam"):
        estimate(params="7B", accounting="deepspeed", precision="fp32")
    with pytest.raises(ValueError, match="mixed-precision Adam"):
        estimate(params="7B", accounting="deepspeed", optimizer="sgd")
    with pytest.raises(ValueError, match="only ZeRO-2 and ZeRO-3"):
        estimate(params="7B", accounting="deepspeed", strategies=["zero1"])
    with pytest.raises(ValueError, match="deepspeed accounting"):
        estimate(params="7B", largest_layer="1M")


# ----------------------------------------------------------------------------- offload, ddpfsdp accounting


def test_offload_all_moves_the_shards_to_the_host():
    params, gpus = 7 * 10**9, 16
    plain = estimate(params=params, gpus=gpus)["strategies"]["zero3"]
    moved = estimate(params=params, gpus=gpus, offload="all")["strategies"]["zero3"]
    assert moved["params_bytes"] == moved["grads_bytes"] == moved["optimizer_bytes"] == moved["model_state_bytes"] == 0
    assert moved["host_bytes_per_gpu"] == plain["model_state_bytes"] == 16 * params // gpus
    assert moved["host_bytes"] == 8 * moved["host_bytes_per_gpu"]  # 8 processes share a node's RAM
    # What remains on the GPU is the gathered units, the same as without offload.
    assert moved["total_bytes"] == plain["working_set_bytes"]
    assert moved["offloaded_by"].startswith("FSDP2 fully_shard(offload_policy=CPUOffloadPolicy())")


def test_offload_all_pcie_traffic_follows_fsdp2():
    """FSDP2 copies each parameter shard host-to-device before every all-gather (forward, and backward
    after resharding; the root is not resharded) and each gradient shard device-to-host."""
    params, gpus = 3_200_000_000, 8
    row = estimate(params=params, gpus=gpus, offload="all", units=32)["strategies"]["zero3"]
    shard = params // gpus
    assert row["pcie"]["host_to_device_bytes"] == 2 * shard * 4  # fp32 shards under bf16-mixed, twice
    assert row["pcie"]["device_to_host_bytes"] == shard * 4
    assert row["pcie_bytes_per_step"] == 3 * shard * 4
    assert QUIZ_FUNCTIONS["pcie_bytes_per_step"](
        params=params, gpus=gpus, strategy="zero3", precision="bf16-mixed", offload="all", units=32
    ) == row["pcie_bytes_per_step"]


def test_offload_all_under_grad_op_copies_each_shard_in_once():
    """reshard_after_forward=False: no unit is gathered again in backward, so each parameter shard
    crosses host-to-device once per step (FSDP2 _fsdp_param.py all_gather_inputs copies the offloaded
    shard to the device before each all-gather)."""
    params, gpus = 3_200_000_000, 8
    row = estimate(params=params, gpus=gpus, offload="all", units=32)["strategies"]["grad-op"]
    shard = params // gpus
    assert row["pcie"] == {"host_to_device_bytes": shard * 4, "device_to_host_bytes": shard * 4}
    assert row["host_bytes_per_gpu"] == 16 * shard  # fp32 params, grads and AdamW's two moments


def test_offload_optimizer_moves_the_optimizer_and_the_gradient_shard():
    params, gpus = 7 * 10**9, 8
    table = estimate(params=params, gpus=gpus, precision="bf16-master", optimizer="adam", offload="optimizer")["strategies"]
    shard = params // gpus
    assert set(table) == {"zero1", "zero2", "zero3"}
    zero2 = table["zero2"]
    assert (zero2["params_bytes"], zero2["grads_bytes"], zero2["optimizer_bytes"]) == (2 * params, 0, 0)
    assert zero2["host_bytes_per_gpu"] == 12 * shard + 2 * shard
    assert zero2["pcie"] == {"host_to_device_bytes": 2 * shard, "device_to_host_bytes": 2 * shard}
    zero1 = table["zero1"]
    assert zero1["grads_bytes"] == 2 * params  # reduced in full on the GPU before the shard goes over
    assert zero1["optimizer_bytes"] == 0 and zero1["host_bytes_per_gpu"] == zero2["host_bytes_per_gpu"]
    assert table["zero3"]["model_state_bytes"] == 2 * shard


def test_offload_admits_only_what_an_implementation_does():
    assert offload_strategies("none") == STRATEGIES
    assert offload_strategies("optimizer") == ("zero1", "zero2", "zero3")
    assert offload_strategies("all") == ("grad-op", "zero3", "hsdp")
    for strategy, offload, instead in [
        ("ddp", "all", "zero3 with --offload all"),
        ("zro", "optimizer", "zero1 or zero2 with --offload optimizer"),
        ("zro", "all", "has no offload"),
        ("grad-op", "optimizer", "no optimizer-only offload"),
        ("ddp", "optimizer", "--offload optimizer"),
        ("zero2", "all", "offload_param needs stage 3"),
        ("hsdp", "optimizer", "no optimizer-only offload"),
    ]:
        assert instead in offload_refusal(strategy, offload)
        with pytest.raises(ValueError, match="instead|use"):
            estimate(params="7B", offload=offload, strategies=[strategy])


def test_host_ram_per_node_counts_the_processes_on_one_node():
    small = estimate(params="1B", gpus=4, offload="all", strategies=["zero3"])
    assert small["inputs"]["gpus_per_node"] == 4 and small["inputs"]["nodes"] == 1
    row = small["strategies"]["zero3"]
    assert row["host_bytes"] == 4 * row["host_bytes_per_gpu"] == 16 * 10**9
    wide = estimate(params="1B", gpus=32, gpus_per_node=4, offload="all", strategies=["zero3"])
    assert wide["inputs"]["nodes"] == 8
    assert wide["strategies"]["zero3"]["host_bytes"] == 4 * 16 * 10**9 // 32
    assert QUIZ_FUNCTIONS["host_bytes"](
        params="1B", gpus="32", strategy="zero3", precision="bf16-mixed", optimizer="adamw", offload="all", gpus_per_node="4"
    ) == 2 * 10**9
    with pytest.raises(ValueError, match="whole number of nodes"):
        estimate(params="1B", gpus=12, offload="all")
    # Without host figures, a partly filled node is harmless.
    assert estimate(params="1B", gpus=12)["inputs"]["nodes"] == 2


def test_no_offload_keeps_every_figure_and_holds_nothing_on_the_host():
    document = estimate(params="7B", gpus=8)
    assert set(document["strategies"]) == set(STRATEGIES)
    for name, row in document["strategies"].items():
        assert row["host_bytes"] == 0 and row["pcie_bytes_per_step"] == 0
        assert row["model_state_bytes"] == model_state(7 * 10**9, 8, name, "bf16-mixed", "adamw", document["inputs"]["group_size"] if name == "hsdp" else None)["model_state_bytes"]


# ----------------------------------------------------------------------------- the CLI


def test_cli_json_carries_host_bytes():
    result = invoke("--params", "13B", "--gpus", "16", "--offload", "all", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["inputs"]["offload"] == "all"
    assert document["inputs"]["accounting"] == "ddpfsdp"
    assert (document["inputs"]["gpus_per_node"], document["inputs"]["nodes"]) == (8, 2)
    assert set(document["strategies"]) == {"grad-op", "zero3", "hsdp"}
    zero3 = document["strategies"]["zero3"]
    assert zero3["host_bytes"] == 8 * 16 * 13 * 10**9 // 16
    assert zero3["model_state_bytes"] == 0
    for key in ("host_bytes_per_gpu", "pcie_bytes_per_step", "pcie", "offloaded_by"):
        assert key in zero3


def test_cli_table_shows_host_rows_and_the_deepspeed_header():
    result = invoke("--params", "2851M", "--gpus", "8", "--accounting", "deepspeed", "--largest-layer", "32M",
                    "--offload", "all", "--unit", "GiB")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "DeepSpeed 0.19" in out and "host RAM per node" in out and "PCIe per step" in out
    assert "71.69 GiB" in out and "0.12 GiB" in out
    assert "offload_param=cpu" in out and "zero_init=1" in out
    assert "ZeRO-2" not in out.split("Communication")[0]  # ZeRO-2 has no parameter offload


def test_cli_strategy_limits_the_table():
    result = invoke("--params", "7B", "--strategy", "fsdp", "--strategy", "ddp", "--json")
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.output)["strategies"]) == ["ddp", "zero3"]


def test_cli_help_says_why_the_accountings_differ():
    out = invoke("--help").output
    for words in ("--offload", "--accounting", "--gpus-per-node", "--largest-layer", "fp32", "largest layer",
                  "two prefetched", "CPUOffloadPolicy"):
        assert words in out, words


@pytest.mark.parametrize(
    ("args", "option", "instead"),
    [
        (["--offload", "all", "--strategy", "ddp"], "--offload", "zero3"),
        (["--offload", "all", "--strategy", "zero1"], "--offload", "--offload optimizer"),
        (["--offload", "optimizer", "--strategy", "hybrid"], "--offload", "--offload all"),
        (["--accounting", "deepspeed", "--strategy", "ddp"], "--accounting", "zero2 or zero3"),
        (["--accounting", "deepspeed", "--strategy", "hsdp"], "--accounting", "ddpfsdp accounting"),
        (["--accounting", "deepspeed", "--precision", "bf16-mixed"], "--accounting", "bf16-master"),
        (["--accounting", "deepspeed", "--optimizer", "sgd"], "--accounting", "adamw"),
        (["--largest-layer", "30M"], "--largest-layer", "--accounting deepspeed"),
        (["--accounting", "deepspeed", "--largest-layer", "big"], "--largest-layer", "7B"),
        (["--gpus", "12", "--offload", "all"], "--gpus-per-node", "multiple"),
        (["--gpus-per-node", "0"], "--gpus-per-node", "x>=1"),
        (["--offload", "disk"], "--offload", "optimizer"),
        (["--accounting", "megatron"], "--accounting", "deepspeed"),
    ],
)
def test_cli_refuses_nonsense_with_what_to_use(args, option, instead):
    result = invoke("--params", "7B", *args)
    assert result.exit_code == 2, result.output
    assert option in result.output and instead in result.output
    assert "Traceback" not in result.output
