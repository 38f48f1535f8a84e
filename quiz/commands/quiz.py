"""`ddpfsdp quiz`: the terminal app, its plain line-by-line mode, and the bank check."""

from __future__ import annotations

import textwrap
from pathlib import Path

import click


class LevelOption(click.ParamType):
    """`--level 3` or `--level 2-3`: a range of question levels."""

    name = "level"

    def convert(self, value, param, ctx):
        from ddpfsdp.quiz.levels import LevelError, LevelRange, parse_levels

        if isinstance(value, LevelRange):
            return value
        try:
            return parse_levels(value)
        except LevelError as error:
            self.fail(str(error), param, ctx)


@click.command()
@click.argument("more_words", nargs=-1, metavar="")
@click.option("--topic", metavar="TOPIC", help="Go straight to one topic (e.g. fsdp-wrap).")
@click.option("--review", is_flag=True, help="Only the questions that are due for review.")
@click.option("--level", "levels", type=LevelOption(), metavar="N|A-B",
              help="Only questions of level N, or levels A to B: 1 fundamentals, 2 working knowledge, 3 in depth, "
                   "4 staff-level trade-offs (e.g. --level 3, --level 2-3).")
@click.option("--mock", is_flag=True, help="Start a timed mock interview: a mixed set, explain questions included.")
@click.option("--plain", is_flag=True, help="Line by line on plain stdin/stdout, for small terminals and screen readers.")
@click.option("--search", metavar="WORDS",
              help="List the questions whose prompt, choices, reasons or model answer match WORDS, best first.")
@click.option("--bookmarked", is_flag=True, help="Study only the questions you bookmarked (b on a question).")
@click.option("--bookmark", "to_mark", metavar="ID", multiple=True, help="Bookmark the question ID; repeat for several.")
@click.option("--unbookmark", "to_unmark", metavar="ID", multiple=True, help="Remove the bookmark of question ID.")
@click.option("--check", is_flag=True, help="Validate the question bank and exit (0 when it is sound).")
@click.option("--cues", is_flag=True, help="With --check: list, per question, the text cues that give its key away.")
@click.option("--bank", "bank_dir", type=click.Path(path_type=Path, file_okay=False), hidden=True)
@click.option("--answers", "answers_dir", type=click.Path(path_type=Path, file_okay=False), hidden=True)
@click.option("--seed", type=int, hidden=True, help="Fix the shuffling of choices (for reproducible runs).")
def quiz(more_words, topic, review, levels, mock, plain, search, bookmarked, to_mark, to_unmark, check, cues, bank_dir,
         answers_dir, seed) -> None:
    """Practise DDP and FSDP interview questions, with evidence from real runs.

    \b
    Examples:
      ddpfsdp quiz                    topics, mastery and what is due
      ddpfsdp quiz --topic fsdp-wrap  straight into one topic
      ddpfsdp quiz --review           only what is due
      ddpfsdp quiz --level 3-4        only in-depth and staff-level questions
      ddpfsdp quiz --plain            line by line, no full-screen app
      ddpfsdp quiz --search bucket cap   find questions by any words in them
      ddpfsdp quiz --bookmark ddp-bucket-rebuild   bookmark a question
      ddpfsdp quiz --bookmarked       study the questions you bookmarked
      ddpfsdp quiz --check            validate the question bank
      ddpfsdp quiz --check --cues     and list the questions a guesser can answer
    """
    from ddpfsdp.quiz.loader import BankError, load_bank

    if more_words and search is None:
        raise click.UsageError(f"unexpected words {' '.join(more_words)!r}; to find questions by words, use "
                               f"--search {' '.join(more_words)}")
    if sum((review, mock, topic is not None, bookmarked)) > 1:
        raise click.UsageError("choose one of --topic, --review, --mock and --bookmarked")
    if cues and not check:
        raise click.UsageError("--cues lists each question's text cues; use it with --check")
    if search is not None or to_mark or to_unmark:
        if review or mock or topic is not None or bookmarked or check or plain or levels is not None:
            raise click.UsageError("--search, --bookmark and --unbookmark print and exit; use them without "
                                   "--topic, --level, --review, --mock, --bookmarked, --check or --plain")
        bank = _cached_bank(bank_dir, answers_dir)
        if to_mark or to_unmark:
            _mark(bank, to_mark, to_unmark)
        if search is not None:
            _search(bank, " ".join((search, *more_words)))
        return
    if check:
        if levels is not None:
            raise click.UsageError("--check validates the whole bank; leave out --level")
        _check_bank(bank_dir, answers_dir, cues)
        return

    from ddpfsdp.quiz.plain_console import plain_without_terminal

    plain = plain or plain_without_terminal("quiz")
    if plain:
        from ddpfsdp.quiz.plain import run_plain

        try:
            bank = load_bank(bank_dir, answers_dir)
        except BankError as error:
            raise click.ClickException(f"the question bank has a problem: {error}") from None
        _check_topic(bank, topic, levels)
        raise SystemExit(run_plain(bank, topic=topic, review=review, mock=mock, seed=seed, bookmarked=bookmarked,
                                   levels=levels))

    from ddpfsdp.quiz.app import make_app

    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, topic=topic, review=review, mock=mock, seed=seed,
                   bookmarked=bookmarked, levels=levels)
    if app.bank is not None:
        _check_topic(app.bank, topic, levels)
    try:
        app.run()
    finally:
        # Belt and braces: every demo started from the app is stopped before the command returns.
        app.stop_all_runs()


