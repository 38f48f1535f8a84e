"""The bank as an Anki deck (`ddpfsdp export anki FILE.apkg`), written with genanki.

Every id is derived from a fixed name, never drawn at random: the note type's id, each topic's deck
id (a subdeck "ddpfsdp::<topic title>") and each note's guid (from its question id). Anki matches an
imported note to the one it has by guid, so importing a newer export updates the cards already studied
(their review history kept) instead of adding copies.
"""

from __future__ import annotations

import hashlib
import html
import os
import tempfile
from pathlib import Path

from ddpfsdp.quiz.cards import Card, cards
from ddpfsdp.quiz.loader import Bank
from ddpfsdp.quiz.portable import usual_mode

MODEL_NAME = "ddpfsdp question"
DECK_ROOT = "ddpfsdp"
FIELDS = ("Id", "Topic", "Level", "Prompt", "Choices", "Key", "Reasons", "Answer")

FRONT = """<div class="meta">{{Topic}} · level {{Level}}</div>
<div class="prompt">{{Prompt}}</div>
{{Choices}}"""
BACK = """{{FrontSide}}
<hr id="answer">
<div class="key">{{Key}}</div>
{{Reasons}}
<div class="answer">{{Answer}}</div>
<div class="meta">{{Id}}</div>"""
CSS = """.card { font-family: sans-serif; font-size: 18px; text-align: left; }
.meta { color: #888; font-size: 14px; }
.key { font-weight: bold; margin: 0.5em 0; }
.reasons li { margin-bottom: 0.3em; }
code, pre { font-size: 15px; }"""


def stable_id(name: str) -> int:
    """An id from `name`, the same on every run, in the range Anki's own ids use (1<<30 to 1<<31)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return (1 << 30) + digest % (1 << 30)


MODEL_ID = stable_id("ddpfsdp.anki.model/1")


def deck_id(topic: str) -> int:
    return stable_id(f"ddpfsdp.anki.deck/{topic}")


def note_guid(question_id: str) -> str:
    import genanki

    return genanki.guid_for("ddpfsdp", question_id)


def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(text)


def _items(items: tuple[str, ...], ordered: bool = False, css: str = "") -> str:
    if not items:
        return ""
    tag = "ol" if ordered else "ul"
    attribute = f' class="{css}"' if css else ""
    return f"<{tag}{attribute}>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + f"</{tag}>"


def note_fields(card: Card) -> list[str]:
    key = _items(card.key, ordered=card.kind == "order") if len(card.key) > 1 else html.escape(card.key[0])
    return [card.id, html.escape(card.topic_title), str(card.level), _markdown(card.prompt),
            _items(card.choices, ordered=True), key, _items(card.reasons, css="reasons"), _markdown(card.model_answer)]


def package(bank: Bank):
    """A genanki Package: one subdeck per topic, one note per question."""
    import genanki

    model = genanki.Model(MODEL_ID, MODEL_NAME, fields=[{"name": name} for name in FIELDS],
                          templates=[{"name": "Question", "qfmt": FRONT, "afmt": BACK}], css=CSS)
    decks = {topic.id: genanki.Deck(deck_id(topic.id), f"{DECK_ROOT}::{topic.title}", description=topic.description)
             for topic in bank.topics.values()}
    for card in cards(bank):
        decks[card.topic].add_note(genanki.Note(model=model, fields=note_fields(card), guid=note_guid(card.id),
                                                tags=["ddpfsdp", *card.tags]))
    return genanki.Package(list(decks.values()))


def write_apkg(bank: Bank, path: Path) -> int:
    """Write the deck to `path` whole or not at all; the number of notes."""
    deck = package(bank)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    os.close(handle)
    try:
        deck.write_to_file(partial)
        os.chmod(partial, usual_mode())
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return sum(len(d.notes) for d in deck.decks)
