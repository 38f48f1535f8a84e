"""The answer-length cue: can a person who knows nothing pass by picking the longest option?

Measured over the single-choice questions: the share whose right answer is strictly the longest
choice (a bank without the cue sits near 1 in the number of choices, 25% for four), and the mean
ratio of the right answer's length to the mean length of the others over single and multi
questions (1.0 when length says nothing). "All of the above" and "none of the above" are a cue of
their own and are listed by question. `ddpfsdp quiz --check` prints these and fails a bank whose
longest-answer share is above LONGEST_SHARE_LIMIT, or that has such a choice. Avoiding the longest
choice must not pay either: the share of four-choice questions whose right answer is the k-th longest
is printed for each k, and none may pass LENGTH_RANK_SHARE_LIMIT.

Pure Python; `ddpfsdp quiz --check` always enforces it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpfsdp.quiz.loader import Bank, Question

LONGEST_SHARE_LIMIT = 0.30
# Shunning the longest choice must not pay either: no place in the order by length (longest,
# second longest, ...) may hold the right answer much more often than chance.
LENGTH_RANK_SHARE_LIMIT = 0.35
RANK_CHECK_MIN_QUESTIONS = 20  # below this many four-choice questions the shares are noise
_CATCH_ALL = re.compile(r"\b(all|none|both|neither) of (the )?(above|these|those)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CueStats:
    singles: int
    right_is_longest: tuple[str, ...]  # ids of single questions whose right answer is strictly longest
    mean_length_ratio: float  # right / others, over single and multi questions
    catch_all: tuple[str, ...]  # ids with an "all/none of the above" choice
    # rank_shares[k]: share of four-choice single questions whose right answer is the (k+1)-th longest
    rank_shares: tuple[float, ...] = ()
    four_choice: int = 0

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
        for rank, share in enumerate(self.rank_shares):
            if self.four_choice >= RANK_CHECK_MIN_QUESTIONS and share > LENGTH_RANK_SHARE_LIMIT:
                found.append(
                    f"the right answer is the {_ORDINALS[rank]} choice by length in {share:.0%} of four-choice single "
                    f"questions (limit {LENGTH_RANK_SHARE_LIMIT:.0%}); a person who picks by length alone would pass"
                )
        if self.catch_all:
            found.append(f"'all/none of the above' choices in: {', '.join(self.catch_all)}; write each option out")
        return found

    def summary(self) -> str:
        return (
            f"Answer-length cue: the right answer is strictly the longest choice in {len(self.right_is_longest)} of "
            f"{self.singles} single questions ({self.longest_share:.0%}, limit {LONGEST_SHARE_LIMIT:.0%}); "
            f"mean length right/others {self.mean_length_ratio:.2f}; "
            f"right answer by length rank (longest first) {' / '.join(f'{share:.0%}' for share in self.rank_shares)}; "
            f"'all/none of the above': {len(self.catch_all)}."
        )


_ORDINALS = ("longest", "second-longest", "third-longest", "fourth-longest")


def _right(question: Question) -> list[str]:
    return [question.answer] if question.kind == "single" else list(question.answer or ())


def cue_stats(bank: Bank) -> CueStats:
    singles = 0
    longest: list[str] = []
    ratios: list[float] = []
    catch_all: list[str] = []
    ranks = [0, 0, 0, 0]
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
            if len(question.choices) == 4:
                # Ties count in the right answer's favour: the rank is how many choices are strictly longer.
                ranks[sum(len(other) > len(question.answer) for other in others)] += 1
        if others:
            mean_right = sum(map(len, right)) / len(right)
            mean_others = sum(map(len, others)) / len(others)
            ratios.append(mean_right / mean_others)
    return CueStats(
        singles=singles,
        right_is_longest=tuple(longest),
        mean_length_ratio=sum(ratios) / len(ratios) if ratios else 1.0,
        catch_all=tuple(catch_all),
        rank_shares=tuple(n / sum(ranks) for n in ranks) if sum(ranks) else (),
        four_choice=sum(ranks),
    )
