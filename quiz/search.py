"""Search every question: its prompt, choices, reasons, steps, talking points and model answer.

rapidfuzz does the fuzzy matching: each word of the query is matched against the bank's vocabulary
(`process.extract` with `fuzz.ratio`, so "bucketting" still finds "bucketing", and a word's start finds
its longer forms), and the best-matching field of a candidate is compared with the whole query
(`fuzz.partial_ratio`) so a phrase found as written ranks first. What rapidfuzz cannot know is how
telling a word is: a rare word ("FlatParameter") says more than a common one ("the"), so each word's
matches are weighed by the share of questions that do not use it (inverse document frequency), and a
question that matches more of the query's words ranks higher.

The index is built once per bank (a few hundred milliseconds) and each query then takes a few
milliseconds (`tests/benchmarks/bench_search.py`). No torch or textual here: `ddpfsdp quiz --search`
and the app's search screen both use it.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ddpfsdp.quiz.loader import Bank, Question

# How much a match in each kind of field counts: the prompt names what a question is about; its
# choices, steps and points next; the reasons and the model answer also mention what it is not about.
FIELD_WEIGHTS: dict[str, float] = {
    "id": 1.0, "prompt": 1.0, "choice": 0.8, "step": 0.8, "point": 0.8, "why": 0.7, "answer": 0.6,
}
FIELD_NAMES: dict[str, str] = {
    "id": "id", "prompt": "prompt", "choice": "choice", "step": "step", "point": "talking point",
    "why": "reason", "answer": "model answer",
}
PREFIX_SIMILARITY = 0.9  # a query word that starts a longer word ("shard" in "sharding")
PHRASE_WEIGHT = 0.5  # how much a field that contains the query as written adds, at most
SNIPPET_CHARS = 72

_WORD = re.compile(r"[a-z0-9]+")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# Code spans, bold and headings; an identifier's underscores stay (`drop_last` is searched as two words).
_MARKUP = re.compile(r"`+|\*\*|^\s*(?:#+|>|[-*]|\d+\.)\s", re.M)
_SPACE = re.compile(r"\s+")


class SearchError(ValueError):
    """A query that cannot be searched; the message says what to type instead."""


@dataclass(frozen=True)
class Field:
    question_id: str
    kind: str  # a key of FIELD_WEIGHTS
    number: int  # the choice's, reason's, step's or point's place, from 1; 0 for the others
    text: str  # plain text, one line

    @property
    def name(self) -> str:
        shown = FIELD_NAMES[self.kind]
        return f"{shown} {self.number}" if self.number else shown


@dataclass(frozen=True)
class Hit:
    question_id: str
    score: float
    field: str  # where it matched best: "prompt", "choice 2", "reason 3", "model answer", ...
    snippet: str  # that field's text around the match, one line
    marks: tuple[tuple[int, int], ...]  # (start, end) of each matched word in the snippet
    matched: tuple[str, ...]  # the query's words that matched somewhere in the question

    def to_dict(self) -> dict:
        return {"id": self.question_id, "score": round(self.score, 4), "field": self.field,
                "snippet": self.snippet, "matched": list(self.matched)}


def plain_text(markdown: str) -> str:
    """Markdown as one line of words: links as their text, no markup characters."""
    return _SPACE.sub(" ", _MARKUP.sub("", _LINK.sub(r"\1", markdown))).strip()


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def question_fields(question: Question, answer_text: str) -> list[Field]:
    """Everything a person could remember a question by, as searchable fields."""
    qid = question.id
    fields = [Field(qid, "id", 0, qid.replace("-", " ")), Field(qid, "prompt", 0, plain_text(question.prompt))]
    items = {"choice": question.choices, "step": question.steps, "point": question.talking_points,
             "why": question.why}
    for kind, texts in items.items():
        fields.extend(Field(qid, kind, number, plain_text(text)) for number, text in enumerate(texts, start=1))
    if answer_text:
        fields.append(Field(qid, "answer", 0, plain_text(answer_text)))
    return fields


class SearchIndex:
    """The bank's fields, its vocabulary, and for each word the fields that use it."""

    def __init__(self, fields: list[Field]):
        import numpy as np

        self.fields = fields
        self.question_ids: list[str] = list(dict.fromkeys(f.question_id for f in fields))
        if [f.question_id for f in fields] != sorted((f.question_id for f in fields), key=self.question_ids.index):
            raise ValueError("a question's fields must be next to each other")
        # Where each question's fields start: the per-question maxima below reduce over these runs.
        self._starts = np.array([i for i, f in enumerate(fields) if i == 0 or fields[i - 1].question_id != f.question_id],
                                dtype=np.int64)
        self._weights = np.array([FIELD_WEIGHTS[f.kind] for f in fields])
        self._field_words: list[frozenset[str]] = [frozenset(words(f.text)) for f in fields]
        postings: dict[str, list[int]] = {}
        for index, found in enumerate(self._field_words):
            for word in found:
                postings.setdefault(word, []).append(index)
        self.vocabulary: list[str] = sorted(postings)
        self._postings = [np.array(postings[word], dtype=np.int64) for word in self.vocabulary]
        question_of = np.repeat(np.arange(len(self._starts)), np.diff(np.append(self._starts, len(fields))))
        total = len(self.question_ids)
        # How telling a word is: rare across questions counts more (a smoothed inverse document frequency).
        self._idf = [math.log(1 + total / len(set(question_of[self._postings[i]].tolist())))
                     for i in range(len(self.vocabulary))]
        self._word_number = {word: i for i, word in enumerate(self.vocabulary)}

    @classmethod
    def build(cls, bank: Bank) -> SearchIndex:
        fields: list[Field] = []
        for question in bank.questions.values():
            try:
                answer = question.model_answer()
            except OSError:  # a model answer deleted since the bank loaded: the rest is still searchable
                answer = ""
            fields.extend(question_fields(question, answer))
        return cls(fields)

    # --- matching words ----------------------------------------------------------------------------

    def _similar_words(self, term: str) -> dict[int, float]:
        """Vocabulary words like `term`, with a similarity in (0, 1]: exact, fuzzy, or `term` + more."""
        from rapidfuzz import fuzz, process

        found: dict[int, float] = {}
        exact = self._word_number.get(term)
        if exact is not None:
            found[exact] = 1.0
        if len(term) >= 4:
            # Short words are matched as typed: "tp" is not "dp", nor "mb" "gb".
            cutoff = 85 if len(term) <= 5 else 80
            for _, score, number in process.extract(term, self.vocabulary, scorer=fuzz.ratio, score_cutoff=cutoff,
                                                     limit=None):
                found[number] = max(found.get(number, 0.0), score / 100)
        if len(term) >= 3:
            number = bisect.bisect_left(self.vocabulary, term)
            while number < len(self.vocabulary) and self.vocabulary[number].startswith(term):
                found[number] = max(found.get(number, 0.0), PREFIX_SIMILARITY)
                number += 1
        return found

    # --- searching ---------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 20) -> list[Hit]:
        """The questions that match `query`, best first; SearchError when it has no words to look for.

        Each word of the query scores, in each field, its best match's similarity times how telling
        the matched word is. A field scores the sum over the query's words, times its kind's weight,
        times the square of the share of the query's words it matched; a question scores half its best
        field and half the same sum over all its fields together, so the words found side by side in
        one field count most, and the words found anywhere in the question still count.
        """
        import numpy as np
        from rapidfuzz import fuzz

        terms = list(dict.fromkeys(words(query)))
        if not terms:
            raise SearchError("type at least one word to search for (letters or digits), e.g. bucket cap")
        if limit < 1:
            return []
        per_term = np.zeros((len(terms), len(self.fields)))
        matched: set[str] = set()
        for row, term in enumerate(terms):
            scores = per_term[row]
            for number, similarity in self._similar_words(term).items():
                where = self._postings[number]
                scores[where] = np.maximum(scores[where], similarity * self._idf[number])
                matched.add(self.vocabulary[number])
        found = per_term > 0
        share = found.sum(axis=0) / len(terms)
        field_score = per_term.sum(axis=0) * self._weights * share**2
        weighted = per_term * self._weights
        question_best = np.maximum.reduceat(weighted, self._starts, axis=1)
        question_share = (question_best > 0).sum(axis=0) / len(terms)
        score = (0.5 * np.maximum.reduceat(field_score, self._starts)
                 + 0.5 * question_best.sum(axis=0) * question_share**2)
        candidates = [int(q) for q in np.argsort(-score, kind="stable")[: max(limit, 50)] if score[q] > 0]
        phrase = " ".join(terms)
        hits = []
        for q in candidates:
            start, end = self._span(q)
            # The id is shown with every result: where else it matched says more, when it did.
            shown = field_score[start:end].copy()
            if shown[1:].max() > 0:
                shown[0] = 0
            field_index = start + int(np.argmax(shown))
            closeness = fuzz.partial_ratio(phrase, self.fields[field_index].text.lower()) / 100 if len(terms) > 1 else 0
            # A field that holds the query as it was typed (a phrase remembered) ranks above the same words apart.
            hits.append((float(score[q]) * (1 + PHRASE_WEIGHT * closeness**4), q, field_index))
        hits.sort(key=lambda hit: (-hit[0], hit[1]))
        shown = []
        for value, q, field_index in hits[:limit]:
            field = self.fields[field_index]
            snippet, marks = _snippet(field.text, self._field_words[field_index] & matched)
            start, end = self._span(q)
            hit_terms = tuple(term for row, term in enumerate(terms) if found[row, start:end].any())
            shown.append(Hit(self.question_ids[q], value, field.name, snippet, marks, hit_terms))
        return shown

    def _span(self, q: int) -> tuple[int, int]:
        """The first field of question number `q`, and one past its last."""
        end = int(self._starts[q + 1]) if q + 1 < len(self._starts) else len(self.fields)
        return int(self._starts[q]), end


