"""A simulated world's limits as a user meets them: the largest --world, and Ctrl+C on one process."""

from __future__ import annotations

import pytest
from rich.console import Console

from ddpfsdp.demos.launch.launcher import Placement
from ddpfsdp.demos.registry import get
from ddpfsdp.quiz.commands.demo import _follow


class _Interrupted:
    """A run that Ctrl+C interrupts while its events are read, and that leaves no process behind."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.cancelled = False

    def events(self):
        raise KeyboardInterrupt
        yield  # a generator, as DemoRun.events is

    def cancel(self) -> None:
        self.cancelled = True

    def leftover_pids(self) -> list[int]:
        return []


@pytest.mark.parametrize(("placement", "said", "not_said"), [
    (Placement("fake", 65536), "the simulation's one process stopped", "65536 ranks"),
    (Placement("cpu", 2), "all 2 ranks stopped", "simulation"),
])
def test_ctrl_c_says_what_was_stopped(placement, said, not_said):
    err = Console(record=True, width=200)
    run = _Interrupted(placement)
    with pytest.raises(SystemExit) as stop:
        _follow(get("fsdp"), run, err, quiet=True, err=err)
    assert stop.value.code == 130 and run.cancelled
    text = err.export_text()
    assert said in text and not_said not in text


def test_the_largest_world_is_stated_and_one_more_is_refused_with_what_to_use():
    from conftest import run_cli

    from ddpfsdp.demos.train.options import validate_simulated
    from ddpfsdp.demos.train.spec import MAX_SIMULATED_WORLD

    # 70B on 8192 ranks takes 36-39 s of CPU on 2 cores (tests/benchmarks/bench_simulate_worlds.py).
    assert MAX_SIMULATED_WORLD == 8192
    validate_simulated("fsdp", {"simulate": True, "world": MAX_SIMULATED_WORLD, "params": "70B"})
    outcome = run_cli("demo", "fsdp", "--simulate", "--world", str(MAX_SIMULATED_WORLD + 1), "--params", "70B")
    assert outcome.exit_code == 2 and outcome.exception is None
    refusal = " ".join(outcome.stderr.split())
    assert f"at most {MAX_SIMULATED_WORLD} ranks" in refusal and "ddpfsdp calc" in refusal
    assert "within a minute on 2 CPU cores" in refusal  # the why
    assert "Traceback" not in outcome.stderr
    help_text = run_cli("demo", "fsdp", "--help").stdout
    assert f"at most {MAX_SIMULATED_WORLD}" in " ".join(help_text.split())
