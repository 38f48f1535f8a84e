"""The numbers page: every figure sourced, the computed ones equal to calc's, whole at 80 columns."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from rich.cells import cell_len
from rich.console import Console

from ddpfsdp.quiz import numbers


@pytest.fixture(scope="module")
def page():
    return {section.title.split(" (")[0].split(":")[0]: section for section in numbers.sections()}


def _calc(*argv: str) -> dict:
    outcome = run_cli("calc", *argv, "--json")
    assert outcome.exit_code == 0, outcome.stderr
    return json.loads(outcome.stdout)


def test_the_page_is_whole_at_80_columns():
    console = Console(width=80, color_system=None, record=True, legacy_windows=False)
    console.print(numbers.render())
    text = console.export_text()
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    assert "…" not in text and "..." not in text
    for section in numbers.sections():
        for row in section.rows:
            for cell in row:
                # Every cell is there, folded perhaps but never cut: its words appear in order.
                assert all(word in text for word in cell.split()), cell


def test_every_section_and_row_names_its_sources():
    for section in numbers.sections():
        assert section.sources, section.title
        assert all(numbers.SOURCES[key].strip() for key in section.sources)
        if "src" in section.columns:
            place = section.columns.index("src")
            for row in section.rows:
                number = int(row[place].strip("[]"))
                assert 1 <= number <= len(section.sources), row


def test_bytes_per_parameter_are_calcs(page):
    section = page["Bytes per parameter held, by precision and optimizer"]
    for precision in ("fp32", "bf16-mixed", "bf16-master", "bf16"):
        for optimizer in ("adamw", "sgd-momentum", "sgd"):
            document = _calc("--params", "1B", "--gpus", "8", "--precision", precision, "--optimizer", optimizer)
            assert section.numbers[f"{precision}/{optimizer}"] == document["bytes_per_param"]["total"]
    assert section.numbers["bf16-master/adamw"] == 2 + 2 + 12  # the ZeRO paper's K = 12


def test_model_state_per_strategy_is_calcs_and_the_zero_papers(page):
    section = page["Model state per GPU by strategy"]
    ours = _calc("--params", "7B", "--gpus", "8", "--precision", "bf16-mixed")["strategies"]
    paper = _calc("--params", "7.5B", "--gpus", "64", "--precision", "bf16-master")["strategies"]
    for strategy in ("ddp", "zro", "zero1", "zero2", "grad-op", "zero3"):
        assert section.numbers[f"pytorch/{strategy}"] == ours[strategy]["model_state_bytes"]
    for strategy, printed_gb in numbers.ZERO_PAPER_GB.items():
        assert section.numbers[f"paper/{strategy}"] == paper[strategy]["model_state_bytes"]
        # Figure 1 of the ZeRO paper, to the digits it prints.
        assert round(section.numbers[f"paper/{strategy}"] / 1e9, 1) == printed_gb


def test_gpu_peaks_are_the_ones_a_demos_mfu_divides_by(page):
    from ddpfsdp.demos.measure.memory import PEAK_FLOPS_PER_S

    peaks = {key: bf16 for key, bf16, _ in PEAK_FLOPS_PER_S}
    section = page["GPUs"]
    assert section.numbers["H100-PCIe-80GB/bf16"] == peaks["H100 PCIE"]
    assert section.numbers["H100-80GB/bf16"] == peaks["H100"]
    assert section.numbers["H200-141GB/bf16"] == peaks["H200"]
    assert section.numbers["A100-80GB/bf16"] == section.numbers["A100-40GB/bf16"] == peaks["A100"]
    # Dense is half the datasheets' "with sparsity" figure.
    assert section.numbers["B200-180GB/bf16"] == 4.5e15 / 2 and section.numbers["L40S-48GB/bf16"] == 362.05e12


def test_links_follow_from_their_signalling_rates(page):
    section = page["Links"]
    assert section.numbers["PCIe Gen4 x16"] == pytest.approx(31.5e9, rel=1e-3)
    assert section.numbers["PCIe Gen5 x16"] == pytest.approx(63.0e9, rel=1e-3)
    assert section.numbers["InfiniBand XDR, 800 Gb/s per GPU"] == 100e9
    assert section.numbers["NVLink 4"] == 900e9 / 2  # the datasheet's 900 GB/s is both ways together


def test_ring_factors_are_the_wire_factor_calc_uses(page):
    section = page["Ring collectives"]
    for n in numbers.RING_SIZES:
        assert section.numbers[f"all_reduce/{n}"] == pytest.approx(2 * (n - 1) / n)
        assert section.numbers[f"all_gather/{n}"] == section.numbers[f"reduce_scatter/{n}"] == pytest.approx((n - 1) / n)
    document = _calc("--params", "1B", "--gpus", "8", "--precision", "fp32")
    ddp = document["strategies"]["ddp"]["comm"]["all_reduce"]
    assert ddp["wire_bytes_per_rank"] == round(ddp["bytes"] * section.numbers["all_reduce/8"])


def test_bubble_figures_are_the_three_papers_formulas(page):
    section = page["Pipeline bubble"]
    p, m, v = (numbers.BUBBLE_EXAMPLE[k] for k in ("pp", "microbatches", "stages_per_rank"))
    assert section.numbers["fraction"] == pytest.approx((p - 1) / (m + p - 1))  # GPipe, of the step
    assert section.numbers["ratio"] == pytest.approx((p - 1) / m)  # Megatron-LM, over ideal time
    assert section.numbers["interleaved_ratio"] == pytest.approx((p - 1) / (v * m))
    calc = _calc("--params", "7B", "--gpus", "8", "--pp", "4", "--microbatches", "16")
    assert calc["pipeline"]["bubble_fraction"] == section.numbers["fraction"]
    assert calc["pipeline"]["bubble_ratio"] == section.numbers["ratio"]


def test_the_mfu_example_is_six_flops_per_parameter_per_token(page):
    example = numbers.MFU_EXAMPLE
    peak = 989e12
    expected = 6 * example["params"] * example["tokens"] / (example["gpus"] * peak * example["mfu"])
    assert page["Model FLOP utilisation"].numbers["example_step_s"] == pytest.approx(expected)


def test_numbers_prints_and_prints_json():
    text = run_cli("numbers")
    assert text.exit_code == 0 and "Ring collectives" in text.stdout
    document = json.loads(run_cli("numbers", "--json").stdout)
    assert document["schema"] == "ddpfsdp.numbers/1"
    assert all(section["sources"] for section in document["sections"])
