"""The per-question cue report (`ddpfsdp quiz --check --cues`): which keys give themselves away.

Per topic, every single (s) and multi (m) question, worst first:
- p: the probability the classifier gives the question's right choice(s), as a share of what it gives
  all the choices, from the model fitted without the question's topic; after the slash, what an
  uninformed model would give (k/n).
- the feature guessers over their limit that favour the key (give it more than a blind guess would),
  strongest first, then how many guessers under their limit favour it too. `colons+` picks the
  choice with the most colons, `words-` the one with the fewest words.
Worst first means the largest p above chance, then the most guessers over their limit.
"""

from __future__ import annotations

import textwrap

from ddpfsdp.quiz.cues.check import WIDTH, KindCues, TextCues

_ID_WIDTH = 32


def render_report(cues: TextCues, topics: list[str]) -> str:
    lines = [
        "Keys that give themselves away, by topic, worst first. p: the classifier's share",
        "for the key, held out with its topic (chance after the slash); then the guessers",
        "over their limit that favour the key (colons+: most colons), +N under it.",
    ]
    rows = {topic: [] for topic in topics}
    for kind in cues.kinds:
        for question in kind.questions:
            rows[question.topic].append(_row(kind, question.id, question.chance))
    for topic, topic_rows in rows.items():
        if not topic_rows:
            continue
        singles = sum(row[2] == "s" for row in topic_rows)
        lines.append(f"\n{topic} ({singles} single, {len(topic_rows) - singles} multi)")
        lines.extend(row[3] for row in sorted(topic_rows, key=lambda row: (-row[0], -row[1])))
    return "\n".join(lines)


def _row(kind: KindCues, qid: str, chance: float) -> tuple[float, int, str, str]:
    """(p over chance, guessers over limit, kind mark, the printed lines) for one question."""
    favouring = [g for g in kind.guessers if g.picks_key(qid)]
    over = sorted((g for g in favouring if kind.guesser_over(g)), key=lambda g: -g.lift_points)
    names = [g.name for g in over]
    if len(favouring) > len(over):
        names.append(f"+{len(favouring) - len(over)}")
    if kind.classifier is not None:
        probability = kind.classifier.results[qid].key_probability
        p = f"{probability:.2f}/{chance:.2f}"
    else:
        probability, p = chance, f"-/{chance:.2f}"
    head = f"  {p:>9} {kind.kind[0]} {qid:<{_ID_WIDTH}} "
    wrapped = textwrap.wrap(" ".join(names), WIDTH - len(head)) or [""]
    text = "\n".join([head + wrapped[0]] + [" " * len(head) + more for more in wrapped[1:]])
    return probability - chance, len(over), kind.kind[0], text.rstrip()
