"""The glossary: every term is used by the bank, and which questions use it is found, not typed."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from ddpfsdp.quiz import glossary
from ddpfsdp.quiz.bank_cache import load_bank_cached
from ddpfsdp.quiz.loader import load_bank


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    return load_bank_cached(cache_dir=tmp_path_factory.mktemp("bank-cache"))


@pytest.fixture(scope="module")
def terms():
    return glossary.load()


def test_every_term_is_used_by_the_bank(bank, terms):
    used = glossary.uses(bank, terms)
    assert [name for name, questions in used.items() if not questions] == []
    # The terms interviews lean on are there.
    assert {"bucket", "unit", "shard", "reshard", "prefetch", "HSDP", "sequence parallelism",
            "context parallelism", "expert parallelism", "1F1B", "ZeRO stages", "DTensor", "DeviceMesh",
            "all-reduce", "reduce-scatter", "all-gather"} <= set(terms)


def test_each_terms_questions_are_the_ones_whose_text_uses_it(bank, terms):
    used = glossary.uses(bank, terms)
    hsdp = bank.questions["shard-hsdp-why"]
    assert "shard-hsdp-why" in used["HSDP"]
    assert "HSDP" in glossary.question_text(hsdp, hsdp.model_answer())
    for name in ("1F1B", "FlatParameter", "all-to-all"):
        for qid in used[name]:
            question = bank.questions[qid]
            assert terms[name].found_in(glossary.question_text(question, question.model_answer()))


def test_the_lists_follow_the_bank(quiz_bank, tmp_path):
    """A term's questions come from scanning whatever bank is loaded: edit the bank, and they change."""
    bank_dir, answers_dir = quiz_bank
    before = glossary.uses(load_bank(bank_dir, answers_dir))
    assert before["reduce-scatter"] == []
    (answers_dir / "ddp-grad-sync.md").write_text("FSDP would reduce-scatter them instead.\n")
    after = glossary.uses(load_bank(bank_dir, answers_dir))
    assert after["reduce-scatter"] == ["ddp-grad-sync"]


def test_every_definition_is_a_paragraph_and_every_see_exists(terms):
    for term in terms.values():
        assert 80 <= len(term.definition) <= 700, term.name
        assert term.definition.endswith("."), term.name
        assert all(other in terms for other in term.see)


@pytest.mark.parametrize("content, said", [
    ('[[term]]\nname = "x"\ndefinition = "d"\n', "needs match"),
    ('[[term]]\nname = "x"\nmatch = ["("]\ndefinition = "d"\n', "bad match pattern"),
    ('[[term]]\nname = "x"\nmatch = ["x"]\ndefinition = "d"\nsee = ["y"]\n', "does not define"),
    ('[[term]]\nname = "x"\nmatch = ["x"]\n', "has no definition"),
])
def test_a_mistake_in_the_glossary_file_is_named(tmp_path, content, said):
    path = tmp_path / "glossary.toml"
    path.write_text(content)
    with pytest.raises(glossary.GlossaryError, match=said):
        glossary.load(path)


def test_a_term_is_found_by_any_spelling(terms):
    assert glossary.lookup(terms, "all_reduce").name == "all-reduce"
    assert glossary.lookup(terms, "hsdp").name == "HSDP"
    assert glossary.lookup(terms, "resharding").name == "reshard"
    with pytest.raises(glossary.GlossaryError, match="did you mean"):
        glossary.lookup(terms, "reshrad")


def test_a_model_answer_links_each_term_once_and_never_inside_code(terms):
    text = "DDP fills a bucket, then `all_reduce(bucket)` runs; each bucket is one all-reduce.\n\n```\nbucket\n```"
    linked = glossary.link_terms(text, terms)
    assert linked.count("(glossary:bucket)") == 1 and linked.startswith("DDP fills a [bucket](glossary:bucket)")
    assert "`all_reduce(bucket)`" in linked and "```\nbucket\n```" in linked
    assert "[all-reduce](glossary:all-reduce)" in linked
    assert glossary.term_of_link("glossary:optimizer%20state") == "optimizer state"
    assert glossary.term_of_link("https://pytorch.org") is None
    assert glossary.terms_in("HSDP all-gathers", terms) == ["HSDP", "all-gather"]


def test_glossary_command_lists_defines_and_refuses(bank):
    listing = run_cli("glossary")
    assert listing.exit_code == 0 and "reshard" in listing.stdout
    assert max(len(line) for line in listing.stdout.splitlines()) <= 80
    one = run_cli("glossary", "reduce-scatter")
    assert one.exit_code == 0 and "reduce_scatter_tensor" in one.stdout and "questions use it" in one.stdout
    document = json.loads(run_cli("glossary", "HSDP", "--json").stdout)
    assert document["terms"][0]["questions"] == glossary.uses(bank)["HSDP"]
    unknown = run_cli("glossary", "zzz")
    assert unknown.exit_code == 2 and "no glossary term 'zzz'" in unknown.stderr
