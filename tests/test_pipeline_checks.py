"""`demo pipeline`'s figures and named checks as pure functions: each check passes on numbers that bear its
claim out and fails on numbers that break it; the figures read a recorded step as the schedule ran it."""

from __future__ import annotations

import pytest

from ddpfsdp.demos.measure.pipeline_report import drawing
from ddpfsdp.demos.theory.pipeline import check_pipeline
from ddpfsdp.demos.claims import pipeline as pc
from ddpfsdp.demos.parallel.pipeline import stage_blocks


def span(kind: str, mb: int, start: float, end: float, stage: int = 0) -> dict:
    return {"kind": kind, "mb": mb, "stage": stage, "start_s": start, "end_s": end}


def one_f_one_b_rank0() -> list[dict]:
    # rank 0 of 2, 1F1B with 4 micro-batches: F0 F1 B0 F2 B1 F3 B2 B3 (torch's warm-up of pp - rank forwards)
    order = [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    return [span(kind, mb, i, i + 1) for i, (kind, mb) in enumerate(order)]


def test_in_flight_counts_forwarded_micro_batches_not_yet_backward():
    assert pc.in_flight_chunks(one_f_one_b_rank0()) == 2
    gpipe = [span("F", mb, mb, mb + 1) for mb in range(4)] + [span("B", mb, 4 + mb, 5 + mb) for mb in range(4)]
    assert pc.in_flight_chunks(gpipe) == 4


def test_in_flight_with_the_weight_gradient_split_off_holds_until_w():
    # I frees nothing by itself: the weights' gradient still needs the saved inputs until W
    spans = [span("F", 0, 0, 1), span("I", 0, 1, 2), span("F", 1, 2, 3), span("W", 0, 3, 4), span("F", 2, 4, 5)]
    assert pc.in_flight_chunks(spans) == 2


def test_bubble_is_the_idle_share_of_the_window_from_first_to_last_compute():
    ranks = [{"spans": [span("F", 0, 0.0, 1.0), span("B", 0, 3.0, 4.0)]},
             {"spans": [span("F", 0, 1.0, 2.0), span("B", 0, 2.0, 3.0)]}]
    assert pc.bubble_by_rank(ranks) == [0.5, 0.5]


def test_the_drawing_puts_each_action_where_it_ran():
    timeline = {"ranks": [{"rank": 0, "spans": [span("F", 0, 0.0, 1.0), span("B", 0, 3.0, 4.0)]},
                          {"rank": 1, "spans": [span("F", 0, 1.0, 2.0), span("B", 0, 2.0, 3.0)]}]}
    rows = drawing(timeline, width=8)
    assert [kinds for _, kinds, _ in rows] == ["FF····BB", "··FFBB··"]
    assert rows[0][2] == "00    00"


def test_stages_take_the_analytic_split_in_order():
    assert stage_blocks(4, 2, 1) == {0: [0, 1], 1: [2, 3]}
    assert stage_blocks(10, 2, 2) == {0: [0, 1, 2], 1: [3, 4, 5], 2: [6, 7], 3: [8, 9]}


# ----------------------------------------------------------------------------- each check, kept and broken


def test_bubble_check_judges_the_rank_that_sets_the_pace():
    good = pc.check_bubble("1f1b", [0.35, 0.22], [0.8, 1.0], 0.2)
    assert good.passed and good.values["pace_rank"] == 1
    assert not pc.check_bubble("1f1b", [0.22, 0.45], [0.8, 1.0], 0.2).passed  # the busiest rank idles too much
    assert not pc.check_bubble("1f1b", [], [], 0.2).passed


def test_in_flight_check():
    assert pc.check_in_flight("1f1b", [4, 3, 2, 1], [4, 3, 2, 1]).passed
    assert not pc.check_in_flight("1f1b", [8, 8, 8, 8], [4, 3, 2, 1]).passed  # GPipe's figure under 1F1B's name


def test_loss_check():
    assert pc.check_loss([6.0, 5.5], [6.0, 5.5 * (1 + 5e-5)]).passed
    assert not pc.check_loss([6.0, 5.6], [6.0, 5.5]).passed
    assert not pc.check_loss([6.0], [6.0, 5.5]).passed  # a step missing
    assert not pc.check_loss([None, 5.5], [6.0, 5.5]).passed


def _row(rank: int, pipeline, boundary: int, scale: int = 1) -> dict:
    theory = pc.p2p_sends(pipeline, rank, boundary)
    return {"rank": rank, "sent_theory": theory,
            "sent": {"activation": {"count": theory["forward_sends"], "bytes": theory["forward_bytes"] * scale},
                     "gradient": {"count": theory["backward_sends"], "bytes": theory["backward_bytes"]}}}


def test_p2p_check():
    pipeline = check_pipeline(2, 4, "1f1b")
    assert pc.check_p2p("1f1b", [_row(0, pipeline, 1024), _row(1, pipeline, 1024)]).passed
    broken = pc.check_p2p("1f1b", [_row(0, pipeline, 1024, scale=2), _row(1, pipeline, 1024)])
    assert not broken.passed and "rank 0" in broken.detail
    assert not pc.check_p2p("1f1b", []).passed


def test_gpipe_holds_more_check():
    assert pc.check_gpipe_holds_more([4, 4], [2, 1]).passed
    assert not pc.check_gpipe_holds_more([2, 1], [2, 1]).passed


def test_interleaved_smaller_bubble_check():
    assert pc.check_interleaved_smaller([0.12, 0.10], [0.22, 0.2]).passed
    assert not pc.check_interleaved_smaller([0.3, 0.25], [0.22, 0.2]).passed
    assert not pc.check_interleaved_smaller([], []).passed


@pytest.mark.parametrize("broken", [True, False])
def test_combined_checks_fail_when_one_run_fails(broken):
    good = pc.check_in_flight("1f1b", [2, 1], [2, 1])
    other = pc.check_in_flight("gpipe", [4, 4] if not broken else [2, 2], [4, 4])
    (joined,) = pc.combined({"1f1b": [good], "gpipe": [other]})
    assert joined.name == "pipeline_activations_in_flight_match_theory"
    assert joined.passed is (not broken)


def test_dp_comm_check():
    fsdp = {"dp": {"all_gather": {"count": 1}, "reduce_scatter": {"count": 1}},
            "pp": {"send": {"count": 4}, "recv": {"count": 4}}}
    assert pc.check_dp_comm([{"rank": 0, "comm": fsdp}, {"rank": 1, "comm": fsdp}]).passed
    ddp_like = {**fsdp, "dp": {"all_reduce": {"count": 1}}}  # replicas all-reducing: not FSDP's pattern
    assert not pc.check_dp_comm([{"rank": 0, "comm": fsdp}, {"rank": 1, "comm": ddp_like}]).passed
    leaking = {**fsdp, "pp": {"send": {"count": 4}, "all_reduce": {"count": 1}}}
    assert not pc.check_dp_comm([{"rank": 0, "comm": leaking}]).passed
    assert not pc.check_dp_comm([]).passed
