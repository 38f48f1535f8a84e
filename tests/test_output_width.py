"""What the commands print fits 80 columns, with no trailing spaces, and a command to copy is on one line.

At 80 columns rich once split "ddpfsdp quiz --topic ⏎ sampler" (progress) and "ddpfsdp ⏎ demo ddp"
(doctor), printed calc's last line 192 columns wide and `demo fault --list` 160, and padded every line
to the terminal's width with spaces. Each command runs here as a person runs it, with COLUMNS=80.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from ddpfsdp.demos.base.prose import command_spans, keep_commands
from ddpfsdp.quiz.cli import cli

def _printed(*argv: str) -> list[str]:
    result = CliRunner().invoke(cli, list(argv), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.mark.parametrize("argv, commands", [
    (["progress"], [r"ddpfsdp quiz --topic [\w-]+$"]),
    (["doctor"], [r"ddpfsdp demo ddp --procs 2"]),
    (["calc", "--params", "7B"], [r"`ddpfsdp demo fsdp --simulate --world 8 --params 7B --precision bf16-mixed`"]),
    (["calc", "--params", "70B", "--gpus", "1024", "--topology", "--oversubscription", "2"], [r"`ddpfsdp demo fsdp "]),
    (["demo", "fault", "--list"], []),
])
def test_a_command_s_output_fits_80_columns_with_each_command_whole(argv, commands):
    lines = _printed(*argv)
    assert [line for line in lines if line != line.rstrip()] == []
    assert [line for line in lines if cell_len(line) > 80] == []
    for pattern in commands:
        assert any(re.search(pattern, line) for line in lines), (pattern, lines[-12:])
    # no line ends inside a command: after "ddpfsdp", or after a flag of one before its value
    assert not [line for line in lines if re.search(r"`?ddpfsdp$|ddpfsdp .*--(?:topic|procs|world|level)$", line)]

def test_keep_commands_moves_a_command_whole_and_lets_a_long_one_keep_its_line():
    text = "Study next: DistributedSampler (topic, ready 0%): ddpfsdp quiz --topic sampler, then the drill."
    lines = keep_commands(text, 60).plain.split("\n")
    assert lines == ["Study next: DistributedSampler (topic, ready 0%):", "ddpfsdp quiz --topic sampler, then the drill."]
    long = keep_commands("Run `ddpfsdp demo fsdp --simulate --world 8192 --params 70B --precision bf16-mixed` now", 40)
    assert long.plain.split("\n") == ["Run", "`ddpfsdp demo fsdp --simulate --world 8192 --params 70B --precision bf16-mixed`",
                                      "now"]
    assert command_spans("a `ddpfsdp calc --params 7B` b ddpfsdp quiz --level 3; c") == [(2, 28), (31, 53)]
