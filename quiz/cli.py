"""The `ddpfsdp` command group.

Start-up imports click and nothing else: each command lives in its own module under
`ddpfsdp.quiz.commands` and is imported only when it is run or its help is shown, and
each command imports torch or textual inside itself, when it needs them.
"""

from __future__ import annotations

import errno
import importlib

import click

# name -> "module:attribute" of a click command; loaded on first use.
COMMANDS: dict[str, str] = {
    "doctor": "ddpfsdp.quiz.commands.doctor:doctor",
    "quiz": "ddpfsdp.quiz.commands.quiz:quiz",
    "progress": "ddpfsdp.quiz.commands.progress:progress",
    "demo": "ddpfsdp.quiz.commands.demo:demo",
    "calc": "ddpfsdp.quiz.commands.calc:calc",
    "drill": "ddpfsdp.quiz.commands.drill:drill",
    "interview": "ddpfsdp.quiz.commands.interview:interview",
    "export": "ddpfsdp.quiz.commands.export:export",
    "numbers": "ddpfsdp.quiz.commands.numbers:numbers",
    "glossary": "ddpfsdp.quiz.commands.glossary:glossary",
    "kata": "ddpfsdp.quiz.commands.kata:kata",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are looked up, not at start-up."""

    def __init__(self, *args, lazy_commands: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            module_name, attribute = self.lazy_commands[cmd_name].split(":")
            return getattr(importlib.import_module(module_name), attribute)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
# The version is read from the installed package when --version asks for it, not at start-up.
@click.version_option(None, "-V", "--version", package_name="ddpfsdp", prog_name="ddpfsdp")
def cli() -> None:
    """Study DDP and FSDP for ML-systems interviews, and prove every answer with numbers.

    \b
    Examples:
      ddpfsdp quiz                         the terminal app: topics, questions, evidence
      ddpfsdp quiz --review                only the cards that are due
      ddpfsdp demo fsdp --procs 2          real FSDP training on 2 CPU processes (gloo)
      ddpfsdp demo fsdp --gpus 4           the same on 4 GPUs (NCCL)
      ddpfsdp demo compare --procs 2       DDP, zro (ZeroRedundancyOptimizer), FSDP grad-op and full
      ddpfsdp calc --params 7B --gpus 8    per-GPU memory and traffic for every strategy
      ddpfsdp drill                        napkin-math sizing problems, graded by the model
      ddpfsdp interview                    a design scenario, step by step, with a debrief
      ddpfsdp progress                     mastery by topic and level, weakest first
      ddpfsdp export anki ddpfsdp.apkg     the questions as an Anki deck
      ddpfsdp numbers                      the figures to know, each with its source
      ddpfsdp glossary reshard             a term defined, and the questions that use it
      ddpfsdp kata list                    write a ring all-reduce, an FSDP unit...: checked on real ranks
      ddpfsdp doctor                       what this machine can run
    """


# What writing the output can fail with, where the output goes rather than the command is at fault.
OUTPUT_ERRNOS = {errno.ENOSPC: "the device is full", errno.EFBIG: "the file is too large",
                 errno.EDQUOT: "the disk quota is used up", errno.EIO: "the device reported an input/output error"}


def main() -> None:
    from ddpfsdp.quiz.paths import DataDirError

    try:
        cli(prog_name="ddpfsdp")
    except DataDirError as error:
        # Raised wherever the store or a cache is first opened, inside any command.
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(1) from None
    except OSError as error:
        if error.errno not in OUTPUT_ERRNOS or not _is_stdout(error):
            raise
        _drop_stdout()
        click.echo(f"Error: could not write the output: {OUTPUT_ERRNOS[error.errno]} ({error.strerror}). Write it "
                   "where there is room, e.g. `> ~/out.txt`, or leave out the redirection.", err=True)
        raise SystemExit(1) from None


def _is_stdout(error: OSError) -> bool:
    """The error came from writing standard output (no file name: a stream's write, not an open)."""
    return error.filename is None


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's own flush at exit fails no second time."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
