"""Test-taking cues in the question bank: can a person who knows nothing pass by picking the longest option?

Measured over the single-choice questions: the share whose right answer is strictly the longest
choice (a bank without the cue sits near 1 in the number of choices, 25% for four), and the mean
ratio of the right answer's length to the mean length of the others over single and multi
questions (1.0 when length says nothing). "All of the above" and "none of the above" are a cue of
their own and are listed by question. `ddpfsdp quiz --check` prints these and fails a bank whose
longest-answer share is above LONGEST_SHARE_LIMIT, or that has such a choice.

Pure Python: the CLI imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpfsdp.quiz.loader import Bank, Question

LONGEST_SHARE_LIMIT = 0.30
_CATCH_ALL = re.compile(r"\b(all|none|both|neither) of (the )?(above|these|those)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CueStats:
    singles: int
    right_is_longest: tuple[str, ...]  # ids of single questions whose right answer is strictly longest
    mean_length_ratio: float  # right / others, over single and multi questions
    catch_all: tuple[str, ...]  # ids with an "all/none of the above" choice

    @property
    def longest_share(self) -> float:
        return len(self.right_is_longest) / self.singles if self.singles else 0.0

    @property
    def problems(self) -> list[str]:
        found = []
        if self.longest_share > LONGEST_SHARE_LIMIT:
            found.append(
                f"the right answer is strictly the longest choice in {self.longest_share:.0%} of single questions "
                f"(limit {LONGEST_SHARE_LIMIT:.0%}); lengthen the wrong choices of: {', '.join(self.right_is_longest)}"
            )
        if self.catch_all:
            found.append(f"'all/none of the above' choices in: {', '.join(self.catch_all)}; write each option out")
        return found

    def summary(self) -> str:
        return (
            f"Answer-length cue: the right answer is strictly the longest choice in {len(self.right_is_longest)} of "
            f"{self.singles} single questions ({self.longest_share:.0%}, limit {LONGEST_SHARE_LIMIT:.0%}); "
            f"mean length right/others {self.mean_length_ratio:.2f}; "
            f"'all/none of the above': {len(self.catch_all)}."
        )


def _right(question: Question) -> list[str]:
    return [question.answer] if question.kind == "single" else list(question.answer or ())


def cue_stats(bank: Bank) -> CueStats:
    singles = 0
    longest: list[str] = []
    ratios: list[float] = []
    catch_all: list[str] = []
    for question in bank.questions.values():
        if question.kind not in ("single", "multi"):
            continue
        right = _right(question)
        others = [choice for choice in question.choices if choice not in right]
        if any(_CATCH_ALL.search(choice) for choice in question.choices):
            catch_all.append(question.id)
        if question.kind == "single":
            singles += 1
            if all(len(question.answer) > len(other) for other in others):
                longest.append(question.id)
        if others:
            mean_right = sum(map(len, right)) / len(right)
            mean_others = sum(map(len, others)) / len(others)
            ratios.append(mean_right / mean_others)
    return CueStats(
        singles=singles,
        right_is_longest=tuple(longest),
        mean_length_ratio=sum(ratios) / len(ratios) if ratios else 1.0,
        catch_all=tuple(catch_all),
    )
