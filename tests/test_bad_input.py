"""Bad input to every command ends with a message that names what is wrong, never a traceback.

Each case runs the `ddpfsdp` entry point in this process (conftest.run_cli: click's CliRunner around
`main`, as the installed script calls it), with a non-zero exit status expected and a word the message
must contain: the option at fault, or the setting to change. Nothing may escape as an exception.
"""

from __future__ import annotations

import pytest
from conftest import run_cli

CASES = [
    # quiz
    (["quiz", "--topic", "no-such-topic"], "--topic"),
    (["quiz", "--review", "--mock"], "--review"),
    (["quiz", "--plain", "--topic", "nope"], "--topic"),
    (["quiz", "--seed", "abc"], "--seed"),
    (["quiz", "--bogus"], "--bogus"),
    # progress, doctor
    (["progress", "--bogus"], "--bogus"),
    (["progress", "extra"], "extra"),
    (["doctor", "--json", "--bogus"], "--bogus"),
    # calc
    (["calc", "--params", "lots"], "--params"),
    (["calc", "--params", "7B", "--gpus", "0"], "--gpus"),
    (["calc", "--params", "7B", "--gpus", "-8"], "--gpus"),
    (["calc", "--params", "7B", "--precision", "fp64"], "--precision"),
    (["calc", "--params", "7B", "--optimizer", "lion"], "--optimizer"),
    (["calc", "--params", "7B", "--gpu-mem", "lots"], "--gpu-mem"),
    (["calc", "--params", "7B", "--gpus", "8", "--group-size", "3"], "--group-size"),
    (["calc", "--model", "no-such-model"], "--model"),
    (["calc", "--params", "7B", "--batch-size", "0"], "--batch-size"),
    (["calc", "--params", "7B", "--seq-len", "-5"], "--seq-len"),
    (["calc", "--params", "-7B"], "--params"),
    (["calc", "--params", "7B", "--offload", "all", "--strategy", "ddp"], "--offload"),
    (["calc", "--params", "7B", "--offload", "all", "--strategy", "zero2"], "--offload"),
    (["calc", "--params", "7B", "--offload", "optimizer", "--strategy", "hsdp"], "--offload"),
    (["calc", "--params", "7B", "--offload", "nvme"], "--offload"),
    (["calc", "--params", "7B", "--accounting", "deepspeed", "--strategy", "ddp"], "--accounting"),
    (["calc", "--params", "7B", "--accounting", "deepspeed", "--precision", "fp32"], "--accounting"),
    (["calc", "--params", "7B", "--gpus-per-node", "-8"], "--gpus-per-node"),
    (["calc", "--params", "7B", "--gpus", "12", "--offload", "all"], "--gpus-per-node"),
    (["calc", "--params", "7B", "--largest-layer", "30M"], "--largest-layer"),
    # demo
    (["demo", "no-such-demo"], "no-such-demo"),
    (["demo", "zero1"], "`ddpfsdp demo zro`"),
    (["demo", "ddp", "--procs", "0"], "--procs"),
    (["demo", "ddp", "--gpus", "4"], "--procs"),
    (["demo", "ddp", "--model", "huge"], "--model"),
    (["demo", "ddp", "--steps", "0"], "--steps"),
    (["demo", "ddp", "--batch-size", "0"], "--batch-size"),
    (["demo", "ddp", "--bucket-mb", "-1"], "--bucket-mb"),
    (["demo", "ddp", "--timeout-s", "0"], "--timeout-s"),
    (["demo", "fsdp", "--sharding", "diagonal"], "--sharding"),
    (["demo", "fsdp", "--wrap", "everything"], "--wrap"),
    (["demo", "fsdp", "--precision", "fp64"], "--precision"),
    (["demo", "fsdp", "--fsdp-api", "3"], "--fsdp-api"),
    (["demo", "fsdp", "--procs", "2", "--sharding", "hybrid", "--replicas", "3"], "--replicas"),
    (["demo", "fsdp", "--procs", "4", "--tp", "1"], "--tp"),
    (["demo", "fsdp", "--procs", "4", "--tp", "3", "--model", "tiny"], "--tp"),
    (["demo", "fsdp", "--procs", "2", "--tp", "2", "--model", "tiny"], "--tp"),
    (["demo", "fsdp", "--procs", "6", "--tp", "4", "--model", "tiny"], "--tp"),
    (["demo", "fsdp", "--procs", "4", "--sequence-parallel"], "--sequence-parallel"),
    (["demo", "fsdp", "--procs", "4", "--tp", "2", "--sharding", "grad-op"], "--sharding"),
    (["demo", "fsdp", "--procs", "4", "--tp", "2", "--fsdp-api", "1"], "--fsdp-api"),
    (["demo", "fsdp", "--procs", "4", "--tp", "2", "--arch", "vit"], "--arch"),
    (["demo", "fsdp", "--simulate", "--world", "64", "--tp", "6", "--params", "70B"], "--tp"),
    (["demo", "ddp", "--procs", "4", "--tp", "2"], "`ddpfsdp demo fsdp` takes it"),
    (["demo", "allreduce", "--sharding", "full"], "`ddpfsdp demo fsdp` takes it"),
    (["demo", "compare", "--optimizer", "lion"], "--optimizer"),
    (["demo", "allreduce", "--numel", "-1"], "--numel"),
    (["demo", "sampler", "--epochs", "0"], "--epochs"),
    # numbers no run can hold: nan passes click's own ranges, 1e400 reads as infinity
    (["demo", "ddp", "--lr", "1e400"], "--lr"),
    (["demo", "ddp", "--lr", "nan"], "--lr"),
    (["demo", "ddp", "--bucket-mb", "1e400"], "--bucket-mb"),
    (["demo", "ddp", "--bucket-mb", "1e30"], "--bucket-mb"),
    (["demo", "ddp", "--timeout-s", "nan"], "--timeout-s"),
    (["demo", "ddp", "--timeout-s", "1e400"], "--timeout-s"),
    (["demo", "ddp", "--layers", "9" * 30], "--layers"),
    (["demo", "sampler", "--procs", "9" * 30], "--procs"),
    (["demo", "fault", "desync", "--timeout-s", "nan"], "--timeout-s"),
    (["demo", "equivalence", "--lr", "inf"], "--lr"),
    (["calc", "--params", "7B", "--fsdp-units", "100000000"], "--fsdp-units"),
    (["calc", "--params", "7B", "--gpus", "64", "--ep", "8", "--experts", "9" * 30], "--experts"),
    (["calc", "--params", "7B", "--gpus", "64", "--ep", "8", "--experts", "64", "--capacity-factor", "1e308"],
     "--capacity-factor"),
    (["calc", "--gpus", "512", "--scaled-to", "1024", "--throughput-gain", "nan"], "--throughput-gain"),
]


