"""The interview's pipeline follow-ups (quiz/interview/pipeline_followups.py), worked by hand."""

from __future__ import annotations

import pytest

from ddpfsdp.quiz.interview import generate, pipeline_followups
from ddpfsdp.quiz.interview.scenario import FUNCTIONS, STEP_KINDS, Setup


def _scenario():
    return generate.generate(3, family="pipeline", model="Llama-2-70B-like", cluster="HGX H200")


def test_the_family_ends_with_the_pipeline_steps_and_their_topic():
    kinds = [step.kind for step in _scenario().steps]
    assert kinds[-3:] == ["pipeline-microbatches", "pipeline-step-time", "explain-pipeline"]
    assert {STEP_KINDS[kind][1] for kind in kinds[-3:]} == {"pipeline"}


def test_micro_batches_by_hand():
    scenario = _scenario()
    step = scenario.steps[-3]
    pp = scenario.setup.nodes
    # 1F1B: (p-1)/(m+p-1) <= 0.1  <=>  m >= 9 (p-1), and m >= p.
    assert step.answer == max(9 * (pp - 1), pp)
    assert step.unit == "count" and step.change and "slower" in step.change
    assert f"{pp} stages" in step.prompt


def test_step_time_by_hand():
    scenario = _scenario()
    setup, step = scenario.setup, scenario.steps[-2]
    slow = setup.inter_bytes_per_s / pipeline_followups.SLOWER
    pp = setup.nodes
    m = max(9 * (pp - 1), pp)
    dp = setup.gpus // pp
    tokens = dp * m * setup.micro_batch * setup.seq_len
    bubble_free = 6 * setup.params * tokens / (setup.gpus * setup.peak_flops_per_s * setup.mfu)
    boundary = setup.micro_batch * setup.seq_len * setup.d_model * (4 if setup.precision == "fp32" else 2)
    hops = 2 * (pp - 1) * (setup.inter_latency_s + boundary / slow)
    assert step.answer == pytest.approx(bubble_free * (1 + (pp - 1) / m) + hops, rel=1e-12)
    assert step.unit == "s" and step.args["bytes_per_s"] == slow


def test_every_pipeline_answer_is_recomputed_and_a_broken_one_is_not():
    for seed in range(40):
        scenario = generate.generate(seed, family="pipeline")
        for step in scenario.steps[-3:-1]:
            assert FUNCTIONS[step.fn](**step.args) == pytest.approx(step.answer), (seed, step.kind)
            assert FUNCTIONS[step.fn](**{**step.args, "pp": 2 * step.args["pp"]}) != pytest.approx(step.answer)


def test_the_follow_up_changes_one_condition():
    setup = _scenario().setup
    changed, _, _, step = pipeline_followups.across_nodes(setup, "zero3", None)
    differing = {k for k in Setup.__dataclass_fields__ if getattr(changed, k) != getattr(setup, k)} - {"inter"}
    assert differing == {"inter_bytes_per_s"} and step.change


def test_talking_points_quote_this_scenarios_figures():
    scenario = _scenario()
    points = " ".join(scenario.steps[-1].talking_points)
    m = int(scenario.steps[-3].answer)
    assert f"{m} micro-batches" in points and f"{scenario.setup.nodes} stages" in points


def test_the_cli_offers_the_pipeline_family():
    from click.testing import CliRunner

    from ddpfsdp.quiz.cli import cli
    from ddpfsdp.quiz.commands.interview import FAMILY_NAMES

    assert set(FAMILY_NAMES) == set(generate.FAMILIES)
    result = CliRunner().invoke(cli, ["interview", "--json", "--seed", "3", "--family", "pipeline"])
    assert result.exit_code == 0, result.output
    assert '"pipeline-microbatches"' in result.output
