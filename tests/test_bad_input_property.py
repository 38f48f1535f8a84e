"""No number typed for any option of any command ends in a traceback, and nothing starts for a refused one.

The options are read from the click commands themselves (the group's commands, each demo's command
made from the registry), so a new numeric option is drawn here without this file changing: one whose
type is a number (an int or float, ranged or not), a type of the project's own (a seed, a level), or text
that names a quantity (metavar COUNT, SIZE, TIME or RATE: "7B", "80GB", "300ms", "2GB/s"). Each is given
values a person might type or paste (huge, tiny, negative, nan, inf, 1e400, Unicode digits and minus
signs, empty), on the command's own examples from its --help (so an option that needs others is reached
with them) and on the bare command. Whatever happens must be one of:

  - a clear refusal: click's usage error (exit 2) or a command's own error (exit 1), "Error:" first,
    and nothing launched;
  - a normal result (exit 0), or one stopped at the launch boundary: `DemoRun.start`, which every
    demo, fault and kata goes through, or the full-screen app's `run` is replaced here, and what a run
    would hand its ranks must be JSON with finite numbers and a timeout a rank can hold.
"""

from __future__ import annotations

import json
import math
import re
import shlex

import click
import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpfsdp.quiz.cli import cli

QUANTITY_METAVARS = {"COUNT", "SIZE", "TIME", "RATE"}
# Examples that validate the whole question bank take seconds each; the bank's own tests cover them.
SLOW_EXAMPLE_FLAGS = {"--check"}
# Flags that keep a command running until Ctrl+C by design (`kata check --watch`); dropped from the examples.
UNTIL_STOPPED_FLAGS = {"--watch"}
EXAMPLES_PER_OPTION = 4


def _commands(command: click.Command = cli, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        return [found for name in command.list_commands(ctx)
                for found in _commands(command.get_command(ctx, name), (*path, name))]
    return [(path, command)]


def _is_numeric(option: click.Parameter) -> bool:
    if not isinstance(option, click.Option) or option.is_flag or option.count or option.hidden:
        return False  # a hidden option is the tests' own hook, not something a person types
    kind = option.type
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
        return True
    if isinstance(kind, click.types.StringParamType):
        return (option.metavar or "").upper() in QUANTITY_METAVARS
    return not type(kind).__module__.startswith("click.")  # the project's own types: seeds, levels


def _help_text(path: tuple[str, ...]) -> str:
    """The help of the command and of every group above it (a group's examples name its commands)."""
    texts, command = [], cli
    for name in path:
        texts.append(command.help or "")
        command = command.get_command(click.Context(command), name)
    return "\n".join([*texts, command.help or ""])


def _examples(path: tuple[str, ...]) -> list[list[str]]:
    """The command's example command lines from --help, without their descriptions or redirections."""
    found = []
    prefix = " ".join(("ddpfsdp", *path))
    for line in _help_text(path).splitlines():
        text = re.split(r"\s{2,}", line.strip())[0].split(" > ")[0]
        if text == prefix or text.startswith(prefix + " "):
            words = [word for word in shlex.split(text)[1 + len(path):] if word not in UNTIL_STOPPED_FLAGS]
            if not SLOW_EXAMPLE_FLAGS & set(words):
                found.append(words)
    return found


def _same(option: click.Option) -> tuple:
    """What makes two commands' options one: the flag, the help, the type and its bounds (every demo's
    --timeout-s comes from the same launch options; RunSpec's fields make each training demo's)."""
    kind = option.type
    return (option.opts[0], option.help, type(kind).__name__, *(getattr(kind, name, None) for name in
                                                                  ("min", "max", "min_open", "max_open")))


def _cases() -> list[tuple[str, list[tuple[tuple[str, ...], list[list[str]]]]]]:
    """Each numeric option once, with every command that has it and that command's examples."""
    shared: dict[tuple, list[tuple[tuple[str, ...], list[list[str]]]]] = {}
    for path, command in _commands():
        for option in command.params:
            if _is_numeric(option):
                shared.setdefault(_same(option), []).append((path, _examples(path)))
    return sorted(((key[0], places) for key, places in shared.items()), key=lambda case: (case[1][0][0], case[0]))


CASES = _cases()


def test_the_options_are_read_from_the_commands():
    """The walk reaches the demos built from the registry and the project's own types, and finds examples."""
    named = {(" ".join(path), flag) for flag, places in CASES for path, _ in places}
    assert {("demo ddp", "--lr"), ("demo ddp", "--bucket-mb"), ("demo fsdp", "--timeout-s"), ("demo pipeline", "--dp"),
            ("demo fault", "--timeout-s"), ("calc", "--params"), ("calc", "--capacity-factor"),
            ("drill", "--count"), ("interview", "--seed"), ("quiz", "--level"), ("demo sampler", "--seed")} <= named
    assert any(["--params", "7B", "--gpus", "64", "--ep", "8", "--experts", "64", "--top-k", "2",
                "--capacity-factor", "1.25"] == words for flag, places in CASES for _, examples in places
               for words in examples if flag == "--capacity-factor")


TYPED = st.one_of(
    st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e308", "1e30", "-1e30",
                     "1e-30", "5e-324", "0", "-0", "-1", "0.5", "1", "2", "3", "", " ", "9" * 40, "-" + "9" * 40,
                     "٣", "١٢", "１２", "−3", "‐2", "⁴", "½", "0x10", "1_000", "1,000", "7B", "80GB", "1e400GB",
                     "nanGB", "-1GB", "300ms", "2GB/s", "inf/s"]),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789.-+e٣١２−", max_size=8),
)


