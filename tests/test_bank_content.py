"""The question bank's content meets its bar: coverage, mix of kinds, evidence links, answer structure.

These tests read the real bank through the loader (which already rejects malformed files), and assert
what the loader cannot: that the bank is broad and deep enough, and that its model answers are shaped
the way the quiz presents them.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS
from ddpfsdp.demos.base.shapes import model_params
from ddpfsdp.demos.registry import DEMOS
from ddpfsdp.quiz.loader import load_bank

TOPICS = ("ddp", "sampler", "collectives", "memory", "fsdp-mechanics", "fsdp-wrap", "sharding", "comm",
          "precision", "fsdp2-debug", "dtensor", "operations", "debugging", "two-d",
          "pipeline", "context-parallel", "expert-parallel", "at-scale")
KINDS = ("single", "multi", "numeric", "order", "explain")
SECTIONS = ("## Why", "## Common mistake", "## Evidence")
# Each distinct linked demo configuration is run once by tests/test_bank_evidence.py; this keeps that
# file within the CI budget. The failure lab's links are not counted: tests/test_faults.py runs every
# fault once per session and checks all of its checks. The 2-D run's two (4 processes each) are shared
# with tests/test_two_d_run.py, which launches them anyway, and the pipeline's two (--compare, and
# --dp 2 on 4 processes) with tests/test_pipeline_demo.py. `zro --model tiny` is the one run whose
# top-level checks measure zro's traffic (compare judges zro's memory only): 2 ranks, about 8 s. `demo moe`'s
# one (4 processes, two ep groups of 2, two short steps) is shared with tests/test_moe_demo.py; the straggler's,
# the checkpoint resume's and local SGD's with tests/test_at_scale_demos.py; `cp --model tiny` (4 processes, about
# 13 s) with tests/test_context_parallel.py.
MAX_DEMO_CONFIGS = 25
# Topics whose demos are still to come: their questions join the linked share once those demos' checks exist
# to link them to.
AWAITING_DEMOS: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def bank():
    return load_bank()


@pytest.fixture(scope="module")
def questions(bank):
    return list(bank.questions.values())


def test_the_topics_in_order(bank):
    assert tuple(bank.topics) == TOPICS


def test_at_least_200_questions_and_15_per_topic(bank, questions):
    assert len(questions) >= 200
    for topic in TOPICS:
        assert len(bank.in_topic(topic)) >= 15, topic


def test_every_choice_question_gives_a_reason_per_choice(questions):
    for q in questions:
        if q.kind in ("single", "multi"):
            assert len(q.why) == len(q.choices), q.id
            right = {q.answer} if q.kind == "single" else set(q.answer)
            for choice, reason in zip(q.choices, q.why):
                # The reason's verdict agrees with the key: a "Right:" line on a wrong choice misleads.
                assert reason.startswith("Right:" if choice in right else "Wrong:"), (q.id, reason)


def test_every_topic_spans_levels_1_to_4(bank):
    for topic in TOPICS:
        assert {q.level for q in bank.in_topic(topic)} == {1, 2, 3, 4}, topic


def test_kinds_are_mixed(questions):
    kinds = Counter(q.kind for q in questions)
    assert set(kinds) == set(KINDS)
    assert kinds["explain"] >= 15
    for kind in ("single", "multi", "numeric", "order"):
        assert kinds[kind] >= 5, kind


def test_explain_questions_carry_talking_points(questions):
    for q in questions:
        if q.kind == "explain":
            assert len(q.talking_points) >= 3, q.id


def test_at_least_12_spot_the_flaw(questions):
    flaws = [q for q in questions if q.spot_the_flaw]
    assert len(flaws) >= 12
    # Spread over the bank, not bunched in one topic.
    assert len({q.topic for q in flaws}) >= 7


def test_at_least_60_percent_link_a_demo_with_evidence(questions):
    linked = [q for q in questions if q.demo is not None]
    assert len(linked) >= 0.6 * len([q for q in questions if q.topic not in AWAITING_DEMOS])
    for q in linked:
        assert q.evidence, f"{q.id} links a demo but names no evidence check"
        assert set(q.evidence) <= set(DEMOS[q.demo.name].checks), q.id


def test_linked_demo_configurations_stay_few(questions):
    configs = {(q.demo.name, q.demo.args) for q in questions if q.demo is not None and q.demo.name != "fault"}
    assert len(configs) <= MAX_DEMO_CONFIGS, sorted(configs)


def test_training_demo_links_use_the_tiny_model(questions):
    for q in questions:
        if q.demo is not None and DEMOS[q.demo.name].kind == "training":
            args = list(q.demo.args)
            if "--simulate" in args:  # fake tensors: interview scale costs seconds, not memory
                assert args[args.index("--world") + 1] == "64" and "--params" in args, q.id
                continue
            assert "--model" in args and args[args.index("--model") + 1] == "tiny", q.id


# Every numeric answer, worked out by hand from the question's own arguments (`calc.args`).
# Wire bytes per rank on a ring of n: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n of
# the buffer (Patarasuk & Yuan 2009; the NCCL tests' "bus bandwidth" factors). Bytes per parameter
# (params + grads + optimizer): fp32 Adam 4 + 4 + 8; bf16-mixed (PyTorch autocast / FSDP2
# MixedPrecisionPolicy with fp32 reduce) holds the same 4 + 4 + 8; the ZeRO paper's mixed-precision
# Adam 2 + 2 + 12 (fp32 master 4, moments 4 + 4); pure bf16 2 + 2 + 2 x 2. ZeRO-3 and FSDP divide all
# of it by N, ZeRO-1 only the optimizer's share, HSDP by its group G (ZeRO paper, section 5).
ACTIVATION_LARGE = 4 * 1024 * 1024  # large preset (24 layers, d 1024, seq 1024, vocab 24576): b*s*d, b = 4
ACTIVATION_BASE = 8 * 1024 * 768  # base preset (12 layers, d 768, seq 1024, vocab 24576): b*s*d, b = 8
HAND_COMPUTED: dict[str, float] = {
    "coll-ring-all-reduce-bytes": 1e9 * 2 * 7 / 8,
    "coll-reduce-scatter-bytes": 4e9 * 15 / 16,
    "coll-hierarchical-bytes": 125e6 * 2 * 1 / 2,
    "comm-ddp-step-bytes": 1e9 * 4 * 2 * 7 / 8,  # all-reduce of 4 GB of fp32 gradients
    "comm-fsdp-step-bytes": 2 * 4e9 * 7 / 8 + 4e9 * 7 / 8,  # two all-gathers + one reduce-scatter
    "comm-ratio-zero3-ddp": 3 / 2,  # 3(N-1)/N over 2(N-1)/N
    "comm-all-gather-7b": 14e9 * 7 / 8,
    "dt-fp8-allgather-bytes": 2 * 7e9 * 1 * 7 / 8,  # float8 weights (1 byte), gathered in forward and backward
    # bf16 all-gathers in groups of 8, fp32 reduce-scatter in them, fp32 shard all-reduced across 8 groups
    "comm-hsdp-cross-node": 2 * 70e9 * 2 * 7 / 8 + 70e9 * 4 * 7 / 8 + 70e9 / 8 * 4 * 2 * 7 / 8,
    "comm-hsdp-cross-node-bytes": 35e9 * 2 * 7 / 8,
    "comm-ddp-autocast-bytes": 7e9 * 4 * 2 * 7 / 8,  # autocast leaves the gradients fp32
    "comm-fsdp-bf16-mixed-bytes": 2 * 7e9 * 2 * 7 / 8 + 7e9 * 4 * 7 / 8,
    "comm-fsdp-bf16-reduce-bytes": 2 * 7e9 * 2 * 7 / 8 + 7e9 * 2 * 7 / 8,
    "ddp-optimizer-bytes-tiny": 932_608 * 2 * 4,  # AdamW's two fp32 moments of the tiny GPT
    "ddp-compress-hook-bytes": 2.6e9 * 2 * 15 / 16,
    "fsdp-accum-grad-memory": 7e9 * 4,
    "wrap-block-gather-bytes": 202_383_360 * 2,
    "mem-bytes-per-param-fp32": 4 + 4 + 8,
    "mem-2b-adam": 2e9 * (4 + 4 + 8),
    "mem-bytes-per-param-bf16-master": 2 + 2 + 4 + 4 + 4,
    "mem-7b-ddp-8x80": 7e9 * (4 + 4 + 8),
    "mem-min-gpus-7b": 2,  # 7e9 x 16 B = 112 GB; 112 / 80 = 1.4, so 2 GPUs of 80 GB
    "mem-max-params-ddp": 80e9 / 16,
    "mem-offload-host-bytes": 70e9 * 16 / 64,
    "mem-meta-init-bytes": 70e9 * 4 / 64,
    # Each block saves b*s*d*(2r + 14c) bytes (r: residual bytes, c: compute bytes; bf16-mixed r 4, c 2);
    # the head saves b*s*d*(r + c) and the fp32 log-softmax b*s*vocab*4, whose gradient adds as much again.
    "mem-activations-no-checkpoint": 24 * ACTIVATION_LARGE * (2 * 4 + 14 * 2)
    + ACTIVATION_LARGE * (4 + 2) + 2 * 4 * 1024 * 24576 * 4,
    # Checkpointed: each block keeps its input (r bytes); the log-softmax's gradient, larger than one
    # recomputed block, sets the peak.
    "mem-activations-checkpointed": 24 * ACTIVATION_LARGE * 4 + ACTIVATION_LARGE * (4 + 2) + 2 * 4 * 1024 * 24576 * 4,
    "mem-accumulation-fsdp-grads": 7e9 * 4,
    "mem-fsdp-two-gpus-state": 1.3e9 * (4 + 4 + 8) / 2,  # full sharding on 2 GPUs: half of DDP's 20.8 GB
    "mem-offload-hsdp-node-ram": 70e9 * 16 / 8 * 8,  # a 1/8 shard of 16 B per parameter, 8 GPUs per node
    # DeepSpeed 0.19 estimate_zero3_model_states_mem_needs, offload_param with zero.Init:
    # 18 bytes x params / nodes x 1.5 (additional_buffer_factor); 32 GPUs are 4 nodes of 8.
    "mem-deepspeed-offload-node-ram": 70e9 * 18 / 4 * 1.5,
    "prec-bf16-mixed-bytes": 4 + 4 + 8,
    "prec-pure-bf16-bytes": 2 + 2 + 2 * 2,
    # fp32: r = c = 4; checkpointed as above.
    "prec-checkpoint-activation-bytes": 12 * ACTIVATION_BASE * 4 + ACTIVATION_BASE * (4 + 4) + 2 * 8 * 1024 * 24576 * 4,
    "shard-zero3-7-5b": 7.5e9 * 16 / 64,  # the ZeRO paper's Figure 1: 1.9 GB
    "shard-zero1-7-5b": 7.5e9 * (2 + 2) + 7.5e9 * 12 / 64,  # the ZeRO paper's Figure 1: 31.4 GB
    "shard-hsdp-memory": 13e9 * 16 / 8,
    "shard-hsdp-min-group": 14,  # 70e9 x 16 B = 1120 GB = 14 x 80 GB exactly
    # ZeroRedundancyOptimizer under autocast: fp32 params and grads whole, AdamW's two fp32 moments / 8.
    "shard-zero1-bf16-mixed": 7e9 * (4 + 4) + 7e9 * 8 / 8,
    "shard-deepspeed-zero3-state": 7e9 * 16 / 8,
    # DeepSpeed ZeRO-1, torch_autocast: fp32 params and grads whole (4 + 4 bytes), and per rank 1/8 of
    # its fp32 copy of the partition (4) and AdamW's two fp32 moments (8): 56 GB + 10.5 GB = 66.5 GB.
    "shard-deepspeed-zero1-autocast": 7e9 * (4 + 4) + 7e9 * (4 + 8) / 8,
    # Megatron-LM's TP: 4 all-reduces per block per step (2 forward, 2 backward) of b*s*d bf16
    # activations, 2 x 7/8 of each sent per rank on a ring of 8; 86 blocks, b 1, s 4096, d 8192.
    "twod-tp-bytes": 4 * 86 * (1 * 4096 * 8192 * 2) * 2 * 7 / 8,
    # Pipelines (GPipe; Narayanan et al. 2021): fill and drain take p - 1 slots of m: idle 3 of 8 + 3 slots.
    "pipe-gpipe-bubble": 3 / 11,
    # 1F1B over 8 stages: 7 / (m + 7) <= 0.1  <=>  m >= 63 (and torch's Schedule1F1B wants m >= 8).
    "pipe-microbatches-for-target": 63,
    # 8 micro-batches x 3 boundaries x 2 directions x b*s*d (1 x 4096 x 8192) bf16 elements.
    "pipe-p2p-bytes": 8 * 3 * 2 * (1 * 4096 * 8192 * 2),
    # Ring attention (torch 2.13's _templated_ring_attention and its backward): per layer, cp - 1 bf16 K/V blocks
    # forward, cp - 1 again backward and cp fp32 dK/dV blocks; a block is 2 x 16,384 tokens x 1024 x 2 bytes.
    "cp-ring-bytes": 32 * (7 * 67_108_864 + 7 * 67_108_864 + 8 * 2 * 67_108_864),
    # Contiguous causal split over 8: chunk 7 costs 7 + 1/2 of the 8²/2 = 32 blocks.
    "cp-causal-imbalance": 7.5 / 32,
    # 4·n²·d·(1/2) / F >= 2·n·d·2 / B  <=>  n >= 2F/B.
    "cp-when-ring-hides": 2 * 989e12 / 50e9,
    # t = 8192 / 4 tokens: 24 blocks of t·d·(2·4 + 14·2), the head t·d·(4 + 2), the fp32 log-softmax (t·vocab·4);
    # early in backward its gradient (192 MiB) outweighs the ring's 3 bf16 K/V and 3 fp32 dK/dV blocks (72 MiB).
    "cp-activation-memory": 24 * 2048 * 1024 * 36 + 2048 * 1024 * 6 + 2 * 2048 * 24576 * 4,
    # ceil(1.25 x 8192 x 2 / 64) = 320 slots per expert.
    "ep-capacity": 320,
    # Capacity ceil(16 x 2 / 4) = 8; only the expert with 14 overflows, by 6.
    "ep-dropped": 14 - 8,
    # 0.01 x 4 x (0.7 x 0.4 + 3 x 0.1 x 0.2)
    "ep-aux-loss-value": 0.01 * 4 * 0.34,
    # 4 all-to-alls x 32 layers, each 7/8 of 16,384 slots x 4096 bf16 elements.
    "ep-all-to-all-bytes": 4 * 32 * 16384 * 4096 * 2 * 7 // 8,
    # FSDP: (2 + 2 + 4) x 7/8 bytes per expert parameter; EP: 4 x 16,384 x 4096 x 2 x 7/8 per layer: E·P_e / (T·k·d).
    "ep-vs-fsdp": 64 * (8 * 4096**2 + 5 * 4096) / (16384 * 4096),
    # At scale. A step is fast only if every rank is: 1 - (1 - p)^N.
    "scale-straggler-probability": 1 - (1 - 0.001) ** 10_000,
    # One 300 ms delay whenever any of 1,000 ranks is late.
    "scale-straggler-expected-step": 1000 + 300 * (1 - (1 - 0.001) ** 1000),
    # bf16 params 2 + fp32 master 4 + two fp32 moments 8 = 14 bytes, no gradients, over 512 ranks.
    "scale-checkpoint-175b-shard": 175e9 * 14 / 512,
    # The slower of 4.79 GB at 2 GB/s per rank and 2.45 TB at 500 GB/s for the file system.
    "scale-checkpoint-175b-write": max(175e9 * 14 / 512 / 2e9, 175e9 * 14 / 500e9),
    # Young: sqrt(2 C M) with C = 5 min, M = 60 min.
    "scale-young-interval": (2 * 5 * 60) ** 0.5,
    "scale-scaling-efficiency": 1.1 / 2,
    # The all-reduce across 128 nodes of each GPU's 1/8: 2 x 127/128 x 28 GB / 8.
    "scale-hierarchical-nic-bytes": 2 * 127 / 128 * 28e9 / 8,
    # 2 x 7/8 x 14 GB at 450 GB/s (reduce-scatter and all-gather) + 2 x 63/64 x 14 GB/8 at 50 GB/s, in ms.
    "scale-hierarchical-time": (2 * 7 / 8 * 14e9 / 450e9 + 2 * 63 / 64 * 14e9 / 8 / 50e9) * 1e3,
    # 875M params a shard: fp32 params and grads 8 bytes each, 8-bit Adam 2 bytes + 2 fp32 absmax per 2,048.
    "scale-8bit-adam-zero3": 875_000_000 * 8 + 2 * (875_000_000 + 4 * -(-875_000_000 // 2048)),
}


def test_numeric_answers_match_the_hand_computed_ones(questions):
    numeric = {q.id: q for q in questions if q.kind == "numeric"}
    assert len(numeric) >= 10
    assert set(numeric) == set(HAND_COMPUTED), "work out each new numeric answer by hand in HAND_COMPUTED"
    for qid, q in numeric.items():
        assert q.calc is not None and q.calc.fn in QUIZ_FUNCTIONS, qid
        assert q.value == pytest.approx(HAND_COMPUTED[qid], rel=1e-12), qid


def test_numeric_questions_about_the_demo_model_use_its_real_size(questions):
    """A question that quotes the tiny model's parameter count must quote the count the demo builds."""
    tiny = model_params("gpt", "tiny")
    for q in questions:
        if q.calc is not None and "tiny GPT" in q.prompt:
            assert int(q.calc.args["params"]) == tiny, q.id
            assert f"{tiny:,}" in q.prompt, q.id