def _cached_bank(bank_dir, answers_dir):
    from ddpfsdp.quiz.bank_cache import load_bank_cached
    from ddpfsdp.quiz.loader import BankError

    try:
        return load_bank_cached(bank_dir, answers_dir)
    except BankError as error:
        raise click.ClickException(f"the question bank has a problem: {error}") from None


def _open_store():
    from ddpfsdp.quiz.store import Store, StoreError

    try:
        store = Store.open()
    except StoreError as error:
        raise click.ClickException(str(error)) from None
    if store.warning:
        click.echo(f"warning: {store.warning}")
    return store


def _mark(bank, to_mark: tuple[str, ...], to_unmark: tuple[str, ...]) -> None:
    """Add and remove bookmarks; an unknown id is refused before anything is written."""
    import difflib

    from ddpfsdp.quiz.store import utc_now

    for qid in (*to_mark, *to_unmark):
        if qid not in bank.questions:
            close = difflib.get_close_matches(qid, list(bank.questions), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; find its id with: ddpfsdp quiz --search WORDS"
            raise click.BadParameter(f"no question {qid!r}{hint}", param_hint="'--bookmark'" if qid in to_mark
                                     else "'--unbookmark'")
    with _open_store() as store:
        for qid in to_mark:
            added = store.add_bookmark(qid, utc_now())
            click.echo(f"Bookmarked {qid}." if added else f"{qid} was already bookmarked.")
        for qid in to_unmark:
            removed = store.remove_bookmark(qid)
            click.echo(f"Removed the bookmark of {qid}." if removed else f"{qid} was not bookmarked.")
        count = len(store.bookmarks())
    click.echo(f"{count} question{'s' if count != 1 else ''} bookmarked; study them with: ddpfsdp quiz --bookmarked")


def _search(bank, query: str) -> None:
    """The questions that match `query`, best first, at most 80 columns wide."""
    from ddpfsdp.quiz.plain_console import plain_console
    from ddpfsdp.quiz.search import SearchError, index_for
    from ddpfsdp.quiz.search_view import render_hits

    try:
        hits = index_for(bank).search(query, limit=10)
    except SearchError as error:
        raise click.BadParameter(str(error), param_hint="'--search'") from None
    console = plain_console()
    console.width = min(console.width, 80)
    console.print(render_hits(bank, query, hits))


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


def _check_topic(bank, topic: str | None, levels=None) -> None:
    if topic is not None and topic not in bank.topics:
        raise click.BadParameter(f"no topic {topic!r}; choose one of {', '.join(bank.topics)}", param_hint="'--topic'")
    if levels is not None:
        asked = bank.in_topic(topic) if topic is not None else list(bank.questions.values())
        if not levels.keep(asked):
            where = f"topic {topic!r}" if topic is not None else "the bank"
            have = sorted({q.level for q in asked})
            raise click.BadParameter(f"{where} has no question at {levels.label()}; its levels are "
                                     f"{', '.join(map(str, have))}", param_hint="'--level'")

