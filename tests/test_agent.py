"""The agent that starts a demo's ranks on one machine: how it starts them, and what it reports."""

from __future__ import annotations

import signal

import pytest

from ddpfsdp.demos.launch import agent
from ddpfsdp.demos.launch.launcher import DemoRun, summarize_failure


def _ranks_that_exited(*exits: tuple[int, int]) -> agent.Ranks:
    ranks = agent.Ranks("sampler", "cpu", len(exits), "fork")
    ranks.exits = [agent.Exit(rank, 1000 + rank, code, 0.0) for rank, code in exits]
    return ranks


def test_the_failure_report_is_read_as_torchruns_is():
    ranks = _ranks_that_exited((1, 7), (0, -signal.SIGTERM))
    report = ranks.report(ranks.exits[0]).splitlines()
    assert "Root Cause (first observed failure):" in report and "  exitcode  : -15 (pid: 1000)  (SIGTERM)" in report
    failure = summarize_failure(report)
    assert failure.rank == 1 and failure.message == (
        "rank 1 exited with code 7 before reporting an error and left no traceback "
        "(a hard exit, a signal, or a crash in native code)")
    # Rank 0 stopped by the agent after rank 1's own report is no silent death.
    assert summarize_failure(report, reported={1}).message == ""
    killed = _ranks_that_exited((0, 0), (1, -signal.SIGKILL))
    assert summarize_failure(killed.report(killed.exits[1]).splitlines()).message.startswith(
        "rank 1 was killed by SIGKILL before reporting an error")


def test_ranks_are_forked_on_cpu_and_started_fresh_on_cuda(monkeypatch):
    monkeypatch.delenv(agent.START_ENV, raising=False)
    assert agent.start_method("cpu") == "fork" and agent.start_method("cuda") == "exec"
    monkeypatch.setenv(agent.START_ENV, "exec")
    assert agent.start_method("cpu") == "exec"
    monkeypatch.setenv(agent.START_ENV, "sideways")  # not a method: the default stands
    assert agent.start_method("cpu") == "fork"


def test_every_rank_gets_what_torchrun_would_give_it():
    environment = agent.rank_environment(2, 4, 29500)
    assert environment == {"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
                           "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_the_agent_decides_the_ranks_threads_unless_told_otherwise(monkeypatch):
    """Several GPU ranks get one thread each, as torchrun gives them; CPU ranks share the host's cores."""
    from ddpfsdp.demos.base import host
    from ddpfsdp.demos.base.placement import Placement

    monkeypatch.setattr(host, "cpu_count", lambda: 16)
    assert agent.thread_default(Placement("cuda", 2), {}) == {"OMP_NUM_THREADS": "1"}
    assert agent.thread_default(Placement("cuda", 1), {}) == {}
    assert agent.thread_default(Placement("cpu", 4), {}) == {"OMP_NUM_THREADS": "4"}
    assert agent.thread_default(Placement("cpu", 32), {}) == {"OMP_NUM_THREADS": "1"}
    assert agent.thread_default(Placement("cpu", 2), {"OMP_NUM_THREADS": "4"}) == {}


@pytest.mark.dist
def test_ranks_started_fresh_run_a_demo_as_forked_ones_do():
    run = DemoRun("sampler", ["--epochs", "2"], procs=2, extra_env={agent.START_ENV: "exec"})
    events = list(run.events())
    assert run.ok, run.launcher_output
    assert [e["event"] for e in events][0] == "start" and run.result.demo == "sampler"
    assert all(check.passed for check in run.result.checks), run.result.checks
    assert run.leftover_pids() == []
