"""Text features of a question's choices: the surface a guesser who knows nothing can read.

Each feature maps one choice, seen beside its question's other choices and prompt, to a number.
Choices are shuffled when shown, so position carries nothing; only these texts do. The guessers
pick by one feature, the classifier weighs them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9_]+(?:['’][a-z]+)?")
# Words too common to mean anything when two choices share them.
_STOPWORDS = frozenset(
    [
        "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "and",
        "or", "but", "as", "is", "are", "be", "was", "were", "it", "its", "this", "that", "these",
        "those", "than", "then", "so", "if", "each", "per", "one",
    ]
)
_ABSOLUTES = frozenset(["always", "never", "only", "all", "every", "none", "entire", "entirely", "whole"])
_HEDGES = frozenset(["may", "might", "can", "could", "usually", "typically", "often", "sometimes", "generally", "mostly", "likely"])
_NEGATIONS = frozenset(["not", "no", "never", "without", "cannot", "nothing", "neither", "nor"])
_REASONS = frozenset(["because", "since", "so", "therefore", "thus", "hence", "which", "whose"])
# A token that reads like code: a call, an attribute path, snake_case or CamelCase inside a word.
_CODE_TOKEN = re.compile(r"`|_|\(|\)|\d|\w\.\w|[a-z][A-Z]|[A-Z]{2,}[a-z]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    return {word for word in words(text) if word not in _STOPWORDS}


@dataclass(frozen=True)
class Context:
    """A choice with what a guesser sees beside it: the question's other choices and its prompt."""

    choice: str
    others: Sequence[str]
    prompt: str


def _count_words(vocabulary: frozenset[str]) -> Callable[[Context], float]:
    def count(context: Context) -> float:
        return float(sum(word in vocabulary for word in words(context.choice)))

    return count


def _negations(context: Context) -> float:
    # "can't", "doesn't" and the like are negations too.
    return float(sum(word in _NEGATIONS or word.endswith(("n't", "n’t")) for word in words(context.choice)))


def _shared_words(context: Context) -> float:
    """How alike this choice is to the others: the mean share of content words two choices share (Jaccard)."""
    mine = content_words(context.choice)
    overlaps = []
    for other in context.others:
        theirs = content_words(other)
        overlaps.append(len(mine & theirs) / len(mine | theirs) if mine | theirs else 0.0)
    return sum(overlaps) / len(overlaps) if overlaps else 0.0


def _prompt_words(context: Context) -> float:
    return float(len(content_words(context.choice) & content_words(context.prompt)))


def _technical(context: Context) -> float:
    return float(sum(bool(_CODE_TOKEN.search(token)) for token in context.choice.split()))


@dataclass(frozen=True)
class Feature:
    name: str  # short, for the table and the per-question report
    label: str  # what it counts, for messages
    value: Callable[[Context], float]


FEATURES: tuple[Feature, ...] = (
    Feature("colons", "colons and semicolons", lambda c: float(c.choice.count(":") + c.choice.count(";"))),
    Feature("parens", "parentheses", lambda c: float(c.choice.count("("))),
    Feature("commas", "commas", lambda c: float(c.choice.count(","))),
    Feature("shared", "words shared with the other choices (Jaccard)", _shared_words),
    Feature("prompt", "words shared with the prompt", _prompt_words),
    Feature("technical", "code-like tokens (backticks, underscores, calls, digits, identifiers)", _technical),
    Feature("chars", "length in characters", lambda c: float(len(c.choice))),
    Feature("words", "length in words", lambda c: float(len(c.choice.split()))),
    Feature("absolutes", "absolutes (always, never, only, all, every, none)", _count_words(_ABSOLUTES)),
    Feature("hedges", "hedges (may, can, usually, typically, often)", _count_words(_HEDGES)),
    Feature("negations", "negations (not, no, never, without, cannot)", _negations),
    Feature("reasons", "reason words (because, since, so, which)", _count_words(_REASONS)),
    Feature("digits", "numbers", lambda c: float(len(re.findall(r"\d+(?:\.\d+)?", c.choice)))),
    Feature("backticks", "backticks", lambda c: float(c.choice.count("`"))),
)


def feature_table(choices: Sequence[str], prompt: str) -> list[list[float]]:
    """One row per choice, one column per feature in FEATURES order."""
    rows = []
    for index, choice in enumerate(choices):
        context = Context(choice, [other for j, other in enumerate(choices) if j != index], prompt)
        rows.append([feature.value(context) for feature in FEATURES])
    return rows


@dataclass(frozen=True)
class ChoiceQuestion:
    """A single or multi question as the cue checks see it: texts, which choices are right, features."""

    id: str
    topic: str
    kind: str  # "single" or "multi"
    choices: tuple[str, ...]
    right: tuple[bool, ...]  # parallel to choices
    values: tuple[tuple[float, ...], ...]  # values[choice][feature], FEATURES order

    @property
    def keys(self) -> int:
        return sum(self.right)

    @property
    def chance(self) -> float:
        """The share of its picks a blind guesser gets right: k right choices of n, k picks."""
        return self.keys / len(self.choices)


def choice_questions(bank, kind: str) -> list[ChoiceQuestion]:
    """The bank's questions of `kind` ("single" or "multi"), in bank order, with their features."""
    found = []
    for question in bank.questions.values():
        if question.kind != kind:
            continue
        answer = {question.answer} if kind == "single" else set(question.answer)
        found.append(
            ChoiceQuestion(
                id=question.id,
                topic=question.topic,
                kind=kind,
                choices=question.choices,
                right=tuple(choice in answer for choice in question.choices),
                values=tuple(tuple(row) for row in feature_table(question.choices, question.prompt)),
            )
        )
    return found
