"""`ddpfsdp demo pipeline` on real gloo ranks, and what it refuses before launch.

Three launches, shared by every test here (tests/demo_runs.py): the done-when run of 1F1B over 4 ranks
with 8 micro-batches, --compare (GPipe, 1F1B and interleaved in one launch) on 2 ranks, and a short
2 stages x 2 FSDP replicas run.
"""

from __future__ import annotations

import io

import pytest
from conftest import run_cli

ONE_F_ONE_B = ("pipeline", "--schedule", "1f1b", "--microbatches", "8")
COMPARE = ("pipeline", "--compare")
WITH_DP = ("pipeline", "--dp", "2", "--steps", "2", "--microbatches", "2", "--batch-size", "8")

BAD = [
    (["--microbatches", "0"], "--microbatches"),
    (["--procs", "8"], "--procs at most 4"),  # 8 stages, 4 blocks in the tiny model
    (["--schedule", "nope"], "--schedule"),
    (["--procs", "3", "--microbatches", "2"], "--microbatches 3"),  # 1F1B: m >= pp
    (["--procs", "4", "--schedule", "interleaved"], "deeper --model"),  # 8 stages on 4 blocks
    (["--batch-size", "10"], "--batch-size"),
    (["--schedule", "interleaved", "--stages-per-rank", "1"], "--stages-per-rank 2"),
    (["--schedule", "gpipe", "--stages-per-rank", "2"], "--schedule interleaved"),
    (["--schedule", "zero-bubble", "--stages-per-rank", "2"], "drop --stages-per-rank"),
    (["--compare", "--schedule", "gpipe"], "drop --schedule"),
    (["--steps", "1"], "--steps"),
    (["--procs", "1"], "--procs"),
    (["--procs", "2", "--dp", "2"], "--procs 4"),
    (["--dp", "2", "--compare"], "drop --dp"),
    (["--simulate"], "ddpfsdp calc --model tiny --gpus 2 --pp 2 --microbatches 4 --schedule 1f1b --batch-size 16"),
]


@pytest.mark.parametrize("args, says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_refused_before_launch_with_what_to_do(args, says):
    outcome = run_cli("demo", "pipeline", *args, stdin="")
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.exit_code != 0
    assert "Traceback" not in outcome.stdout + outcome.stderr
    assert says in outcome.stderr.replace("\n", " "), outcome.stderr


def test_simulate_is_refused_with_the_analytic_models_figures_for_the_run():
    """A fake process group cannot carry torch's shape exchange, so the refusal shows the theory instead."""
    outcome = run_cli("demo", "pipeline", "--simulate", "--microbatches", "8", stdin="")
    said = " ".join(outcome.stderr.split())
    assert outcome.exit_code == 2 and "not a measurement" in said, said
    # 2 stages, 8 micro-batches of 16 tiny sequences (64 tokens of 128 fp32 values): (p-1)/(m+p-1) = 1/9
    assert "a bubble of 0.111 of the step" in said and "in flight per rank at its peak 2, 1" in said
    assert "sent per rank per step 4.00 MiB, 4.00 MiB" in said


def _check(result: dict, name: str) -> dict:
    return next(c for c in result["checks"] if c["name"] == name)


@pytest.mark.dist
def test_1f1b_on_4_ranks_passes_its_checks(demo_result):
    result = demo_result(*ONE_F_ONE_B, procs=4)
    passed = {c["name"]: c["passed"] for c in result["checks"]}
    assert set(passed) == {"pipeline_bubble_matches_theory", "pipeline_activations_in_flight_match_theory",
                           "pipeline_loss_matches_reference", "pipeline_p2p_matches_theory"}
    for name in ("pipeline_activations_in_flight_match_theory", "pipeline_loss_matches_reference",
                 "pipeline_p2p_matches_theory"):
        assert passed[name] is True, _check(result, name)
    # The bubble is time, on 4 ranks sharing 2 CPU cores with the rest of the suite: judged, with the
    # numbers behind it, not asserted here (a quiet machine's runs are in docs/pipeline.md).
    assert isinstance(passed["pipeline_bubble_matches_theory"], bool)
    assert "vs theory 0.273" in _check(result, "pipeline_bubble_matches_theory")["detail"]
    run = result["runs"]["1f1b"]["pipeline"]
    assert [r["in_flight_chunks"] for r in run["ranks"]] == [4, 3, 2, 1]
    assert run["theory"]["bubble_fraction"] == pytest.approx(3 / 11)


@pytest.mark.dist
def test_the_recorded_step_is_whole_on_every_rank(demo_result):
    run = demo_result(*ONE_F_ONE_B, procs=4)["runs"]["1f1b"]
    for rank in run["timeline"]["ranks"]:
        kinds = [s["kind"] for s in rank["spans"]]
        assert kinds.count("F") == kinds.count("B") == 8
        assert all(s["end_s"] >= s["start_s"] >= 0 for s in rank["spans"])
        sends = [c for c in rank["collectives"] if c["op"] == "send"]
        assert len(sends) == 8 * ((rank["rank"] != 3) + (rank["rank"] != 0))


@pytest.mark.dist
def test_compare_shows_gpipe_holding_more_than_1f1b_and_judges_the_bubbles(demo_result):
    result = demo_result(*COMPARE)
    assert list(result["runs"]) == ["gpipe", "1f1b", "interleaved"]
    passed = {c["name"]: c["passed"] for c in result["checks"]}
    for name in ("pipeline_activations_in_flight_match_theory", "pipeline_loss_matches_reference",
                 "pipeline_p2p_matches_theory", "gpipe_holds_more_activations_than_1f1b"):
        assert passed[name] is True, _check(result, name)
    # time on 2 shared CPU cores: judged, with the numbers behind it, not asserted here
    for name in ("pipeline_bubble_matches_theory", "interleaved_has_smaller_bubble"):
        assert isinstance(passed[name], bool) and _check(result, name)["values"]
    flights = {name: [r["in_flight_chunks"] for r in run["pipeline"]["ranks"]] for name, run in result["runs"].items()}
    assert flights == {"gpipe": [4, 4], "1f1b": [2, 1], "interleaved": [5, 3]}


@pytest.mark.dist
def test_the_result_renders_the_schedule_and_traces_every_action(demo_result):
    from rich.console import Console

    from ddpfsdp.demos.measure import trace
    from ddpfsdp.demos.measure.pipeline_report import render

    result = demo_result(*COMPARE)
    out = io.StringIO()
    render(result, Console(file=out, width=100))
    text = out.getvalue()
    assert "ScheduleInterleaved1F1B" in text and " rank 1 " in text and "one process" in text
    events = trace.events(result)
    actions = [e for e in events if e["ph"] == "X" and e["cat"] != "collective"]
    spans = sum(len(r["spans"]) for run in result["runs"].values() for r in run["timeline"]["ranks"])
    assert len(actions) == spans


@pytest.mark.dist
def test_two_stages_by_two_fsdp_replicas_train_as_one_process_and_shard_over_dp(demo_result):
    result = demo_result(*WITH_DP, procs=4)
    passed = {c["name"]: c["passed"] for c in result["checks"]}
    for name in ("pipeline_loss_matches_reference", "pipeline_dp_comm_is_fsdp", "pipeline_p2p_matches_theory",
                 "pipeline_activations_in_flight_match_theory"):
        assert passed[name] is True, _check(result, name)
    ranks = result["runs"]["1f1b"]["pipeline"]["ranks"]
    assert [(r["pp_rank"], r["dp_rank"]) for r in ranks] == [(0, 0), (1, 0), (0, 1), (1, 1)]
