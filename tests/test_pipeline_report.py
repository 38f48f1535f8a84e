"""`demo pipeline`'s result read back as typed fields (measure/pipeline_report.py's PipelineView): the
renderer reads them, from the JSON form, the typed result and a result that went through JSON text alike,
through the demo command's own rendering path; and reading one loses nothing. No ranks: the recorded
steps are built by hand, as torch's 1F1B and GPipe order the actions of 2 stages and 2 micro-batches.

tests/data/pipeline_1f1b_procs2.json is a result `ddpfsdp demo pipeline --procs 2 --steps 2 --microbatches 2
--batch-size 4 --json` printed before the pipeline's data had types, unedited."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ddpfsdp.demos import registry
from ddpfsdp.demos.measure.pipeline_report import PipelineView, drawing, render
from ddpfsdp.demos.measure.pipeline_timeline import PlacedStep, record
from ddpfsdp.demos.result.schema import DemoResult, as_result
from ddpfsdp.demos.base.shapes import GPT_PRESETS
from ddpfsdp.demos.theory.pipeline import boundary_bytes, check_pipeline
from ddpfsdp.demos.claims import pipeline as claims
from saved_results import placed_result

SAVED = Path(__file__).parent / "data" / "pipeline_1f1b_procs2.json"
MS = 1_000_000  # ns
BATCH = 4  # 2 micro-batches of 2 samples
SHAPE = GPT_PRESETS["tiny"]
BOUNDARY = boundary_bytes(BATCH // 2, SHAPE.seq_len, SHAPE.d_model, "fp32")
ORDERS = {  # per rank, the actions in the order the schedule runs them, each 10 ms, from the given start
    "1f1b": [(0, [("F", 0), ("F", 1), ("B", 0), ("B", 1)]), (10, [("F", 0), ("L", 0), ("B", 0), ("F", 1),
                                                                  ("L", 1), ("B", 1)])],
    "gpipe": [(0, [("F", 0), ("F", 1), ("B", 0), ("B", 1)]), (10, [("F", 0), ("L", 0), ("F", 1), ("L", 1),
                                                                   ("B", 0), ("B", 1)])],
}


def _raw(rank: int, start_ms: int, actions: list[tuple[str, int]]) -> dict:
    stamped = [{"kind": kind, "stage": rank, "mb": mb, "start": (start_ms + 10 * i) * MS,
                "end": (start_ms + 10 * i + 10) * MS} for i, (kind, mb) in enumerate(actions)]
    # stage 0 sends each activation forward and receives its gradient; stage 1 the other way round
    sends, recvs = ("activation", "gradient") if rank == 0 else ("gradient", "activation")
    p2p = [{"op": op, "what": what, "stage": rank, "mb": mb, "bytes": BOUNDARY, "peer": 1 - rank,
            "issued": a["start"], "completed": a["start"] if op == "recv" else None}
           for mb in range(2) for op, what in (("send", sends), ("recv", recvs))
           for a in stamped[:1]]
    return {"start": start_ms * MS, "end": stamped[-1]["end"], "actions": stamped, "p2p": p2p}


def _run(schedule: str) -> dict:
    ranks = [PlacedStep(**record(_raw(rank, start, actions), rank, 0), pp_rank=rank, dp_rank=0, dp=1,
                        comm={"pp": {"send": {"count": 2, "bytes": 2 * BOUNDARY, "wire_bytes_per_rank": 0.0}}})
             for rank, (start, actions) in enumerate(ORDERS[schedule])]
    measured = claims.measure(check_pipeline(2, 2, schedule), SHAPE, ranks, [6.0, 5.5], batch_size=BATCH, wall_s=1.0)
    checks = claims.run_checks(measured, [6.0, 5.5])
    return {"config": {"schedule": schedule}, "timeline": {"ranks": ranks}, "loss": measured["losses"],
            "pipeline": measured, "checks": [c.to_dict() for c in checks]}


RUNS = {name: _run(name) for name in ("gpipe", "1f1b")}
RESULT = placed_result("pipeline", {"model": "tiny", "schedules": ["gpipe", "1f1b"], "world_size": 2, "device": "cpu",
                               "backend": "gloo"}, {}, RUNS["1f1b"]["checks"], runs=RUNS, reference_loss=[6.0, 5.5],
                  notes=["Measured on CPU processes with gloo."])


def _rendered(result) -> str:
    out = io.StringIO()
    render(result, Console(file=out, width=120, color_system=None))
    return out.getvalue()


def test_the_view_reads_each_figure_the_result_carries():
    view = PipelineView.of(RESULT)
    one = view.runs["1f1b"]
    assert one.pipeline.torch_schedule == "Schedule1F1B" and one.pipeline.pp == 2 and one.pipeline.dp == 1
    assert [r.in_flight_chunks for r in one.pipeline.ranks] == [2, 1]
    assert [r.in_flight_chunks for r in view.runs["gpipe"].pipeline.ranks] == [2, 2]
    assert one.pipeline.theory.bubble_fraction == pytest.approx(1 / 3)
    assert one.pipeline.ranks[0].sent.activation.count == 2 and one.pipeline.ranks[0].sent.gradient.count == 0
    assert one.pipeline.ranks[0].sent.bytes == one.pipeline.ranks[0].sent_theory.bytes == 2 * BOUNDARY
    assert [s.kind for s in one.timeline.ranks[1].spans] == ["F", "L", "B", "F", "L", "B"]
    assert view.reference_loss == [6.0, 5.5] and view.notes == ["Measured on CPU processes with gloo."]


def test_the_json_form_renders_as_the_typed_result_and_as_one_read_from_text():
    typed = RESULT
    as_json = typed.to_json()
    from_text = as_result(json.loads(json.dumps(as_json)))
    text = _rendered(as_json)
    assert text == _rendered(typed) == _rendered(from_text)
    # what it shows is the run's figures: the step, each rank's bubble beside theory, the losses
    assert "Schedule1F1B: 2 ranks x 1 stage(s), 2 micro-batches of 2 samples; step 70 ms" in text
    assert "0.333" in text and "ScheduleGPipe" in text and "rank 1 " in text
    assert "loss per step, 1f1b: 6.00000, 5.50000; one process: 6.00000, 5.50000" in text


def test_reading_a_result_loses_nothing():
    as_json = RESULT.to_json()
    assert DemoResult.from_json(as_json).to_json() == as_json
    assert PipelineView.of(as_json).to_json()["runs"] == as_json["runs"]


def test_the_demo_command_renders_a_pipeline_result_with_its_checks():
    from ddpfsdp.quiz.commands.demo import _render

    out = io.StringIO()
    _render(registry.get("pipeline"), as_result(RESULT.to_json()), Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert "Schedule1F1B: 2 ranks" in text and "the recorded step" in text
    assert "pipeline_p2p_matches_theory" in text and "pipeline_activations_in_flight_match_theory" in text


def test_the_drawing_reads_the_typed_step_as_its_json():
    timeline = RESULT.to_json()["runs"]["gpipe"]["timeline"]
    typed = PipelineView.of(RESULT).runs["gpipe"].timeline
    assert drawing(timeline, width=7) == drawing(typed, width=7)
    assert [kinds for _, kinds, _ in drawing(typed, width=7)] == ["FFBB···", "·FLFLBB"]


def test_a_saved_result_loads_goes_out_as_it_came_in_and_renders_its_figures():
    saved = json.loads(SAVED.read_text("utf-8"))
    result = as_result(saved)
    assert json.dumps(result.to_json()) == json.dumps(saved)
    run = PipelineView.of(result).runs["1f1b"].pipeline
    rows = saved["runs"]["1f1b"]["pipeline"]["ranks"]
    assert [r.in_flight_chunks for r in run.ranks] == [r["in_flight_chunks"] for r in rows] == [2, 1]
    assert [r.bubble for r in run.ranks] == [r["bubble"] for r in rows]
    assert [r.sent.bytes for r in run.ranks] == [r["sent_theory"]["bytes"] for r in rows]
    text = _rendered(saved)
    assert text == _rendered(result)
    assert f"{rows[0]['bubble']:.3f}" in text and f"{rows[1]['bubble']:.3f}" in text


def test_the_figures_of_a_saved_run_come_back_from_its_recorded_step_key_for_key():
    saved = json.loads(SAVED.read_text("utf-8"))
    run = saved["runs"]["1f1b"]
    block = run["pipeline"]
    again = claims.measure(check_pipeline(block["pp"], block["microbatches"], block["schedule"]), SHAPE,
                           run["timeline"]["ranks"], block["losses"], batch_size=block["batch_size"],
                           wall_s=block["wall_s"])
    assert json.dumps(again) == json.dumps(block)
