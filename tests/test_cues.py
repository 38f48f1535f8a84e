"""The text-cue check: feature guessers, the topic-held-out classifier and cut-off choices.

Each check is fed synthetic banks built to carry one cue (keys with the most colons, keys sharing the
most words, keys a classifier can learn from two features together, a choice cut off mid-sentence) and
must fail them; a bank built so that no text can carry a cue must pass. Expected values are worked out
by hand or follow from how the bank was built, never from the code under test.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from ddpfsdp.quiz.cues.check import (
    CLASSIFIER_LIMIT_POINTS,
    GUESSER_LIMIT_POINTS,
    text_cues,
)
from ddpfsdp.quiz.cues.classifier import leave_one_topic_out
from ddpfsdp.quiz.cues.cutoff import cut_off
from ddpfsdp.quiz.cues.features import choice_questions
from ddpfsdp.quiz.cues.guessers import credit, pick_shares
from ddpfsdp.quiz.cues.report import render_report
from ddpfsdp.quiz.loader import Bank, Question, Topic

# Two-syllable pseudo-words: no digits, no code, no function words, and 400 of them, so two random
# choices rarely share a word by accident.
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"][:20]
VOCABULARY = [a + b for a in _SYLLABLES for b in _SYLLABLES]


def _text(rng: random.Random, words: int | None = None) -> str:
    return " ".join(rng.sample(VOCABULARY, words or rng.randint(5, 9)))


def _bank(specs) -> Bank:
    """specs: (id, topic, kind, prompt, choices, right indices) -> an in-memory Bank."""
    questions = {}
    for qid, topic, kind, prompt, choices, right in specs:
        answer = choices[right[0]] if kind == "single" else tuple(choices[i] for i in right)
        questions[qid] = Question(
            id=qid, topic=topic, level=1, kind=kind, prompt=prompt, file=Path(f"{topic}.toml"),
            answer_file=Path(f"{qid}.md"), choices=tuple(choices), answer=answer, why=("Because.",) * len(choices),
        )
    topics = {}
    for order, topic in enumerate(dict.fromkeys(q.topic for q in questions.values())):
        ids = tuple(q.id for q in questions.values() if q.topic == topic)
        topics[topic] = Topic(topic, topic, order, "", Path(f"{topic}.toml"), ids)
    return Bank(topics=topics, questions=questions)


def rotated_specs(seed=0, topics=4, groups=6, n=4, k=1, kind="single", edit=None):
    """Groups of n questions with the same choices and prompt, each choice right in k of them.

    With `edit=None` no text can be a cue: whatever a guesser or a model makes of a group's texts,
    it picks the same choices in all n questions, and each choice is right in k of them, so it earns
    exactly k/n, chance. `edit(choices, right)` rewrites a question's choices to plant a cue.
    """
    rng = random.Random(seed)
    specs = []
    for t in range(topics):
        for g in range(groups):
            # Words drawn without replacement: no two choices share a word unless an edit says so.
            # Distinct word counts of four-letter words: no two choices tie on length.
            lengths = rng.sample(range(4, 11), n + 1)
            drawn = rng.sample(VOCABULARY, sum(lengths))
            texts = [" ".join(drawn[sum(lengths[:i]) : sum(lengths[: i + 1])]) for i in range(n + 1)]
            prompt = texts.pop() + "?"
            for r in range(n):
                right = sorted((r + j) % n for j in range(k))
                choices = edit(list(texts), right, rng) if edit else texts
                specs.append((f"t{t}-g{g}-r{r}-{kind}", f"topic-{t}", kind, prompt, choices, right))
    return specs


def _with_colon(choices, right, rng):
    return [text.replace(" ", ": ", 1) if i in right else text for i, text in enumerate(choices)]


def _sharing_words(choices, right, rng):
    """The key takes one word from each other choice; the others share nothing but with the key."""
    others = [text.split()[0] for i, text in enumerate(choices) if i not in right]
    return [" ".join(others + text.split()[len(others):]) if i in right else text for i, text in enumerate(choices)]


def _commas_and_parens(seed=3, topics=4, per_topic=20):
    """The key has the most commas less bracketed words: two features a single guesser sees apart."""
    rng = random.Random(seed)
    specs = []
    for t in range(topics):
        for q in range(per_topic):
            while True:
                marks = [(rng.randint(0, 3), rng.randint(0, 3)) for _ in range(4)]
                scores = [commas - parens for commas, parens in marks]
                if scores.count(max(scores)) == 1:
                    break
            choices = []
            for commas, parens in marks:
                words = _text(rng, 8).split()
                for i in range(commas):
                    words[i] += ","
                for i in range(parens):
                    words[7 - i] = f"({words[7 - i]})"
                choices.append(" ".join(words))
            specs.append((f"t{t}-q{q}", f"topic-{t}", "single", _text(rng) + "?", choices, [scores.index(max(scores))]))
    return specs


def _guesser(cues, kind, feature, direction):
    scores = getattr(cues, kind).guessers
    return next(g for g in scores if g.feature.name == feature and g.direction == direction)


def test_ties_share_a_pick():
    assert pick_shares([1, 1, 0, 0], 1) == [0.5, 0.5, 0.0, 0.0]
    assert pick_shares([3, 2, 2, 1], 2) == [1.0, 0.5, 0.5, 0.0]
    assert pick_shares([0, 0, 0, 0], 1) == [0.25] * 4
    assert credit([2, 1, 1, 0], [False, True, False, False]) == 0.0
    assert credit([1, 1, 1, 0], [False, True, False, False]) == pytest.approx(1 / 3)
    # Multi: 2 right of 5; the top two are a right one and one of three tied, a right one among them.
    assert credit([5, 3, 3, 3, 0], [True, True, False, False, False]) == pytest.approx((1 + 1 / 3) / 2)


def test_a_bank_without_a_cue_passes_at_exactly_chance():
    bank = _bank(rotated_specs() + rotated_specs(seed=1, groups=2, n=5, k=2, kind="multi"))
    cues = text_cues(bank)
    assert len(cues.single.questions) == 96 and len(cues.multi.questions) == 40
    for kind, chance in (("single", 0.25), ("multi", 0.4)):
        scores = getattr(cues, kind)
        assert all(g.accuracy == pytest.approx(chance) for g in scores.guessers)
        assert scores.classifier.accuracy == pytest.approx(chance)
    assert cues.limit_problems == [] and cues.cut_off_problems == []


def test_keys_with_the_most_colons_fail_the_colon_guesser():
    cues = text_cues(_bank(rotated_specs(edit=_with_colon)))
    colons = _guesser(cues, "single", "colons", "most")
    assert colons.accuracy == 1.0 and colons.chance == 0.25
    assert colons.lift_points > GUESSER_LIMIT_POINTS
    failing = [p for p in cues.limit_problems if "colons and semicolons" in p]
    assert len(failing) == 1 and "highest in colons and semicolons finds 100.0% of the keys" in failing[0]
    assert "+75.0 points" in failing[0] and "t0-g0-r0-single" in failing[0] and "and 86 more" in failing[0]


def test_keys_sharing_the_most_words_fail_the_shared_words_guesser():
    cues = text_cues(_bank(rotated_specs(edit=_sharing_words)))
    shared = _guesser(cues, "single", "shared", "most")
    assert shared.accuracy == 1.0
    assert any("highest in words shared with the other choices" in p for p in cues.limit_problems)
    assert _guesser(cues, "single", "colons", "most").accuracy == 0.25  # no colon anywhere: all tied


def test_multi_keys_with_the_most_colons_fail_too():
    cues = text_cues(_bank(rotated_specs(groups=2, n=5, k=2, kind="multi", edit=_with_colon)))
    colons = _guesser(cues, "multi", "colons", "most")
    assert colons.accuracy == 1.0 and colons.chance == pytest.approx(0.4)
    assert any(p.startswith("picking the multi choice highest in colons") for p in cues.limit_problems)


def test_a_cue_in_two_features_fails_the_classifier_though_no_guesser_sees_it_all():
    cues = text_cues(_bank(_commas_and_parens()))
    classifier = cues.single.classifier
    best_guesser = max(g.accuracy for g in cues.single.guessers)
    assert classifier.lift_points > CLASSIFIER_LIMIT_POINTS
    assert classifier.accuracy >= 0.9 and classifier.accuracy > best_guesser + 0.2
    assert set(classifier.topics) == {"topic-0", "topic-1", "topic-2", "topic-3"}
    assert any(p.startswith("a classifier trained on the other topics finds") for p in cues.limit_problems)


def test_the_classifier_is_deterministic_and_never_sees_the_held_out_topic():
    questions = choice_questions(_bank(_commas_and_parens()), "single")
    first, second = leave_one_topic_out(questions), leave_one_topic_out(questions)
    assert first.results == second.results
    # A topic whose keys follow the opposite rule is guessed wrong: its model learnt only the others.
    flipped = [q if q.topic != "topic-0" else _flip(q) for q in questions]
    assert leave_one_topic_out(flipped).topic_accuracy("topic-0")[0] < 0.25


def _flip(question):
    """The same choices with the key moved to the choice with the fewest commas less brackets."""
    from dataclasses import replace

    scores = [text.count(",") - text.count("(") for text in question.choices]
    low = min(scores)
    return replace(question, right=tuple(score == low and scores.index(low) == i for i, score in enumerate(scores)))


def test_too_few_questions_are_measured_but_not_judged():
    specs = [s for s in rotated_specs(edit=_with_colon) if s[0].startswith(("t0-g0", "t1-g0"))]
    cues = text_cues(_bank(specs))
    assert len(cues.single.questions) == 8 and _guesser(cues, "single", "colons", "most").accuracy == 1.0
    assert cues.limit_problems == []


@pytest.mark.parametrize(
    "text, reason",
    [
        ("whose gradients are reduce-scattered together in one", "'in one'"),
        ("the all-gather of the", "'the'"),
        ("it waits for each rank of", "'of'"),
        ("the buckets and", "'and'"),
        ("sends its shard to each", "'to each'"),
        ("the peak, then", None),
        ("the first half,", "','"),
        ("one rank computes it for all", None),
        ("parameters are gathered one by one", None),
        ("it needs more than one", None),
        ("they outweigh a block five to one", None),
        ("the device they were saved from", None),
        ("sync stays switched on", None),
        ("7 full batches and one of 13", None),
        ("as on one GPU", None),
        ("the call (with its group)", None),
    ],
)
def test_a_choice_cut_off_mid_sentence_is_caught(text, reason):
    found = cut_off(text)
    if reason is None:
        assert found is None, found
    else:
        assert found is not None and reason in found


def _write_bank(root, specs):
    bank_dir, answers_dir = root / "bank", root / "answers"
    bank_dir.mkdir(parents=True)
    answers_dir.mkdir()
    topics = list(dict.fromkeys(spec[1] for spec in specs))
    for order, topic in enumerate(topics, start=1):
        lines = [f'topic = "{topic}"', f'title = "{topic}"', f"order = {order}"]
        for qid, spec_topic, kind, prompt, choices, right in specs:
            if spec_topic != topic:
                continue
            answer = json.dumps(choices[right[0]]) if kind == "single" else json.dumps([choices[i] for i in right])
            lines += [
                "", "[[question]]", f'id = "{qid}"', "level = 1", f'kind = "{kind}"', f"prompt = {json.dumps(prompt)}",
                f"choices = {json.dumps(choices)}", f"answer = {answer}", f"why = {json.dumps([f'Because {i}.' for i in range(len(choices))])}",
            ]
            (answers_dir / f"{qid}.md").write_text(f"The model answer of {qid}.\n")
        (bank_dir / f"{topic}.toml").write_text("\n".join(lines) + "\n")
    return bank_dir, answers_dir


def _check(bank_dir, answers_dir, *extra):
    from ddpfsdp.quiz.cli import cli

    return CliRunner().invoke(cli, ["quiz", "--check", *extra, "--bank", str(bank_dir), "--answers", str(answers_dir)])


def test_quiz_check_fails_a_cued_bank(tmp_path):
    enforced = _check(*_write_bank(tmp_path, rotated_specs(edit=_with_colon)))
    assert "colons    100.0 +75.0 !" in enforced.output
    assert enforced.exit_code == 1
    assert "highest in colons and semicolons finds 100.0% of the keys" in enforced.output
    assert "rewrite the choices of t0-g0-r0-single" in enforced.output
    assert "Traceback" not in enforced.output


def test_quiz_check_passes_a_bank_without_a_cue(tmp_path):
    result = _check(*_write_bank(tmp_path, rotated_specs()))
    assert result.exit_code == 0, result.output
    assert "The question bank is sound: 96 questions in 4 topics (96 single)." in result.output
    assert all(len(line) <= 80 for line in result.output.splitlines()[1:])


def test_quiz_check_fails_a_choice_cut_off_mid_sentence(tmp_path):
    specs = rotated_specs()
    qid, topic, kind, prompt, choices, right = specs[5]
    specs[5] = (qid, topic, kind, prompt, [choices[0] + " in one", *choices[1:]], right)
    result = _check(*_write_bank(tmp_path, specs))
    assert result.exit_code == 1
    assert f"{qid}: a choice stops mid-sentence (it ends on 'in one')" in result.output


def test_the_cue_report_lists_each_question_worst_first(tmp_path):
    cues = text_cues(_bank(rotated_specs(edit=_with_colon)))
    report = render_report(cues, [f"topic-{t}" for t in range(4)])
    lines = report.splitlines()
    assert "topic-0 (24 single, 0 multi)" in lines
    rows = [line for line in lines if line.startswith("  ") and "-single" in line]
    assert len(rows) == 96 and all(len(line) <= 80 for line in lines)
    # Every key has the most colons, so every row names that guesser, and the classifier finds every key.
    assert all("colons+" in row for row in rows)
    probabilities = [float(row.split()[0].split("/")[0]) for row in rows[:24]]
    assert probabilities == sorted(probabilities, reverse=True) and probabilities[-1] > 0.5
    assert report in _check(*_write_bank(tmp_path, rotated_specs(edit=_with_colon)), "--cues").output


def test_cues_needs_check():
    from ddpfsdp.quiz.cli import cli

    result = CliRunner().invoke(cli, ["quiz", "--cues"])
    assert result.exit_code == 2 and "use it with --check" in result.output


def test_only_the_check_command_imports_the_text_cue_check():
    """The app and plain mode never load it (numpy included): only `quiz --check`, inside the command."""
    import ast

    import ddpfsdp.quiz

    heavy = ("ddpfsdp.quiz.cues.check", "ddpfsdp.quiz.cues.report", "ddpfsdp.quiz.cues.classifier",
             "ddpfsdp.quiz.cues.guessers", "ddpfsdp.quiz.cues.features", "ddpfsdp.quiz.cues.cutoff")
    root = Path(ddpfsdp.quiz.__file__).parent
    importers = {}
    for path in root.rglob("*.py"):
        if path.parent.name == "cues":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
                if any(name in heavy for name in names):
                    top_level = node in tree.body
                    importers.setdefault(path.relative_to(root).as_posix(), set()).add(top_level)
    assert importers == {"commands/quiz.py": {False}}
