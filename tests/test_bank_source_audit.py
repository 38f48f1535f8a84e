"""Bank entries a source audit found wrong in their detail, each held against the source or a run:
the fused-qkv split (torch.chunk), sequence parallelism's whole tensors (Korthikanti et al. §4.2), the
slow-links layout's sharding degree, DDP's used-parameter map (one entry per parameter), DDP's buffer
sync in torch 2.13, and order questions whose independent steps may come in either order. Then a second
audit's: zro never called ZeRO-1, zro's traffic linked to the run that measures it, and the pipeline's
figures held to the analytic model (the first stage's peak, the bubble's two forms and their sources,
the 10% bound, interleaving's sends). tests/test_bank_torch_claims.py holds the claims about torch's
runtime to torch itself."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from ddpfsdp.quiz import grading
from ddpfsdp.quiz.loader import BankError, load_bank


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def _answer_text(bank, qid: str) -> str:
    return bank.questions[qid].model_answer()


def test_fused_qkv_key_names_what_torch_chunk_gives_rank_0(bank):
    import torch

    # [q; k; v] rows, each block head-major: row r of block part p belongs to head r // head_dim.
    heads, head_dim, tp = 4, 2, 2
    d = heads * head_dim
    labels = [(part, row // head_dim) for part in "qkv" for row in range(d)]
    rows = torch.arange(3 * d)
    rank0 = {labels[int(r)] for r in torch.chunk(rows, tp, dim=0)[0]}  # Shard(0) is torch.chunk
    assert rank0 == {("q", h) for h in range(heads)} | {("k", h) for h in range(heads // tp)}
    question = bank.questions["twod-fused-qkv"]
    assert "the k of the first half of the heads, no v" in question.answer
    answer = _answer_text(bank, "twod-fused-qkv")
    assert "first half of the heads" in answer and "no v" in answer
    assert "half of k for every head" not in answer


def test_sp_memory_counts_4_of_korthikanti_s_10_sbh_kept_whole(bank):
    answer = _answer_text(bank, "twod-sp-memory")
    assert "4 of Korthikanti et al.'s 10 sbh" in answer and "2 of the 10" not in answer


def test_slow_links_does_not_offer_hsdp_where_16_way_sharding_is_needed(bank):
    answer = _answer_text(bank, "twod-slow-links")
    assert "FSDP (or HSDP)" not in answer and "16-way" in answer
    why = bank.questions["twod-slow-links"].why[0]
    assert "only 8 ways" in why


def test_unused_parameters_map_has_an_entry_per_parameter(bank):
    question = bank.questions["fault-unused-parameters-fix"]
    assert "6 used tensors" not in question.answer and "each of the 6 parameters" in question.answer


def test_batchnorm_cause_names_forward_sync_buffers_as_torch_2_13_does(bank):
    from torch.nn.parallel import DistributedDataParallel

    signature = inspect.signature(DistributedDataParallel.__init__).parameters
    if "forward_sync_buffers" in signature:  # torch 2.13: broadcast_buffers deprecated, default None
        assert signature["broadcast_buffers"].default is None and signature["forward_sync_buffers"].default is None
    question = bank.questions["fault-batchnorm-sync-cause"]
    assert not any("broadcast_buffers=True (the default)" in why for why in question.why)
    assert any("forward_sync_buffers" in why for why in question.why)
    assert "forward_sync_buffers" in _answer_text(bank, "fault-batchnorm-sync-cause")


def test_setup_order_accepts_the_mesh_and_the_meta_model_in_either_order(bank):
    question = bank.questions["twod-setup-order"]
    steps = list(question.steps)
    assert question.any_order == (tuple(steps[:2]),)
    assert grading.grade_order(question, steps).correct
    swapped = [steps[1], steps[0], *steps[2:]]
    grade = grading.grade_order(question, swapped)
    assert grade.correct and grade.score == 1.0
    assert all(step.in_place for step in grading.review_steps(question, grade))
    # The dependent steps still count: TP after FSDP is wrong.
    wrong = [*steps[:2], steps[3], steps[2], *steps[4:]]
    graded = grading.grade_order(question, wrong)
    assert not graded.correct and graded.score == pytest.approx(4 / 6)
    assert "step 3 should be" in graded.verdict


@pytest.mark.parametrize("any_order, says", [
    ("[[1, 3]]", "consecutive"), ("[[1]]", "at least two"), ("[[1, 9]]", "at least two"), ("[[1, 2], [2, 3]]", "no other"),
])
def test_a_bad_any_order_is_refused_with_what_to_write(tmp_path, any_order, says):
    bank_dir, answers_dir = tmp_path / "bank", tmp_path / "answers"
    bank_dir.mkdir(), answers_dir.mkdir()
    (answers_dir / "o.md").write_text("An answer.")
    (bank_dir / "t.toml").write_text(f'''topic = "t"
title = "T"
order = 1
description = "d"

[[question]]
id = "o"
level = 1
kind = "order"
prompt = "Order them."
steps = ["a", "b", "c"]
any_order = {any_order}
why = ["1", "2", "3"]
''')
    with pytest.raises(BankError, match=says):
        load_bank(bank_dir, answers_dir)


# --- what a second audit found: names, links and pipeline figures ---------------------------------------


def _flat(text: str) -> str:
    return " ".join(text.split())


_ZRO = r"`?(?:ZeroRedundancyOptimizer|zro)`?"
_ZRO_CALLED_ZERO1 = [
    re.compile(rf"ZeRO-1,?\s*\(?\s*(?:as\s+)?(?:implemented by\s+|PyTorch's\s+)?{_ZRO}"),
    re.compile(rf"{_ZRO}\s*\(\s*ZeRO-1\s*\)"),
    re.compile(r"PyTorch's ZeRO-1|ZeRO-1 as PyTorch implements"),
]


def _sentences(text: str):
    for paragraph in re.split(r"\n\s*\n|^#+ .*$", text, flags=re.M):
        yield from re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", _flat(paragraph or ""))


def zro_called_zero1(text: str) -> list[str]:
    """Sentences that call zro (PyTorch's ZeroRedundancyOptimizer) ZeRO-1, a name that belongs to DeepSpeed's
    stage here (calc's zero1): by apposition, or as the ZeRO-1 a demo runs (no demo runs DeepSpeed)."""
    found = []
    for sentence in _sentences(text):
        if any(pattern.search(sentence) for pattern in _ZRO_CALLED_ZERO1):
            found.append(sentence)
        elif re.search(r"\bdemo\b|gloo", sentence) and re.search(r"(?<!DeepSpeed's )(?<!paper's )ZeRO-1", sentence):
            found.append(sentence)
    return found


@pytest.mark.parametrize("text", [
    "ZeRO-1 as implemented by ZeroRedundancyOptimizer broadcasts updated parameter partitions.",
    "Assuming a post-step broadcast as in `ZeroRedundancyOptimizer` (ZeRO-1), which FSDP does not need.",
    "`zro_shards_optimizer` shows ZeRO-1 (PyTorch's ZeroRedundancyOptimizer) holding 1/N.",
    "`ddpfsdp demo compare` runs PyTorch's ZeRO-1, ZeroRedundancyOptimizer, on real processes.",
    "`ddpfsdp demo compare --model tiny`: `losses_agree` holds DDP, ZeRO-1, FSDP grad-op and FSDP full.",
    "No demo links here: the compare demo's ZeRO-1 checks cover memory, not traffic.",
    "A model trains with **ZeRO-1 as PyTorch's ZeroRedundancyOptimizer** on a node of 8.",
])
def test_the_zro_naming_check_finds_each_form_an_audit_found(text):
    assert zro_called_zero1(text) == [_flat(text)]


@pytest.mark.parametrize("text", [
    "DeepSpeed's ZeRO-1 under `torch_autocast` holds more than `ZeroRedundancyOptimizer`.",
    "No demo runs DeepSpeed here. Analytic: `ddpfsdp calc --params 7B --gpus 8` shows ZeRO-1 at 66.5 GB.",
    "The paper's ZeRO-1 sends 2(N-1)/N; zro (ZeroRedundancyOptimizer) adds a broadcast.",
])
def test_the_zro_naming_check_leaves_deepspeed_s_and_the_paper_s_zero1_alone(text):
    assert zro_called_zero1(text) == []


def test_zro_is_never_called_zero1_in_the_bank_or_the_answers(bank):
    from ddpfsdp.quiz.loader import default_answers_dir

    found = []
    for question in bank.questions.values():
        texts = [question.prompt]
        for name in ("choices", "why", "talking_points", "steps"):
            texts += list(getattr(question, name, None) or ())
        found += [f"{question.id}: {s}" for text in texts for s in zro_called_zero1(str(text))]
    for path in sorted(default_answers_dir().glob("*.md")):
        found += [f"{path.name}: {s}" for s in zro_called_zero1(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_zro_is_never_called_zero1_in_what_the_commands_print():
    """The demo's summary, calc's help and notes, and the drill's prompts name zro as what it is."""
    from click.testing import CliRunner

    from ddpfsdp.demos import registry
    from ddpfsdp.quiz import drill
    from ddpfsdp.quiz.cli import cli

    texts = {f"demo {name}": demo.summary for name, demo in registry.DEMOS.items()}
    texts["calc --help"] = CliRunner().invoke(cli, ["calc", "--help"]).output
    explained = CliRunner().invoke(cli, ["calc", "--params", "7B", "--gpus", "8", "--precision", "bf16-mixed", "--json"])
    texts["calc notes"] = " ".join(json.loads(explained.output)["notes"])
    problems = [p for p in drill.generate(1, 200, ["model-state"]) if p.args["strategy"] == "zro"]
    assert problems
    texts.update({p.id: p.prompt for p in problems})
    assert all(p.prompt.count("ZeroRedundancyOptimizer") == 1 for p in problems), problems[0].prompt
    found = [f"{where}: {sentence}" for where, text in texts.items() for sentence in zro_called_zero1(text)]
    assert not found, "\n".join(found)


def test_the_answers_point_at_pages_that_hold_what_they_name():
    """The README's sections moved to docs/: an answer that sends the reader to one names the page."""
    from ddpfsdp.quiz.loader import default_answers_dir

    stale = [path.name for path in default_answers_dir().glob("*.md") if "the README's" in path.read_text("utf-8")]
    assert stale == []
    recorder = (default_answers_dir() / "dbg-flight-recorder.md").read_text("utf-8")
    assert "docs/failure-lab.md" in recorder and "## Reading a flight-recorder table" in (
        Path(__file__).parents[1] / "docs" / "failure-lab.md").read_text("utf-8")


def test_the_bubble_working_names_which_paper_gives_which_ratio():
    """GPipe gives the bubble as a share of the step, (K-1)/(M+K-1); Megatron-LM's (p-1)/m is idle time over
    the ideal time. The drill's working once said the papers quote idle over work."""
    from ddpfsdp.quiz import drill

    problem = next(p for p in drill.generate(1, 300, ["pipeline"]) if p.fn == "pipeline_bubble_fraction")
    assert "GPipe's paper gives it for one stage per rank, (K-1)/(M+K-1)" in problem.working
    assert "Megatron-LM's (p-1)/(v·m) is idle over the ideal time" in problem.working
    assert "papers quote" not in problem.working


def test_zro_s_broadcast_traffic_links_the_zro_demo_that_measures_it(bank):
    question = bank.questions["comm-zero1-torch-broadcast"]
    assert question.demo is not None and (question.demo.name, question.demo.args) == ("zro", ("--model", "tiny"))
    assert "comm_matches_theory" in question.evidence
    assert "No demo links here" not in question.model_answer()


def test_the_pp_activation_distractor_is_wrong_by_the_model(bank):
    from ddpfsdp.demos.theory.pipeline import in_flight

    question = bank.questions["pipe-when-to-use"]
    distractor = "PP halves the first stage's peak activation memory under 1F1B for every doubling of the number of stages"
    assert distractor in question.choices and distractor not in question.answer
    assert "saves per micro-batch" not in " ".join(question.choices)  # literally true, so never a wrong choice
    why = question.why[question.choices.index(distractor)]
    assert "stage 0 holds pp micro-batches" in why and "about one full micro-batch's" in why
    # Stage 0 holds min(m, pp) micro-batches of 1/pp of the layers: one full micro-batch's worth at any pp.
    assert {in_flight(pp, 16, "1f1b", 1, 0)["microbatches"] / pp for pp in (2, 4, 8, 16)} == {1.0}


def test_the_first_stage_s_activations_do_not_halve_with_the_stages_in_calc():
    import json

    from click.testing import CliRunner

    from ddpfsdp.quiz.cli import cli

    def first_stage(pp: int) -> int:  # 7B: 32 blocks, so 16, 8 and 4 per stage
        result = CliRunner().invoke(cli, ["calc", "--params", "7B", "--gpus", "8", "--pp", str(pp), "--microbatches",
                                          "16", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["pipeline"]["ranks"][0]["activation_bytes"]

    assert first_stage(2) == first_stage(4) == first_stage(8)


def test_stage_balance_blames_the_head_for_time_and_the_embedding_for_memory(bank):
    import json

    from click.testing import CliRunner

    from ddpfsdp.quiz.cli import cli

    question = bank.questions["pipe-stage-balance"]
    assert question.answer.startswith("The last stage also runs the LM head and the loss")
    assert "first and last stages also hold the embedding" not in " ".join(question.choices)
    answer = _flat(question.model_answer())
    assert "embedding is a lookup, cheap in compute: what it adds is memory" in answer
    points = " ".join(bank.questions["pipe-explain-across-nodes"].talking_points)
    assert "the embedding and the LM head sit on the first and last stages, so give them fewer blocks" not in points
    assert "LM head and loss make the last stage the slowest" in points
    # The answer's evidence: the first stage is the memory peak of `calc --model large --gpus 4 --pp 4`.
    result = CliRunner().invoke(cli, ["calc", "--model", "large", "--gpus", "4", "--pp", "4", "--json"])
    ranks = json.loads(result.output)["pipeline"]["ranks"]
    assert max(ranks, key=lambda row: row["total_bytes"])["rank"] == 0


def test_each_bubble_formula_is_attributed_to_its_source(bank):
    cause = _flat(bank.questions["pipe-bubble-cause"].model_answer())
    gpipe = _flat(bank.questions["pipe-gpipe-bubble"].model_answer())
    for answer in (cause, gpipe):
        assert "The papers" not in answer and "papers' ratio" not in answer
        assert "(K-1)/(M+K-1)" in answer and "Huang et al. 2019" in answer
        assert "Megatron-LM" in answer and "Ultra-Scale Playbook" in answer
    assert "the idle share of the whole step" in cause and "over the ideal, bubble-free compute time" in cause
    assert "the idle share of the whole step" in gpipe and "idle time over the ideal compute time" in gpipe
    assert "The formula is GPipe's (Huang et al. 2019) and the Ultra-Scale Playbook's" not in gpipe


def test_nine_times_p_minus_1_micro_batches_give_at_most_not_under_10_percent(bank):
    from fractions import Fraction

    from ddpfsdp.demos.theory.pipeline import bubble

    assert Fraction(bubble(8, 63, "1f1b")["bubble_fraction"]).limit_denominator(1000) == Fraction(1, 10)
    points = " ".join(bank.questions["pipe-explain-across-nodes"].talking_points)
    assert "keeps it under 10%" not in points and "keeps it at most 10% (exactly 10% at m = 9(p-1))" in points
    answer = _flat(bank.questions["pipe-explain-across-nodes"].model_answer())
    assert "keep it at most 10% (exactly 10% at m = 9 (p-1))" in answer


def test_interleaving_sends_over_v_times_as_often_not_about_v(bank):
    # (pV-1)/(p-1) = V + (V-1)/(p-1): above V for every V >= 2, and 2V-1 on the end ranks.
    assert all((p * v - 1) / (p - 1) > v for p in range(2, 65) for v in range(2, 9))
    question = bank.questions["pipe-spot-interleave-free"]
    assert "over V times as often" in question.answer and "about V times" not in question.answer
    assert "about V times" not in _flat(question.model_answer())
    points = " ".join(bank.questions["pipe-explain-across-nodes"].talking_points)
    assert "at the cost of V times the boundary sends" not in points and "(pV-1)/(p-1) times" in points
