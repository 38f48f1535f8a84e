"""`ddpfsdp glossary [TERM]`: the terms the question bank uses, and the questions that use each."""

from __future__ import annotations

import json

import click

SHOWN_PROMPTS = 12  # questions listed with their prompt; the rest by id


@click.command()
@click.argument("term", required=False, nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the terms (or TERM) as JSON, with the questions that use each.")
def glossary(term: tuple[str, ...], as_json: bool) -> None:
    """Define the terms the questions use (bucket, unit, reshard, HSDP, 1F1B, ...); with TERM, its
    definition and every question that uses it.

    \b
    Examples:
      ddpfsdp glossary              every term, one line each
      ddpfsdp glossary reshard      its definition and the questions that use it
      ddpfsdp glossary all_reduce   a term by any spelling the questions use
    """
    from ddpfsdp.quiz import glossary as terms_module
    from ddpfsdp.quiz.bank_cache import load_bank_cached
    from ddpfsdp.quiz.loader import BankError

    try:
        terms = terms_module.load()
        bank = load_bank_cached()
    except (terms_module.GlossaryError, BankError) as error:
        raise click.ClickException(str(error)) from None
    asked = " ".join(term).strip()
    if asked:
        try:
            chosen = [terms_module.lookup(terms, asked)]
        except terms_module.GlossaryError as error:
            raise click.BadParameter(str(error), param_hint="TERM") from None
    else:
        chosen = list(terms.values())
    used = terms_module.uses(bank, terms, [t.name for t in chosen])
    if as_json:
        click.echo(json.dumps({"schema": "ddpfsdp.glossary/1", "terms": [
            {"name": t.name, "definition": t.definition, "see": list(t.see), "questions": used[t.name]}
            for t in chosen]}, indent=2))
        return
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from ddpfsdp.quiz.plain_console import plain_console
    from ddpfsdp.quiz.search import plain_text
    from ddpfsdp.quiz.search_view import shorten

    console = plain_console()
    console.width = min(console.width, 80)
    if not asked:
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("term", style="bold", no_wrap=True)
        table.add_column("what it is", ratio=1, overflow="fold")
        table.add_column("questions", justify="right", no_wrap=True)
        for t in chosen:
            table.add_row(t.name, shorten(t.definition.split(". ")[0].rstrip(".") + ".", 72), str(len(used[t.name])))
        console.print(Group(Text(f"{len(chosen)} terms the questions use. ddpfsdp glossary TERM defines one and "
                                 "lists its questions.", style="dim"), table))
        return
    t = chosen[0]
    questions = used[t.name]
    lines: list = [Text(t.name, style="bold"), Text(t.definition)]
    if t.see:
        lines.append(Text.assemble(("See also: ", "dim"), ", ".join(t.see)))
    lines.append(Text(f"\n{len(questions)} question{'s' if len(questions) != 1 else ''} use it:", style="bold"))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for qid in questions[:SHOWN_PROMPTS]:
        question = bank.questions[qid]
        grid.add_row(Text(qid, style="bold"), f"level {question.level}: {shorten(plain_text(question.prompt), 90)}")
    lines.append(grid)
    if len(questions) > SHOWN_PROMPTS:
        lines.append(Text(f"and {len(questions) - SHOWN_PROMPTS} more: " + ", ".join(questions[SHOWN_PROMPTS:])))
    lines.append(Text("Find one by its words: ddpfsdp quiz --search WORDS", style="dim"))
    console.print(Group(*lines))
