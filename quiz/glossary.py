"""The glossary (quiz/glossary.toml): each term's definition, and the questions that use it, found by
scanning the bank's text, never listed by hand.

`ddpfsdp glossary [TERM]` prints it; the app's glossary screen shows it, and a model answer links its
terms to it. No torch or textual here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ddpfsdp.quiz.loader import Bank
from ddpfsdp.quiz.search import question_fields

GLOSSARY_FILE = Path(__file__).resolve().parent / "glossary.toml"
LINK_SCHEME = "glossary:"  # a model answer's links to a term: [bucket](glossary:bucket)


class GlossaryError(Exception):
    """The glossary file has a mistake, or a term is not in it; the message says which."""


@dataclass(frozen=True)
class Term:
    name: str
    patterns: tuple[re.Pattern[str], ...]
    definition: str
    see: tuple[str, ...] = ()

    def found_in(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self.patterns)

    def first_match(self, text: str) -> re.Match[str] | None:
        found = [m for m in (pattern.search(text) for pattern in self.patterns) if m]
        return min(found, key=lambda m: m.start()) if found else None


def load(path: Path = GLOSSARY_FILE) -> dict[str, Term]:
    """The terms by name, in the file's order; GlossaryError names the term and field at fault."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise GlossaryError(f"{path} cannot be read: {error}") from None
    terms: dict[str, Term] = {}
    for number, entry in enumerate(raw.get("term", []), start=1):
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise GlossaryError(f"{path}: term #{number} has no name")
        matches, definition = entry.get("match"), entry.get("definition")
        if not isinstance(matches, list) or not matches or not all(isinstance(m, str) for m in matches):
            raise GlossaryError(f"{path}: term {name!r} needs match, a list of regular expressions")
        if not isinstance(definition, str) or not definition.strip():
            raise GlossaryError(f"{path}: term {name!r} has no definition")
        flags = 0 if entry.get("case", False) else re.IGNORECASE
        try:
            patterns = tuple(re.compile(m, flags) for m in matches)
        except re.error as error:
            raise GlossaryError(f"{path}: term {name!r} has a bad match pattern: {error}") from None
        if name in terms:
            raise GlossaryError(f"{path}: term {name!r} is defined twice")
        terms[name] = Term(name, patterns, " ".join(definition.split()), tuple(entry.get("see", ())))
    for term in terms.values():
        for other in term.see:
            if other not in terms:
                raise GlossaryError(f"{path}: term {term.name!r} sees {other!r}, which the glossary does not define")
    return terms


@functools.cache
def terms() -> dict[str, Term]:
    """The glossary file's terms, read once per process."""
    return load()


def question_text(question, answer: str) -> str:
    return "\n".join(field.text for field in question_fields(question, answer))


_TEXTS: dict[int, tuple[Bank, dict[str, str]]] = {}


def texts(bank: Bank) -> dict[str, str]:
    """Each question's searchable text (prompt, choices, reasons, steps, points, model answer), read once per
    bank and kept for the life of the process."""
    kept = _TEXTS.get(id(bank))
    if kept is None or kept[0] is not bank:
        read = {}
        for question in bank.questions.values():
            try:
                answer = question.model_answer()
            except OSError:
                answer = ""
            read[question.id] = question_text(question, answer)
        kept = _TEXTS[id(bank)] = (bank, read)
    return kept[1]


def uses(bank: Bank, terms: dict[str, Term] | None = None, names: list[str] | None = None) -> dict[str, list[str]]:
    """For each term (or each of `names`), the ids of the questions whose text uses it, in bank order."""
    terms = terms or load()
    read = texts(bank)
    return {name: [qid for qid, text in read.items() if terms[name].found_in(text)] for name in (names or terms)}


def lookup(terms: dict[str, Term], asked: str) -> Term:
    """A term by its name or by any text its patterns match ("all_reduce", "HSDP", "1f1b"); GlossaryError
    with the closest names otherwise."""
    import difflib

    folded = {name.lower(): term for name, term in terms.items()}
    if asked.strip().lower() in folded:
        return folded[asked.strip().lower()]
    # A spelling the questions use, or a longer form of one ("resharding"): the longest match that starts it.
    starts = [(len(match.group(0)), term) for term in terms.values()
              if (match := term.first_match(asked.strip())) and match.start() == 0]
    if starts:
        return max(starts, key=lambda found: found[0])[1]
    close = difflib.get_close_matches(asked.lower(), list(folded), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(folded[c].name for c in close)}?" if close else "."
    raise GlossaryError(f"no glossary term {asked!r}{hint} See them all with: ddpfsdp glossary")


def terms_in(text: str, terms: dict[str, Term] | None = None) -> list[str]:
    """The names of the terms `text` uses, in the order they first appear."""
    terms = terms or load()
    found = [(match.start(), name) for name, term in terms.items() if (match := term.first_match(text))]
    return [name for _, name in sorted(found)]


_CODE = re.compile(r"```.*?```|`[^`\n]*`|\[[^\]]*\]\([^)]*\)", re.S)


def link_terms(markdown: str, terms: dict[str, Term] | None = None) -> str:
    """`markdown` with each term's first use outside code and links made a link to its definition."""
    terms = terms or load()
    # Code and existing links are cut out first, so nothing inside them is ever rewritten.
    pieces = _CODE.split(markdown)
    kept = _CODE.findall(markdown)
    linked: set[str] = set()
    out = []
    for index, piece in enumerate(pieces):
        spans = []
        for name, term in terms.items():
            if name in linked:
                continue
            match = term.first_match(piece)
            if match is None:
                continue
            end = match.end()
            while end < len(piece) and piece[end].isalnum():  # the whole word: "all-reduces", not "all-reduce"s
                end += 1
            if not any(a < end and match.start() < b for a, b, _ in spans):
                spans.append((match.start(), end, name))
                linked.add(name)
        for start, end, name in sorted(spans, reverse=True):
            piece = f"{piece[:start]}[{piece[start:end]}]({LINK_SCHEME}{name.replace(' ', '%20')}){piece[end:]}"
        out.append(piece)
        if index < len(kept):
            out.append(kept[index])
    return "".join(out)


def term_of_link(href: str) -> str | None:
    """The term a `glossary:` link names, or None for any other link."""
    if not href.startswith(LINK_SCHEME):
        return None
    return href.removeprefix(LINK_SCHEME).replace("%20", " ")
