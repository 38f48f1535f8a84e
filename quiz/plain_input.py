"""Reading one answer on a plain terminal, the same in the quiz, the drill and the interview.

`s` (or `skip`) skips, `q` (or `quit`), the end of the input and Ctrl+C stop; each is raised as its
own exception so the caller decides what a skip or a stop means there.
"""

from __future__ import annotations

from rich.console import Console
from rich.prompt import Prompt


class Quit(Exception):
    """The person typed q, the input ended, or Ctrl+C was pressed."""


class Skip(Exception):
    """The person typed s."""


def read(console: Console, prompt: str = "Your answer") -> str:
    try:
        text = Prompt.ask(prompt, console=console, default="", show_default=False)
    except (EOFError, KeyboardInterrupt):
        raise Quit from None
    text = text.strip()
    if text.lower() in ("q", "quit"):
        raise Quit
    if text.lower() in ("s", "skip"):
        raise Skip
    return text