def _opening(markdown: str) -> str:
    return markdown.strip().split("\n\n", 1)[0]


def test_every_answer_opens_with_the_crisp_answer_then_the_sections(questions):
    for q in questions:
        text = q.model_answer()
        opening = _opening(text)
        assert not opening.startswith("#"), f"{q.id}: the answer must open with prose, not a heading"
        sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", opening) if s.strip()]
        assert 1 <= len(sentences) <= 5, f"{q.id}: opening has {len(sentences)} sentences"
        positions = [text.find(section) for section in SECTIONS]
        assert all(p > 0 for p in positions), f"{q.id}: missing one of {SECTIONS}"
        assert positions == sorted(positions), f"{q.id}: sections out of order"
        for section, start in zip(SECTIONS, positions):
            body = text[start + len(section):].split("\n## ", 1)[0]
            assert len(body.strip()) >= 40, f"{q.id}: {section} is empty"


def test_evidence_sections_name_the_linked_demo_and_checks(questions):
    for q in questions:
        if q.demo is None:
            continue
        evidence = q.model_answer().split("## Evidence", 1)[1]
        assert f"ddpfsdp demo {q.demo.name}" in evidence, q.id
        for check in q.evidence:
            assert f"`{check}`" in evidence, f"{q.id}: evidence section does not mention {check}"


