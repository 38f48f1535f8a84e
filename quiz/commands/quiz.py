"""`ddpfsdp quiz`: the terminal app, its plain line-by-line mode, and the bank check."""

from __future__ import annotations

import textwrap
from pathlib import Path

import click


@click.command()
@click.option("--topic", metavar="TOPIC", help="Go straight to one topic (e.g. fsdp-wrap).")
@click.option("--review", is_flag=True, help="Only the questions that are due for review.")
@click.option("--mock", is_flag=True, help="Start a timed mock interview: a mixed set, explain questions included.")
@click.option("--plain", is_flag=True, help="Line by line on plain stdin/stdout, for small terminals and screen readers.")
@click.option("--check", is_flag=True, help="Validate the question bank and exit (0 when it is sound).")
@click.option("--cues", is_flag=True, help="With --check: list, per question, the text cues that give its key away.")
@click.option("--bank", "bank_dir", type=click.Path(path_type=Path, file_okay=False), hidden=True)
@click.option("--answers", "answers_dir", type=click.Path(path_type=Path, file_okay=False), hidden=True)
@click.option("--seed", type=int, hidden=True, help="Fix the shuffling of choices (for reproducible runs).")
def quiz(topic, review, mock, plain, check, cues, bank_dir, answers_dir, seed) -> None:
    """Practise DDP and FSDP interview questions, with evidence from real runs.

    \b
    Examples:
      ddpfsdp quiz                    topics, mastery and what is due
      ddpfsdp quiz --topic fsdp-wrap  straight into one topic
      ddpfsdp quiz --review           only what is due
      ddpfsdp quiz --plain            line by line, no full-screen app
      ddpfsdp quiz --check            validate the question bank
      ddpfsdp quiz --check --cues     and list the questions a guesser can answer
    """
    from ddpfsdp.quiz.loader import BankError, load_bank

    if sum((review, mock, topic is not None)) > 1:
        raise click.UsageError("choose one of --topic, --review and --mock")
    if cues and not check:
        raise click.UsageError("--cues lists each question's text cues; use it with --check")
    if check:
        _check_bank(bank_dir, answers_dir, cues)
        return

    if plain:
        from ddpfsdp.quiz.plain import run_plain

        try:
            bank = load_bank(bank_dir, answers_dir)
        except BankError as error:
            raise click.ClickException(f"the question bank has a problem: {error}") from None
        _check_topic(bank, topic)
        raise SystemExit(run_plain(bank, topic=topic, review=review, mock=mock, seed=seed))

    from ddpfsdp.quiz.app import make_app

    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, topic=topic, review=review, mock=mock, seed=seed)
    if app.bank is not None:
        _check_topic(app.bank, topic)
    try:
        app.run()
    finally:
        # Belt and braces: every demo started from the app is stopped before the command returns.
        app.stop_all_runs()


def _check_bank(bank_dir, answers_dir, show_cues: bool) -> None:
    """Load and validate the bank, print its cue measurements, and fail on what must be fixed."""
    from ddpfsdp.quiz.cues import check as text_check
    from ddpfsdp.quiz.cues import cue_stats
    from ddpfsdp.quiz.cues.report import render_report
    from ddpfsdp.quiz.loader import BankError, load_bank

    try:
        bank = load_bank(bank_dir, answers_dir)
    except BankError as error:
        raise click.ClickException(f"the question bank has a problem: {error}") from None
    kinds: dict[str, int] = {}
    for question in bank.questions.values():
        kinds[question.kind] = kinds.get(question.kind, 0) + 1
    shown = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    length = cue_stats(bank)
    text = text_check.text_cues(bank)
    click.echo(length.summary())
    click.echo(text_check.render_table(text))
    if show_cues:
        click.echo(render_report(text, list(bank.topics)))
    problems = length.problems + text.cut_off_problems + text.limit_problems
    if problems:
        raise click.ClickException("the question bank leaks a test-taking cue:\n  - " + "\n  - ".join(problems))
    click.echo(textwrap.fill(f"The question bank is sound: {len(bank.questions)} questions in {len(bank.topics)} topics ({shown}).", 80))


def _check_topic(bank, topic: str | None) -> None:
    if topic is not None and topic not in bank.topics:
        raise click.BadParameter(f"no topic {topic!r}; choose one of {', '.join(bank.topics)}", param_hint="'--topic'")