class Launched(Exception):
    """Raised where a run would start: the command got as far as launching."""


@pytest.fixture
def boundary(monkeypatch):
    """Stop every launch and the full-screen app at the boundary, recording what a launch would hand on."""
    import textual.app

    from ddpfsdp.demos.launch import launcher, request

    launches: list[str] = []

    def start(run):
        asked = json.loads(json.dumps(request.options_of(run.asked)))
        wire = json.dumps(asked, allow_nan=False)  # raises for nan or infinity, which the ranks could not read
        assert run.timeout_s is None or math.isfinite(run.timeout_s) and 0 < run.timeout_s <= request.MAX_TIMEOUT_S
        launches.append(wire)
        raise Launched(run.demo)

    def app_run(app, *args, **kwargs):
        launches.append(type(app).__name__)
        raise Launched(type(app).__name__)

    monkeypatch.setattr(launcher.DemoRun, "start", start)
    monkeypatch.setattr(textual.app.App, "run", app_run)
    return launches


def _outcome(argv: list[str], launches: list[str]) -> None:
    before = len(launches)
    outcome = run_cli(*argv, stdin="")
    exception = outcome.exception
    said = outcome.stdout + outcome.stderr
    shown = f"ddpfsdp {shlex.join(argv)} -> exit {outcome.exit_code}\n{said[-1500:]}"
    if isinstance(exception, Launched):
        return
    assert exception is None, f"{shown}\n{type(exception).__name__}: {exception}"
    assert len(launches) == before, shown
    assert "Traceback" not in said, shown
    if outcome.exit_code == 2:
        assert "Error:" in outcome.stderr, shown


# Typed first, on the first command that has the option and its first base; then drawn.
ALWAYS = ("nan", "1e400", "1e308", "-1", "9" * 40)


def _argv(path: tuple[str, ...], base: list[str], flag: str, value: str) -> list[str]:
    """The base command line with `value` for `flag`: in place of the example's own, or added."""
    if flag in base:
        at = base.index(flag)
        return [*path, *base[:at + 1], value, *base[at + 2:]]
    return [*path, *base, flag, value]


def _bases(flag: str, examples: list[list[str]]) -> list[list[str]]:
    """The examples that give the option, or else the bare command and every example."""
    return [words for words in examples if flag in words] or [[], *examples]


@pytest.mark.parametrize("flag, places", CASES, ids=[f"{' '.join(places[0][0])} {flag}" for flag, places in CASES])
def test_no_value_of_a_numeric_option_ends_in_a_traceback(flag, places, boundary):
    path, examples = places[0]
    for value in ALWAYS:
        _outcome(_argv(path, _bases(flag, examples)[0], flag, value), boundary)

    @st.composite
    def invocations(draw):
        path, examples = draw(st.sampled_from(places))
        return _argv(path, draw(st.sampled_from(_bases(flag, examples))), flag, draw(TYPED))

    @settings(max_examples=EXAMPLES_PER_OPTION, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(argv=invocations())
    def check(argv: list[str]) -> None:
        _outcome(argv, boundary)

    check()
