"""The simulated peak counts what a real step holds at that moment: the optimizer state made by the step
before is live through forward and backward, for ZeroRedundancyOptimizer's shard as for DDP's whole state.

torch's MemTracker reads `optimizer.state`; ZeroRedundancyOptimizer keeps its shard's state in its inner
optimizer (`.optim`), so a tracker told only of the outer one saw no optimizer state until `step()`, and a
peak in backward left it out, where the real run (which counts live tensors) holds it.
"""

from __future__ import annotations

import pytest

TINY = {"world": 8, "model": "tiny", "batch_size": 4, "simulate": True}


@pytest.mark.parametrize("demo", ["zro", "ddp"])
def test_the_optimizer_state_is_in_the_simulated_peak_when_it_falls_in_backward(demo, simulated):
    rank = simulated(demo, TINY)["memory"]["ranks"][0]
    assert rank["peak_phase"] == "backward"  # this configuration peaks early in backward
    assert rank["optimizer"] > 0
    assert rank["peak_breakdown"].get("optimizer") == rank["optimizer"]
    assert sum(rank["peak_breakdown"].values()) == rank["peak"]


@pytest.mark.dist
@pytest.mark.timeout(300)
def test_the_real_zro_run_counts_its_optimizer_shard_at_the_peak_as_the_simulation_does(demo_result):
    real = demo_result("compare", "--model", "tiny")["runs"]["zro"]  # the session's shared launch
    rank = real["memory"]["ranks"][0]
    assert rank["optimizer"] > 0
    assert rank["peak_breakdown"].get("optimizer") == pytest.approx(rank["optimizer"], rel=0.01)
