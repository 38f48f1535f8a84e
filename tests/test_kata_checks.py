"""The katas' checks as functions of numbers: each fed numbers that break its claim, and seen to fail;
the referee's account of a run from outcomes no run produced; what is read of a learner's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpfsdp.demos.katas import claims, referee
from ddpfsdp.demos.katas.catalog import KATAS
from ddpfsdp.demos.katas.learner_file import FileProblem, read_learner_file

PLANTED = Path(__file__).parent / "data" / "katas"


# --- the shared claims -------------------------------------------------------------------------------


def test_equals_oracle_names_rank_case_index_and_both_values():
    mismatch = {"index": [7], "got": 3.0, "expected": 5.0, "count": 4, "numel": 13, "why": "values differ"}
    check = claims.equals_oracle("equals_all_reduce", "dist.all_reduce", [(2, "13 elements", mismatch)], 9)
    assert check.passed is False
    assert check.detail == "rank 2, 13 elements: element [7] is 3, dist.all_reduce gives 5 (4 of 13 differ)"
    assert claims.equals_oracle("equals_all_reduce", "dist.all_reduce", [], 9).passed is True
    assert claims.equals_oracle("equals_all_reduce", "dist.all_reduce", [], 0).passed is False  # nothing compared


def test_ring_messages_refuses_a_second_peer_a_non_neighbour_both_directions_and_too_many():
    ring = [(r, "case", [[(r + 1) % 4, 3, 12]] * 6) for r in range(4)]
    assert claims.ring_messages("ring_messages", ring, 4, 6).passed is True
    two_peers = [(0, "case", [[1, 3, 12], [3, 3, 12]])]
    assert "sends to ranks 1, 3" in claims.ring_messages("ring_messages", two_peers, 4, 6).detail
    far = [(0, "case", [[2, 3, 12]])]
    assert "not its neighbour" in claims.ring_messages("ring_messages", far, 4, 6).detail
    mixed = [(0, "case", [[1, 3, 12]]), (1, "case", [[0, 3, 12]])]
    assert "both directions" in claims.ring_messages("ring_messages", mixed, 4, 6).detail
    many = [(0, "case", [[1, 3, 12]] * 7)]
    assert claims.ring_messages("ring_messages", many, 4, 6).passed is False
    assert claims.ring_messages("ring_messages", [(0, "case", [[1, 3, 12]] * 5)], 4, 6, {"case": 6}).passed is False
    # Empty chunks (a tensor smaller than the world) are not messages of the ring.
    assert claims.ring_messages("ring_messages", [(0, "case", [[2, 0, 0], [1, 1, 4]])], 4, 6).passed is True


def test_elements_within_fails_outside_the_bounds_and_on_a_wrong_total():
    assert claims.elements_within("ring_bytes", [(0, "c", 6, 6, 6)], 4, "theory").passed is True
    too_much = claims.elements_within("ring_bytes", [(0, "c", 24, 6, 6)], 4, "theory")
    assert too_much.passed is False and "sent 24 elements (96 bytes)" in too_much.detail
    wrong_total = claims.elements_within("ring_bytes", [(0, "c", 6, 4, 8)], 4, "theory", {"c": (24, 22)})
    assert wrong_total.passed is False and "22" in wrong_total.detail


# --- each kata's own checks --------------------------------------------------------------------------


def test_the_halves_need_one_of_each_and_a_padding_under_n():
    from ddpfsdp.demos.katas.rings import one_rs_one_ag, padding_under_n

    good = [["reduce_scatter_single", 12, 4, 48, None], ["all_gather_single", 4, 12, 16, None]]
    assert one_rs_one_ag([(0, "c", good)]).passed is True
    assert one_rs_one_ag([(0, "c", good + good)]).passed is False
    assert one_rs_one_ag([(0, "c", [["all_reduce", 10, 10, 40, None]])]).passed is False
    assert padding_under_n([(0, "c", 10, good)], 3).passed is True  # 10 -> 12 on 3 ranks
    assert padding_under_n([(0, "c", 10, [["reduce_scatter_single", 15, 5, 60, None]])], 3).passed is False


def test_recursive_doubling_counts_steps_against_log2_and_the_ring():
    from ddpfsdp.demos.katas.rings import fewer_steps_than_ring, log2_steps

    doubling = [(r, "c", 64, [[r ^ 1, 64, 256], [r ^ 2, 64, 256]]) for r in range(4)]
    assert log2_steps(doubling, 4).passed is True
    check = fewer_steps_than_ring(doubling, 4)
    assert check.passed is True and "8 x alpha/beta" in check.detail  # (6 - 2) / (2 - 1.5)
    ring = [(r, "c", 64, [[(r - 1) % 4, 64, 256]] * 6) for r in range(4)]
    assert log2_steps(ring, 4).passed is False and fewer_steps_than_ring(ring, 4).passed is False
    assert log2_steps([(0, "c", 64, [[1, 64, 256]] * 4)], 3).passed is False  # more than floor(log2 3) + 2


def test_all_to_all_wants_one_chunk_to_each_other_rank():
    from ddpfsdp.demos.katas.rings import one_message_per_peer

    assert one_message_per_peer([(0, "c", 4, [[1, 4, 16], [2, 4, 16]])], 3).passed is True
    assert one_message_per_peer([(0, "c", 4, [[1, 4, 16]])], 3).passed is False
    assert one_message_per_peer([(0, "c", 4, [[1, 8, 32], [2, 4, 16]])], 3).passed is False


def test_one_sync_per_step_sees_an_early_sync_and_a_gradient_sent_twice():
    from ddpfsdp.demos.katas.accumulation import one_sync_per_step

    after_last = [["all_reduce", 20, 20, 80, 3], ["all_reduce", 15, 15, 60, 3]]
    assert one_sync_per_step([(0, "c", 3, 35, after_last)]).passed is True
    early = [["all_reduce", 20, 20, 80, 1], ["all_reduce", 15, 15, 60, 3]]
    assert "after micro-batch 1 of 3" in one_sync_per_step([(0, "c", 3, 35, early)]).detail
    twice = after_last + after_last
    assert one_sync_per_step([(0, "c", 3, 35, twice)]).passed is False


def test_zero1_state_and_gathers():
    from ddpfsdp.demos.katas.zero import gathers_params_once, state_sharded

    assert state_sharded([(0, "c", 1000, 3 * 250 * 4)], 4).passed is True
    full = state_sharded([(0, "c", 1000, 2 * 1000 * 4)], 2)
    assert full.passed is False and "2.00 x the parameter" in full.detail
    once = [["all_gather_single", 250, 1000, 1000, step] for step in range(3)]
    assert gathers_params_once([(0, "c", once)]).passed is True
    assert gathers_params_once([(0, "c", once[:2])]).passed is False


def test_fsdp_unit_phases_and_lifetime():
    from ddpfsdp.demos.katas.fsdp_unit import collectives_per_unit, frees_after_forward, shard_is_flat

    good = [["all_gather_single", 14, 42, 56, "forward"], ["all_gather_single", 14, 42, 56, "backward"],
            ["reduce_scatter_single", 42, 14, 168, "backward"]]
    assert collectives_per_unit([(0, "c", good)]).passed is True
    assert collectives_per_unit([(0, "c", good[:1] + good[2:])]).passed is False  # no gather in backward
    assert frees_after_forward([(0, "c", 0, 168, 168)]).passed is True
    assert "still alive after forward" in frees_after_forward([(0, "c", 168, 168, 168)]).detail
    assert frees_after_forward([(0, "c", 0, 336, 168)]).passed is False
    assert shard_is_flat([(0, "c", None, 56, 56)]).passed is True
    assert shard_is_flat([(0, "c", None, 56 + 168, 56)]).passed is False


def test_megatron_counts_each_phase():
    from ddpfsdp.demos.katas.megatron import one_all_reduce_each_way

    good = [["all_reduce", 18, 18, 72, "forward"], ["all_reduce", 18, 18, 72, "backward"]]
    assert one_all_reduce_each_way([(0, "c", 18, good)]).passed is True
    assert one_all_reduce_each_way([(0, "c", 18, good[:1])]).passed is False
    hidden = [["all_reduce", 36, 36, 144, "forward"], good[1]]
    assert one_all_reduce_each_way([(0, "c", 18, hidden)]).passed is False


def test_the_pipeline_simulation_gives_1f1b_its_bubble_and_finds_an_impossible_order():
    from ddpfsdp.demos.katas.pipeline_order import bubble_matches_theory, in_flight_at_most, simulate, torch_1f1b

    orders = {s: torch_1f1b(s, 4, 6) for s in range(4)}
    run = simulate(orders, 4, 6)
    assert run["makespan"] == 2 * (6 + 4 - 1) and float(run["idle"]) == pytest.approx(3 / 9) and not run["stuck"]
    assert bubble_matches_theory({(4, 6): orders}).passed is True
    assert in_flight_at_most({(4, 6): orders}).passed is True
    gpipe = {s: [f"F{i}" for i in range(6)] + [f"B{i}" for i in range(6)] for s in range(4)}
    assert in_flight_at_most({(4, 6): gpipe}).passed is False
    backward_first = {**orders, 3: ["B0", *orders[3][1:]]}
    check = bubble_matches_theory({(4, 6): backward_first})
    assert check.passed is False and "deadlocks" in check.detail


def test_torchs_1f1b_is_recorded_from_its_runtime_loop():
    from ddpfsdp.demos.katas.pipeline_order import torch_1f1b

    assert torch_1f1b(0, 3, 4) == ["F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"]
    assert torch_1f1b(2, 3, 4) == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]


def test_torchs_1f1b_ir_differs_from_its_runtime_on_the_last_stage():
    """Why the kata's oracle is the runtime loop: torch 2.13's pipeline_order IR numbers the last stage's
    forwards from 1. Should a later torch fix it, this test says the IR could serve as the oracle again."""
    from types import SimpleNamespace

    from torch.distributed.pipelining.schedules import Schedule1F1B

    order = Schedule1F1B._get_pipeline_order(SimpleNamespace(_num_stages=3, _n_microbatches=4))
    last = [str(action)[1:] for action in order[2] if "REDUCE" not in str(action)]
    assert last[0] == "F1" and last[-2] == "F4"


def test_the_bucket_oracle_reproduces_the_issues_example():
    from ddpfsdp.demos.katas.buckets import BUCKETS

    case = BUCKETS.cases(2, 0)[0]
    assert BUCKETS.answer(case.params) == [[0, 1], [2, 3, 4, 5]]


# --- the referee -------------------------------------------------------------------------------------


def _wait(rank, op, peer, step=0, **more):
    return {"rank": rank, "op": op, "peer": peer, "step": step, "case_label": "13 elements", **more}


def test_a_receive_cycle_is_every_rank_receiving_first():
    outcomes = {r: {"status": "deadline", "wait": _wait(r, "recv", (r - 1) % 3)} for r in range(3)}
    health = referee.health(outcomes, {}, 3, 3.0, p2p=True)
    check = next(c for c in health.checks if c.name == "no_deadlock")
    assert check.passed is False
    assert check.detail.endswith(": every rank receives before it sends")
    assert health.lines[0].startswith("deadlock after the 3 s deadline, in case 13 elements: rank 0 waits to receive from 2")
    assert not health.clean


def test_other_cycles_and_waits_are_named_for_what_they_are():
    sends = {r: _wait(r, "send", 1 - r) for r in range(2)}
    assert "sends before it receives" in referee.name_cycle(sends, {}, 2)
    steps = {0: _wait(0, "recv", 1, step=2), 1: _wait(1, "recv", 0, step=1)}
    assert "different steps" in referee.name_cycle(steps, {}, 2)
    finished_peer = {0: _wait(0, "recv", 1)}
    assert "rank 1 finished without posting the message" in referee.name_cycle(finished_peer, {1: {"status": "finished"}}, 2)
    mismatch = {0: {"rank": 0, "op": "all_reduce", "call": 0}, 1: _wait(1, "recv", 0)}
    assert "different operations" in referee.name_cycle(mismatch, {}, 2)


def test_a_wait_on_a_rank_that_raised_is_not_called_a_deadlock():
    outcomes = {0: {"status": "deadline", "wait": _wait(0, "recv", 1)},
                1: {"status": "raised", "error": {"type": "IndexError", "message": "out of range", "where": "f.py, line 3",
                                                   "traceback": "Traceback (your code):\n  File \"f.py\", line 3"}}}
    health = referee.health(outcomes, {}, 2, 3.0, p2p=True)
    verdicts = {c.name: c.passed for c in health.checks}
    assert verdicts["no_exception"] is False and verdicts["no_deadlock"] is None
    assert health.lines[0] == "rank 1 raised IndexError: out of range (f.py, line 3)"


def test_a_rank_without_an_outcome_still_running_fails_finishes():
    outcomes = {0: {"status": "finished", "measured": []}}
    states = {1: {"what": "running", "since": 100.0, "case": 0, "case_label": "13 elements"}}
    health = referee.health(outcomes, states, 2, 3.0, p2p=False, now_s=105.0)
    check = next(c for c in health.checks if c.name == "finishes")
    assert check.passed is False and "rank 1 is still running your code, case 13 elements, after 5.0 s" in check.detail


def test_a_request_never_waited_on_fails_and_keeps_the_run_from_ending_cleanly():
    outcomes = {r: {"status": "finished", "measured": [], "pending": [_wait(r, "send", 1 - r)] if r == 0 else []}
                for r in range(2)}
    health = referee.health(outcomes, {}, 2, 3.0, p2p=True)
    assert next(c for c in health.checks if c.name == "every_request_waited").passed is False
    assert not health.clean
    clean = referee.health({r: {"status": "finished", "measured": []} for r in range(2)}, {}, 2, 3.0, p2p=True)
    assert clean.clean and all(c.passed for c in clean.checks)


class _Board:
    def __init__(self, outcomes, states):
        self._outcomes, self._states = outcomes, states

    def outcomes(self):
        return dict(self._outcomes)

    def states(self):
        return dict(self._states)


def test_collect_stops_at_a_rank_running_past_the_deadline_but_waits_for_the_judges_own_preparation():
    import time

    now = time.time()
    looping = _Board({0: {"status": "finished"}}, {1: {"what": "running", "since": now - 10}})
    outcomes, states = referee.collect(looping, 2, deadline_s=1.0, limit_s=30)
    assert list(outcomes) == [0] and states[1]["what"] == "running"
    preparing = _Board({0: {"status": "finished"}}, {1: {"what": "preparing", "since": now - 10}})
    started = time.monotonic()
    referee.collect(preparing, 2, deadline_s=1.0, limit_s=0.3)  # only the run's limit ends it
    assert time.monotonic() - started >= 0.3


# --- the learner's file ------------------------------------------------------------------------------


def test_a_file_that_cannot_run_is_refused_with_the_line(tmp_path):
    kata = KATAS["ring-allreduce"]
    with pytest.raises(FileProblem, match="does not exist"):
        read_learner_file(tmp_path / "nope.py", kata)
    with pytest.raises(FileProblem, match="is a folder"):
        read_learner_file(tmp_path, kata)
    broken = tmp_path / "broken.py"
    broken.write_text("def ring_all_reduce(comm, tensor)\n    pass\n")
    with pytest.raises(FileProblem, match=r"broken.py has a syntax error at line 1.*expected ':'"):
        read_learner_file(broken, kata)
    misnamed = tmp_path / "misnamed.py"
    misnamed.write_text("def ringAllReduce(comm, tensor):\n    pass\n")
    with pytest.raises(FileProblem, match="does not define ring_all_reduce.*'ringAllReduce'"):
        read_learner_file(misnamed, kata)
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\xff\xfe\x00def")
    with pytest.raises(FileProblem, match="not UTF-8"):
        read_learner_file(binary, kata)


@pytest.mark.parametrize("path", sorted(PLANTED.glob("*static*.py")), ids=lambda p: p.stem)
def test_a_file_naming_what_the_kata_forbids_is_refused_before_it_runs(path):
    kata = KATAS[path.stem.split("__")[0]]
    reading = read_learner_file(path, kata)
    assert reading.forbidden and reading.forbidden[0].line > 1


def test_the_reference_solutions_and_starters_name_nothing_forbidden():
    for kata in KATAS.values():
        assert read_learner_file(kata.solution_path, kata).forbidden == [], kata.name
        assert read_learner_file(kata.starter_path, kata).forbidden == [], kata.name
        assert kata.statement and kata.explanation and len(kata.hints) >= 3 and kata.talking_points


def test_a_forbidden_call_fails_no_forbidden_call_with_what_to_use():
    outcomes = {0: {"status": "forbidden", "op": "all_reduce", "where": "mine.py, line 5",
                    "message": "all_reduce is not allowed in ring-allreduce: write it from point-to-point messages"},
                1: {"status": "finished", "measured": []}}
    health = referee.health(outcomes, {}, 2, 3.0, p2p=True)
    check = next(c for c in health.checks if c.name == "no_forbidden_call")
    assert check.passed is False and check.values["op"] == "all_reduce"
    assert check.detail == ("rank 0: all_reduce is not allowed in ring-allreduce: write it from point-to-point "
                            "messages (mine.py, line 5)")
    assert not health.clean
