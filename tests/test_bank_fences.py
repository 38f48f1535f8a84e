"""Every fenced block of the question bank fits an 80-column screen: the app does not wrap code."""

from __future__ import annotations

import re
import tomllib

from ddpfsdp.quiz.loader import default_bank_dir

# The app shows a fenced block as it is, inside a border and padding: 70 characters fit at 80 columns.
MAX_FENCED_WIDTH = 70
FENCED = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", flags=re.DOTALL | re.MULTILINE)


def fenced_lines(value) -> list[str]:
    """Each line inside a fenced block in a TOML value, at any depth (prompts, choices, explanations)."""
    if isinstance(value, str):
        return [line for block in FENCED.findall(value) for line in block.splitlines()]
    if isinstance(value, dict):
        return [line for item in value.values() for line in fenced_lines(item)]
    if isinstance(value, list):
        return [line for item in value for line in fenced_lines(item)]
    return []


def test_the_fence_finder_sees_every_line_of_a_block_in_any_field():
    bank = {"question": [{"prompt": "Say:\n\n```text\nshort\n" + "x" * 71 + "\n```\n\nWhy?",
                          "why": ["a", "```\n  indented\n```"]}]}
    assert fenced_lines(bank) == ["short", "x" * 71, "  indented"]


def test_every_fenced_line_in_the_bank_fits_80_columns():
    files = sorted(default_bank_dir().glob("*.toml"))
    assert files
    too_wide = [f"{path.name}: {len(line)}: {line}" for path in files
                for line in fenced_lines(tomllib.loads(path.read_text(encoding="utf-8")))
                if len(line) > MAX_FENCED_WIDTH]
    assert not too_wide, "\n".join(too_wide)
