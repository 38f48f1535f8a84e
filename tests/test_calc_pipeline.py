"""`ddpfsdp calc --pp`: the `pipeline` section and its table, against hand-computed examples, and bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.base.shapes import GPT_PRESETS, GPT_SIZES
from ddpfsdp.quiz.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], terminal_width=200)


def document(*args: str) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_pipeline_section_by_hand():
    # small: 10 blocks of d 256, seq 128, vocab 4096. 4 GPUs = pp 2 x dp 2, 1F1B, m 4, micro-batch 2, fp32, AdamW.
    shape = GPT_PRESETS["small"]
    doc = document("--model", "small", "--gpus", "4", "--batch-size", "2", "--precision", "fp32",
                   "--pp", "2", "--microbatches", "4")
    section = doc["pipeline"]
    assert section["theory"] is True
    assert section["mesh"] == {"pp": 2, "dp": 2, "tp": 1}
    assert section["schedule"] == "1f1b" and section["torch_schedule"] == "Schedule1F1B"
    # Bubble: (p-1)/(m+p-1) = 1/5 of the step; ratio (p-1)/m = 1/4.
    assert section["bubble_fraction"] == pytest.approx(1 / 5)
    assert section["bubble_ratio"] == pytest.approx(1 / 4)
    first, last = section["ranks"]
    # Rank 0: 5 blocks + embeddings, 16 bytes each, FSDP over dp 2 (rounded up per shard).
    params0 = 5 * shape.block_params + shape.embedding_params
    assert first["model_state_bytes"] == 16 * -(-params0 // 2)
    # 1F1B: rank 0 holds min(m, p - 0) = 2 micro-batches, rank 1 one.
    assert (first["in_flight_microbatches"], last["in_flight_microbatches"]) == (2, 1)
    # Rank 0 saves 5 blocks x b·s·d·(2·4 + 14·4) bytes per micro-batch.
    assert first["activation_bytes"] == 2 * 5 * (2 * 128 * 256) * 64
    # Boundary b·s·d·4 bytes; 2 m (S-1) of them per step.
    assert section["boundary_bytes"] == 2 * 128 * 256 * 4
    assert section["p2p_bytes_per_step"] == 2 * 4 * 1 * 2 * 128 * 256 * 4
    assert section["global_batch"] == 2 * 4 * 2


def test_interleaved_and_gpipe_against_1f1b_in_the_same_configuration():
    base = ("--model", "small", "--gpus", "4", "--pp", "4", "--microbatches", "8")
    one = document(*base)["pipeline"]
    gpipe = document(*base, "--schedule", "gpipe")["pipeline"]
    interleaved = document(*base[:-2], "--microbatches", "8", "--schedule", "interleaved")["pipeline"]
    # p 4, m 8: GPipe and 1F1B 3/11 idle; interleaved V 2: 1.5/9.5 = 3/19.
    assert one["bubble_fraction"] == pytest.approx(3 / 11) == gpipe["bubble_fraction"]
    assert interleaved["bubble_fraction"] == pytest.approx(3 / 19)
    # GPipe holds all 8 on rank 0, 1F1B 4, interleaved 4 + 3/2 (torch's warm-up: 11 chunks of half a stage).
    assert [r["in_flight_microbatches"] for r in gpipe["ranks"]][0] == 8
    assert [r["in_flight_microbatches"] for r in one["ranks"]] == [4, 3, 2, 1]
    assert interleaved["ranks"][0]["in_flight_microbatches"] == pytest.approx(5.5)
    assert gpipe["ranks"][0]["activation_bytes"] > one["ranks"][0]["activation_bytes"]


def test_three_d_with_tp_and_a_named_size():
    # 70B shape on 64 GPUs: tp 8, pp 4, dp 2; the 2-D column stays, the pipeline section composes all three.
    doc = document("--params", "70B", "--gpus", "64", "--tp", "8", "--pp", "4", "--microbatches", "16")
    section = doc["pipeline"]
    assert section["mesh"] == {"pp": 4, "dp": 2, "tp": 8}
    shape = GPT_SIZES["70B"]
    last = section["ranks"][-1]
    assert last["layers"] == 21  # 86 blocks: 22, 22, 21, 21
    local = -(-(21 * shape.block_params + shape.head_params) // 8)
    assert last["model_state_bytes"] == 16 * -(-local // 2)
    assert "2d" in doc["strategies"]


def test_table_prints_per_stage_rows_beside_the_strategies():
    result = invoke("--model", "small", "--gpus", "4", "--pp", "2", "--microbatches", "4", "--schedule", "gpipe")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # rich wraps at the console's width
    assert "Pipeline per stage" in out and "ScheduleGPipe" in out and "(theory)" in out
    assert "20.0% of the step idle" in out
    assert "Beside the other strategies" in out and "zero3" in out


def test_zero_bubble_is_labelled_as_the_papers_claim():
    out = " ".join(invoke("--model", "small", "--gpus", "4", "--pp", "4", "--microbatches", "8",
                          "--schedule", "zero-bubble").output.split())
    assert "ZB-H1 paper's claim" in out


@pytest.mark.parametrize("args,words", [
    (("--pp", "2", "--microbatches", "0"), "at least 1"),
    (("--pp", "16"), "each stage needs at least one"),
    (("--pp", "2", "--schedule", "dualpipe"), "choose one of gpipe, 1f1b, interleaved, zero-bubble"),
    (("--pp", "4", "--microbatches", "2"), "at least as many micro-batches as stages"),
    (("--pp", "4", "--microbatches", "9", "--schedule", "interleaved"), "multiple of its rounds"),
    (("--pp", "3"), "does not divide the 8 GPUs"),
    (("--microbatches", "4"), "add --pp"),
    (("--pp", "2", "--stages-per-rank", "2"), "one stage per rank"),
    (("--pp", "2", "--offload", "all", "--strategy", "zero3"), "ddpfsdp accounting and no offload"),
])
def test_bad_pipelines_are_usage_errors(args, words):
    result = invoke("--model", "small", "--gpus", "8", *args)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_a_bare_count_has_no_block_shape():
    result = invoke("--params", "3B", "--gpus", "8", "--pp", "2")
    assert result.exit_code == 2
    assert "needs their shape" in result.output


def _quoted_calc_commands() -> list[tuple[str, str, bool]]:
    """(answer id, the command's arguments, whether the answer says calc refuses it) for every `ddpfsdp calc`
    a pipeline answer quotes."""
    import re

    from ddpfsdp.quiz.loader import default_answers_dir

    found = []
    for path in sorted(default_answers_dir().glob("pipe-*.md")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"`(ddpfsdp calc [^`]*)`([^.]*)", text):
            found.append((path.stem, " ".join(match.group(1).split()[2:]), "refuses" in match.group(2)))
    return found


def test_every_calc_command_a_pipeline_answer_quotes_runs_as_it_says():
    quoted = _quoted_calc_commands()
    assert len(quoted) >= 15
    for answer, args, refused in quoted:
        result = invoke(*args.split())
        assert result.exit_code == (2 if refused else 0), (answer, args, result.output[-300:])


@pytest.mark.parametrize("schedule,extra", [
    ("gpipe", ()), ("1f1b", ()), ("interleaved", ()), ("interleaved", ("--stages-per-rank", "4")), ("zero-bubble", ()),
])
@pytest.mark.parametrize("pp", ["2", "4"])
def test_the_printed_bubble_expression_gives_its_value(schedule, extra, pp):
    import re
    from fractions import Fraction

    args = ("--model", "large", "--gpus", "8", "--pp", pp, "--schedule", schedule, *extra)
    section = document(*args)["pipeline"]
    out = " ".join(invoke(*args).output.split())
    expression, value = re.search(r"Bubble: ([0-9()/+-]+) = ([0-9.]+) slot", out).groups()
    # (p-1)/d or p-1, worked with whole numbers: what the line shows must be what it claims.
    numerator, _, divisor = expression.replace("(", "").replace(")", "").partition("/")
    left, right = numerator.split("-")
    worked = Fraction(int(left) - int(right), int(divisor or 1))
    assert worked == Fraction(section["bubble_t"]).limit_denominator(1000)
    assert float(value) == pytest.approx(float(worked), abs=5e-4)
