"""`ddpfsdp interview --plain`: the working under each verdict fits the terminal, words and numbers whole."""

from __future__ import annotations

import io
from datetime import datetime, UTC

import pytest
from rich.console import Console

from ddpfsdp.quiz.interview import generate
from ddpfsdp.quiz.interview.plain import run_interview_plain
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("seed", [0, 5])
def test_working_lines_fit_the_width_and_keep_words_whole(monkeypatch, width, seed):
    scenario = generate.generate(seed)
    # A wrong but readable answer to every step (1 is an option, a size, a time and a share), so every
    # step's working is shown; then the debrief.
    monkeypatch.setattr("sys.stdin", io.StringIO("1\n" * len(scenario.steps) + "\n"))
    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False, color_system=None)
    assert run_interview_plain(scenario, console=console, store=Store.memory(), clock=lambda: T0) == 0
    lines = out.getvalue().splitlines()
    working = [i for i, line in enumerate(lines) if line.startswith("Working: ")]
    assert len(working) == sum(1 for step in scenario.steps if step.working)
    for start, step in zip(working, [s for s in scenario.steps if s.working]):
        # The working's lines: from the label to the next step's rule ("Step 2 of 11 · ...") or the debrief's.
        end = next(i for i in range(start + 1, len(lines) + 1)
                   if i == len(lines) or lines[i].startswith(("Step ", "─")))
        block = lines[start:end]
        assert max(len(line) for line in block) <= width, block
        # Every word and number of the working, in order and whole: none is cut across two lines.
        assert _words(" ".join(block)) == ["Working:", *_words(step.working)], block


def test_each_step_s_title_is_whole_and_the_command_to_start_again_is_on_one_line(monkeypatch):
    """At 80 columns a rule cut a long step title ("· graded within…"), and the stop message split its
    command across two lines."""
    from ddpfsdp.quiz.interview.render import step_line
    from ddpfsdp.quiz.interview.plain import again

    scenario = generate.generate(1)
    monkeypatch.setattr("sys.stdin", io.StringIO("1\n" * 3 + "q\n"))
    out = io.StringIO()
    console = Console(file=out, width=80, highlight=False, color_system=None)
    run_interview_plain(scenario, console=console, store=Store.memory(), clock=lambda: T0)
    lines = out.getvalue().splitlines()
    for step in scenario.steps[:4]:
        title = step_line(step, len(scenario.steps))
        assert any(title in line for line in lines), title
    assert not [line for line in lines if "…" in line and line.startswith("Step ")]
    assert any(f"`{again(scenario)}`" in line for line in lines)
