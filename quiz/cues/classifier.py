"""A classifier that learns the bank's text cues on some topics and guesses the keys of another.

Each choice is a row; its label is whether it is right. Its columns are every text feature of
FEATURES taken relative to its own question's choices, twice: the value minus the question's mean,
and the choice's rank among them (ties averaged) centred on zero and divided by n - 1. Columns are
standardised on the training rows. A logistic regression with an L2 penalty (L2_PENALTY, the
intercept unpenalised) is fitted by Newton's method from zero weights: nothing is random, so the
same bank always gives the same numbers.

Leave one topic out: for each topic, a model fitted on the other topics' questions of the same
kind scores the held-out topic's questions. It picks, per question, the k highest-scored choices
(k right answers; k = 1 for a single question; ties shared as the guessers share them) and earns
the share of its picks that are right. Single and multi questions get separate models: a multi
question's key is one of several right statements, a different thing to learn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ddpfsdp.quiz.cues.features import ChoiceQuestion
from ddpfsdp.quiz.cues.guessers import credit

L2_PENALTY = 1.0
NEWTON_STEPS = 25


def relative_columns(question: ChoiceQuestion) -> np.ndarray:
    """The question's choices as rows: each feature minus the question's mean, then its centred rank."""
    values = np.asarray(question.values, dtype=float)
    n = len(values)
    centred = values - values.mean(axis=0)
    # Ranks 1..n from the smallest value, tied values sharing the mean of their ranks.
    below = (values[None, :, :] < values[:, None, :]).sum(axis=1)
    tied = (values[None, :, :] == values[:, None, :]).sum(axis=1)
    ranks = below + (tied + 1) / 2
    return np.hstack([centred, (ranks - (n + 1) / 2) / max(n - 1, 1)])


@dataclass(frozen=True)
class Model:
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # intercept first

    def logits(self, columns: np.ndarray) -> np.ndarray:
        standard = (columns - self.mean) / self.scale
        return self.weights[0] + standard @ self.weights[1:]


def fit(columns: np.ndarray, labels: np.ndarray, penalty: float = L2_PENALTY) -> Model:
    """L2-penalised logistic regression by Newton's method (deterministic, from zero weights)."""
    mean = columns.mean(axis=0)
    scale = columns.std(axis=0)
    scale[scale == 0] = 1.0
    design = np.hstack([np.ones((len(columns), 1)), (columns - mean) / scale])
    ridge = penalty * np.eye(design.shape[1])
    ridge[0, 0] = 0.0
    weights = np.zeros(design.shape[1])
    for _ in range(NEWTON_STEPS):
        probability = _sigmoid(design @ weights)
        gradient = design.T @ (probability - labels) + ridge @ weights
        hessian = design.T @ (design * (probability * (1 - probability))[:, None]) + ridge
        step = np.linalg.solve(hessian, gradient)
        weights = weights - step
        if np.max(np.abs(step)) < 1e-10:
            break
    return Model(mean, scale, weights)


@dataclass(frozen=True)
class HeldOut:
    """What the model fitted without a question's topic made of that question."""

    credit: float  # share of its top-k picks that are right
    chance: float  # k/n
    key_probability: float  # the right choices' share of the probability it gave the question's choices


@dataclass(frozen=True)
class ClassifierScore:
    kind: str
    results: dict[str, HeldOut]  # question id -> held-out result
    topics: dict[str, tuple[str, ...]]  # held-out topic -> its question ids

    @property
    def accuracy(self) -> float:
        return sum(r.credit for r in self.results.values()) / len(self.results)

    @property
    def chance(self) -> float:
        return sum(r.chance for r in self.results.values()) / len(self.results)

    @property
    def lift_points(self) -> float:
        return 100 * (self.accuracy - self.chance)

    def topic_accuracy(self, topic: str) -> tuple[float, float]:
        """(accuracy, chance) over one held-out topic."""
        held = [self.results[qid] for qid in self.topics[topic]]
        return sum(r.credit for r in held) / len(held), sum(r.chance for r in held) / len(held)


def leave_one_topic_out(questions: Sequence[ChoiceQuestion]) -> ClassifierScore | None:
    """Cross-validate by topic; None when fewer than two topics have questions of this kind."""
    topics = list(dict.fromkeys(q.topic for q in questions))
    if len(topics) < 2:
        return None
    columns = {q.id: relative_columns(q) for q in questions}
    results: dict[str, HeldOut] = {}
    for topic in topics:
        train = [q for q in questions if q.topic != topic]
        model = fit(np.vstack([columns[q.id] for q in train]), np.concatenate([np.asarray(q.right, dtype=float) for q in train]))
        for question in (q for q in questions if q.topic == topic):
            results[question.id] = _held_out(model, columns[question.id], question)
    return ClassifierScore(
        kind=questions[0].kind,
        results=results,
        topics={topic: tuple(q.id for q in questions if q.topic == topic) for topic in topics},
    )


def _held_out(model: Model, columns: np.ndarray, question: ChoiceQuestion) -> HeldOut:
    logits = model.logits(columns)
    probability = _sigmoid(logits)
    total = float(probability.sum())
    share = float(probability[np.asarray(question.right)].sum()) / total if total > 0 else question.chance
    return HeldOut(credit=credit([float(x) for x in logits], question.right), chance=question.chance, key_probability=share)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # tanh form: no overflow warning for large logits of either sign.
    return 0.5 * (1.0 + np.tanh(0.5 * x))
