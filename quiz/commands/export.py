"""`ddpfsdp export anki|csv FILE`: the question bank as flashcards for Anki, or as a CSV table."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def export() -> None:
    """Export the question bank as flashcards: question, choices, key, reasons and model answer, tagged by
    topic and level.

    Each card keeps its question's id, so exporting again and importing the new file updates the cards
    you have (and their review history) rather than adding copies.

    \b
    Examples:
      ddpfsdp export anki ddpfsdp.apkg    a deck per topic, for Anki (File > Import)
      ddpfsdp export csv cards.csv        one row per question, for a spreadsheet or another tool
    """


def _bank():
    from ddpfsdp.quiz.bank_cache import load_bank_cached
    from ddpfsdp.quiz.loader import BankError

    try:
        return load_bank_cached()
    except BankError as error:
        raise click.ClickException(f"the question bank has a problem: {error}") from None


def _check_target(path: Path, ours, example: str) -> bool:
    """Whether `path` can be written (an earlier export of ours may be replaced); whether it existed."""
    from ddpfsdp.quiz.portable import PortableError, check_writable

    try:
        check_writable(path, overwrite=True, example=example)
    except PortableError as error:
        raise click.ClickException(f"{error}; nothing was written") from None
    if path.exists() and not ours(path):
        raise click.ClickException(f"{path} exists and is not a file this command wrote; choose another name, or "
                                   "move that file first. Nothing was written")
    return path.exists()


def _is_apkg(path: Path) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return "collection.anki2" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def _is_our_csv(path: Path) -> bool:
    from ddpfsdp.quiz.cards import CSV_COLUMNS

    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.readline().rstrip("\r\n") == ",".join(CSV_COLUMNS)
    except (OSError, UnicodeDecodeError):
        return False


@export.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True))
def anki(file: Path) -> None:
    """Write the bank to FILE (.apkg) as an Anki deck: one subdeck per topic, one note per question."""
    replaced = _check_target(file, _is_apkg, "ddpfsdp.apkg")
    if file.suffix.lower() != ".apkg":
        raise click.BadParameter(f"{file.name!r}: Anki imports decks from .apkg files; name it "
                                 f"{file.with_suffix('.apkg').name}", param_hint="FILE")
    from ddpfsdp.quiz.anki import write_apkg

    bank = _bank()
    try:
        notes = write_apkg(bank, file)
    except OSError as error:
        raise click.ClickException(f"cannot write {file} ({error.strerror or error}); nothing was written") from None
    click.echo(f"{'Replaced' if replaced else 'Wrote'} {file}: {notes} notes in {len(bank.topics)} decks under ddpfsdp::.")
    click.echo("In Anki: File > Import. Importing a newer export updates these notes.")


@export.command("csv")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True))
def csv_(file: Path) -> None:
    """Write the bank to FILE as CSV: one row per question, lists one item a line inside a cell."""
    from ddpfsdp.quiz.cards import cards, csv_text
    from ddpfsdp.quiz.portable import PortableError, write_file

    replaced = _check_target(file, _is_our_csv, "cards.csv")
    rows = cards(_bank())
    try:
        write_file(file, csv_text(rows).encode("utf-8"), overwrite=True, example="cards.csv")
    except PortableError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{'Replaced' if replaced else 'Wrote'} {file}: {len(rows)} questions, one a row, keyed by id.")
