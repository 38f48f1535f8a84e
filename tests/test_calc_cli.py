"""`ddpfsdp calc`: the side-by-side table, the JSON document, and usage errors for bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import run_cli

from ddpfsdp.quiz.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], terminal_width=200)


def test_table_shows_every_strategy_labelled_as_theory():
    result = invoke("--params", "7.5e9", "--gpus", "64", "--precision", "bf16-master", "--optimizer", "adam",
                    "--explain")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Theory" in out and "not measured" in out
    assert "1 GB = 1e9 bytes" in out
    for title in ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "HSDP"):
        assert title in out
    # The ZeRO paper's per-device figures, as printed.
    for figure in ("120.00 GB", "31.41 GB", "16.64 GB", "1.88 GB"):
        assert figure in out
    for row in ("params", "grads", "optimizer", "working set", "activations", "total", "fits in 80.00 GB"):
        assert row in out
    assert "all_reduce" in out and "reduce_scatter" in out and "all_gather" in out
    assert "does not shrink model state" in out


SCREEN = {"COLUMNS": "80", "LINES": "24", "NO_COLOR": "1", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def test_the_default_is_the_per_gpu_tables_in_one_screenful():
    """`calc --params 7B --gpus 8` at 80 columns: the memory tables and the verdicts, at most 40 lines."""
    result = CliRunner().invoke(cli, ["calc", "--params", "7B", "--gpus", "8"], env=SCREEN)
    assert result.exit_code == 0, result.output
    # Each line as an 80-column terminal shows it: a longer one takes more than one row.
    rows = sum(max(1, -(-len(line) // 80)) for line in result.output.splitlines())
    assert rows <= 40, result.output
    out = result.output
    assert "Per-GPU memory" in out and "fits in 80.00 GB" in out and "ZeRO-3" in out
    assert "Communication per step" not in out and "What each column follows" not in out and "•" not in out
    assert "--explain" in out and "Measure it:" in out


def test_explain_adds_the_key_the_traffic_and_the_notes():
    plain = CliRunner().invoke(cli, ["calc", "--params", "7B", "--gpus", "8"], env=SCREEN).output
    explained = CliRunner().invoke(cli, ["calc", "--params", "7B", "--gpus", "8", "--explain"], env=SCREEN).output
    assert explained.startswith(plain.split("--explain adds")[0])
    for part in ("What each column follows", "Communication per step", "calls: ? =", "• Theory:",
                 "does not shrink model state"):
        assert part in explained and part not in plain
    assert "--explain adds" not in explained
    as_json = invoke("--params", "7B", "--gpus", "8", "--json").output
    assert as_json == invoke("--params", "7B", "--gpus", "8", "--json", "--explain").output


def test_gib_display():
    result = invoke("--model", "base", "--gpus", "8", "--unit", "GiB")
    assert result.exit_code == 0, result.output
    assert "GiB" in result.output and "2**30" in result.output


def test_json_document():
    result = invoke("--params", "7B", "--gpus", "16", "--group-size", "8", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "ddpfsdp.calc/1"
    assert document["inputs"]["params"] == 7_000_000_000
    assert document["inputs"]["group_size"] == 8
    assert document["inputs"]["gpu_mem_bytes"] == 80_000_000_000
    assert set(document["strategies"]) == {"ddp", "zro", "zero1", "zero2", "grad-op", "zero3", "hsdp"}
    hsdp = document["strategies"]["hsdp"]
    assert isinstance(hsdp["model_state_bytes"], int)
    assert set(hsdp["comm"]) == {"all_gather", "reduce_scatter", "all_reduce"}
    assert document["notes"]


def test_json_with_a_model_and_checkpointing():
    plain = json.loads(invoke("--model", "large", "--batch-size", "4", "--json").output)
    checkpointed = json.loads(invoke("--model", "large", "--batch-size", "4", "--checkpoint-activations", "--json").output)
    assert checkpointed["inputs"]["checkpoint_activations"] is True
    assert checkpointed["strategies"]["ddp"]["activation_bytes"] < plain["strategies"]["ddp"]["activation_bytes"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--params", "7Q"], "7B"),
        (["--params", "-3"], "positive"),
        (["--params", "7B", "--gpus", "0"], "1<=x<=1000000"),
        (["--params", "7B", "--gpus", "12", "--group-size", "5"], "divisor of 12"),
        (["--params", "7B", "--precision", "fp16"], "bf16-master"),
        (["--params", "7B", "--optimizer", "lion"], "sgd-momentum"),
        (["--params", "7B", "--gpu-mem", "80XB"], "GiB"),
        (["--model", "huge"], "tiny, small, base, large, xl"),
        ([], "--params"),
        (["--params", "7B", "--model", "tiny"], "not both"),
        (["--params", "1e30"], "from 1K to 100T"),
        (["--params", "101T"], "more than 100T"),
        (["--params", "999"], "fewer than 1K"),
        (["--params", "7B", "--gpus", "99999999999999999999"], "1<=x<=1000000"),
        (["--params", "7B", "--gpus", "1000001"], "1<=x<=1000000"),
    ],
)
def test_bad_input_is_a_usage_error(args, named):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["--params", "7Q"], ["--params", "7B", "--gpus", "8", "--group-size", "3"]])
def test_bad_input_through_the_entry_point_has_no_traceback(args):
    outcome = run_cli("calc", *args)
    assert outcome.exception is None and outcome.exit_code == 2
    assert "Traceback" not in outcome.stderr
    assert "Usage:" in outcome.stderr


def test_help_has_examples():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.output and "ddpfsdp calc --params 7B" in result.output
    assert "Theory" in result.output


@pytest.mark.parametrize("args", [("--params", "70B", "--gpus", "64", "--tp", "8"),
                                  ("--params", "7B", "--gpus", "16", "--tp", "2", "--gpu-mem", "20GB")])
def test_the_2d_column_is_judged_as_the_others_are(args):
    """Without a preset no column counts activations: the 2-D column's total and verdict leave them out too."""
    strategies = json.loads(invoke(*args, "--json").output)["strategies"]
    for name, row in strategies.items():
        assert row["activation_bytes"] is None, name
        assert row["total_bytes"] == row["model_state_bytes"] + row["working_set_bytes"], name
        assert row["fits"] == (row["total_bytes"] <= 20e9 if "20GB" in args else row["total_bytes"] <= 80e9), name
    assert strategies["2d"]["shape_activation_bytes"] > 0  # the named size's estimate, kept apart
    text = invoke(*args).output
    assert "would add" in text


