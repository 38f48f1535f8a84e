"""A check's detail is read by a person: sizes in units, counts with their nouns agreed."""

from __future__ import annotations

from ddpfsdp.demos.result.checks import peak_lower_on_every_rank
from ddpfsdp.demos.concepts.wrap import _counted


def test_peak_bytes_are_shown_in_units_and_kept_exact_in_the_values():
    check = peak_lower_on_every_rank("reshard_lowers_peak", ("kept", [22271196, 22271196]),
                                     ("resharded", [20971520, 20971520]), "resharding")
    assert check.passed
    assert "[22271196, 22271196]" not in check.detail and "21.24 MiB, 21.24 MiB" in check.detail
    assert "20.00 MiB, 20.00 MiB" in check.detail and "saves 1.24 MiB, 1.24 MiB" in check.detail
    assert check.values["kept_peak_bytes"] == [22271196, 22271196]
    broken = peak_lower_on_every_rank("reshard_lowers_peak", ("kept", [10, 10]), ("resharded", [10, 11]), "it")
    assert not broken.passed


def test_counts_agree_with_their_nouns():
    assert _counted(1, "unit") == "1 unit" and _counted(2, "all-gather") == "2 all-gathers"
    assert _counted(0, "reduce-scatter") == "0 reduce-scatters"
