"""Every fault of the failure lab, broken and fixed, on real gloo ranks, run once per session.

The faults whose broken program does not hang share one launch of 2 ranks, and a hang that issues no
collective (a pipeline's send and recv: no flight-recorder dump, no analyzer) rides at its end; every
other hang has a launch of its own, so it ends within its timeout plus the grace. Every test here
reads those runs: the checks pass, each fault ends in time, no process of any run is left, a run
without the symptom fails every check, and the symptoms the question bank quotes are the ones torch printed today.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field

import pytest
from ddpfsdp.demos.faults.catalog import FAULTS
from ddpfsdp.demos.faults.runner import DEFAULT_TIMEOUT_S, FAULT_GRACE_S, FaultRun
from ddpfsdp.demos.faults.symptom import missing_lines

pytestmark = pytest.mark.dist

QUIET = [name for name, fault in FAULTS.items() if not fault.hangs]
HANGS = [name for name, fault in FAULTS.items() if fault.hangs]
# A launch holds at most one hang, run last (runner.launch_order): the first without collectives joins the quiet one.
RIDER = [name for name in HANGS if not FAULTS[name].collectives][:1]
# Claims that hold in both runs alike (not a symptom that the fix removes): fed a wrong value instead.
INVARIANTS = {"accumulation_same_gradients"}


@dataclass
class Launch:
    run: FaultRun
    wall_s: float
    events: list[dict] = field(default_factory=list)


@pytest.fixture(scope="session")
def launches() -> list[Launch]:
    done = []
    for names in (QUIET + RIDER, *([name] for name in HANGS if name not in RIDER)):
        run = FaultRun(names, procs=2, timeout_s=DEFAULT_TIMEOUT_S)
        started = time.monotonic()
        events = list(run.events())
        done.append(Launch(run, time.monotonic() - started, events))
        print(f"\nfault launch {names}: {done[-1].wall_s:.1f} s; per fault {({k: round(v, 2) for k, v in run.wall_s.items()})}")
    return done


@pytest.fixture(scope="session")
def results(launches) -> dict[str, dict]:
    found = {}
    for launch in launches:
        assert launch.run.error is None, f"{launch.run.faults}: {launch.run.error}"
        found.update({name: result.to_json() for name, result in launch.run.results.items()})
    return found


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(FAULTS))
def test_every_fault_shows_its_symptom_broken_and_not_fixed(results, name):
    result = results[name]
    assert result["schema"] == "ddpfsdp.demo/1" and result["config"]["backend"] == "gloo"
    assert [c["name"] for c in result["checks"]] == list(FAULTS[name].claims)
    failed = [f"{c['name']}: {c['detail']}" for c in result["checks"] if not c["passed"]]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_ends_within_its_timeout_plus_the_grace(launches, name):
    run = next(launch.run for launch in launches if name in launch.run.faults)
    assert run.wall_s[name] <= DEFAULT_TIMEOUT_S + FAULT_GRACE_S


def test_no_process_of_any_run_is_left(launches):
    for launch in launches:
        assert launch.run.returncode is not None, launch.run.faults
        assert launch.run.leftover_pids() == [], launch.run.faults


def test_the_lab_starts_its_ranks_through_the_one_launcher():
    """Its ranks are the launcher's: the same agent, a rank that fails leaving the others to show their
    symptom, and the lab's deadline read from the events."""
    from ddpfsdp.demos.launch.launcher import DemoRun

    run = FaultRun(["desync"], procs=3, timeout_s=DEFAULT_TIMEOUT_S)
    run.start()
    try:
        assert isinstance(run._run, DemoRun) and run._run.placement.world_size == 3
        assert run._run.on_failure == "wait" and run._run.watchdog is not None
        assert run._run.command[-3:] == ["--on-failure", "wait", "fault"]
    finally:
        run.cancel()
    assert run.leftover_pids() == []


def test_cancelling_a_run_in_its_hang_stops_every_rank():
    from ddpfsdp.demos.launch.launcher import STOP_GRACE_S

    run = FaultRun(["desync"], procs=2, timeout_s=DEFAULT_TIMEOUT_S)
    took = None
    for event in run.events():
        if event.get("event") == "progress" and event.get("phase") == "broken":
            started = time.monotonic()
            run.cancel()  # as the quiz does on Escape, and the command on Ctrl+C
            took = time.monotonic() - started
    assert took is not None and took < STOP_GRACE_S + 2
    assert run.cancelled and run.result is None and run.leftover_pids() == []


def _judge(name: str, block: dict) -> dict[str, bool]:
    return {check.name: check.passed for check in FAULTS[name].judge(block)}


