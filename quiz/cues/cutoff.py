"""Choices cut off mid-sentence: text that stops where a sentence cannot.

A choice (or an order question's step) is cut off when it ends in a comma, colon, semicolon, dash
or an open bracket; when its last word is an article, a possessive, a conjunction or a preposition
that is never left stranded at the end (of, per, via, during); or when it ends in a preposition and
a determiner with nothing after them ("in one", "of the", "to each"). Prepositions that English
strands ("the device it was saved from", "nothing to load into") are left alone, and so are the
idioms that end this way ("one by one", "more than one", "five to one").
"""

from __future__ import annotations

import re

_ARTICLES = {"a", "an", "the"}
_POSSESSIVES = {"its", "their", "his", "her", "our", "your", "my", "whose"}
_CONJUNCTIONS = {"and", "or", "but", "nor", "because", "although", "whereas", "while", "unless", "if", "than"}
_NEVER_STRANDED = {"of", "per", "via", "during", "versus", "vs"}
_PREPOSITIONS = _NEVER_STRANDED | {
    "in", "on", "at", "to", "by", "as", "for", "with", "from", "into", "onto", "across", "after", "before",
    "over", "under", "through", "within", "without", "between", "among",
}
# "all" and "both" stand alone as pronouns ("for all", "of both"), so they are not among these.
_DETERMINERS = {"one", "each", "every", "this", "these", "those", "some", "any", "either"}
_IDIOMS = {("by", "one"), ("than", "one"), ("than", "any"), ("as", "one")}
_NUMBER_WORDS = {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred", "thousand"}
_DANGLING_MARK = re.compile(r"[,:;(\[{\-–—/]\s*$")
_WORD = re.compile(r"[A-Za-z0-9']+")


def cut_off(text: str) -> str | None:
    """Why `text` looks cut off mid-sentence (the words it ends on), or None when it ends cleanly."""
    stripped = text.strip()
    if _DANGLING_MARK.search(stripped):
        return f"it ends in {stripped[-1]!r}"
    tail = _WORD.findall(stripped.rstrip(".!?")[-60:].lower())
    if not tail or stripped.endswith((")", "]", "`", '"')):
        return None
    last = tail[-1]
    if last in _ARTICLES | _POSSESSIVES | _CONJUNCTIONS | _NEVER_STRANDED:
        return f"it ends on {last!r}"
    if len(tail) >= 2 and tail[-2] in _PREPOSITIONS and last in _DETERMINERS and (tail[-2], last) not in _IDIOMS:
        # "five to one" is a ratio, not a sentence cut short.
        if len(tail) >= 3 and (tail[-3].isdigit() or tail[-3] in _NUMBER_WORDS):
            return None
        return f"it ends on {tail[-2] + ' ' + last!r}"
    return None


def cut_off_choices(bank) -> list[tuple[str, str, str]]:
    """(question id, text, why) for every choice or order step of the bank that stops mid-sentence."""
    found = []
    for question in bank.questions.values():
        for choice in (*question.choices, *question.steps):
            reason = cut_off(choice)
            if reason is not None:
                found.append((question.id, choice, reason))
    return found