def test_fsdp_is_never_taught_to_all_reduce_gradients(bank):
    """The bank's most important correctness fact, asserted where it is taught."""
    q = bank.questions["fsdp-reduce-scatter-not-all-reduce"]
    assert "reduce-scatter" in q.answer
    assert "all-reduces" not in q.answer.split(";")[0]
    assert "reduce-scatters" in _opening(q.model_answer())


def test_no_orphan_answer_files(bank):
    from ddpfsdp.quiz.loader import default_answers_dir

    ids = set(bank.questions)
    orphans = sorted(p.stem for p in default_answers_dir().glob("*.md") if p.stem not in ids)
    assert not orphans, f"answer files without a question: {orphans}"


def test_the_bank_leaks_no_answer_length_cue(bank):
    from ddpfsdp.quiz.cues import LENGTH_RANK_SHARE_LIMIT, LONGEST_SHARE_LIMIT, cue_stats

    stats = cue_stats(bank)
    assert stats.problems == []
    assert stats.longest_share <= LONGEST_SHARE_LIMIT
    assert stats.four_choice >= 100 and max(stats.rank_shares) <= LENGTH_RANK_SHARE_LIMIT
    assert 0.9 <= stats.mean_length_ratio <= 1.1


def test_no_choice_stops_mid_sentence(bank):
    from ddpfsdp.quiz.cues.cutoff import cut_off_choices

    assert cut_off_choices(bank) == []


def test_no_text_feature_or_classifier_finds_the_keys(bank):
    from ddpfsdp.quiz.cues.check import text_cues

    cues = text_cues(bank)
    assert len(cues.single.questions) >= 100 and cues.single.judged and cues.multi.judged
    assert cues.limit_problems == []