def test_the_2d_column_counts_a_presets_activations_as_the_others_do():
    strategies = json.loads(invoke("--model", "small", "--gpus", "4", "--tp", "2", "--json").output)["strategies"]
    for name, row in strategies.items():
        assert row["activation_bytes"] > 0, name
        assert row["total_bytes"] == row["model_state_bytes"] + row["working_set_bytes"] + row["activation_bytes"]


@pytest.mark.parametrize("args", [("--params", "1K", "--gpus", "1"), ("--params", "100T", "--gpus", "1000000")])
def test_the_stated_ranges_are_accepted_at_both_ends(args):
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "GB" in result.output


def _refused_by_the_demo(command_line: str) -> str | None:
    """What `ddpfsdp demo fsdp ...` refuses before it starts, through that demo's own parser and checks."""
    import click

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request

    words = command_line.split()
    assert words[:3] == ["ddpfsdp", "demo", "fsdp"], command_line
    demo = registry.get("fsdp")
    try:
        request.validate(demo, request.from_command_line(demo, words[3:]))
    except click.ClickException as error:
        return error.message
    return None


@pytest.mark.parametrize("args", [
    ("--params", "7B", "--gpus", "8"),
    ("--params", "7.5e9", "--gpus", "64"),
    ("--params", "70B", "--gpus", "64", "--group-size", "8"),
    ("--params", "70B", "--gpus", "64", "--tp", "8"),
    ("--params", "7.5e9", "--gpus", "6", "--tp", "3"),
    ("--params", "7B", "--gpus", "1"),
    ("--params", "7B", "--gpus", "65537"),
    ("--params", "7B", "--gpus", "1000000"),
    ("--model", "tiny", "--gpus", "4", "--tp", "2"),
    ("--params", "7B", "--gpus", "8", "--precision", "bf16-master"),
])
def test_the_simulated_run_it_suggests_is_one_the_demo_accepts(args):
    """calc names a simulated run only where `ddpfsdp demo fsdp` would start it; otherwise it says why not."""
    import re

    out = invoke(*args).output
    suggested = re.search(r"Measure it:\s+`([^`]+)`", out)
    if suggested:
        assert _refused_by_the_demo(suggested.group(1)) is None, suggested.group(1)
    else:
        refused = re.search(r"No simulated run of this configuration:\s+`([^`]+)`\s+would\s+be\s+refused", out)
        assert refused, out
        assert _refused_by_the_demo(refused.group(1))
