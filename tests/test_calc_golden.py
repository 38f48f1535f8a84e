"""`ddpfsdp calc` prints exactly what it printed when these fixtures were written.

Each configuration's table and `--json` document are stored under `tests/golden/calc/`; together the
configurations use every option of the command (parameter counts and presets, GPU and group sizes,
each precision, optimizer and offload level, batch, sequence and checkpointing, memory limits, both
units, both accountings with a given largest layer and zero.Init on and off, strategy filters, GPUs
per node) and two refusals. A change to the analytic model's code that moves any figure, note or
message fails here, byte for byte. After a deliberate change, rewrite them with
`DDPFSDP_WRITE_GOLDEN=1 pytest tests/test_calc_golden.py` and read the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from ddpfsdp.quiz.cli import cli

GOLDEN = Path(__file__).parent / "golden" / "calc"

# name -> arguments of `ddpfsdp calc`
CONFIGS: dict[str, tuple[str, ...]] = {
    "params-7b-defaults": ("--params", "7B", "--gpus", "8"),
    "zero-paper-7-5b": ("--params", "7.5e9", "--gpus", "64", "--precision", "bf16-master", "--optimizer", "adam"),
    "large-checkpointed": ("--model", "large", "--gpus", "8", "--batch-size", "8", "--checkpoint-activations"),
    "hsdp-70b-group-8": ("--params", "70B", "--gpus", "64", "--group-size", "8", "--gpu-mem", "80GB", "--optimizer", "adamw"),
    "fp32-sgd-momentum-gib": (
        "--params", "350M", "--gpus", "4", "--precision", "fp32", "--optimizer", "sgd-momentum", "--unit", "GiB",
    ),
    "base-seq-512-pure-bf16-sgd": (
        "--model", "base", "--gpus", "16", "--seq-len", "512", "--precision", "bf16", "--optimizer", "sgd",
        "--gpu-mem", "24GiB", "--batch-size", "3",
    ),
    "offload-all-zero3": ("--params", "13B", "--gpus", "16", "--offload", "all", "--strategy", "zero3"),
    "offload-optimizer-4-per-node": (
        "--params", "13B", "--gpus", "32", "--offload", "optimizer", "--gpus-per-node", "4",
        "--precision", "bf16-master", "--optimizer", "adam",
    ),
    "offload-all-small-gib": (
        "--model", "small", "--gpus", "2", "--precision", "bf16-mixed", "--batch-size", "4",
        "--checkpoint-activations", "--unit", "GiB", "--offload", "all", "--gpus-per-node", "2",
    ),
    "deepspeed-offload-optimizer": (
        "--params", "2851M", "--gpus", "8", "--accounting", "deepspeed", "--largest-layer", "32M",
        "--offload", "optimizer", "--zero-init",
    ),
    "deepspeed-offload-all-no-zero-init": (
        "--params", "70B", "--gpus", "32", "--accounting", "deepspeed", "--offload", "all",
        "--largest-layer", "1B", "--no-zero-init",
    ),
    "deepspeed-xl-preset": ("--model", "xl", "--gpus", "64", "--accounting", "deepspeed", "--optimizer", "adam"),
    "deepspeed-fsdp-units": ("--params", "7B", "--gpus", "16", "--accounting", "deepspeed", "--fsdp-units", "7"),
    "units-7-on-12-gpus": ("--params", "1B", "--gpus", "12", "--fsdp-units", "7"),
    "strategy-aliases-group-4": (
        "--params", "7B", "--gpus", "8", "--strategy", "fsdp", "--strategy", "hybrid", "--strategy", "DDP",
        "--group-size", "4",
    ),
    "one-gpu": ("--params", "1B", "--gpus", "1", "--gpu-mem", "4e10"),
    # "ZeRO-2" three ways: DeepSpeed's stage, FSDP's SHARD_GRAD_OP and zro (ZeroRedundancyOptimizer) beside them.
    "zero2-grad-op-zro-70b-32": (
        "--params", "70B", "--gpus", "32", "--precision", "bf16-mixed", "--strategy", "zero2", "--strategy", "grad-op",
        "--strategy", "zro",
    ),
    "two-d-70b-tp-8": ("--params", "70B", "--gpus", "64", "--tp", "8", "--precision", "bf16-mixed"),
    "two-d-tiny-sequence-parallel": (
        "--model", "tiny", "--gpus", "4", "--tp", "2", "--sequence-parallel", "--precision", "fp32", "--batch-size", "8",
    ),
    "pipeline-70b-3d-interleaved": (
        "--params", "70B", "--gpus", "64", "--tp", "8", "--pp", "4", "--microbatches", "16", "--schedule", "interleaved",
        "--stages-per-rank", "2",
    ),
    "context-parallel-7b-128k": (
        "--params", "7B", "--gpus", "32", "--seq-len", "131072", "--cp", "16", "--checkpoint-activations",
    ),
    "expert-parallel-large-64": (
        "--model", "large", "--gpus", "16", "--ep", "8", "--experts", "64", "--top-k", "2", "--capacity-factor", "1.25",
    ),
    # At cluster scale: stragglers and scaling need no model; checkpoints, topology, the 3-D plan, 8-bit Adam, LoRA.
    "stragglers-10000": ("--gpus", "10000", "--stragglers", "0.001", "--straggler-delay", "300ms", "--step-time", "1s"),
    "scaling-512-to-1024": ("--gpus", "512", "--scaled-to", "1024", "--throughput-gain", "1.1"),
    "checkpoint-175b-512": (
        "--params", "175B", "--gpus", "512", "--precision", "bf16-master", "--optimizer", "adam", "--checkpoint-bw",
        "2GB/s", "--storage-bw", "500GB/s", "--gpu-mtbf-hours", "50000", "--checkpoint-every", "1h", "--restart-time",
        "10min",
    ),
    "topology-70b-1024-oversubscribed": (
        "--params", "70B", "--gpus", "1024", "--topology", "--intra-bw", "450GB/s", "--inter-bw", "400Gbps",
        "--oversubscription", "2", "--rack-nodes", "4",
    ),
    "plan-175b-1024": (
        "--params", "175B", "--gpus", "1024", "--plan", "--cluster", "DGX A100 80GB", "--precision", "bf16-master",
        "--optimizer", "adam", "--global-batch", "1536", "--mfu", "0.5", "--plan-dp", "zero1",
    ),
    "adam-8bit-lora-70b": (
        "--params", "70B", "--gpus", "8", "--adam-8bit", "--lora-rank", "16", "--lora-base", "nf4", "--lora-targets",
        "all",
    ),
}

# name -> (arguments, exit code): refusals print their message, also byte for byte.
REFUSALS: dict[str, tuple[tuple[str, ...], int]] = {
    "refused-ddp-offload": (("--params", "7B", "--strategy", "ddp", "--offload", "all"), 2),
    "refused-deepspeed-zero1": (("--params", "7B", "--accounting", "deepspeed", "--strategy", "zero1"), 2),
    "refused-partial-node": (("--params", "7B", "--gpus", "12", "--offload", "optimizer"), 2),
    "refused-tp-heads": (("--params", "70B", "--gpus", "48", "--tp", "3"), 2),
    "refused-pipeline-no-microbatches": (("--model", "small", "--pp", "2", "--microbatches", "0"), 2),
}

# Rich sizes its tables to the terminal: fix the width and keep colour off whatever the caller's shell says.
ENV = {"COLUMNS": "120", "LINES": "50", "FORCE_COLOR": None, "NO_COLOR": "1", "TTY_COMPATIBLE": None}


def _calc(args: tuple[str, ...]):
    return CliRunner().invoke(cli, ["calc", *args], env=ENV)


def _compare(path: Path, output: str) -> None:
    if os.environ.get("DDPFSDP_WRITE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(output.encode("utf-8"))
        pytest.skip(f"wrote {path.name}; unset DDPFSDP_WRITE_GOLDEN to compare")
    expected = path.read_bytes().decode("utf-8")
    assert output == expected, f"`ddpfsdp calc` output changed for {path.stem}"


@pytest.mark.parametrize("name", CONFIGS)
def test_table_is_unchanged(name):
    result = _calc((*CONFIGS[name], "--explain"))
    assert result.exit_code == 0, result.output
    _compare(GOLDEN / f"{name}.txt", result.output)


@pytest.mark.parametrize("name", CONFIGS)
def test_json_is_unchanged(name):
    result = _calc((*CONFIGS[name], "--json"))
    assert result.exit_code == 0, result.output
    _compare(GOLDEN / f"{name}.json", result.output)


def test_the_default_view_is_unchanged():
    """Without --explain: the memory tables, the fits note, the pointer to --explain and the simulated run."""
    result = _calc(CONFIGS["params-7b-defaults"])
    assert result.exit_code == 0, result.output
    _compare(GOLDEN / "params-7b-defaults.short.txt", result.output)


@pytest.mark.parametrize("name", REFUSALS)
def test_refusal_is_unchanged(name):
    args, code = REFUSALS[name]
    result = _calc(args)
    assert result.exit_code == code, result.output
    _compare(GOLDEN / f"{name}.txt", result.output)


def test_the_configurations_use_every_option():
    """A new option of `ddpfsdp calc` needs a configuration here before its output is held fixed."""
    from ddpfsdp.quiz.commands.calc import calc

    used = {arg for args in CONFIGS.values() for arg in args if arg.startswith("--")} | {"--json", "--explain"}
    offered = {opt for param in calc.params for opt in (*param.opts, *param.secondary_opts)} - {"--help"}
    assert offered - used == set()

    def values(option: str) -> set[str]:
        return {args[i + 1] for args in CONFIGS.values() for i, arg in enumerate(args) if arg == option}

    assert values("--precision") == {"fp32", "bf16-mixed", "bf16-master", "bf16"}
    assert values("--optimizer") == {"adamw", "adam", "sgd-momentum", "sgd"}
    assert values("--offload") == {"optimizer", "all"}  # and none, the default
    assert values("--unit") == {"GiB"}  # and GB, the default
