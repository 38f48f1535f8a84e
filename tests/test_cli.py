"""The command group: help for every command and usage errors.

(That start-up and `--help` defer torch and Textual is proved in a fresh interpreter, with every other
such path, by tests/test_import_hygiene.py.)
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from conftest import run_cli

from ddpfsdp.quiz.cli import COMMANDS, cli


def test_group_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output
    assert "Examples:" in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    assert command.help and command.help.strip(), f"{name} has no help text"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_version_option():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("ddpfsdp, version ")


@pytest.mark.parametrize("argv", [["no-such-command"], ["--no-such-option"], ["doctor", "--bogus"]])
def test_bad_input_is_a_usage_error_not_a_traceback(argv):
    outcome = run_cli(*argv)
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 2
    assert "Traceback" not in outcome.stderr
    assert "Usage:" in outcome.stderr


def test_only_demo_fault_loads_the_failure_lab():
    """The registry names the failure lab without importing its programs: a training demo's command,
    the worker and the launcher leave them unloaded; `demo fault` loads them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ddpfsdp.quiz.cli import cli\n"
        "import ddpfsdp.demos.worker, ddpfsdp.demos.launch.launcher\n"
        "r = CliRunner().invoke(cli, ['demo', 'fsdp', '--model', 'huge'])\n"
        "assert r.exit_code == 2, r.output\n"
        "before = sorted(m for m in sys.modules if m.startswith('ddpfsdp.demos.faults'))\n"
        "r = CliRunner().invoke(cli, ['demo', 'fault', '--list'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(before, 'ddpfsdp.demos.faults.catalog' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "True"]


@pytest.mark.parametrize("command", ["quiz", "drill", "interview"])
def test_without_a_terminal_the_app_runs_line_by_line_and_ends(command, tmp_path):
    """`ddpfsdp quiz </dev/null >file` once drew the full-screen app into the file and waited for keys
    forever: with no terminal, the command says so and runs as --plain, which ends at the input's end."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DDPFSDP_HOME": str(tmp_path)}
    with open(tmp_path / "out.txt", "w") as out:
        done = subprocess.run([sys.executable, "-m", "ddpfsdp.quiz.cli", command], stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    written = (tmp_path / "out.txt").read_text()
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Running line by line, as `ddpfsdp {command} --plain` does" in done.stderr
    assert "standard input and output are not a terminal" in done.stderr
    assert "\x1b[?1049h" not in written and "\x1b[" not in written  # no alternate screen, no escape codes
    assert "Traceback" not in done.stderr


def test_a_full_device_is_a_clear_error_not_a_traceback():
    """`ddpfsdp calc --params 7B --json > /dev/full`: the write fails; the message says why and what to do."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    for argv in (["calc", "--params", "7B", "--json"], ["calc", "--params", "7B"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "ddpfsdp.quiz.cli", *argv], stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
        assert done.returncode == 1
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
        assert done.stderr.startswith("Error: could not write the output: the device is full"), done.stderr

