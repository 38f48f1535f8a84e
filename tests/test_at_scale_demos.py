"""The at-scale demos on real gloo ranks, each configuration launched once per session and shared (the
question bank's links first: tests/test_bank_evidence.py runs those too).

    straggler --model tiny                          2 ranks, rank 1 sleeping 500 ms before each slowed step
    checkpoint-resume --model tiny                  FSDP2 saved on 2 ranks, resumed on 4
    checkpoint-resume --model tiny --resume-on 2    FSDP2 saved on 4 ranks, resumed on 2
    local-sgd --model tiny                          2 ranks, DDP then local SGD (H 4, W 2), 15 steps each
"""

from __future__ import annotations

import os

import pytest

from ddpfsdp.demos.measure.at_scale_report import (
    checkpoint_resume_view,
    local_sgd_view,
    render_checkpoint_resume,
    render_local_sgd,
    render_straggler,
)
from ddpfsdp.demos.result.schema import DemoResult

pytestmark = [pytest.mark.dist, pytest.mark.timeout(300)]

STRAGGLER = ("straggler", "--model", "tiny")
GROWS = ("checkpoint-resume", "--model", "tiny")  # 2 -> 4
SHRINKS = ("checkpoint-resume", "--model", "tiny", "--resume-on", "2")  # 4 -> 2
LOCAL_SGD = ("local-sgd", "--model", "tiny")


def _passed(result: dict) -> dict[str, bool]:
    return {check["name"]: check["passed"] for check in result["checks"]}


def test_a_straggler_sets_every_rank_s_step_and_the_others_wait_for_it(demo_result):
    result = DemoResult.from_json(demo_result(*STRAGGLER))
    assert all(_passed(result.to_json()).values()), [c.detail for c in result.checks]
    block = result.straggler
    assert (block.slow_rank, block.delay_s, [r.rank for r in block.ranks]) == (1, 0.5, [0, 1])
    # the recorded step: rank 1's sleep is a span of its own, and both ranks began together
    spans = {r["rank"]: [s["name"] for s in r["spans"]] for r in result.timeline.ranks}
    assert "straggler delay" in spans[1] and "straggler delay" not in spans[0]
    assert all("ranks aligned" in names for names in spans.values())
    assert result.theory["step_s"] == pytest.approx(block.ranks[1].base_step_s.median + 0.5)


def test_the_straggler_report_shows_the_measurement_beside_the_theory(demo_result):
    from rich.console import Console

    console = Console(width=80, record=True)
    render_straggler(demo_result(*STRAGGLER), console)
    text = console.export_text()
    assert "1 (slow)" in text and "Theory (the step at N ranks is the maximum of the N)" in text
    assert "z the straggler's sleep" in text


@pytest.mark.parametrize("args, saved, resumed", [(GROWS, 2, 4), (SHRINKS, 4, 2)])
def test_a_sharded_checkpoint_resumes_on_another_world_as_if_it_never_stopped(demo_run, args, saved, resumed):
    run = demo_run(*args, procs=saved)
    result = run.assert_ok()
    assert all(_passed(result).values()), [c["detail"] for c in result["checks"]]
    assert set(_passed(result)) == {"checkpoint_bytes_match_theory", "full_state_dict_gathers_on_rank0",
                                    "resumed_state_equals_saved", "resumed_loss_matches_uninterrupted"}
    # two launches, each with its result: the save's, then the resume's
    phases = [event["result"]["config"]["phase"] for event in run.events if event["event"] == "result"]
    assert phases == ["save", "resume"]
    block = DemoResult.from_json(result).checkpoint_resume
    assert (block.saved_world, block.resumed_world, len(block.files)) == (saved, resumed, saved)
    assert block.temporary and not os.path.exists(block.folder)  # the run's own folder, removed
    # every item's data, and a torch.save archive around each: the files are more than the data
    assert block.data_bytes == block.state_bytes and block.file_bytes > block.data_bytes
    assert block.compared.entries == block.compared.equal > 4 * 4  # 4 blocks of parameters, moments, steps
    assert len(block.losses_resumed) == len(block.losses_uninterrupted) == block.save_after == 2


def test_the_checkpoint_report_explains_the_files_against_the_data(demo_result):
    from rich.console import Console

    result = demo_result(*GROWS)
    console = Console(width=80, record=True)
    render_checkpoint_resume(result, console)
    text = " ".join(console.export_text().split())
    assert "Sharded save on 2 ranks" in text and "per item over its data" in text
    assert "a temporary folder, removed after the run" in text
    assert checkpoint_resume_view(DemoResult.from_json(result), 80)


def test_local_sgd_all_reduces_on_torch_s_schedule_and_its_replicas_drift_between_averagings(demo_result):
    result = DemoResult.from_json(demo_result(*LOCAL_SGD))
    assert all(_passed(result.to_json()).values()), [c.detail for c in result.checks]
    block = result.local_sgd
    assert (block.period, block.warmup, block.steps, block.averaged_steps) == (4, 2, 15, [2, 6, 10, 14])
    ddp, local = block.run("ddp"), block.run("local-sgd")
    # counted on the ranks: DDP every step, local SGD on the warm-up and the averagings only, on both ranks
    assert [s.step for s in local.steps if any(s.all_reduces)] == [0, 1, 2, 6, 10, 14]
    assert all(s.all_reduces == [1, 1] for s in ddp.steps)
    assert {b for s in local.steps for b in s.all_reduce_bytes if b} == {block.param_bytes}
    # measured on the ranks: the replicas apart on rank 1 after a local step, equal after an averaging
    assert local.steps[5].replica_diff[1] > 0 and local.steps[6].replica_diff == [0.0, 0.0]
    assert result.loss == [s.loss for s in local.steps] and result.theory["bytes_ratio"] == pytest.approx(0.4)


def test_the_local_sgd_report_shows_each_step_with_the_theory_labelled(demo_result):
    from rich.console import Console

    console = Console(width=80, record=True)
    render_local_sgd(demo_result(*LOCAL_SGD), console)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80
    assert "average" in text and "local" in text and "Theory: (W + A) / S = (2 + 4) / 15 = 0.40" in text
    assert "measured in this run only" in " ".join(text.split())
    assert local_sgd_view(DemoResult.from_json(demo_result(*LOCAL_SGD)), 80)
