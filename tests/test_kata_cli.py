"""`ddpfsdp kata`: listing, starting, hints, solutions, progress; bad input refused with a message and
nothing launched; and, end to end through the one launcher, a pass recorded, a deadlock named within
seconds, Ctrl+C, and nothing left running after any of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import run_cli, sigint_as_a_terminal_sends_it

from ddpfsdp.demos.katas.catalog import KATAS
from ddpfsdp.demos.launch.launcher import processes_with_env
from ddpfsdp.quiz.cli import cli
from ddpfsdp.quiz.commands import kata as kata_command

PLANTED = Path(__file__).parent / "data" / "katas"
MARKER = "DDPFSDP_TEST_MARKER"


@pytest.fixture
def nothing_launches(monkeypatch):
    """Any launch fails the test: bad input must be refused before a rank starts."""
    from ddpfsdp.demos.launch import launcher

    def refuse(*args, **kwargs):
        raise AssertionError("a run was launched")

    monkeypatch.setattr(launcher, "DemoRun", refuse)


def _store():
    from ddpfsdp.quiz.store import Store

    return Store.open()


@pytest.mark.parametrize("command", sorted(kata_command.kata.commands))
def test_every_kata_command_has_help(command):
    result = CliRunner().invoke(cli, ["kata", command, "--help"])
    assert result.exit_code == 0 and kata_command.kata.commands[command].help


def test_list_json_lists_every_kata_with_its_status():
    outcome = run_cli("kata", "list", "--json")
    assert outcome.exit_code == 0, outcome.stderr
    listed = json.loads(outcome.stdout)["katas"]
    assert len(listed) >= 12 and {k["name"] for k in listed} == set(KATAS)
    assert {k["status"] for k in listed} == {"new"}
    assert all(k["topic"] and k["level"] in (1, 2, 3) for k in listed)


def test_start_writes_the_starter_and_never_overwrites_without_force(tmp_path):
    folder = tmp_path / "work"
    outcome = run_cli("kata", "start", "ring-allreduce", "--dir", str(folder))
    assert outcome.exit_code == 0, outcome.stderr
    path = folder / "ring_allreduce.py"
    assert path.read_text() == KATAS["ring-allreduce"].starter_path.read_text()
    assert "Ring all-reduce from send and recv" in outcome.stdout
    path.write_text("# my work\n")
    again = run_cli("kata", "start", "ring-allreduce", "--dir", str(folder))
    assert again.exit_code == 1 and "exists already" in again.stderr and "--force" in again.stderr
    assert path.read_text() == "# my work\n"
    assert run_cli("kata", "start", "ring-allreduce", "--dir", str(folder), "--force").exit_code == 0
    assert path.read_text() != "# my work\n"
    with _store() as store:
        assert store.kata_files()["ring-allreduce"] == path.resolve()
        assert [e.event for e in store.kata_events("ring-allreduce")] == ["start", "start"]
    listed = {k["name"]: k["status"] for k in json.loads(run_cli("kata", "list", "--json").stdout)["katas"]}
    assert listed["ring-allreduce"] == "started"


def test_a_workspace_that_cannot_be_written_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    outcome = run_cli("kata", "start", "ring-allreduce", "--dir", str(blocker))
    assert outcome.exit_code == 1 and "is a file, not a folder" in outcome.stderr
    outcome = run_cli("kata", "start", "ring-allreduce", "--dir", str(blocker / "below"))
    assert outcome.exit_code == 1 and "cannot write" in outcome.stderr and "--dir" in outcome.stderr
    assert outcome.exception is None


def test_hints_come_one_at_a_time_and_are_counted():
    hints = KATAS["sampler-indices"].hints
    for number in range(1, len(hints) + 2):
        outcome = run_cli("kata", "hint", "sampler-indices")
        shown = min(number, len(hints))
        assert outcome.exit_code == 0 and f"Hint {shown} of {len(hints)}: {hints[shown - 1]}" in outcome.stdout
    with _store() as store:
        assert sum(e.event == "hint" for e in store.kata_events("sampler-indices")) == len(hints) + 1


def test_the_solution_waits_for_a_pass_or_a_give_up():
    refused = run_cli("kata", "solution", "ddp-buckets")
    assert refused.exit_code == 1 and "--give-up" in refused.stderr
    shown = run_cli("kata", "solution", "ddp-buckets", "--give-up")
    assert shown.exit_code == 0 and "def assign_buckets" in shown.stdout and "Talking points:" in shown.stdout
    assert "Given up: reviewed as Again" in shown.stdout
    with _store() as store:
        assert [e.event for e in store.kata_events("ddp-buckets")] == ["gave_up"]
        [attempt] = store.attempts("kata:ddp-buckets")
        assert attempt.topic == "ddp" and not attempt.correct and attempt.kind == "kata"


@pytest.mark.parametrize(("argv", "message"), [
    (["no-such-kata"], "unknown kata 'no-such-kata'"),
    (["ring-allreduce", "--procs", "0"], "--procs"),
    (["ring-allreduce", "--procs", "1"], "--procs"),
    (["ring-allreduce", "--procs", "65"], "--procs"),
    (["ring-allreduce", "--procs", "2", "--gpus", "2"], "not both"),
    (["ring-allreduce", "x.py", "--reference"], "leave out FILE"),
])
def test_bad_check_arguments_are_usage_errors(argv, message, nothing_launches):
    outcome = run_cli("kata", "check", *argv)
    assert outcome.exit_code == 2 and message in outcome.stderr and outcome.exception is None


def test_gpus_without_a_gpu_are_refused_with_the_cpu_command(monkeypatch, nothing_launches):

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 0)
    outcome = run_cli("kata", "check", "ring-allreduce", "--gpus", "2")
    assert outcome.exit_code == 2 and "no CUDA GPU" in outcome.stderr
    assert "ddpfsdp kata check ring-allreduce --procs 2" in outcome.stderr


def test_ranks_sharing_a_gpu_are_refused_for_point_to_point_katas(monkeypatch, nothing_launches):

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    outcome = run_cli("kata", "check", "ring-allreduce", "--gpus", "2")
    assert outcome.exit_code == 2 and "cannot send CUDA tensors point to point" in " ".join(outcome.stderr.split())


def test_a_kata_without_messages_shares_one_gpu(monkeypatch):

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    assert kata_command._gpu_placement(KATAS["memory-estimate"], 3) == (1, 3)
    assert kata_command._gpu_placement(KATAS["memory-estimate"], 1) == (1, None)
    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 2)
    with pytest.raises(click.UsageError, match="has 2 CUDA GPUs; run on --gpus 2 or fewer"):
        kata_command._gpu_placement(KATAS["memory-estimate"], 4)


@pytest.mark.parametrize(("text", "message"), [
    (None, "does not exist; `ddpfsdp kata start ring-allreduce` writes the starter"),
    ("def ring_all_reduce(comm, tensor)\n    pass\n", "syntax error at line 1"),
    ("def something_else(comm, tensor):\n    pass\n", "does not define ring_all_reduce"),
    (b"\xff\xfe\x00def", "is not UTF-8 text"),
])
def test_a_file_that_cannot_run_is_refused_before_launch(tmp_path, text, message, nothing_launches):
    path = tmp_path / "ring_allreduce.py"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    outcome = run_cli("kata", "check", "ring-allreduce", str(path))
    assert outcome.exit_code == 1 and message in outcome.stderr and outcome.exception is None
    assert "Traceback" not in outcome.stderr


def test_a_file_that_cannot_be_read_is_refused(tmp_path, nothing_launches):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "ring_allreduce.py"
    path.write_text("def ring_all_reduce(comm, tensor): pass\n")
    path.chmod(0)
    outcome = run_cli("kata", "check", "ring-allreduce", str(path))
    assert outcome.exit_code == 1 and "cannot be read" in outcome.stderr


def test_a_file_naming_the_answer_fails_no_forbidden_call_without_a_launch(nothing_launches):
    path = PLANTED / "ring-allreduce__no_forbidden_call__static_dist_all_reduce.py"
    outcome = run_cli("kata", "check", "ring-allreduce", str(path), "--json")
    assert outcome.exit_code == 1
    result = json.loads(outcome.stdout)
    assert result["launched"] is False
    [check] = result["checks"]
    assert check["name"] == "no_forbidden_call" and not check["passed"] and "line 6" in check["detail"]
    with _store() as store:
        [event] = store.kata_events("ring-allreduce")
        assert event.event == "check" and event.passed is False and event.detail == {"failed": ["no_forbidden_call"]}


def test_watch_checks_again_on_every_save(tmp_path, monkeypatch, nothing_launches):
    monkeypatch.setattr(kata_command, "WATCH_POLL_S", 0.05)
    path = tmp_path / "ring_allreduce.py"
    forbidden = (PLANTED / "ring-allreduce__no_forbidden_call__static_dist_all_reduce.py").read_text()
    path.write_text(forbidden)

    def save_again():
        time.sleep(0.5)
        path.write_text("def ring_all_reduce(comm, tensor)\n")  # a broken save: said, and watched on
        stamp = path.stat().st_mtime_ns
        os.utime(path, ns=(stamp + 10**9, stamp + 10**9))

    saver = threading.Thread(target=save_again)
    saver.start()
    outcome = run_cli("kata", "check", "ring-allreduce", str(path), "--watch", "--watch-checks", "2")
    saver.join()
    assert outcome.exception is None
    assert "nothing was launched" in outcome.stdout and "syntax error" in outcome.stderr
    assert "watching" in outcome.stderr


# --- end to end, through the launcher ----------------------------------------------------------------


@pytest.mark.dist
def test_a_pass_is_recorded_and_reviews_the_card(tmp_path):
    folder = tmp_path / "work"
    assert run_cli("kata", "start", "sampler-indices", "--dir", str(folder)).exit_code == 0
    shutil.copy(KATAS["sampler-indices"].solution_path, folder / "sampler_indices.py")
    outcome = run_cli("kata", "check", "sampler-indices", "--procs", "2")
    assert outcome.exit_code == 0, outcome.stdout + outcome.stderr
    assert "all 5 checks passed" in outcome.stdout and "reviewed as Easy" in outcome.stdout
    with _store() as store:
        checks = [e for e in store.kata_events("sampler-indices") if e.event == "check"]
        assert [e.passed for e in checks] == [True]
        [attempt] = store.attempts("kata:sampler-indices")
        assert attempt.correct and attempt.topic == "sampler"
        due = store.cards()["kata:sampler-indices"][1]
        assert due - attempt.answered_at >= timedelta(days=1)
    listed = {k["name"]: k["status"] for k in json.loads(run_cli("kata", "list", "--json").stdout)["katas"]}
    assert listed["sampler-indices"] == "passed"
    solution = run_cli("kata", "solution", "sampler-indices")
    assert solution.exit_code == 0 and "def distributed_sampler_indices" in solution.stdout


def _cli(*argv: str, marker: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ddpfsdp.quiz.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **{MARKER: marker}),
                            preexec_fn=sigint_as_a_terminal_sends_it)


def _gone(marker: str, within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := processes_with_env(MARKER, marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.dist
def test_a_deadlock_and_an_endless_loop_are_named_within_seconds_and_leave_nothing_running(tmp_path):
    """Both at once, each a `ddpfsdp kata check` of its own: their deadlines pass together."""
    deadlock_marker, loop_marker = uuid.uuid4().hex, uuid.uuid4().hex
    looping = tmp_path / "memory_estimate.py"
    looping.write_text("def model_state_bytes(params, gpus, strategy, precision, optimizer):\n    while gpus:\n"
                       "        pass\n")
    started = time.monotonic()
    deadlock = _cli("kata", "check", "ring-allreduce", str(PLANTED / "ring-allreduce__no_deadlock__receive_first.py"),
                    "--procs", "3", "--deadline-s", "2", marker=deadlock_marker)
    loop = _cli("kata", "check", "memory-estimate", str(looping), "--procs", "2", "--deadline-s", "1",
                marker=loop_marker)
    try:
        out, err = deadlock.communicate(timeout=60)
        deadlock_s = time.monotonic() - started
        loop_out, loop_err = loop.communicate(timeout=60)
    finally:
        for proc in (deadlock, loop):
            if proc.poll() is None:
                proc.kill()
    assert deadlock.returncode == 1, out + err
    assert deadlock_s < 10
    flat = " ".join(out.split())  # rich wraps the lines at the terminal's width
    assert "deadlock after the 2 s deadline" in flat and "every rank receives before it sends" in flat
    for rank in range(3):
        assert f"rank {rank} waits to receive from {(rank - 1) % 3} in step 0" in flat
    assert "Timed out waiting" not in out + err and "Traceback" not in out + err
    assert loop.returncode == 1, loop_out + loop_err
    flat = " ".join(loop_out.split())
    assert "still running your code" in flat and "a loop that never ends" in flat
    assert _gone(deadlock_marker, 2.0) == [] and _gone(loop_marker, 2.0) == []


@pytest.mark.dist
def test_ctrl_c_stops_every_rank(tmp_path):
    marker = uuid.uuid4().hex
    path = tmp_path / "memory_estimate.py"
    path.write_text("def model_state_bytes(params, gpus, strategy, precision, optimizer):\n    while True:\n"
                    "        pass\n")
    proc = _cli("kata", "check", "memory-estimate", str(path), "--procs", "2", "--deadline-s", "60", marker=marker)
    try:
        deadline = time.monotonic() + 60
        while len(processes_with_env(MARKER, marker)) < 4 and time.monotonic() < deadline:  # cli, agent, 2 ranks
            time.sleep(0.1)
        assert len(processes_with_env(MARKER, marker)) >= 4
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=15)
        assert time.monotonic() - sent < 6.0
        assert proc.returncode == 130 and "Cancelled" in err
        assert _gone(marker, 1.0) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in processes_with_env(MARKER, marker):
            os.kill(pid, signal.SIGKILL)