@pytest.mark.parametrize("name", list(FAULTS))
def test_a_broken_run_without_the_symptom_fails_every_check(results, name):
    block = copy.deepcopy(results[name]["fault"])
    block["broken"] = copy.deepcopy(block["fixed"])
    verdicts = _judge(name, block)
    assert not any(passed for check, passed in verdicts.items() if check not in INVARIANTS), verdicts


@pytest.mark.parametrize("name", list(FAULTS))
def test_a_fixed_run_that_still_shows_the_symptom_fails(results, name):
    block = copy.deepcopy(results[name]["fault"])
    block["fixed"] = copy.deepcopy(block["broken"])
    verdicts = _judge(name, block)
    about_the_fix = [check for check, claim in FAULTS[name].claims.items() if "fixed" in claim]
    assert about_the_fix and not any(verdicts[check] for check in about_the_fix), verdicts


def test_the_same_gradient_check_fails_on_a_gradient_one_percent_off(results):
    block = copy.deepcopy(results["accumulation-sync"]["fault"])
    block["fixed"]["ranks"][1]["measured"]["relative_difference"] = 0.01
    assert _judge("accumulation-sync", block) == {"accumulation_syncs_every_micro_batch": True, "accumulation_same_gradients": False}


def _quoted_faults():
    from ddpfsdp.quiz.loader import load_bank

    return [(q.id, q.demo.args[0], q.prompt) for q in load_bank().questions.values() if q.demo and q.demo.name == "fault"]


@pytest.mark.parametrize("qid,name,prompt", _quoted_faults(), ids=[q[0] for q in _quoted_faults()])
def test_the_bank_quotes_the_symptom_torch_printed_today(results, qid, name, prompt):
    live = "\n".join(results[name]["fault"]["broken"]["symptom"] + results[name]["fault"]["fixed"]["symptom"])
    blocks = re.findall(r"```text\n(.*?)\n```", prompt, flags=re.DOTALL)
    assert blocks, qid
    drifted = [line for block in blocks for line in missing_lines(block, live)]
    assert not drifted, f"{qid} quotes lines the {name} run no longer prints:\n" + "\n".join(drifted)


def test_the_command_prints_saves_and_writes_json(results, monkeypatch):
    from click.testing import CliRunner
    from ddpfsdp.demos.faults import runner
    from ddpfsdp.quiz.cli import cli
    from ddpfsdp.quiz.store import Store

    class Replay:
        """The recorded desync run, replayed through the command (the ranks ran in the fixture)."""

        def __init__(self, faults, procs, timeout_s):
            from ddpfsdp.demos.result.schema import as_result

            self.faults, self.result, self.error, self.ok = faults, as_result(results[faults[0]]), None, True

        def events(self):
            yield {"event": "progress", "fault": self.faults[0], "phase": "broken"}

    monkeypatch.setattr(runner, "FaultRun", Replay)
    shown = CliRunner().invoke(cli, ["demo", "fault", "desync"], terminal_width=160)
    assert shown.exit_code == 0, shown.output
    assert "first divergence at sequence id" in shown.output and "desync_times_out" in shown.output
    as_json = CliRunner().invoke(cli, ["demo", "fault", "desync", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["fault"]["name"] == "desync"
    with Store.open() as store:
        assert store.last_demo_result("fault", ["desync"]).result["fault"]["name"] == "desync"


async def test_the_evidence_panel_shows_the_broken_symptom_beside_the_fixed_run(results, tmp_path):
    import shutil

    from conftest import open_feedback, widget_text

    from ddpfsdp.quiz.app import make_app
    from ddpfsdp.quiz.loader import default_answers_dir, default_bank_dir
    from ddpfsdp.quiz.store import Store

    # The debugging topic alone: the app loads in a fraction of the time the whole bank takes.
    bank_dir, answers_dir = tmp_path / "bank", tmp_path / "answers"
    bank_dir.mkdir()
    answers_dir.mkdir()
    shutil.copy(default_bank_dir() / "debugging.toml", bank_dir)
    for answer in default_answers_dir().glob("fault-*.md"):
        shutil.copy(answer, answers_dir)
    with Store.open() as store:
        store.save_demo_result("fault", ["desync"], results["desync"])
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=3, topic="debugging")
    async with app.run_test(size=(120, 60)) as pilot:
        panel = await open_feedback(pilot, "fault-desync-fix")  # the topic's first question, level 1
        shown = widget_text(panel.query_one("#evidence-saved"), width=118)
    assert "broken: every step all-reduces gradients" in shown and "fixed: every rank all-reduces the loss" in shown
    assert "Timed out waiting 3000ms for recv operation to complete" in shown
    assert "no rank raised an error" in shown and "desync_times_out" in shown
