"""The command group: help for every command, usage errors, and a start-up that defers heavy imports."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

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
    proc = subprocess.run(
        [sys.executable, "-m", "ddpfsdp.quiz.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "Usage:" in proc.stderr


def test_cli_import_defers_torch_and_textual():
    # A fresh interpreter is the only way to prove a deferral defers.
    code = (
        "import sys, ddpfsdp.quiz.cli;"
        "heavy = [m for m in ('torch', 'textual', 'numpy') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_group_help_loads_no_heavy_module():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ddpfsdp.quiz.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(','.join(m for m in ('torch', 'textual') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
