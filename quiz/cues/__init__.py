"""Test-taking cues in the question bank: what a guesser who knows nothing about DDP can read.

length      the answer-length cue and "all/none of the above"
features    text features of a choice, seen beside its question's other choices and prompt
guessers    pick the choice with the most (or least) of one feature
classifier  a logistic regression on all features, cross-validated by topic
cutoff      choices that stop mid-sentence
check       the limits, the verdict and the table `ddpfsdp quiz --check` prints
report      the per-question list `ddpfsdp quiz --check --cues` prints

Only `ddpfsdp quiz --check` imports the modules beyond `length` (numpy among them), never the app.
"""

from ddpfsdp.quiz.cues.length import (
    LENGTH_RANK_SHARE_LIMIT,
    LONGEST_SHARE_LIMIT,
    RANK_CHECK_MIN_QUESTIONS,
    CueStats,
    cue_stats,
)

__all__ = ["LENGTH_RANK_SHARE_LIMIT", "LONGEST_SHARE_LIMIT", "RANK_CHECK_MIN_QUESTIONS", "CueStats", "cue_stats"]
