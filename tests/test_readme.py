"""The README is the front door: its first screen sets a newcomer up and names the commands to try first,
it names every command, its test command is the one CI runs, and it stays short; the rest is in docs/.

The first screen is the first 40 lines: it must hold, as commands to paste (inside a code block), the
clone, the CPU build of torch, the project's install and the three commands to try, and a picture. CI runs
the README's test command verbatim (.ci/run), so that line must be in the README and in .ci/run alike, and
near the top. Its links and anchors, and those of every page in docs/, are checked by tests/test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"

FIRST_SCREEN_LINES = 40
MAX_LINES = 250
TEST_COMMAND_BY_LINE = 80
FIRST_SCREEN_COMMANDS = {
    "the clone": "git clone",
    "the CPU torch line": "pip install torch==2.13.0",
    "the install line": "pip install -e .",
    "the quiz": "ddpfsdp quiz",
    "a real DDP demo": "ddpfsdp demo ddp",
    "the analytic model": "ddpfsdp calc --params 7B --gpus 8",
}
TEST_COMMAND = 'pip install -e ".[test]" && pytest'

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def fenced_commands(lines: list[str]) -> list[str]:
    """Each line inside a fenced code block, without its trailing `# comment`: what a reader pastes."""
    commands, fenced = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command:
                commands.append(command)
    return commands


def missing_from_first_screen(text: str) -> list[str]:
    """What the first screen lacks: each required command no pasted line of the first 40 starts with,
    and a picture whose file exists."""
    lines = text.splitlines()[:FIRST_SCREEN_LINES]
    commands = fenced_commands(lines)
    missing = [name for name, command in FIRST_SCREEN_COMMANDS.items()
               if not any(c == command or c.startswith(command + " ") for c in commands)]
    if not any((ROOT / unquote(path)).is_file() for path in IMAGE.findall("\n".join(lines))):
        missing.append("a picture")
    return missing


def front_door_problems(text: str) -> list[str]:
    """What keeps the README from being a front door: too long, or its test command (the line CI runs)
    missing from its code blocks or too far down."""
    lines = text.splitlines()
    problems = [f"{len(lines)} lines, more than {MAX_LINES}"] if len(lines) > MAX_LINES else []
    at = next((number for number, line in enumerate(lines, 1) if line.strip() == TEST_COMMAND
               and TEST_COMMAND in fenced_commands(lines[:number])), None)
    if at is None:
        problems.append("no test command in a code block")
    elif at > TEST_COMMAND_BY_LINE:
        problems.append(f"the test command at line {at}, below line {TEST_COMMAND_BY_LINE}")
    return problems


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_first_screen_sets_up_and_names_the_first_commands(readme):
    assert missing_from_first_screen(readme) == []


def test_the_cpu_torch_line_pins_the_torch_ci_installs(readme):
    """The first screen's torch is the one CI tests on, and it names PyTorch's CPU index."""
    torch_line = next(c for c in fenced_commands(readme.splitlines()[:FIRST_SCREEN_LINES])
                      if c.startswith("pip install torch=="))
    pin = torch_line.split()[2]
    assert f'"{pin}"' in CI.read_text(encoding="utf-8")
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line


def test_the_readme_holds_the_test_command_ci_runs(readme):
    assert TEST_COMMAND in fenced_commands(readme.splitlines())
    assert TEST_COMMAND in [line.strip() for line in CI.read_text(encoding="utf-8").splitlines()]


def test_the_readme_is_short_with_its_test_command_near_the_top(readme):
    assert front_door_problems(readme) == []


def test_the_readme_names_every_command_and_links_the_guides(readme):
    from ddpfsdp.quiz.cli import COMMANDS

    assert [name for name in COMMANDS if f"`ddpfsdp {name}" not in readme] == []
    assert "`ddpfsdp demo fault NAME`" in readme
    assert "](docs/README.md)" in readme


# The checks above, fed a README that breaks them.

GOOD_TOP = """# ddpfsdp

```bash
git clone "$REPO_URL" ddpfsdp && cd ddpfsdp
pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
pip install -e .
ddpfsdp quiz    # the app
ddpfsdp demo ddp
ddpfsdp calc --params 7B --gpus 8
```
![home](tests/__snapshots__/test_quiz_snapshots/test_home%5B120x40%5D.svg)
"""


def test_a_first_screen_with_everything_passes():
    assert missing_from_first_screen(GOOD_TOP) == []


def test_a_command_pushed_below_the_first_screen_is_missing():
    pushed = GOOD_TOP.replace("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu\n", "")
    pushed += "\n" * FIRST_SCREEN_LINES + "```bash\npip install torch==2.13.0\n```\n"
    assert missing_from_first_screen(pushed) == ["the CPU torch line"]


def test_a_command_named_only_in_prose_is_missing():
    prose = GOOD_TOP.replace("ddpfsdp demo ddp\n", "") + "Then run `ddpfsdp demo ddp`.\n"
    assert missing_from_first_screen(prose) == ["a real DDP demo"]


def test_a_longer_command_does_not_stand_for_a_shorter_one():
    other = GOOD_TOP.replace("ddpfsdp calc --params 7B --gpus 8", "ddpfsdp calc --params 7B --gpus 80")
    assert missing_from_first_screen(other) == ["the analytic model"]


def test_a_picture_whose_file_is_gone_is_missing():
    gone = GOOD_TOP.replace("test_home%5B120x40%5D.svg", "test_no_such_screen.svg")
    assert missing_from_first_screen(gone) == ["a picture"]


def test_an_install_of_another_kind_is_missing():
    assert missing_from_first_screen(GOOD_TOP.replace("pip install -e .\n", "pip install ddpfsdp\n")) == [
        "the install line"]


def test_a_long_readme_or_a_test_command_too_low_is_reported():
    tested = GOOD_TOP + f"```bash\n{TEST_COMMAND}\n```\n"
    assert front_door_problems(tested) == []
    assert front_door_problems(tested + "line\n" * MAX_LINES) == [f"{len(tested.splitlines()) + MAX_LINES} lines, "
                                                                    f"more than {MAX_LINES}"]
    low = GOOD_TOP + "\n" * TEST_COMMAND_BY_LINE + f"```bash\n{TEST_COMMAND}\n```\n"
    assert front_door_problems(low) == [f"the test command at line {len(GOOD_TOP.splitlines()) + TEST_COMMAND_BY_LINE + 2}, "
                                        f"below line {TEST_COMMAND_BY_LINE}"]
    assert front_door_problems(GOOD_TOP + f"Run `{TEST_COMMAND}`.\n") == ["no test command in a code block"]
