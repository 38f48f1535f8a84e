"""Feature guessers: pick the choice with the most (or the least) of one text feature.

A guesser answers a question with k right choices by picking the k choices that rank highest (or
lowest) on its feature. Ties are broken at random, and counted exactly: a tie among g choices for
m remaining picks gives each of them m/g of a pick. Its credit on a question is the share of its
picks that are right (for a single question, 1 when it picks the key, 1/g when the key is among g
tied choices); a blind guesser expects k/n. Its accuracy is the mean credit over the questions.

Every feature gets both guessers, the most and the least: where the keys carry fewer colons, fewer
"so ..." clauses or fewer words than the distractors, picking the plainest choice pays, and a rewrite
that moves the detail from the keys onto the distractors would open exactly that cue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpfsdp.quiz.cues.features import FEATURES, ChoiceQuestion, Feature

DIRECTIONS = ("most", "least")


def pick_shares(scores: Sequence[float], picks: int) -> list[float]:
    """How much of a pick each choice gets when the `picks` highest scores are taken, ties shared."""
    shares = [0.0] * len(scores)
    left = picks
    for value in sorted(set(scores), reverse=True):
        tied = [i for i, score in enumerate(scores) if score == value]
        share = min(1.0, left / len(tied))
        for i in tied:
            shares[i] = share
        left -= share * len(tied)
        if left <= 1e-12:
            break
    return shares


def credit(scores: Sequence[float], right: Sequence[bool]) -> float:
    """The share of a top-k pick by `scores` that is right, k being the number of right choices."""
    keys = sum(right)
    shares = pick_shares(scores, keys)
    return sum(share for share, is_right in zip(shares, right) if is_right) / keys


@dataclass(frozen=True)
class GuesserScore:
    feature: Feature
    direction: str  # "most" or "least"
    kind: str  # "single" or "multi"
    credits: dict[str, float]  # question id -> credit
    chances: dict[str, float]  # question id -> k/n

    @property
    def accuracy(self) -> float:
        return sum(self.credits.values()) / len(self.credits)

    @property
    def chance(self) -> float:
        return sum(self.chances.values()) / len(self.chances)

    @property
    def lift_points(self) -> float:
        return 100 * (self.accuracy - self.chance)

    @property
    def name(self) -> str:
        return f"{self.feature.name}{'+' if self.direction == 'most' else '-'}"

    def picks_key(self, question_id: str) -> bool:
        """Whether this guesser gives the question's keys more than a blind guess would."""
        return self.credits[question_id] > self.chances[question_id] + 1e-9


def guesser_scores(questions: Sequence[ChoiceQuestion]) -> list[GuesserScore]:
    """Every feature, both directions, over `questions` (all of one kind); empty when there are none."""
    if not questions:
        return []
    scores = []
    for column, feature in enumerate(FEATURES):
        for direction in DIRECTIONS:
            sign = 1.0 if direction == "most" else -1.0
            earned = {q.id: credit([sign * row[column] for row in q.values], q.right) for q in questions}
            chances = {q.id: q.chance for q in questions}
            scores.append(GuesserScore(feature, direction, questions[0].kind, earned, chances))
    return scores