def _snippet(text: str, matched: Iterable[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """About SNIPPET_CHARS of `text` around its first matched word, cut at spaces, and where each
    matched word lies in it."""
    matched = set(matched)
    spans = [(m.start(), m.end()) for m in _WORD.finditer(text.lower()) if m.group() in matched]
    start = 0
    if spans and spans[0][0] > SNIPPET_CHARS // 3:
        start = text.rfind(" ", 0, spans[0][0] - SNIPPET_CHARS // 4) + 1
    end = len(text)
    if end - start > SNIPPET_CHARS:
        end = text.rfind(" ", start, start + SNIPPET_CHARS)
        if end <= start:
            end = start + SNIPPET_CHARS
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    snippet = prefix + text[start:end].strip() + suffix
    offset = len(prefix) - start - (len(text[start:end]) - len(text[start:end].lstrip()))
    marks = tuple((a + offset, b + offset) for a, b in spans if a >= start and b <= end)
    return snippet, marks


_INDEXES: dict[int, tuple[Bank, SearchIndex]] = {}


def index_for(bank: Bank) -> SearchIndex:
    """The bank's index, built on first use and kept for the life of the process."""
    kept = _INDEXES.get(id(bank))
    if kept is None or kept[0] is not bank:
        kept = _INDEXES[id(bank)] = (bank, SearchIndex.build(bank))
    return kept[1]
