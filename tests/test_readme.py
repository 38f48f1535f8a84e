"""The README's first screen sets a newcomer up and names the commands to try first; its links resolve.

The first screen is the first 40 lines: it must hold, as commands to paste (inside a code block), the
CPU build of torch, the project's install and the three commands to try. CI runs the README's test
command verbatim (.ci/run), so that line must be in the README and in .ci/run alike.
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
FIRST_SCREEN_COMMANDS = {
    "the CPU torch line": "pip install torch==2.13.0",
    "the install line": "pip install .",
    "the quiz": "ddpfsdp quiz",
    "a real DDP demo": "ddpfsdp demo ddp",
    "the analytic model": "ddpfsdp calc --params 7B --gpus 8",
}
TEST_COMMAND = 'pip install -e ".[test]" && pytest'

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
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


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens kept), spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor, outside code blocks; a repeated one gets GitHub's -1, -2, ..."""
    seen: dict[str, int] = {}
    found, fenced = set(), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(text: str) -> list[str]:
    """Links to a heading that is not there, or to a file of this repository that is not there."""
    targets, broken = anchors(text), []
    for target in LINK.findall(text):
        if target.startswith("#"):
            if target[1:] not in targets:
                broken.append(target)
        elif not re.match(r"[a-z]+:", target) and not (ROOT / unquote(target.split("#")[0])).exists():
            broken.append(target)
    return broken


def unbalanced_folds(text: str) -> list[str]:
    """Each <details> must open with a <summary> and close before the next one opens."""
    problems, lines, open_at = [], text.splitlines(), None
    for number, line in enumerate(lines, 1):
        if line.strip() == "<details>":
            if open_at is not None:
                problems.append(f"line {number}: <details> inside the one opened at line {open_at}")
            open_at = number
            if number >= len(lines) or not lines[number].startswith("<summary>"):
                problems.append(f"line {number}: <details> without a <summary> on the next line")
        elif line.strip() == "</details>":
            if open_at is None:
                problems.append(f"line {number}: </details> with nothing open")
            open_at = None
    if open_at is not None:
        problems.append(f"line {open_at}: <details> never closed")
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


def test_every_link_and_picture_resolves(readme):
    assert broken_links(readme) == []


def test_every_fold_is_closed_and_named(readme):
    assert readme.count("<details>") >= 10
    assert unbalanced_folds(readme) == []


# The checks above, fed a README that breaks them.

GOOD_TOP = """# ddpfsdp

```bash
pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
pip install .
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


def test_a_link_to_no_heading_or_no_file_is_broken():
    text = "## Set up\n\n[set-up](#set-up) [gone](#try-first) [file](tests/no_such_file.py) [web](https://pytorch.org)\n"
    assert broken_links(text) == ["#try-first", "tests/no_such_file.py"]


def test_anchors_follow_github():
    text = "### The result (`--json`, schema `ddpfsdp.demo/1`)\n## Notes\n## Notes\n```\n# not a heading\n```\n"
    assert anchors(text) == {"the-result---json-schema-ddpfsdpdemo1", "notes", "notes-1"}


def test_folds_left_open_or_nested_are_reported():
    assert unbalanced_folds("<details>\n<summary>a</summary>\n\ntext\n") == ["line 1: <details> never closed"]
    assert unbalanced_folds("<details>\ntext\n</details>\n") == [
        "line 1: <details> without a <summary> on the next line"]
    assert unbalanced_folds("<details>\n<summary>a</summary>\n<details>\n<summary>b</summary>\n</details>\n") == [
        "line 3: <details> inside the one opened at line 1"]
