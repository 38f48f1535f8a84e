"""One step recorded in time by the real demos on 2 gloo processes: timeline, checks and trace.

The runs are the session's shared launches (tests/demo_runs.py): `fsdp --model tiny` with its trace,
`fsdp --model tiny --sharding grad-op` and `ddp --model tiny --bucket-mb 1` as the question bank links
them, and FSDP1 without prefetch, which only this module runs.
"""

from __future__ import annotations

from collections import Counter

import pytest

pytestmark = [pytest.mark.dist, pytest.mark.timeout(400)]

TINY = ["--model", "tiny"]


def _check(result: dict, name: str) -> dict:
    return next(c for c in result["checks"] if c["name"] == name)


@pytest.fixture
def fsdp_traced(demo_run):
    run = demo_run("fsdp", *TINY)
    run.assert_ok()
    assert run.trace is not None, "rank 0 wrote no trace"
    return run.result, run.trace


def test_fsdp_records_both_ranks_and_its_checks_pass(fsdp_traced):
    result, _ = fsdp_traced
    ranks = result["timeline"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    for rank in ranks:
        assert {s["unit"] for s in rank["spans"] if s["phase"] == "forward" and s["unit"]} == set(result["timeline"]["units"])
        assert len(rank["memory"]["samples"]) > 10
    for name in ("fsdp_reshards_after_forward", "fsdp_prefetches_next_unit", "timeline_records_every_collective"):
        check = _check(result, name)
        assert check["passed"], check
    assert _check(result, "fsdp_reshards_after_forward")["values"]["drops_per_rank"] == [6, 6]
    prefetch = _check(result, "fsdp_prefetches_next_unit")["values"]
    assert prefetch["ranks"][0] == {"forward": 0, "backward": prefetch["pairs"]}
    assert 0 <= result["timeline"]["exposed"]["share"][0] <= 1


def test_trace_holds_every_rank_lane_and_collective(fsdp_traced):
    result, trace = fsdp_traced
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(processes.values()) == ["rank 0", "rank 1"]
    for pid in processes:
        lanes = {e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == pid}
        assert lanes == {"compute", "communication"}
        assert any(e["ph"] == "C" and e["pid"] == pid for e in events)
    for pid, rank in zip(sorted(processes), result["timeline"]["ranks"]):
        traced = Counter((e["name"], e["args"]["seq"]) for e in events if e.get("cat") == "collective" and e["pid"] == pid)
        recorded = Counter((c["op"], c["seq"]) for c in rank["collectives"])
        assert traced == recorded and recorded
        per_op = Counter(c["op"] for c in rank["collectives"])
        assert per_op == {op: v["count"] for op, v in result["comm"]["per_step"].items()}


def test_cli_prints_the_text_timeline_under_its_tables(fsdp_traced):
    import io

    from rich.console import Console

    from ddpfsdp.demos.measure.report import render_training

    result, _ = fsdp_traced
    console = Console(width=100, file=io.StringIO(), record=True)
    render_training(result, console)
    text = console.export_text()
    assert f"Timeline of step {result['timeline']['step']}" in text
    for rank in (0, 1):
        assert f"rank {rank} " in text
    compute = [line for line in text.splitlines() if line.strip().startswith("compute |")]
    comm = [line for line in text.splitlines() if line.strip().startswith("comm    |")]
    assert len(compute) == 2 and all("F" in line and "B" in line for line in compute)
    assert len(comm) == 2 and all("G" in line and "S" in line for line in comm)


def test_grad_op_keeps_params_until_backward_and_says_so(demo_result):
    result = demo_result("fsdp", *TINY, "--sharding", "grad-op")
    check = _check(result, "fsdp_reshards_after_forward")
    assert check["passed"] and check["values"]["drops_per_rank"] == [0, 0], check
    assert "stay until backward" in check["detail"]


def test_ddp_with_small_buckets_overlaps_and_fsdp1_without_prefetch_does_not(demo_result):
    ddp = demo_result("ddp", *TINY, "--bucket-mb", "1")
    check = _check(ddp, "ddp_overlaps_allreduce_with_backward")
    assert check["passed"] and check["values"]["buckets"] >= 2, check
    assert len(ddp["timeline"]["ranks"]) == 2
    fsdp1 = demo_result("fsdp", *TINY, "--steps", "5", "--warmup", "1", "--fsdp-api", "1", "--prefetch", "off")
    check = _check(fsdp1, "fsdp_prefetches_next_unit")
    assert check["passed"] and check["values"]["ranks"][0]["backward"] == 0, check


@pytest.mark.parametrize("args", [["fsdp", *TINY, "--sharding", "grad-op"], ["ddp", *TINY, "--bucket-mb", "1"]])
def test_without_a_timeline_its_claims_are_left_out_and_the_rest_judged_alike(demo_result, args):
    """A run with --no-timeline has nothing to judge overlap, resharding, prefetching or completion
    on: those claims are left out, not failed, and every other check reads the same numbers."""
    from ddpfsdp.demos.train.demo import run_checks

    result = demo_result(*args)
    with_timeline = {c.name: c for c in run_checks(result, result["theory"])}
    without = {c.name: c for c in run_checks({**result, "timeline": None}, result["theory"])}
    timeline_claims = {"timeline_records_every_collective", "ddp_overlaps_allreduce_with_backward",
                       "fsdp_reshards_after_forward", "fsdp_prefetches_next_unit"}
    assert set(with_timeline) - set(without) == timeline_claims & set(with_timeline)
    assert "timeline_records_every_collective" in with_timeline and len(with_timeline) - len(without) >= 2
    assert all(without[name] == with_timeline[name] for name in without)


def test_recorder_edges_on_one_process(tmp_path):
    """The recorder's hooks, in one gloo process: every unit's forward and backward, in order, and the
    reducer's all-reduce issued in backward and completed."""
    import torch
    import torch.distributed as dist

    from ddpfsdp.demos.measure import lanes
    from ddpfsdp.demos.measure.timeline import TimelineRecorder
    from ddpfsdp.demos.train.models import build_model
    from ddpfsdp.demos.train.spec import RunSpec
    from ddpfsdp.demos.parallel.parallelize import World, parallelize
    from ddpfsdp.demos.parallel.strategies import timeline_units

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = build_model("gpt", "tiny", seed=0)
        prepared = parallelize(model, RunSpec("ddp"), World(1), "cpu")
        tokens = torch.randint(0, 100, (2, 16))
        units = timeline_units(model, prepared)
        with TimelineRecorder("cpu", prepared.model, units, prepared.optimizer) as recorder:
            recorder.begin("forward", "forward")
            loss = prepared.model(tokens).float().mean()
            recorder.end("forward", "forward")
            recorder.before_backward(loss)
            loss.backward()
            prepared.optimizer.step()
        rank = recorder.to_dict(0)
    finally:
        dist.destroy_process_group()
    names = [name for name, _, _ in units]
    forward = [s["unit"] for s in lanes.unit_spans(rank, "forward")]
    backward = [s["unit"] for s in lanes.unit_spans(rank, "backward")]
    assert forward == names and sorted(backward) == sorted(names)
    assert backward[0] == "head" and set(backward[-2:]) == {"embeddings", "blocks.0"}
    reduces = lanes.backward_collectives(rank, "all_reduce")
    assert reduces and all(c["completed_s"] is not None and c["completed_s"] >= c["issued_s"] for c in reduces)
    assert lanes.span(rank, "optimizer") and lanes.span(rank, "backward")
    memory = [b for _, b in rank["memory"]["samples"]]
    assert max(memory) > memory[0]  # activations are allocated during the step


def test_a_collective_without_a_work_is_completed_when_waited_on(tmp_path):
    """A functional collective returns a tensor, not a Work: it is complete when the host waits on
    its result (wait_tensor), and that wait is recorded as time blocked, not compute. One that is
    not waited on inside the step has no completion, and the check on the timeline names it. In the
    same step a c10d all-reduce, whose Work's future reports, and a gloo reduce-scatter, whose Work
    has no future and is waited on instead, are completed (one gloo process)."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from ddpfsdp.demos.measure.timeline import TimelineRecorder
    from ddpfsdp.demos.claims.timeline import timeline_records_every_collective

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with TimelineRecorder("cpu", torch.nn.Linear(2, 2), []) as recorder:
            dist.all_reduce(torch.ones(4))
            funcol.all_reduce(torch.ones(8), "sum", dist.group.WORLD).wait()
            work = dist.reduce_scatter_single(torch.zeros(16), torch.ones(16), async_op=True)
            with pytest.raises(RuntimeError, match="getFuture not implemented"):
                work.get_future()
            work.wait()
            pending = funcol.all_reduce(torch.ones(2), "sum", dist.group.WORLD)
        pending.wait()
        rank = recorder.to_dict(0)
        per_op = recorder.per_op()
    finally:
        dist.destroy_process_group()
    done = {c["bytes"]: c["completed_s"] for c in rank["collectives"]}
    assert set(done) == {8, 16, 32, 64} and per_op["all_reduce"]["count"] == 3
    assert done[16] is not None and done[16] >= 0
    assert done[64] is not None and done[64] >= rank["collectives"][2]["issued_s"]
    functional = rank["collectives"][1]
    assert done[32] is not None and done[32] >= functional["issued_s"]
    assert len(rank["waits"]) == 1 and rank["waits"][0][1] == pytest.approx(done[32])
    assert done[8] is None
    check = timeline_records_every_collective({"ranks": [rank]}, per_op)
    assert not check.passed and "1 without completion" in check.detail


def test_completion_is_taken_from_the_future_a_watcher_or_the_stream(tmp_path):
    """Where a collective's completion comes from, by what the backend returned: gloo's all-reduce
    Work has a future; its reduce-scatter Work has none, so a host thread waits on it (CPU only).
    NCCL with async_op=False returns no Work and runs on the current stream (an H100, torch 2.11), so the
    stream says when it is done; on CPU nothing would."""
    import torch
    import torch.distributed as dist

    from ddpfsdp.demos.measure.timeline import completion_source

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        reduce = dist.all_reduce(torch.ones(4), async_op=True)
        scatter = dist.reduce_scatter_single(torch.zeros(16), torch.ones(16), async_op=True)
        reduce.wait()
        scatter.wait()
    finally:
        dist.destroy_process_group()
    assert [completion_source(reduce, cuda) for cuda in (False, True)] == ["future", "future"]
    assert [completion_source(scatter, cuda) for cuda in (False, True)] == ["watcher", "none"]
    assert [completion_source(None, cuda) for cuda in (False, True)] == ["none", "stream"]
