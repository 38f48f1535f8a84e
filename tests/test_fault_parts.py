"""The failure lab's parts that need no ranks: the flight-recorder table, normalisation, the shared checks,
the launch rules, the command line, the bank topic and the evidence panel's view of a fault.

Records here are written by hand, so every expected value is read off the record, never computed by
the code under test.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from ddpfsdp.demos.faults import fr_table, verdicts
from ddpfsdp.demos.faults.catalog import CLAIMS, FAULTS
from ddpfsdp.demos.faults.runner import FaultRun, launch_order
from ddpfsdp.demos.faults.symptom import missing_lines, normalise
from ddpfsdp.demos.launch.launcher import LaunchError
from ddpfsdp.quiz.cli import cli


def entry(seq, op, sizes=((1,),), frame=None):
    return {"seq": seq, "op": op, "input_sizes": [list(s) for s in sizes], "input_dtypes": ["Float"], "p2p": False, "frame": frame}


IN_STEP = {
    0: [entry(1, "gloo:all_reduce", ((8,),)), entry(2, "gloo:broadcast")],
    1: [entry(1, "gloo:all_reduce", ((8,),)), entry(2, "gloo:broadcast")],
}
PARTED = {
    0: [*IN_STEP[0], entry(3, "gloo:all_reduce", frame="loop.py:7 in log_loss")],
    1: [*IN_STEP[1], entry(3, "gloo:broadcast", frame="loop.py:9 in stop_flag")],
}


# --- the flight-recorder table ----------------------------------------------------------------------


def test_ranks_that_agree_have_no_divergence():
    assert fr_table.divergence(IN_STEP) is None
    assert fr_table.divergence_line(None, IN_STEP) == "flight recorder: every rank issued the same 2 collectives, in the same order"


def test_the_first_differing_sequence_id_is_the_divergence():
    found = fr_table.divergence(PARTED)
    assert found["seq"] == 3
    assert found["ops"] == {"0": "gloo:all_reduce [[1]]", "1": "gloo:broadcast [[1]]"}
    lines = fr_table.table_lines(PARTED)
    assert lines[-3].split()[:2] == ["3", "✘"]
    assert lines[-2] == "  rank 0 issued sequence id 3 at loop.py:7 in log_loss"


def test_a_rank_that_issued_nothing_diverges_there():
    short = {0: PARTED[0], 1: IN_STEP[1]}
    assert fr_table.divergence(short)["ops"] == {"0": "gloo:all_reduce [[1]]", "1": fr_table.MISSING}


def test_the_table_shows_only_the_last_rows_up_to_the_divergence():
    many = {r: [entry(i, "gloo:all_reduce") for i in range(1, 21)] for r in (0, 1)}
    many[1][9] = entry(10, "gloo:barrier", sizes=())
    rows = [line.split()[0] for line in fr_table.table_lines(many, rows=4)[1:5]]
    assert rows == ["7", "8", "9", "10"]


# --- normalisation ------------------------------------------------------------------------------------


def test_normalise_masks_paths_ports_pids_and_times():
    live = ("rank 0: RuntimeError: [/__w/pytorch/third_party/gloo/pair.cc:553] Connection closed by peer "
            "[127.0.0.1]:40144, pid 4242, after 3.02 s at 17:51:11.527 (0x7f3a)")
    quoted = ("rank 0: RuntimeError: [/home/me/gloo/pair.cc:12] Connection closed by peer "
              "[127.0.0.1]:29500, pid 7, after 1 s at 09:00:00 (0xdead)")
    assert normalise(live) == normalise(quoted)
    assert "<path>/pair.cc:<line>" in normalise(live)


def test_a_quote_that_drifted_is_reported():
    live = "rank 1: RuntimeError: Timed out waiting 3000ms for recv operation to complete\nsteps: rank 0 1"
    assert missing_lines("Timed out waiting 3000ms for recv operation", live) == []
    assert missing_lines("Timed out waiting 3000ms for send operation", live) == ["Timed out waiting <duration> for send operation"]


def test_an_elided_quote_needs_its_parts_in_order_in_one_live_line():
    live = ("rank 0: RuntimeError: Expected to have finished reduction in the prior iteration. This error indicates "
            "that your module has parameters that were not used in producing loss. You can enable ...\nsteps: rank 0 1")
    assert missing_lines("rank 0: RuntimeError: Expected ... not used in producing loss. ...", live) == []
    assert missing_lines("  module has parameters that were not used in producing loss. ...", live) == []
    # parts out of order, a part torch did not print, or parts taken from two lines are each reported
    assert missing_lines("not used in producing loss. ... Expected to have finished", live) != []
    assert missing_lines("rank 0: RuntimeError: ... not used in computing loss.", live) != []
    assert missing_lines("rank 0: RuntimeError: ... steps: rank 0 1", live) != []


# --- the shared checks, fed hand-made runs ------------------------------------------------------------


def rank(r, error=None, wall_s=0.1, entries=()):
    return {"rank": r, "error": error, "measured": {}, "wall_s": wall_s, "flight_recorder": list(entries)}


TIMEOUT = {"type": "RuntimeError", "message": "[/gloo/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"}
CLOSED = {"type": "RuntimeError", "message": "[/gloo/pair.cc:553] Connection closed by peer [127.0.0.1]:5"}


def hang_block(**changes):
    block = {
        "timeout_s": 3.0,
        "broken": {"ranks": [rank(0, CLOSED, 3.05, PARTED[0]), rank(1, TIMEOUT, 3.01, PARTED[1])],
                   "analyzer": {"ran": True, "errors": [{"seq": 3, "mismatch": "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH", "missing_ranks": []}]}},
        "fixed": {"ranks": [rank(0, None, 0.2, IN_STEP[0]), rank(1, None, 0.2, IN_STEP[1])],
                  "analyzer": {"ran": True, "errors": []}},
    }
    block.update(changes)
    return block


def test_a_hang_passes_the_shared_checks():
    block = hang_block()
    assert verdicts.hung_until_timeout("t", block).passed
    assert verdicts.ranks_part_in_flight_recorder("t", block).passed
    assert verdicts.analyzer_flags_broken_only("t", block).passed


@pytest.mark.parametrize("change", [
    {"broken": {"ranks": [rank(0, CLOSED, 3.05), rank(1, CLOSED, 3.01)]}},  # nobody timed out
    {"broken": {"ranks": [rank(0, CLOSED, 1.0), rank(1, TIMEOUT, 1.2)]}},  # failed before the timeout
    {"broken": {"ranks": [rank(0, None, 3.05), rank(1, TIMEOUT, 3.01)]}},  # a rank finished
    {"fixed": {"ranks": [rank(0, TIMEOUT, 3.0), rank(1, None, 0.2)]}},  # the fix still fails
])
def test_the_timeout_check_fails_without_the_hang(change):
    assert not verdicts.hung_until_timeout("t", hang_block(**change)).passed


def test_the_divergence_check_fails_when_the_ranks_agree_or_the_fix_parts():
    agree = {"ranks": [rank(0, TIMEOUT, 3.1, IN_STEP[0]), rank(1, TIMEOUT, 3.1, IN_STEP[1])]}
    assert not verdicts.ranks_part_in_flight_recorder("t", hang_block(broken=agree)).passed
    parts = {"ranks": [rank(0, None, 0.1, PARTED[0]), rank(1, None, 0.1, PARTED[1])]}
    assert not verdicts.ranks_part_in_flight_recorder("t", hang_block(fixed=parts)).passed


def test_the_analyzer_check_needs_a_desync_at_the_divergence():
    block = hang_block()
    block["broken"]["analyzer"]["errors"][0]["seq"] = 2
    assert not verdicts.analyzer_flags_broken_only("t", block).passed
    block = hang_block()
    block["broken"]["analyzer"]["errors"][0]["mismatch"] = "Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH"
    assert not verdicts.analyzer_flags_broken_only("t", block).passed
    block = hang_block()
    block["fixed"]["analyzer"]["errors"] = [{"seq": 1, "mismatch": "COLLECTIVE_TYPE_MISMATCH", "missing_ranks": []}]
    assert not verdicts.analyzer_flags_broken_only("t", block).passed


def test_an_error_check_needs_the_phrase_on_every_rank_and_none_fixed():
    raised = {"type": "RuntimeError", "message": "Expected to have finished reduction in the prior iteration"}
    block = {"broken": {"ranks": [rank(0, raised), rank(1, raised)]}, "fixed": {"ranks": [rank(0), rank(1)]}}
    assert verdicts.every_rank_raised("t", block, "Expected to have finished", "x").passed
    block["broken"]["ranks"][1] = rank(1)
    assert not verdicts.every_rank_raised("t", block, "Expected to have finished", "x").passed


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_check_of_a_fault_fails_on_an_empty_run(name):
    fault = FAULTS[name]
    checks = fault.judge({"broken": {}, "fixed": {}, "timeout_s": 3.0})
    assert [c.name for c in checks] == list(fault.claims)
    assert not any(c.passed for c in checks)


# --- launching, the registry and the command line -----------------------------------------------------


def test_at_least_ten_faults_and_the_registry_knows_their_checks():
    from ddpfsdp.demos.registry import DEMOS

    assert len(FAULTS) >= 10
    assert DEMOS["fault"].checks == CLAIMS
    assert len(CLAIMS) == sum(len(f.claims) for f in FAULTS.values())


def test_a_launch_holds_one_hang_and_runs_failing_programs_last():
    assert launch_order(["init-seeds", "unused-parameters", "sampler-set-epoch"])[-1] == "unused-parameters"
    assert launch_order(["desync", "init-seeds"]) == ["init-seeds", "desync"]
    for names in (["desync", "uneven-inputs"], ["nope"], ["init-seeds", "init-seeds"]):
        with pytest.raises(LaunchError):
            launch_order(names)


@pytest.mark.parametrize("kwargs", [{"procs": 1}, {"procs": 9}, {"timeout_s": 0.5}])
def test_a_run_refuses_what_cannot_show_a_fault(kwargs):
    with pytest.raises(LaunchError):
        FaultRun(["desync"], **kwargs)


def test_fault_list_prints_each_fault_with_its_summary_within_80_columns():
    """Each summary wraps under its column (the list was 160 columns wide), its words in order."""
    result = CliRunner().invoke(cli, ["demo", "fault", "--list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.rstrip("\n").splitlines()
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), lines
    starts = [line.split()[0] for line in lines if not line.startswith(" ")]
    assert starts == list(FAULTS)
    column = len(lines[0]) - len(lines[0].split(None, 1)[1])
    entries = " ".join(lines).split()
    for name, fault in FAULTS.items():
        at = entries.index(name)
        assert entries[at + 1:at + 1 + len(fault.summary.split())] == fault.summary.split()
    assert all(line[:column].strip() == "" for line in lines if line.startswith(" "))


@pytest.mark.parametrize("argv", [["demo", "fault"], ["demo", "fault", "nope"], ["demo", "fault", "desync", "--procs", "1"]])
def test_bad_fault_input_is_a_usage_error(argv):
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Error:" in result.output


# --- the bank topic and the evidence panel ------------------------------------------------------------


def fault_questions():
    from ddpfsdp.quiz.loader import load_bank

    return [q for q in load_bank().questions.values() if q.demo is not None and q.demo.name == "fault"]


def test_every_fault_has_a_cause_and_a_fix_question_quoting_its_symptom():
    asked: dict[str, set[str]] = {name: set() for name in FAULTS}
    for q in fault_questions():
        assert re.search(r"```text\n.+?\n```", q.prompt, flags=re.DOTALL), f"{q.id} quotes no symptom"
        assert len(q.why) == len(q.steps if q.kind == "order" else q.choices), q.id
        kind = "cause" if "What is the cause?" in q.prompt else "fix" if re.search(r"\bthe fix\b", q.prompt) else q.id
        asked[q.demo.args[0]].add(kind)
    # Every fault is asked about twice at least; a fault may carry more (a walk-through of a timeout).
    assert all({"cause", "fix"} <= kinds for kinds in asked.values()), asked


def test_the_evidence_panel_shows_the_broken_run_beside_the_fixed_one():
    from ddpfsdp.quiz import evidence as ev
    from ddpfsdp.quiz.widgets.evidence import result_table
    from rich.console import Console

    result = {"demo": "fault", "fault": {"cause": "a cause", "fix": "wrap the loop in Join([model])",
                                         "broken": {"program": "rank 0 logs", "symptom": ["rank 1: Timed out"]},
                                         "fixed": {"program": "every rank logs", "symptom": ["no rank raised an error"]}}}
    assert ev.fault_sides(result) == [("broken", "rank 0 logs", ["rank 1: Timed out"]),
                                      ("fixed", "every rank logs", ["no rank raised an error"])]
    console = Console(width=100, record=True)
    console.print(result_table(result))
    text = console.export_text()
    assert "broken: rank 0 logs" in text and "fixed: every rank logs" in text
    assert "rank 1: Timed out" in text and "Fix: wrap the loop in Join([model])" in text
    assert ev.fault_sides({"demo": "sampler"}) == []


def test_the_quiz_starts_a_fault_link_as_a_fault_run_without_launching_it():
    from ddpfsdp.quiz.app import default_demo_runner

    run = default_demo_runner("fault", ["uneven-inputs"])
    assert isinstance(run, FaultRun) and run.faults == ["uneven-inputs"] and run.leftover_pids() == []


def test_the_printed_result_keeps_torch_and_the_fault_texts_verbatim():
    from ddpfsdp.demos.faults.render import render_fault
    from rich.console import Console

    result = {"config": {"world_size": 2, "timeout_s": 3.0},
              "fault": {"name": "uneven-inputs", "summary": "s", "cause": "c", "fix": "use Join([model])",
                        "broken": {"program": "no [bold]markup[/bold]", "wall_s": 3.1, "symptom": ["    8 ✘  gloo:barrier []"]},
                        "fixed": {"program": "with Join([model])", "wall_s": 0.2, "symptom": ["no rank raised an error"]}}}
    console = Console(width=200, record=True)
    render_fault(result, console)
    text = console.export_text()
    for shown in ("use Join([model])", "with Join([model])", "no [bold]markup[/bold]", "8 ✘  gloo:barrier []"):
        assert shown in text


def test_the_analyzer_s_misleading_verdicts_are_printed_with_how_to_read_them():
    from ddpfsdp.demos.faults.render import render_fault
    from rich.console import Console

    # desync: rank 0 holds the bug, and torch's analyzer names rank 1; rank0-gather's fixed run on gloo: a
    # false SIZE_OR_SYNTAX_MISMATCH on DTensor's all-gather.
    result = {"config": {"world_size": 2, "timeout_s": 3.0},
              "fault": {"name": "desync", "summary": "s", "cause": "c", "fix": "f",
                        "broken": {"program": "p", "wall_s": 3.1, "symptom": [
                            "error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH"]},
                        "fixed": {"program": "q", "wall_s": 0.2, "symptom": [
                            "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH"]}}}
    console = Console(width=400, record=True)
    render_fault(result, console)
    text = console.export_text()
    assert text.count("not that rank N holds the bug") == 2  # under each run that names a culprit
    assert text.count("only its collective-type and missing-rank findings count") == 1
    quiet = {**result, "fault": {**result["fault"], "broken": {"program": "p", "symptom": ["no analyzer verdict"]},
                                 "fixed": {"program": "q", "symptom": ["fine"]}}}
    console = Console(width=400, record=True)
    render_fault(quiet, console)
    assert "Note:" not in console.export_text()


def test_a_table_cut_to_its_last_rows_says_so():
    many = {r: [entry(i, "gloo:all_reduce") for i in range(1, 8)] for r in (0, 1)}
    lines = fr_table.table_lines(many, rows=6)
    assert fr_table.divergence_line(None, many).endswith("the same 7 collectives, in the same order")
    assert [line.split()[0] for line in lines[1:7]] == ["2", "3", "4", "5", "6", "7"]
    assert lines[7] == "  (the last 6 of 7 sequence ids)"
    assert "the last" not in "\n".join(fr_table.table_lines(many, rows=7))


# --- the pipeline fault, fed hand-made runs -----------------------------------------------------------


SHAPE = {"type": "RuntimeError", "message": "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"}
SEND_TIMEOUT = {"type": "RuntimeError", "message": "[/gloo/unbound_buffer.cc:129] Timed out waiting 3000ms for send operation to complete"}
REFERENCE = [0.9134169, 0.8805375, 0.8506311]


def stage(r, error=None, wall_s=0.2, **measured):
    return {**rank(r, error, wall_s), "measured": measured}


def pipeline_block():
    return {
        "timeout_s": 3.0,
        "broken": {"ranks": [stage(0, SEND_TIMEOUT, 3.03, micro_batch_rows=[3, 3, 2, 2], receive_buffer_rows=[]),
                             stage(1, SHAPE, 0.08, micro_batch_rows=[3, 3, 2, 2], receive_buffer_rows=[3, 3, 3, 3],
                                   losses=[], reference_losses=REFERENCE)]},
        "fixed": {"ranks": [stage(0, None, 0.15, micro_batch_rows=[2] * 5, receive_buffer_rows=[], steps_done=3),
                            stage(1, None, 0.15, micro_batch_rows=[2] * 5, receive_buffer_rows=[2] * 5, steps_done=3,
                                  losses=[0.9134169, 0.8805374, 0.8506311], reference_losses=REFERENCE)]},
    }


def pipeline_verdicts(block):
    return {check.name: check.passed for check in FAULTS["pipeline-microbatch-split"].judge(block)}


def test_the_pipeline_fault_passes_its_checks_on_the_run_torch_produced():
    assert all(pipeline_verdicts(pipeline_block()).values()), pipeline_verdicts(pipeline_block())


def _set(block, phase, r, **values):
    block[phase]["ranks"][r]["measured"].update(values)
    return block


@pytest.mark.parametrize("check,broken", [
    # The split was even, or the buffers followed each micro-batch: nothing for the stage to trip on.
    ("pipeline_split_buffers_keep_micro_batch_0_shape", lambda b: _set(b, "broken", 1, micro_batch_rows=[3, 3, 3, 3])),
    ("pipeline_split_buffers_keep_micro_batch_0_shape", lambda b: _set(b, "broken", 1, receive_buffer_rows=[3, 3, 2, 2])),
    # Nobody raised a shape error before the timeout: both ranks only timed out.
    ("pipeline_split_buffers_keep_micro_batch_0_shape",
     lambda b: {**b, "broken": {"ranks": [b["broken"]["ranks"][0], {**b["broken"]["ranks"][1], "error": SEND_TIMEOUT, "wall_s": 3.02}]}}),
    # The rank that failed at once raised something other than a size mismatch.
    ("pipeline_split_buffers_keep_micro_batch_0_shape",
     lambda b: {**b, "broken": {"ranks": [b["broken"]["ranks"][0], {**b["broken"]["ranks"][1], "error": CLOSED}]}}),
    # The fix's split is still uneven, or its buffers disagree with it.
    ("pipeline_split_buffers_keep_micro_batch_0_shape", lambda b: _set(b, "fixed", 1, micro_batch_rows=[3, 3, 2, 2])),
    ("pipeline_split_buffers_keep_micro_batch_0_shape", lambda b: _set(b, "fixed", 1, receive_buffer_rows=[3] * 5)),
    # The fix's loss is 1% off one process's, or does not fall, or a broken rank finished a step.
    ("pipeline_split_fixed_trains_like_one_process", lambda b: _set(b, "fixed", 1, losses=[x * 1.01 for x in REFERENCE])),
    ("pipeline_split_fixed_trains_like_one_process", lambda b: _set(b, "fixed", 1, losses=[0.9, 0.9, 0.9], reference_losses=[0.9, 0.9, 0.9])),
    ("pipeline_split_fixed_trains_like_one_process", lambda b: _set(b, "fixed", 1, losses=REFERENCE[:2])),
    ("pipeline_split_fixed_trains_like_one_process", lambda b: _set(b, "broken", 0, steps_done=1)),
    # No rank waited the whole timeout.
    ("pipeline_split_times_out", lambda b: {**b, "broken": {"ranks": [{**b["broken"]["ranks"][0], "wall_s": 1.0}, b["broken"]["ranks"][1]]}}),
])
def test_each_pipeline_check_fails_on_a_run_without_its_symptom(check, broken):
    """Each change breaks one check and leaves the others passing."""
    verdicts_ = pipeline_verdicts(broken(pipeline_block()))
    assert verdicts_[check] is False, verdicts_
    assert sum(not passed for passed in verdicts_.values()) == 1, verdicts_


def test_a_hang_without_collectives_prints_no_flight_recorder_table():
    from ddpfsdp.demos.faults import report
    from ddpfsdp.demos.result.schema import FaultPhase

    fault = FAULTS["pipeline-microbatch-split"]
    assert fault.hangs and not fault.collectives
    lines = report.symptom_lines(fault, FaultPhase(program="p", ranks=pipeline_block()["broken"]["ranks"]))
    assert lines[:2] == [f"rank 0: {SEND_TIMEOUT['type']}: {SEND_TIMEOUT['message']}", f"rank 1: {SHAPE['type']}: {SHAPE['message']}"]
    assert "micro-batch rows, as the schedule split the batch of 10: [3, 3, 2, 2]" in lines
    assert "rank 1's receive buffer rows per micro-batch: [3, 3, 3, 3]" in lines
    assert not any("flight recorder" in line or "analyzer" in line for line in lines), lines
