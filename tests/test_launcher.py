"""The launcher on real processes: results, crashes, Ctrl+C and bad input, with nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from click.testing import CliRunner
from conftest import sigint_as_a_terminal_sends_it

from ddpfsdp.demos.launch import events
from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError, Placement, processes_with_env, resolve_placement
from ddpfsdp.quiz.cli import cli

MARKER = "DDPFSDP_TEST_MARKER"


def _cli_process(*argv: str, marker: str) -> subprocess.Popen:
    env = dict(os.environ, **{MARKER: marker}, PYTHONFAULTHANDLER="1")
    return subprocess.Popen(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )


def _wait_until_gone(marker: str, within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := processes_with_env(MARKER, marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_events_round_trip_and_ignore_other_output():
    line = events.encode({"event": "progress", "step": 1, "steps": 3, "loss": float("nan")})
    assert events.decode(line + "\n") == {"event": "progress", "step": 1, "steps": 3, "loss": None}
    assert events.decode("Setting OMP_NUM_THREADS environment variable") is None
    assert events.decode(events.PREFIX + "{not json") is None


def test_placement_without_gpus(monkeypatch):
    assert resolve_placement(procs=3) == Placement("cpu", 3)
    # With no --procs on a machine without GPUs: 2 processes, or two groups of --tp for a 2-D run.

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 0)
    assert resolve_placement() == Placement("cpu", 2)
    assert DemoRun("fsdp", ["--model", "tiny"]).placement == Placement("cpu", 2)
    assert DemoRun("fsdp", ["--model", "tiny", "--tp", "4"]).placement == Placement("cpu", 8)
    assert DemoRun("fsdp", ["--tp=2"]).placement == Placement("cpu", 4)
    assert DemoRun("pipeline", ["--dp", "2"]).placement == Placement("cpu", 4)  # two stages per replica
    with pytest.raises(LaunchError, match="not both"):
        resolve_placement(gpus=1, procs=1)


def test_the_gpu_build_of_torch_is_read_from_its_version_file():
    """The launcher counts GPUs only in a GPU build of torch; which build it is comes from
    torch/version.py, read as text, and agrees with torch.version here."""
    import torch

    from ddpfsdp.demos.launch.hardware import gpu_build_in_version_file, torch_gpu_build

    here = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"HIP {torch.version.hip}" if torch.version.hip else None
    assert torch_gpu_build() == here
    cpu = "from typing import Optional\n__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
    assert gpu_build_in_version_file(cpu) is None
    assert gpu_build_in_version_file(cpu.replace("cuda: Optional[str] = None", "cuda: Optional[str] = '13.0'")) == "CUDA 13.0"
    assert gpu_build_in_version_file("cuda = None\nhip = '6.4.1'\n") == "HIP 6.4.1"
    # Anything else is not a verdict: the launcher then imports torch and asks it.
    for text in ("cuda = None\n", "cuda = get_cuda()\nhip = None\n", "cuda = (\n"):
        assert gpu_build_in_version_file(text) == "unknown", text


def test_too_many_gpus_names_the_procs_command_that_runs_here():
    from ddpfsdp.demos.launch.placement import cuda_device_count

    if cuda_device_count():
        pytest.skip("needs a machine without CUDA")
    result = CliRunner().invoke(cli, ["demo", "fsdp", "--gpus", "4", "--model", "tiny"])
    assert result.exit_code == 2
    assert "has no CUDA GPU" in result.output
    assert "ddpfsdp demo fsdp --procs 4" in result.output


def test_one_gpu_machine_is_told_only_what_it_can_run(monkeypatch):
    """One GPU, one rank asked (--ranks-per-gpu 1): data parallelism cannot use it, and --gpus 2 would be
    refused too; the message names two ranks sharing the GPU and CPU processes, never a second GPU.
    (Left to its default, the same machine runs two ranks sharing the GPU: tests/test_sharing.py.)"""

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    with pytest.raises(LaunchError) as refused:
        DemoRun("ddp", ["--model", "tiny"], ranks_per_gpu=1)
    message = str(refused.value)
    assert "1 GPU (NCCL)" in message and "one rank per GPU" in message
    assert "ddpfsdp demo ddp --gpus 1 --ranks-per-gpu 2" in message and "ddpfsdp demo ddp --procs 2" in message
    assert "--simulate --world 8" in message and "--gpus 2" not in message
    result = CliRunner().invoke(cli, ["demo", "fsdp", "--model", "tiny", "--ranks-per-gpu", "1"])
    assert result.exit_code == 2 and "ddpfsdp demo fsdp --procs 2" in result.output
    assert "--gpus 2" not in result.output
    # what it suggests is accepted: two CPU processes, or two ranks on the one GPU
    assert DemoRun("ddp", ["--model", "tiny"], procs=2).placement == Placement("cpu", 2)
    assert DemoRun("ddp", ["--model", "tiny"], gpus=1, ranks_per_gpu=2).placement == Placement("cuda", 2, 2)


def test_too_few_ranks_names_gpus_only_where_there_are_enough():
    from ddpfsdp.demos.launch.placement import too_few_ranks

    asked_one = too_few_ranks("compare", 2, Placement("cuda", 1), gpus=4)
    assert "ddpfsdp demo compare --gpus 2" in asked_one and "ddpfsdp demo compare --procs 2" in asked_one
    assert "one rank per GPU" not in asked_one  # the machine has GPUs enough: only the choice was short
    no_gpu = too_few_ranks("zro", 2, Placement("cpu", 1), gpus=0)
    assert "--gpus" not in no_gpu and "ddpfsdp demo zro --procs 2" in no_gpu and "--simulate" not in no_gpu
    one_gpu = too_few_ranks("fsdp", 2, Placement("cuda", 1), gpus=1, simulates=True)
    assert "--gpus 2" not in one_gpu and "This machine has 1 CUDA GPU," in one_gpu
    assert "ddpfsdp demo fsdp --gpus 1 --ranks-per-gpu 2" in one_gpu


def test_one_rank_runs_only_the_demo_that_shows_something_on_one(monkeypatch):
    """Checkpointing is one rank's own memory, so one GPU runs it on one rank; what the other concept
    demos show happens between ranks (on one, `comm` would divide by zero), so one rank is refused,
    and by default they get two ranks sharing the GPU."""

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    assert DemoRun("checkpoint", []).placement == Placement("cuda", 1)
    for demo in ("comm", "equivalence", "sampler", "wrap"):
        with pytest.raises(LaunchError, match=f"ddpfsdp demo {demo} --procs 2"):
            DemoRun(demo, [], ranks_per_gpu=1)
        assert DemoRun(demo, []).placement == Placement("cuda", 2, 2)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["demo", "sampler", "--procs", "0"], "--procs"),
        (["demo", "no-such-demo"], "No such command"),
        (["demo", "fsdp", "--steps", "0"], "--steps"),
        (["demo", "fsdp", "--sharding", "diagonal"], "--sharding"),
    ],
)
def test_bad_demo_input_is_a_usage_error(argv, expected):
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_demo_help_lists_every_demo_with_a_description():
    from ddpfsdp.demos.registry import DEMOS

    result = CliRunner().invoke(cli, ["demo", "--help"])
    assert result.exit_code == 0, result.output
    for name, demo in DEMOS.items():
        line = next((ln for ln in result.output.splitlines() if ln.strip().startswith(name + " ")), None)
        assert line is not None, f"{name} missing from demo --help"
        assert demo.summary.split()[0] in line


@pytest.mark.dist
def test_a_run_streams_progress_then_one_result(demo_run):
    run = demo_run("sampler")  # the session's shared launch (tests/demo_runs.py)
    seen = [event["event"] for event in run.events]
    assert seen[0] == "start"
    assert "progress" in seen
    assert seen.count("result") == 1 and seen[-1] == "result"
    assert run.ok and run.returncode == 0
    assert run.result["schema"] == "ddpfsdp.demo/1"
    assert run.result["config"]["world_size"] == 2
    assert run.leftover_pids == []


@pytest.mark.dist
def test_a_crashing_rank_ends_every_rank_and_is_named():
    run = DemoRun("sampler", ["--epochs", "5"], procs=2, fail_rank=1, fail_step=1)
    crashed_at = None
    for event in run.events():
        if event["event"] == "error" and crashed_at is None:
            crashed_at = time.monotonic()
    ended_at = time.monotonic()
    assert run.returncode != 0 and not run.ok
    assert run.error["rank"] == 1
    assert "InjectedFault" in run.error["message"]
    assert "fault injected on rank 1 at step 1" in run.error["traceback"]
    assert crashed_at is not None and ended_at - crashed_at < 5.0
    assert run.leftover_pids() == []


@pytest.mark.dist
def test_cli_reports_the_failed_rank_and_its_traceback():
    marker = uuid.uuid4().hex
    proc = _cli_process("demo", "sampler", "--procs", "2", "--fail-rank", "1", "--fail-step", "0", marker=marker)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1
    assert "rank 1 failed" in err
    assert "InjectedFault" in err
    assert "Traceback (most recent call last)" in err  # the rank's traceback, shown as a message
    # Without --verbose the launcher's own output waits for it (the vanish test below asks for it).
    assert "Run again with --verbose" in err and "ChildFailedError" not in err
    assert _wait_until_gone(marker, 5.0) == []


@pytest.mark.dist
def test_ctrl_c_stops_every_rank_within_5_s():
    marker = uuid.uuid4().hex
    proc = _cli_process(
        "demo", "fsdp", "--procs", "2", "--model", "tiny", "--steps", "2000", "--json", marker=marker
    )
    try:
        # Wait until ranks exist and are training.
        deadline = time.monotonic() + 60
        while len(processes_with_env(MARKER, marker)) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(processes_with_env(MARKER, marker)) >= 4  # cli, agent, 2 ranks
        time.sleep(3)  # into the training loop
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:  # read both pipes while waiting: a CLI blocked on a full pipe would look like a hang
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack to stderr
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"the CLI had not exited 10 s after SIGINT; its threads then:\n{err[-6000:]}")
        assert time.monotonic() - sent < 5.0
        assert proc.returncode == 130
        assert "Cancelled" in err
        assert _wait_until_gone(marker, 0.5) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in processes_with_env(MARKER, marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.dist
def test_cancel_from_another_thread_leaves_nothing():
    import threading

    run = DemoRun("fsdp", ["--model", "tiny", "--steps", "2000"], procs=2)
    stopper = None
    for event in run.events():
        if event["event"] == "progress" and stopper is None:
            stopper = threading.Thread(target=run.cancel)
            started = time.monotonic()
            stopper.start()
    stopper.join()
    assert time.monotonic() - started < 5.0
    assert run.cancelled and run.result is None
    assert run.leftover_pids() == []


@pytest.mark.dist
def test_json_output_is_the_result():
    result = CliRunner().invoke(cli, ["demo", "sampler", "--procs", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["demo"] == "sampler" and payload["schema"] == "ddpfsdp.demo/1"


def test_each_rank_drives_its_own_gpu():
    import click

    from ddpfsdp.demos.worker import cuda_index

    assert [cuda_index(r, 8) for r in range(8)] == list(range(8))
    assert cuda_index(3, 1) == 0  # a scheduler bound one GPU to this task
    with pytest.raises(click.UsageError, match="local rank 4 has no GPU of its own"):
        cuda_index(4, 2)


TORCHRUN_FAILURE = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "worker.py", line 8, in <module>
[rank0]: RuntimeError: Connection reset by peer
[rank1]: Traceback (most recent call last):
[rank1]:   File "worker.py", line 12, in step
[rank1]: MemoryError: out of host memory
E1123 07:30:02.557000 17728 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1
Traceback (most recent call last):
  File "torch/distributed/run.py", line 1032, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 17733)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 17734)
  error_file: <N/A>
============================================================"""


