"""Search over the real bank (prompts, choices, reasons, model answers), bookmarks, and `quiz --search`."""

from __future__ import annotations

from datetime import datetime, timedelta, UTC

import pytest
from conftest import run_cli

from ddpfsdp.quiz.bank_cache import load_bank_cached
from ddpfsdp.quiz.search import SearchError, SearchIndex, index_for, plain_text, words
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    return load_bank_cached(cache_dir=tmp_path_factory.mktemp("bank-cache"))


@pytest.fixture(scope="module")
def index(bank):
    return SearchIndex.build(bank)


def _rare_words(index, text: str, count: int = 4) -> str:
    """The `count` words of `text` that fewest questions use: what a person remembers a question by."""
    idf = {word: index._idf[number] for number, word in enumerate(index.vocabulary)}
    found = [w for w in dict.fromkeys(words(text)) if len(w) > 2 and w in idf]
    return " ".join(sorted(found, key=lambda w: (-idf[w], w))[:count])


def test_words_from_a_model_answer_find_its_question_first(index):
    # answers/dbg-flatparameter-vs-dtensor.md: "... gives each rank a contiguous slice ..."
    hits = index.search("FlatParameter contiguous slice")
    assert hits[0].question_id == "dbg-flatparameter-vs-dtensor"
    assert "FlatParameter" in hits[0].snippet
    assert hits[0].matched == ("flatparameter", "contiguous", "slice")


def test_words_from_a_prompt_find_its_question_first(index, bank):
    prompt = plain_text(bank.questions["ddp-bucket-size-tuning"].prompt)
    assert "long all-reduce after the last backward kernel" in prompt
    hits = index.search("long all-reduce after the last backward kernel")
    assert hits[0].question_id == "ddp-bucket-size-tuning"
    assert hits[0].field == "prompt"


@pytest.mark.parametrize("field", ["answer", "prompt"])
def test_every_question_is_found_by_its_own_rarest_words(index, bank, field):
    """Across the whole bank: four telling words of a question's model answer (or prompt) rank it first,
    with a handful of exceptions where another question shares them, and never below third."""
    first, misses = 0, []
    for question in bank.questions.values():
        text = question.model_answer() if field == "answer" else question.prompt
        ids = [hit.question_id for hit in index.search(_rare_words(index, text), limit=3)]
        first += bool(ids) and ids[0] == question.id
        if question.id not in ids:
            misses.append(question.id)
    assert misses == []
    assert first >= 0.95 * len(bank.questions), first


def test_a_typo_and_the_start_of_a_word_still_match(index):
    typo = index.search("bucketting")
    assert "bucketing" in typo[0].snippet.lower()
    start = index.search("prefetc")
    assert start and "prefetch" in start[0].snippet.lower()


def test_a_short_word_is_matched_as_typed(index):
    # "tp" must not find "dp" (ratio 50) nor "mb" "gb": a two-letter word has no room for a typo.
    assert index._similar_words("tp") == {index.vocabulary.index("tp"): 1.0}


def test_the_snippet_marks_the_matched_words(index):
    hit = index.search("gradient_as_bucket_view")[0]
    marked = [hit.snippet[a:b].lower() for a, b in hit.marks]
    assert marked and set(marked) <= {"gradient", "as", "bucket", "view"}


def test_an_empty_query_is_refused_with_advice(index):
    for query in ("", "   ", "!!! ---"):
        with pytest.raises(SearchError, match="type at least one word"):
            index.search(query)
    assert index.search("zzzqqqxxy") == []


def test_the_index_is_built_once_per_bank(bank):
    assert index_for(bank) is index_for(bank)


def test_bookmarks_are_kept_in_the_store_once_each():
    store = Store.open()
    assert store.add_bookmark("ddp-grad-sync", T0) is True
    assert store.add_bookmark("ddp-grad-sync", T0 + timedelta(hours=1)) is False
    store.add_bookmark("fsdp-wrap", T0 - timedelta(hours=1))
    store.close()
    store = Store.open()
    assert store.bookmarks() == {"fsdp-wrap": T0 - timedelta(hours=1), "ddp-grad-sync": T0}
    assert store.remove_bookmark("fsdp-wrap") is True and store.remove_bookmark("fsdp-wrap") is False
    assert list(store.bookmarks()) == ["ddp-grad-sync"]


def test_quiz_search_prints_ranked_results_within_80_columns():
    outcome = run_cli("quiz", "--search", "FlatParameter", "contiguous", "slice", env={"COLUMNS": "200"})
    assert outcome.exit_code == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("10 questions match 'FlatParameter contiguous slice'")
    first = outcome.stdout.split(" 2. ")[0]
    assert "1. dbg-flatparameter-vs-dtensor · " in first and "level 2" in first
    assert "model answer: " in first


@pytest.mark.parametrize("argv, words_said", [
    (["quiz", "--search", ""], "type at least one word"),
    (["quiz", "--search", "bucket", "--review"], "use them without"),
    (["quiz", "bucket"], "to find questions by words, use --search bucket"),
    (["quiz", "--bookmark", "no-such-question"], "no question 'no-such-question'"),
    (["quiz", "--bookmark", "ddp-bucket-rebuld"], "did you mean ddp-bucket-rebuild"),
])
def test_bad_search_and_bookmark_input_is_a_usage_error(argv, words_said):
    outcome = run_cli(*argv)
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code == 2 and words_said in outcome.stderr, outcome.stderr
    assert Store.open().bookmarks() == {}


def test_no_match_says_what_to_try():
    outcome = run_cli("quiz", "--search", "zzzqqqxxy")
    assert outcome.exit_code == 0 and "No question matches 'zzzqqqxxy'" in outcome.stdout


def test_bookmark_then_study_the_bookmarked_set_in_plain_mode(bank):
    outcome = run_cli("quiz", "--bookmark", "ddp-bucket-rebuild", "--bookmark", "sampler-padding")
    assert outcome.exit_code == 0, outcome.stderr
    assert "2 questions bookmarked" in outcome.stdout
    assert run_cli("quiz", "--unbookmark", "sampler-padding").exit_code == 0
    outcome = run_cli("quiz", "--plain", "--bookmarked", stdin="q\n")
    assert outcome.exit_code == 0, outcome.stderr
    assert "(practice): 1 question" in outcome.stdout
    marked = bank.questions["ddp-bucket-rebuild"]
    assert f"1/1 · {marked.topic} · level {marked.level} · {marked.kind}" in outcome.stdout


def test_studying_bookmarks_without_any_says_how_to_make_one():
    outcome = run_cli("quiz", "--plain", "--bookmarked", stdin="q\n")
    assert outcome.exit_code == 0
    assert "No bookmarked questions yet" in outcome.stdout and "--bookmark ID" in outcome.stdout
