"""Search results as text: what `ddpfsdp quiz --search` prints and the app's search screen lists.

Each result names its question (id, topic, level), starts its prompt, and shows where it matched with
the matched words in bold. No torch or textual here.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ddpfsdp.quiz.loader import Bank
from ddpfsdp.quiz.search import Hit, plain_text

PROMPT_CHARS = 150


def shorten(text: str, chars: int) -> str:
    """`text` cut at a space before `chars` characters, with an ellipsis when cut."""
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars - 1)
    return text[: cut if cut > chars // 2 else chars - 1].rstrip(" ,;:") + "…"


def title(bank: Bank, hit: Hit) -> Text:
    question = bank.questions[hit.question_id]
    return Text.assemble((hit.question_id, "bold"), f" · {bank.topics[question.topic].title} · level {question.level}")


def matched_line(hit: Hit) -> Text:
    """'model answer: …the bucket cap…' with the matched words in bold."""
    line = Text(f"{hit.field}: ", style="dim")
    snippet = Text(hit.snippet)
    for start, end in hit.marks:
        snippet.stylize("bold yellow", start, end)
    line.append_text(snippet)
    return line


def hit_lines(bank: Bank, hit: Hit, one_line_each: bool = False) -> Group:
    """The title, the prompt's start and where it matched; `one_line_each` cuts each to one line (a list
    in the app, whose rows keep one height at any width)."""
    prompt = shorten(plain_text(bank.questions[hit.question_id].prompt), PROMPT_CHARS)
    lines = [title(bank, hit), Text(prompt), matched_line(hit)]
    if one_line_each:
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
    return Group(*lines)


def render_hits(bank: Bank, query: str, hits: list[Hit]) -> Group:
    if not hits:
        return Group(Text(f"No question matches {query!r}. Try fewer or other words: the search ignores case, "
                          "finds the start of a longer word, and forgives a typo."))
    head = Text(f"{len(hits)} question{'s' if len(hits) != 1 else ''} match {query!r}, best first:")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(ratio=1)
    for number, hit in enumerate(hits, start=1):
        grid.add_row(f"{number}.", hit_lines(bank, hit))
        grid.add_row("", "")
    tail = Text("In the app (ddpfsdp quiz), / searches and Enter opens a result; "
                "ddpfsdp quiz --bookmark ID marks one to study later with --bookmarked.", style="dim")
    return Group(head, Text(""), grid, tail)
