"""`ddpfsdp calc` at cluster scale: each option group's section in the JSON document, figures checked by hand,
the printed sections, and bad input refused with a message and no traceback."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from ddpfsdp.quiz.cli import cli

ENV = {"COLUMNS": "80", "LINES": "24", "NO_COLOR": "1", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], env=ENV)


def document(*args: str) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_straggler_probability_needs_no_model():
    doc = document("--gpus", "10000", "--stragglers", "0.001", "--straggler-delay", "300ms", "--step-time", "1s")
    assert doc["schema"] == "ddpfsdp.calc/1" and doc["theory"] is True and "strategies" not in doc
    section = doc["stragglers"]
    # 1 - 0.999^10000 = 1 - e^-10.0050033 = 0.9999548267; the step 1 + 0.3 x that = 1.2999864 s.
    assert section["p_slow_step"] == pytest.approx(0.9999548267, rel=1e-9)
    assert section["expected_step_s"] == pytest.approx(1.2999864, rel=1e-7)
    out = invoke("--gpus", "10000", "--stragglers", "0.001").output
    assert "1 - (1 - 0.001)^10,000 = 99.995%" in out


def test_checkpoint_size_and_young_daly_interval():
    doc = document("--params", "175B", "--gpus", "512", "--precision", "bf16-master", "--optimizer", "adam",
                   "--checkpoint-bw", "2GB/s", "--storage-bw", "500GB/s", "--gpu-mtbf-hours", "50000",
                   "--checkpoint-every", "1h", "--restart-time", "10min")
    c = doc["checkpoint"]
    # 175e9 x 14 = 2.45e12 bytes; 4,785,156,250 per rank; the write max(2.39 s, 2.45e12 / 5e11 = 4.9 s) = 4.9 s.
    assert c["total_bytes"] == 2_450_000_000_000 and c["sharded_bytes_per_rank"] == 4_785_156_250
    assert c["sharded_write_s"] == pytest.approx(4.9)
    # Gathered to rank 0 at 2 GB/s: 2.45e12 / 2e9 = 1,225 s (the storage's 4.9 s is not the bound).
    assert c["gathered_write_s"] == pytest.approx(1225)
    # Job MTBF 50,000 h / 512 = 97.65625 h = 351,562.5 s; Young sqrt(2 x 4.9 x 351,562.5) = sqrt(3,445,312.5)
    # = 1,856.1553 s.
    assert c["job_mtbf_s"] == pytest.approx(351_562.5)
    assert c["young_interval_s"] == pytest.approx(1856.1553, rel=1e-7)
    # Every hour: 4.9/3600 = 0.136% + 3600/703,125 = 0.512% + 600/351,562.5 = 0.171%.
    at = c["at_interval"]
    assert at["checkpoint"] == pytest.approx(4.9 / 3600)
    assert at["rework"] == pytest.approx(3600 / 703_125)
    assert at["restart"] == pytest.approx(600 / 351_562.5)
    out = invoke("--params", "175B", "--gpus", "512", "--precision", "bf16-master", "--optimizer", "adam",
                 "--checkpoint-bw", "2GB/s").output
    assert "Young (1974)" in out and "Daly (2006)" in out and "2,450.00 GB" in out


def test_hierarchical_all_reduce_by_link():
    doc = document("--params", "1B", "--gpus", "16", "--precision", "fp32", "--topology", "--intra-bw", "100GB/s",
                   "--inter-bw", "80Gbps")
    t = doc["topology"]
    # fp32 gradients of 1e9 params: 4e9 bytes. 80 Gb/s = 10 GB/s. Flat: 2 x 15/16 x 4e9 = 7.5e9 / 1e10 = 0.75 s
    # plus latency (NCCL's 14 us x 2 network steps + 3.4 us x 28 NVLink steps = 123.2 us).
    assert t["all_reduce_bytes"] == 4e9
    assert t["flat_ring"]["time_s"] == pytest.approx(0.75 + 123.2e-6)
    # Hierarchical: 7/8 x 4e9 = 3.5e9 B at 100 GB/s = 35 ms twice; 2 x 1/2 x 5e8 = 5e8 B at 10 GB/s = 50 ms; latency
    # 2 x 7 x 3.4 us + 2 x 14 us = 75.6 us.
    phases = t["hierarchical"]["phases"]
    assert [p["link"] for p in phases] == ["intra", "inter", "intra"]
    assert t["hierarchical"]["by_link"]["intra"]["time_s"] == pytest.approx(0.07 + 47.6e-6)
    assert t["hierarchical"]["by_link"]["inter"]["time_s"] == pytest.approx(0.05 + 28e-6)
    assert t["hsdp"]["by_link"]["inter"]["wire_bytes_per_gpu"] == pytest.approx(5e8)


def test_scaling_section():
    doc = document("--gpus", "512", "--scaled-to", "1024", "--throughput-gain", "1.1")
    assert doc["scaling"]["efficiency"] == pytest.approx(0.55)
    assert doc["scaling"]["strong_fixed_share_before"] == pytest.approx(9 / 11)  # (1/1.1 - 1/2) / (1/2) = 9/11


def test_plan_for_175b_on_1024_gpus_of_80_gb_in_nodes_of_8():
    doc = document("--params", "175B", "--gpus", "1024", "--gpus-per-node", "8", "--plan", "--cluster",
                   "DGX A100 80GB", "--precision", "bf16-master", "--optimizer", "adam")
    plan = doc["plan"]
    assert plan["job"]["gpus"] == 1024 and plan["job"]["gpu_mem_bytes"] == 80 * 10**9
    assert plan["topology"]["gpus_per_node"] == 8
    best = plan["candidates"][0]
    assert (best["tp"], best["pp"], best["dp"]) == (8, 8, 16)
    for row in plan["candidates"]:
        assert row["fits"] and row["memory"]["total_bytes"] <= 80 * 10**9
        assert set(row["comm"]) == {"tp", "pp", "dp"} and row["comm"]["tp"]["link"] == "intra"
        # The bubble: (pp-1)/(m+pp-1).
        assert row["bubble_fraction"] == pytest.approx((row["pp"] - 1) / (row["microbatches"] + row["pp"] - 1))
    assert plan["others"] and all(other["reason"] for other in plan["others"])
    out = invoke("--params", "175B", "--gpus", "1024", "--plan", "--cluster", "dgx-a100-80gb", "--precision",
                 "bf16-master", "--optimizer", "adam").output
    assert "8 x 8 x 16" in out and "Why the other" in out and "tp-across-nodes" in out


def test_adam_8bit_and_lora_sections():
    doc = document("--params", "70B", "--gpus", "8", "--adam-8bit", "--lora-rank", "16")
    # ZeRO-3 over 8, bf16-mixed: 70e9/8 = 8.75e9 params a GPU; 8-bit state 2 x (8.75e9 + 4 x ceil(8.75e9/2048)).
    zero3 = doc["adam_8bit"]["strategies"]["zero3"]
    assert zero3["optimizer_bytes"] == 2 * (8_750_000_000 + 4 * math.ceil(8_750_000_000 / 2048))
    lora = doc["lora"]
    # The 70B shape: 86 blocks of d 8,192: 16 x 16 x 8,192 x 86 adapter parameters.
    assert lora["adapter_params"] == 16 * 16 * 8192 * 86 and lora["base"] == "nf4"


def test_existing_documents_gain_no_sections():
    doc = document("--params", "7B", "--gpus", "8")
    assert not {"stragglers", "checkpoint", "topology", "scaling", "plan", "adam_8bit", "lora"} & set(doc)


@pytest.mark.parametrize("args, message", [
    (("--params", "7B", "--checkpoint-bw", "2GB/s", "--gpu-mtbf-hours", "0"), "more than 0"),
    (("--params", "7B", "--checkpoint-bw", "2GB/s", "--gpu-mtbf-hours", "-3"), "more than 0"),
    (("--params", "7B", "--checkpoint-bw", "fast"), "write it like"),
    (("--params", "7B", "--gpu-mtbf-hours", "100"), "need a write bandwidth"),
    (("--gpus", "100", "--stragglers", "0.01", "--straggler-delay", "700s"), "time-out"),
    (("--gpus", "100", "--stragglers", "0.01", "--straggler-delay", "-1s"), "write it like"),
    (("--gpus", "100", "--stragglers", "1.5"), "from 0 to 1"),
    (("--gpus", "100", "--straggler-delay", "1s"), "add --stragglers"),
    (("--gpus", "100", "--throughput-gain", "1.1"), "add --scaled-to"),
    (("--gpus", "100", "--scaled-to", "200"), "needs --throughput-gain"),
    (("--gpus", "512", "--scaled-to", "256", "--throughput-gain", "1.1"), "larger count second"),
    (("--params", "7B", "--gpus", "1020", "--topology"), "1,016 or 1,024"),
    (("--params", "7B", "--gpus", "16", "--topology", "--oversubscription", "0.5"), "non-blocking"),
    (("--params", "7B", "--gpus", "16", "--topology", "--cluster", "DGX Z9"), "unknown cluster"),
    (("--params", "7.5e9", "--gpus", "64", "--plan"), "needs their shape"),
    (("--params", "123B", "--gpus", "8", "--lora-rank", "8"), "needs their shape"),
    (("--params", "175B", "--gpus", "8", "--plan"), "add GPUs"),
    (("--params", "7B", "--mfu", "0.4"), "add --plan"),
])
def test_bad_input_is_a_usage_error_without_traceback(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