@pytest.mark.parametrize("argv, names", CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_bad_input_names_the_option_without_a_traceback(argv, names):
    outcome = run_cli(*argv, stdin="")
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code != 0, outcome.stdout
    assert "Traceback" not in outcome.stdout + outcome.stderr, outcome.stderr
    assert names in outcome.stderr, outcome.stderr


def test_a_run_is_never_handed_a_timeout_a_rank_cannot_hold():
    """A rank makes a timedelta of --timeout-s for its process group: the launcher refuses what would fail there."""
    from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError

    for timeout_s in (float("nan"), float("inf"), 1e30, 0.0):
        with pytest.raises(LaunchError, match="--timeout-s must be a positive number of seconds, at most 86,400"):
            DemoRun("allreduce", procs=2, timeout_s=timeout_s)


def test_the_zero1_demo_says_what_zero1_is_and_what_to_run_instead():
    """calc's zero1 is DeepSpeed's ZeRO-1, which no demo runs; the demo of PyTorch's ZeroRedundancyOptimizer
    is `zro`. The old demo name is refused as other usage errors are, with the command to paste."""
    from click.testing import CliRunner

    from ddpfsdp.demos import registry
    from ddpfsdp.demos.result.schema import RENAMED
    from ddpfsdp.demos.worker import main as worker

    outcome = run_cli("demo", "zero1", "--model", "tiny", "--procs", "2", stdin="")
    assert outcome.exception is None and outcome.exit_code == 2, outcome.stderr
    message = " ".join(outcome.stderr.split())
    assert "calc's zero1 is DeepSpeed's ZeRO-1" in message and "which the demos do not run" in message
    assert "ZeroRedundancyOptimizer" in message and "`ddpfsdp demo zro --model tiny --procs 2`" in message
    assert "Traceback" not in outcome.stdout + outcome.stderr
    assert run_cli("demo", "zero1", "--help", stdin="").exit_code == 2
    ranked = CliRunner().invoke(worker, ["--device", "cpu", "zero1", "--model", "tiny"])
    assert ranked.exit_code == 2 and ranked.exception is not None and isinstance(ranked.exception, SystemExit)
    assert "`ddpfsdp demo zro`" in " ".join(ranked.output.split())
    with pytest.raises(ValueError, match="`ddpfsdp demo zro`"):
        registry.get("zero1")
    # a retired name is no demo's, and a result saved under it reads as the demo it names
    for old, (instead, _) in registry.RETIRED.items():
        assert old not in registry.DEMOS and instead in registry.DEMOS and RENAMED[old] == instead


# doctor reports such a directory as one of its findings instead (tests/test_doctor.py).
@pytest.mark.parametrize("command", [["progress"], ["quiz", "--plain"], ["quiz"]])
@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_a_data_directory_that_cannot_be_used_is_named(tmp_path, command, where):
    (tmp_path / "a-file").write_text("not a folder")
    outcome = run_cli(*command, stdin="", env={"DDPFSDP_HOME": str(tmp_path / where)})
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 1
    assert "Traceback" not in outcome.stdout + outcome.stderr, outcome.stderr
    assert f"DDPFSDP_HOME={tmp_path / where}" in outcome.stderr
    assert "set DDPFSDP_HOME to a folder you can write to" in outcome.stderr



def test_an_answer_of_1e400_is_asked_again_and_not_counted(quiz_bank):
    """1e400 reads as float('inf'): the plain quiz refuses it as unreadable and asks again; drills and
    interview steps refuse it the same way. Only the answer after it is saved."""
    import random

    from ddpfsdp.quiz import drill, grading
    from ddpfsdp.quiz.interview import answers, generate
    from ddpfsdp.quiz.loader import load_bank
    from ddpfsdp.quiz.store import Store

    bank = load_bank(*quiz_bank)
    rng = random.Random(5)  # the ddp topic at seed 5: single, multi, then the numeric question
    single = bank.questions["ddp-grad-sync"]
    right_single = grading.shuffled(single.choices, rng).index(single.answer) + 1
    multi = bank.questions["ddp-replicated-state"]
    wrong_multi = grading.shuffled(multi.choices, rng).index("parameters") + 1
    lines = [str(right_single), str(wrong_multi), "1e400", "1.5 GB", "q"]
    outcome = run_cli("quiz", "--plain", "--bank", str(quiz_bank[0]), "--answers", str(quiz_bank[1]), "--seed", "5",
                      "--topic", "ddp", stdin="\n".join(lines) + "\n")
    assert outcome.exception is None, outcome.exception
    assert "'1e400' is out of range: it reads as infinity" in outcome.stdout, outcome.stdout
    assert "inf GB" not in outcome.stdout
    numeric = [a for a in Store.open().attempts() if a.question_id == "ddp-allreduce-wire"]
    assert [(a.answer["text"], a.correct) for a in numeric] == [("1.5 GB", True)]

    problem = drill.generate(seed=1, count=1)[0]
    with pytest.raises(grading.QuantityError, match="infinity"):
        drill.grade(problem, "1e400")
    scenario = generate.generate(0, family="scale", model="Llama-2-13B-like", cluster="DGX A100 40GB")
    numeric_steps = [step for step in scenario.steps if step.unit in ("GB", "GiB", "s", "%", "")]
    assert numeric_steps
    for step in numeric_steps:
        with pytest.raises(grading.QuantityError, match="infinity"):
            answers.grade(step, "1e400")


@pytest.mark.parametrize("command, words, moved", [(["progress"], "is damaged", False),
                                                    (["quiz", "--plain"], "was damaged", True)])
def test_a_damaged_progress_file_is_reported_once(ddpfsdp_home, command, words, moved, caplog):
    """The store leaves the telling to whoever opened it: one warning, not a log line and a warning, and
    before anything else. A command that only reads leaves the file where it is.

    (Outside pytest a logged warning goes to the terminal through logging's last-resort handler.)"""
    ddpfsdp_home.mkdir(parents=True, exist_ok=True)
    (ddpfsdp_home / "ddpfsdp.sqlite3").write_bytes(b"not a database, just bytes " * 100)
    outcome = run_cli(*command, stdin="q\n")
    assert outcome.exception is None, repr(outcome.exception)
    said = " ".join((outcome.stdout + outcome.stderr).split())
    assert said.count(words) == 1, said
    assert outcome.stdout.startswith("warning:") and "ddpfsdp progress --recover" in said
    assert [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()] == []
    assert bool(list(ddpfsdp_home.glob("ddpfsdp.sqlite3.damaged-*"))) is moved


def _read_only(path, monkeypatch) -> None:
    """Make the progress file unwritable: by its mode where that binds (not as root), else as SQLite reports it."""
    import os
    import sqlite3

    path.chmod(0o444)
    if os.geteuid() != 0:
        return
    from ddpfsdp.quiz.store import Store

    connect = Store._connect

    def refusing(target):
        if str(target) == str(path):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return connect(target)

    monkeypatch.setattr(Store, "_connect", staticmethod(refusing))


@pytest.mark.parametrize("command", [["progress"], ["quiz", "--plain"]])
def test_a_read_only_progress_file_is_named_once_and_never_moved_aside(ddpfsdp_home, monkeypatch, command):
    from ddpfsdp.quiz.store import Store

    Store.open().close()
    path = ddpfsdp_home / "ddpfsdp.sqlite3"
    before = path.read_bytes()
    _read_only(path, monkeypatch)
    outcome = run_cli(*command, stdin="q\n")
    assert outcome.exception is None, repr(outcome.exception)
    said = outcome.stdout + outcome.stderr
    assert "Traceback" not in said
    assert said.count("is read-only") == 1 and "DDPFSDP_HOME" in said, said
    assert "damaged" not in said
    assert not list(ddpfsdp_home.glob("ddpfsdp.sqlite3.damaged-*"))  # the answers in it stay where they are
    assert path.read_bytes() == before
