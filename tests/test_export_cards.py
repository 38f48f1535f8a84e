"""`ddpfsdp export anki|csv`: the bank as cards, with ids that stay the same from one export to the next."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import zipfile

import pytest
from conftest import run_cli

from ddpfsdp.quiz import anki
from ddpfsdp.quiz.bank_cache import load_bank_cached
from ddpfsdp.quiz.cards import CSV_COLUMNS, cards


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    return load_bank_cached(cache_dir=tmp_path_factory.mktemp("bank-cache"))


def _notes(path, folder) -> tuple[list[tuple[str, str, list[str]]], set[str]]:
    """(guid, tags, fields) of each note of an .apkg, and its deck names, read from its SQLite collection."""
    with zipfile.ZipFile(path) as archive:
        archive.extract("collection.anki2", folder)
    db = sqlite3.connect(folder / "collection.anki2")
    notes = [(guid, tags, fields.split("\x1f")) for guid, tags, fields in
             db.execute("SELECT guid, tags, flds FROM notes ORDER BY id")]
    decks = {deck["name"] for deck in json.loads(db.execute("SELECT decks FROM col").fetchone()[0]).values()}
    models = json.loads(db.execute("SELECT models FROM col").fetchone()[0])
    db.close()
    assert [int(model_id) for model_id in models] == [anki.MODEL_ID]
    return notes, decks


def test_the_anki_deck_has_a_note_per_question_with_ids_that_do_not_change(bank, tmp_path):
    first, second = tmp_path / "one.apkg", tmp_path / "two.apkg"
    for path in (first, second):
        outcome = run_cli("export", "anki", str(path))
        assert outcome.exit_code == 0, outcome.stderr
    assert f"{len(bank.questions)} notes in {len(bank.topics)} decks" in outcome.stdout
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    notes, decks = _notes(first, tmp_path / "a")
    again, _ = _notes(second, tmp_path / "b")
    assert len(notes) == len(bank.questions)
    assert decks >= {f"ddpfsdp::{topic.title}" for topic in bank.topics.values()}
    by_id = {fields[0]: (guid, tags, fields) for guid, tags, fields in notes}
    assert set(by_id) == set(bank.questions)
    # The same question is the same note in every export: Anki updates it instead of adding a copy.
    assert {fields[0]: guid for guid, _, fields in again} == {qid: note[0] for qid, note in by_id.items()}
    assert by_id["ddp-bucket-rebuild"][0] == anki.note_guid("ddp-bucket-rebuild")
    guid, tags, fields = by_id["ddp-bucket-rebuild"]
    question = bank.questions["ddp-bucket-rebuild"]
    assert f"topic::{question.topic}" in tags.split() and f"level::{question.level}" in tags.split()
    assert dict(zip(anki.FIELDS, fields))["Level"] == str(question.level)
    assert "<li>" in dict(zip(anki.FIELDS, fields))["Reasons"]


def test_ids_are_derived_from_names_not_drawn():
    assert anki.stable_id("x") == anki.stable_id("x") != anki.stable_id("y")
    assert (1 << 30) <= anki.deck_id("ddp") < (1 << 31)
    assert anki.note_guid("ddp-grad-sync") == anki.note_guid("ddp-grad-sync") != anki.note_guid("ddp-gradient-average")


def test_the_csv_round_trips_through_the_csv_module(bank, tmp_path):
    path = tmp_path / "cards.csv"
    outcome = run_cli("export", "csv", str(path))
    assert outcome.exit_code == 0, outcome.stderr
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = [card.csv_row() for card in cards(bank)]
    assert rows == expected
    assert tuple(rows[0]) == CSV_COLUMNS
    order = next(row for row in rows if row["kind"] == "order")
    assert order["key"].split("\n") == list(bank.questions[order["id"]].steps)
    numeric = next(row for row in rows if row["kind"] == "numeric")
    assert numeric["key"] and numeric["model_answer"].strip() == bank.questions[numeric["id"]].model_answer().strip()
    single = next(row for row in rows if row["kind"] == "single")
    assert single["key"] == bank.questions[single["id"]].answer
    assert len(single["reasons"].split("\n")) == len(single["choices"].split("\n"))


def test_an_earlier_export_is_replaced_and_any_other_file_kept(tmp_path):
    path = tmp_path / "cards.csv"
    assert run_cli("export", "csv", str(path)).exit_code == 0
    replaced = run_cli("export", "csv", str(path))
    assert replaced.exit_code == 0 and replaced.stdout.startswith("Replaced")
    mine = tmp_path / "notes.csv"
    mine.write_text("my own notes\n")
    outcome = run_cli("export", "csv", str(mine))
    assert outcome.exit_code == 1 and "is not a file this command wrote" in outcome.stderr
    assert mine.read_text() == "my own notes\n"
    deck = tmp_path / "mine.apkg"
    deck.write_bytes(b"not a zip")
    assert run_cli("export", "anki", str(deck)).exit_code == 1 and deck.read_bytes() == b"not a zip"


@pytest.mark.parametrize("kind, name", [("anki", "d.apkg"), ("csv", "c.csv")])
def test_a_folder_that_does_not_exist_or_a_folder_given_as_the_file_is_a_clear_error(tmp_path, kind, name):
    for path, said in ((tmp_path / "missing" / name, "does not exist"), (tmp_path, "is a folder")):
        outcome = run_cli("export", kind, str(path))
        assert outcome.exception is None, repr(outcome.exception)
        assert outcome.exit_code == 1 and said in outcome.stderr and "nothing was written" in outcome.stderr
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_an_unwritable_folder_is_a_clear_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    outcome = run_cli("export", "anki", str(locked / "d.apkg"))
    assert outcome.exit_code == 1 and "cannot be written to" in outcome.stderr


def test_an_anki_file_must_end_in_apkg(tmp_path):
    outcome = run_cli("export", "anki", str(tmp_path / "deck.zip"))
    assert outcome.exit_code == 2 and "name it deck.apkg" in outcome.stderr


def test_the_csv_is_what_a_spreadsheet_reads(bank):
    from ddpfsdp.quiz.cards import csv_text

    text = csv_text(cards(bank)[:2])
    assert text.startswith(",".join(CSV_COLUMNS) + "\r\n")
    assert len(list(csv.reader(io.StringIO(text, newline="")))) == 3
