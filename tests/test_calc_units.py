"""Counts and sizes as people write them: what is accepted, what is refused, and how sizes print."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.base.units import format_bytes, format_count, parse_bytes, parse_count


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7B", 7_000_000_000),
        ("7b", 7_000_000_000),
        ("7.5e9", 7_500_000_000),
        ("7.5B", 7_500_000_000),
        ("350M", 350_000_000),
        ("125K", 125_000),
        ("1.3T", 1_300_000_000_000),
        (" 70 B ", 70_000_000_000),
        ("1_000", 1000),
        ("64", 64),
        (64, 64),
        (7.5e9, 7_500_000_000),
    ],
)
def test_parse_count_accepts(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["7Q", "-3", "0", "", "abc", "7e", "B", "1.2.3", "inf", float("nan"), -5, True])
def test_parse_count_refuses_with_examples(text):
    with pytest.raises(ValueError) as error:
        parse_count(text)
    assert "7B" in str(error.value) or "finite" in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80 * 10**9),
        ("80gb", 80 * 10**9),
        ("14.9GiB", round(14.9 * 2**30)),
        ("512MiB", 512 * 2**20),
        ("1.5e10", 15 * 10**9),
        ("2TB", 2 * 10**12),
        ("100", 100),
        (4096, 4096),
    ],
)
def test_parse_bytes_accepts(text, expected):
    assert parse_bytes(text) == expected


def test_gb_and_gib_differ():
    assert parse_bytes("1GiB") - parse_bytes("1GB") == 2**30 - 10**9


@pytest.mark.parametrize("text", ["80XB", "-1GB", "0", "GB", "eighty", ""])
def test_parse_bytes_refuses(text):
    with pytest.raises(ValueError) as error:
        parse_bytes(text)
    assert "GB" in str(error.value) or "at least" in str(error.value)


def test_format_bytes_spells_the_unit():
    assert format_bytes(120e9) == "120.00 GB"
    assert format_bytes(2**30, "GiB") == "1.00 GiB"
    assert format_bytes(1.5 * 2**20, "MiB", digits=1) == "1.5 MiB"
    assert format_bytes(1234, "B") == "1,234 B"
    assert format_bytes(3.2e9, "auto") == "3.20 GB"
    with pytest.raises(ValueError):
        format_bytes(1, "furlongs")


def test_format_count():
    assert format_count(7_000_000_000) == "7.00B"
    assert format_count(350_000_000) == "350.00M"
    assert format_count(999) == "999"
