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
