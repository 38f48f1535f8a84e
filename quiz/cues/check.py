"""The text-cue check: can a guesser who knows nothing about DDP find the keys?

Single and multi questions are measured apart. For each kind:
- every feature guesser (guessers.py), both directions: its accuracy, the mean of 1/n (single) or
  k/n (multi) it would get blind, and the difference in points. None may be more than
  GUESSER_LIMIT_POINTS above chance.
- the classifier (classifier.py), cross-validated by topic: its accuracy over the held-out
  questions, per topic and overall. It may not be more than CLASSIFIER_LIMIT_POINTS above chance.
A kind with fewer than MIN_QUESTIONS questions is measured and printed but not judged: on a handful
of questions the shares are noise. Even on 136 questions a guesser's accuracy has a standard error
of about 4 points, so a bank with no cue at all sits a few points above chance on its best guesser.

`quiz --check` fails a bank over any limit, and a bank with a choice cut off mid-sentence (cutoff.py).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ddpfsdp.quiz.cues.classifier import ClassifierScore, leave_one_topic_out
from ddpfsdp.quiz.cues.cutoff import cut_off_choices
from ddpfsdp.quiz.cues.features import ChoiceQuestion, choice_questions
from ddpfsdp.quiz.cues.guessers import GuesserScore, guesser_scores

GUESSER_LIMIT_POINTS = 8.0
CLASSIFIER_LIMIT_POINTS = 10.0
MIN_QUESTIONS = 20
QUESTIONS_NAMED = 10  # a failure names this many questions to rewrite, worst first
WIDTH = 80


@dataclass(frozen=True)
class KindCues:
    """The guessers and the classifier over one kind of question ("single" or "multi")."""

    kind: str
    questions: tuple[ChoiceQuestion, ...]
    guessers: tuple[GuesserScore, ...]
    classifier: ClassifierScore | None

    @property
    def judged(self) -> bool:
        return len(self.questions) >= MIN_QUESTIONS

    def guesser_over(self, guesser: GuesserScore) -> bool:
        return self.judged and guesser.lift_points > GUESSER_LIMIT_POINTS

    @property
    def classifier_over(self) -> bool:
        return self.judged and self.classifier is not None and self.classifier.lift_points > CLASSIFIER_LIMIT_POINTS

    def problems(self) -> list[str]:
        found = []
        for guesser in sorted(self.guessers, key=lambda g: -g.lift_points):
            if self.guesser_over(guesser):
                ids = sorted((qid for qid in guesser.credits if guesser.picks_key(qid)), key=lambda qid: -guesser.credits[qid])
                found.append(
                    f"picking the {self.kind} choice {'highest' if guesser.direction == 'most' else 'lowest'} in "
                    f"{guesser.feature.label} finds {guesser.accuracy:.1%} of the keys, "
                    f"{guesser.lift_points:+.1f} points over chance {guesser.chance:.1%} (limit +{GUESSER_LIMIT_POINTS:g}); "
                    f"rewrite the choices of {_named(ids)}"
                )
        if self.classifier_over:
            score = self.classifier
            lifts = {qid: result.key_probability - result.chance for qid, result in score.results.items()}
            ids = sorted((qid for qid in lifts if lifts[qid] > 0), key=lambda qid: -lifts[qid])
            found.append(
                f"a classifier trained on the other topics finds {score.accuracy:.1%} of the {self.kind} keys, "
                f"{score.lift_points:+.1f} points over chance {score.chance:.1%} (limit +{CLASSIFIER_LIMIT_POINTS:g}); "
                f"rewrite first the questions whose keys it finds easiest: {_named(ids)}"
            )
        return found


def _named(ids: list[str]) -> str:
    shown = ", ".join(ids[:QUESTIONS_NAMED])
    more = len(ids) - QUESTIONS_NAMED
    return shown + (f" and {more} more (`ddpfsdp quiz --check --cues` lists them)" if more > 0 else "")


@dataclass(frozen=True)
class TextCues:
    single: KindCues
    multi: KindCues
    cut_off: tuple[tuple[str, str, str], ...]  # (question id, text, why)

    @property
    def kinds(self) -> tuple[KindCues, KindCues]:
        return self.single, self.multi

    @property
    def limit_problems(self) -> list[str]:
        """The guessers and classifiers over their limits."""
        return [problem for kind in self.kinds for problem in kind.problems()]

    @property
    def cut_off_problems(self) -> list[str]:
        return [f"{qid}: a choice stops mid-sentence ({why}): {text!r}; finish the sentence" for qid, text, why in self.cut_off]


def text_cues(bank) -> TextCues:
    kinds = []
    for kind in ("single", "multi"):
        questions = choice_questions(bank, kind)
        kinds.append(KindCues(kind, tuple(questions), tuple(guesser_scores(questions)), leave_one_topic_out(questions)))
    return TextCues(kinds[0], kinds[1], tuple(cut_off_choices(bank)))


def render_table(cues: TextCues) -> str:
    """The guessers and the classifier at a glance, in 80 columns."""
    lines = [
        "Text cues: % of keys found by picking the choice highest (most) or lowest",
        "(least) in one feature, ties shared, and points over chance; '!' marks a cue",
        f"over its limit (a guesser +{GUESSER_LIMIT_POINTS:g} points, the classifier +{CLASSIFIER_LIMIT_POINTS:g}).",
        f"{'':<10}" + "".join(f"{_kind_heading(kind):<30}" for kind in cues.kinds).rstrip(),
        (f"{'feature':<10}" + f"{'most':<15}{'least':<15}" * 2).rstrip(),
    ]
    by_feature: dict[str, list[str]] = {}
    for kind in cues.kinds:
        for guesser in kind.guessers:
            cell = _cell(100 * guesser.accuracy, guesser.lift_points, kind.guesser_over(guesser))
            by_feature.setdefault(guesser.feature.name, []).append(cell)
    for name, cells in by_feature.items():
        if len(cells) == 2:  # no multi questions
            cells += ["-", "-"]
        lines.append((f"{name:<10}" + "".join(f"{cell:<15}" for cell in cells)).rstrip())
    lines.extend(_classifier_lines(cues))
    return "\n".join(lines)


def _kind_heading(kind: KindCues) -> str:
    if not kind.questions:
        return f"{kind.kind}: none"
    chance = 100 * sum(q.chance for q in kind.questions) / len(kind.questions)
    judged = "" if kind.judged else ", not judged"
    return f"{kind.kind}: {len(kind.questions)}, chance {chance:.1f}{judged}"


def _cell(accuracy: float, lift: float, over: bool) -> str:
    return f"{accuracy:4.1f} {lift:+5.1f}{' !' if over else ''}"


def _classifier_lines(cues: TextCues) -> list[str]:
    lines = ["Classifier (logistic regression on every feature, each topic held out in turn):"]
    for kind in cues.kinds:
        score = kind.classifier
        if score is None:
            why = "no questions" if not kind.questions else "needs questions in two topics"
            lines.append(f"  {kind.kind}: not run ({why})")
            continue
        lines.append(
            f"  {kind.kind}: {100 * score.accuracy:.1f}, chance {100 * score.chance:.1f}, "
            f"{score.lift_points:+.1f} points{' !' if kind.classifier_over else ''}"
        )
        topics = ", ".join(f"{topic} {100 * score.topic_accuracy(topic)[0]:.0f}" for topic in score.topics)
        lines.extend(textwrap.wrap(f"held out: {topics}", WIDTH, initial_indent="    ", subsequent_indent="      "))
    return lines
