"""A simulated run reports exactly what it reported when these fixtures were written.

Each configuration's result (`simulate(demo, options)`) is stored under `tests/golden/simulate/` without
its wall times and environment, the only parts that depend on the machine; every other figure (model
state, peak and where it happens, its categories, the largest unit, every collective's count and bytes,
the analytic model beside it, each check and its numbers) must come back equal, so a change that makes
the simulation faster cannot move one. The configurations cover each strategy, sharding, precision, wrap,
architecture and activation checkpointing, and a world of 512 (on the tiny model, whose 64-row tensors
leave most ranks an empty shard, and on the 1B model). `SCALE` names the interview-scale runs that
`tests/benchmarks/bench_simulate.py` times and holds against their own fixtures the same way.

After a deliberate change to what the simulation reports, rewrite them with
`DDPFSDP_WRITE_GOLDEN=1 pytest tests/test_simulate_golden.py` and read the diff before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "golden" / "simulate"
TINY = {"simulate": True, "world": 8, "model": "tiny", "batch_size": 4}

# name -> (demo, options)
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "fsdp-tiny-8": ("fsdp", TINY),
    "fsdp-tiny-8-hybrid-2-bf16-mixed": ("fsdp", {**TINY, "sharding": "hybrid", "replicas": 2,
                                                 "precision": "bf16-mixed"}),
    "fsdp-vit-8-grad-op-checkpointed": ("fsdp", {**TINY, "arch": "vit", "sharding": "grad-op",
                                                 "checkpoint_activations": True}),
    "fsdp-resnet-8-wrap-layer-bf16": ("fsdp", {**TINY, "arch": "resnet", "wrap": "layer", "precision": "bf16"}),
    "fsdp-tiny-8-wrap-model-sgd": ("fsdp", {**TINY, "wrap": "model", "optimizer": "sgd"}),
    "compare-tiny-8": ("compare", TINY),
    "compare-tiny-8-bf16-mixed": ("compare", {**TINY, "precision": "bf16-mixed"}),
    "fsdp-tiny-512": ("fsdp", {**TINY, "world": 512}),
    "fsdp-1b-512-bf16-mixed": ("fsdp", {"simulate": True, "world": 512, "params": "1B", "batch_size": 1,
                                        "precision": "bf16-mixed"}),
}

# name -> arguments of `ddpfsdp demo`: the runs the benchmark times, compared on its --json output.
SCALE: dict[str, tuple[str, ...]] = {
    "cli-fsdp-7b-64-bf16-mixed": ("fsdp", "--simulate", "--world", "64", "--params", "7B",
                                  "--precision", "bf16-mixed"),
    "cli-fsdp-70b-512-bf16-mixed": ("fsdp", "--simulate", "--world", "512", "--params", "70B",
                                    "--precision", "bf16-mixed"),
}

MACHINE_KEYS = ("wall_s", "env")


def normalised(result: Any) -> Any:
    """`result` as JSON reads it back, without the keys that depend on the machine, at any depth."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in MACHINE_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(json.dumps(result)))


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Every path at which `actual` differs from `expected`, with both values."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = [f"{where}.{k}: missing" for k in expected if k not in actual]
        found += [f"{where}.{k}: unexpected" for k in actual if k not in expected]
        for key in [k for k in expected if k in actual]:
            found += differences(expected[key], actual[key], f"{where}.{key}")
        return found
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{where}[{i}]")]
    return [] if expected == actual and type(expected) is type(actual) else [f"{where}: {expected!r} -> {actual!r}"]


def check_against_fixture(name: str, result: Any) -> None:
    """Assert `result` equals the stored fixture `name`, or write it when DDPFSDP_WRITE_GOLDEN is set."""
    path = GOLDEN / f"{name}.json"
    actual = normalised(result)
    if os.environ.get("DDPFSDP_WRITE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"wrote {path.name}; unset DDPFSDP_WRITE_GOLDEN to compare")
    expected = json.loads(path.read_text())
    changed = differences(expected, actual)
    assert not changed, f"the simulated {name} changed:\n" + "\n".join(changed[:40])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CONFIGS)
def test_simulated_result_is_unchanged(simulated, name):
    demo, options = CONFIGS[name]
    check_against_fixture(name, simulated(demo, options))  # the session's run, shared with test_simulate.py


def test_the_comparison_finds_and_names_a_moved_figure():
    """The comparison itself: one byte more anywhere, or a figure of another type, is a difference."""
    expected = {"memory": {"ranks": [{"peak": 10, "params": 4}]}, "comm": {"all_gather": {"bytes": 2.0}}}
    moved = {"memory": {"ranks": [{"peak": 11, "params": 4}]}, "comm": {"all_gather": {"bytes": 2}}}
    assert differences(expected, moved) == [".memory.ranks[0].peak: 10 -> 11", ".comm.all_gather.bytes: 2.0 -> 2"]
    assert differences(expected, {"memory": expected["memory"]}) == [".comm: missing"]
    assert differences(expected, json.loads(json.dumps(expected))) == []
    assert normalised({"wall_s": 1.5, "env": {}, "runs": {"ddp": {"wall_s": 2, "peak": 3}}}) == {"runs": {"ddp": {"peak": 3}}}