def test_the_root_cause_is_read_from_torchruns_report():
    from ddpfsdp.demos.launch.launcher import summarize_failure

    failure = summarize_failure(TORCHRUN_FAILURE.format(code=1).splitlines())
    assert failure.rank == 1  # the root cause, not rank 0 of the "Failures" list above it
    assert failure.message == "rank 1 exited with code 1 before reporting an error"
    assert failure.rank_lines == (
        "Traceback (most recent call last):",
        '  File "worker.py", line 12, in step',
        "MemoryError: out of host memory",
    )
    killed = summarize_failure(TORCHRUN_FAILURE.format(code=-9).replace("[rank1]", "[rank2]").splitlines())
    assert killed.message == (
        "rank 1 was killed by SIGKILL before reporting an error and left no traceback "
        "(a hard exit, a signal, or a crash in native code)"
    )
    assert summarize_failure(["some other output"]).message == ""


def test_a_rank_that_failed_silently_is_blamed_before_torchruns_root_cause():
    from ddpfsdp.demos.launch.launcher import summarize_failure

    # Seen on gloo: rank 1 vanished, rank 0 then failed on the dropped connection and reported it;
    # both ended within one second and torchrun named rank 0 as its root cause.
    report = [
        "Failures:", "[1]:", "  rank      : 1 (local_rank: 1)", "  exitcode  : 7 (pid: 22294) ",
        "Root Cause (first observed failure):", "[0]:", "  rank      : 0 (local_rank: 0)", "  exitcode  : 1 (pid: 22293) ",
    ]
    assert summarize_failure(report, reported={0}).rank == 1
    # Had rank 1 reported its own error, that report stands and nothing is read from torchrun.
    assert summarize_failure(report, reported={0, 1}).message == ""
    # A rank stopped after another's report exits with 1: not a silent death.
    stopped = [line.replace("exitcode  : 7", "exitcode  : 1") for line in report]
    assert summarize_failure(stopped, reported={0}).message == ""
    # With no report at all, torchrun's root cause is all there is.
    assert summarize_failure(stopped).rank == 0


@pytest.mark.dist
def test_a_rank_that_vanishes_is_named_first_and_the_launcher_text_follows_with_verbose():
    marker = uuid.uuid4().hex
    argv = ["demo", "sampler", "--procs", "2", "--epochs", "5", "--fail-rank", "1", "--fail-step", "1", "--fail-mode", "exit"]
    proc = _cli_process(*argv, "--verbose", marker=marker)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1
    first = next(line for line in err.splitlines() if line.startswith("Error:"))
    assert first == (
        "Error: sampler: rank 1 exited with code 7 before reporting an error and left no traceback "
        "(a hard exit, a signal, or a crash in native code)"
    )
    assert "The launcher's output:" in err and "Root Cause (first observed failure)" in err
    assert _wait_until_gone(marker, 5.0) == []
