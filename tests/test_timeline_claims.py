"""The timeline claims on hand-made steps: each holds on a step that shows it and fails on one that does not."""

from __future__ import annotations

import copy

from ddpfsdp.demos.measure import lanes, trace
from ddpfsdp.demos.claims import timeline as tl

UNITS = ["embeddings", "blocks.0", "blocks.1", "head", "<root>"]
UNIT_PARAMS = [10, 20, 20, 10, 0]
FOLLOWED = UNITS[:-1]


class Step:
    """Builds one rank's timeline, handing out host order numbers as the edges happen."""

    def __init__(self, rank: int = 0) -> None:
        self.seq = 0
        self.t = 0.0
        self.rank = {"rank": rank, "clock": "host", "spans": [], "collectives": [], "params": [],
                     "memory": {"kind": "test", "samples": []}}
        self.open: dict[tuple, tuple] = {}

    def _tick(self) -> tuple[float, int]:
        self.seq += 1
        self.t += 0.001
        return self.t, self.seq

    def begin(self, name, phase, unit=None):
        self.open[(name, phase)] = self._tick()

    def end(self, name, phase, unit=None):
        (start, seq_start), (end, seq_end) = self.open.pop((name, phase)), self._tick()
        self.rank["spans"].append({"name": name, "phase": phase, "unit": unit, "start_s": start, "end_s": end,
                                   "seq_start": seq_start, "seq_end": seq_end})

    def collective(self, op, duration_s=0.002, nbytes=100):
        t, seq = self._tick()
        self.rank["collectives"].append({"op": op, "bytes": nbytes, "group_size": 2, "group": "0", "issued_s": t,
                                         "completed_s": t + duration_s, "seq": seq})

    def params(self, held, label):
        t, _ = self._tick()
        self.rank["params"].append([t, held, label])

    def done(self):
        self.rank["duration_s"] = self.t + 0.001
        return self.rank


def fsdp_step(*, reshard=True, forward_prefetch=False, backward_prefetch=True, rank=0):
    s = Step(rank)
    shard, full = 30, 90
    s.begin("forward", "forward")
    held = shard
    for i, unit in enumerate(FOLLOWED):
        if not (forward_prefetch and i > 0):
            s.collective("all_gather")
        if forward_prefetch and i + 1 < len(FOLLOWED):
            s.collective("all_gather")  # the next unit's, issued before this one computes
        held = full
        s.begin(unit, "forward", unit)
        s.params(held, f"{unit} forward")
        s.end(unit, "forward", unit)
        if reshard:
            held = shard
        s.params(held, f"{unit} after forward")
    s.end("forward", "forward")
    s.begin("backward", "backward")
    backward_units = FOLLOWED[::-1]
    for i, unit in enumerate(backward_units):
        if reshard:
            if not (backward_prefetch and i > 0):
                s.collective("all_gather")
            if backward_prefetch and i + 1 < len(backward_units):
                s.collective("all_gather")
        s.begin(unit, "backward", unit)
        s.end(unit, "backward", unit)
        s.collective("reduce_scatter")
        held = shard
        s.params(held, f"{unit} after backward")
    s.end("backward", "backward")
    s.begin("optimizer", "optimizer")
    s.end("optimizer", "optimizer")
    return s.done()


def ddp_step(buckets: int, rank=0):
    s = Step(rank)
    s.begin("forward", "forward")
    for unit in FOLLOWED:
        s.begin(unit, "forward", unit)
        s.end(unit, "forward", unit)
    s.end("forward", "forward")
    s.begin("backward", "backward")
    for i, unit in enumerate(FOLLOWED[::-1]):
        s.begin(unit, "backward", unit)
        s.end(unit, "backward", unit)
        if buckets >= 2 and i == 0:
            s.collective("all_reduce", duration_s=0.004)
    s.end("backward", "backward")
    for _ in range(buckets - 1 if buckets >= 2 else 1):
        s.collective("all_reduce", duration_s=0.004)
    s.begin("optimizer", "optimizer")
    s.end("optimizer", "optimizer")
    return s.done()


def timeline(*ranks):
    return {"step": 4, "units": FOLLOWED, "ranks": list(ranks)}


def test_ddp_overlap_holds_with_two_buckets_and_states_one_bucket():
    two = tl.ddp_overlaps_allreduce_with_backward(timeline(ddp_step(2), ddp_step(2, 1)), 25)
    assert two.passed, two.detail
    assert two.values["buckets"] == 2 and two.values["ranks"][0]["hidden_share"] > 0
    one = tl.ddp_overlaps_allreduce_with_backward(timeline(ddp_step(1), ddp_step(1, 1)), 25)
    assert one.passed and "1 bucket" in one.detail, one.detail


def test_ddp_overlap_fails_when_the_first_bucket_waits_for_the_end():
    late = ddp_step(2)
    # move the first all-reduce after every unit's backward: the reducer did not overlap
    late["collectives"][0]["seq"] = 10_000
    late["collectives"][1]["seq"] = 10_001
    late["spans"] = [s for s in late["spans"] if s["name"] != "optimizer"]
    check = tl.ddp_overlaps_allreduce_with_backward(timeline(late), 25)
    assert not check.passed and "rank 0: first of 2 all-reduces issued after every unit's backward began" in check.detail
    empty = tl.ddp_overlaps_allreduce_with_backward(timeline(), 25)
    assert not empty.passed and "no timeline with an all-reduce in backward" in empty.detail


def test_reshard_after_forward_full_and_grad_op():
    full = tl.fsdp_reshards_after_forward(timeline(fsdp_step(), fsdp_step(rank=1)), "full", UNITS, UNIT_PARAMS)
    assert full.passed and full.values["drops_per_rank"] == [4, 4], full.detail
    grad_op = tl.fsdp_reshards_after_forward(timeline(fsdp_step(reshard=False)), "grad-op", UNITS, UNIT_PARAMS)
    assert grad_op.passed and "stay until backward" in grad_op.detail, grad_op.detail


def _fails_naming(check, words: str) -> None:
    """The check failed, and its detail names what was off."""
    assert not check.passed, check.detail
    assert words in check.detail, check.detail


def test_reshard_after_forward_fails_on_the_wrong_sawtooth():
    _fails_naming(tl.fsdp_reshards_after_forward(timeline(fsdp_step(reshard=False)), "full", UNITS, UNIT_PARAMS),
                  "rank 0: kept their parameters after forward: embeddings, blocks.0, blocks.1, head")
    _fails_naming(tl.fsdp_reshards_after_forward(timeline(fsdp_step()), "grad-op", UNITS, UNIT_PARAMS),
                  "rank 0: dropped after forward: embeddings, blocks.0, blocks.1, head")
    one_missing = fsdp_step()
    for entry in one_missing["params"]:
        if entry[2] == "blocks.1 after forward":
            entry[1] = 90  # this unit kept its parameters
    check = tl.fsdp_reshards_after_forward(timeline(one_missing), "full", UNITS, UNIT_PARAMS)
    _fails_naming(check, "3 of 4 units")
    assert check.detail.endswith("off: rank 0: kept their parameters after forward: blocks.1"), check.detail
    never_falls = fsdp_step(reshard=False)
    never_falls["params"] = [p for p in never_falls["params"] if not p[2].endswith("after backward")]
    check = tl.fsdp_reshards_after_forward(timeline(never_falls), "grad-op", UNITS, UNIT_PARAMS)
    _fails_naming(check, "fall not seen")
    assert "rank 0: parameters never fell in backward" in check.detail
    _fails_naming(tl.fsdp_reshards_after_forward(None, "full", UNITS, UNIT_PARAMS), "off: no timeline")


def test_prefetch_claims_follow_the_setting():
    pairs = len(FOLLOWED) - 1
    kwargs = dict(sharding="full", fsdp_api=2, units=UNITS, unit_params=UNIT_PARAMS)
    default = tl.fsdp_prefetches_next_unit(timeline(fsdp_step()), prefetch="default", **kwargs)
    assert default.passed and default.values["ranks"][0] == {"forward": 0, "backward": pairs}, default.detail
    forward = tl.fsdp_prefetches_next_unit(timeline(fsdp_step(forward_prefetch=True)), prefetch="forward", **kwargs)
    assert forward.passed and forward.values["ranks"][0]["forward"] == pairs, forward.detail
    off = tl.fsdp_prefetches_next_unit(timeline(fsdp_step(backward_prefetch=False)), prefetch="off",
                                       **{**kwargs, "fsdp_api": 1})
    assert off.passed and off.values["ranks"][0]["backward"] == 0, off.detail
    grad_op = tl.fsdp_prefetches_next_unit(timeline(fsdp_step(reshard=False)), prefetch="default",
                                           **{**kwargs, "sharding": "grad-op"})
    assert grad_op.passed and "grad-op keeps" in grad_op.detail


def test_prefetch_fails_when_the_step_disagrees():
    kwargs = dict(sharding="full", fsdp_api=2, units=UNITS, unit_params=UNIT_PARAMS)
    # no backward prefetch where FSDP2 always does it: 0 of the 3 pairs, 3 expected
    check = tl.fsdp_prefetches_next_unit(timeline(fsdp_step(backward_prefetch=False)), prefetch="default", **kwargs)
    _fails_naming(check, "backward 0 of 3 (expected 3")
    assert "off: rank 0: forward 0, backward 0" in check.detail
    # --prefetch forward promised next-unit gathers in forward; none came
    check = tl.fsdp_prefetches_next_unit(timeline(fsdp_step()), prefetch="forward", **kwargs)
    _fails_naming(check, "forward 0 of 3 next-unit all-gathers issued before the current unit's compute ended (expected 3)")
    # --prefetch off, yet every backward gather came early
    check = tl.fsdp_prefetches_next_unit(timeline(fsdp_step()), prefetch="off", **kwargs)
    _fails_naming(check, "backward 3 of 3 (expected 0)")
    missing = fsdp_step()
    missing["collectives"] = missing["collectives"][1:]
    _fails_naming(tl.fsdp_prefetches_next_unit(timeline(missing), prefetch="default", **kwargs),
                  "rank 0: 3 forward all-gathers for 4 units")
    _fails_naming(tl.fsdp_prefetches_next_unit(None, prefetch="default", **kwargs), "off: no timeline")


def test_every_collective_recorded_and_completed():
    step = fsdp_step()
    per_op = {"all_gather": {"count": sum(c["op"] == "all_gather" for c in step["collectives"])},
              "reduce_scatter": {"count": 4}}
    assert tl.timeline_records_every_collective(timeline(step), per_op).passed
    unfinished = copy.deepcopy(step)
    unfinished["collectives"][0]["completed_s"] = None
    _fails_naming(tl.timeline_records_every_collective(timeline(unfinished), per_op), "rank 0: 1 without completion")
    _fails_naming(tl.timeline_records_every_collective(timeline(step), {**per_op, "all_reduce": {"count": 1}}),
                  "rank 0: all_reduce 0 of 1")
    extra = copy.deepcopy(step)
    extra["collectives"].append({**extra["collectives"][-1], "seq": 999})  # one reduce-scatter too many
    _fails_naming(tl.timeline_records_every_collective(timeline(extra), per_op), "rank 0: reduce_scatter 5 of 4")
    _fails_naming(tl.timeline_records_every_collective(None, per_op), "no timeline recorded")


def test_exposed_communication_is_comm_outside_compute():
    rank = {"duration_s": 1.0, "spans": [{"name": "a", "phase": "forward", "unit": "a", "start_s": 0.0, "end_s": 0.5,
                                          "seq_start": 1, "seq_end": 2}],
            "collectives": [{"op": "all_gather", "issued_s": 0.4, "completed_s": 0.7, "seq": 3}]}
    assert lanes.exposed_comm_s(rank) == 0.2 or abs(lanes.exposed_comm_s(rank) - 0.2) < 1e-9
    assert abs(lanes.exposed_share(rank) - 0.2) < 1e-9
    figures = tl.exposed_comm(timeline(rank))
    assert abs(figures["share"][0] - 0.2) < 1e-9 and abs(figures["comm_s"][0] - 0.3) < 1e-9


def test_downsampling_keeps_every_peak_and_trough():
    from ddpfsdp.demos.measure.timeline import downsample

    samples = [(i, (i % 7) * 10 + (1000 if i == 555 else 0)) for i in range(2000)]
    kept = downsample(samples, limit=100)
    assert len(kept) <= 120 and (555, samples[555][1]) in kept
    assert kept == sorted(kept) and min(b for _, b in kept) == 0


def test_trace_has_a_process_per_rank_with_both_lanes():
    result = {"demo": "fsdp", "schema": "ddpfsdp.demo/1", "timeline": timeline(fsdp_step(), fsdp_step(rank=1))}
    events = trace.to_json(result)["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1"}
    threads = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert threads == {(1, "compute"), (1, "communication"), (2, "compute"), (2, "communication")}
    assert any(e["ph"] == "C" for e in events)


def test_backward_order_of_nested_units_is_the_reverse_of_forwards_finishing():
    names = ["embeddings", "blocks.0", "blocks.0.attn", "blocks.0.mlp", "blocks.1", "blocks.1.attn", "head"]
    assert tl._post_order(names) == ["embeddings", "blocks.0.attn", "blocks.0.mlp", "blocks.0", "blocks.1.attn",
                                     "blocks.1", "head"]


def test_root_alone_keeps_its_parameters_after_forward():
    s = Step()
    s.begin("forward", "forward")
    s.collective("all_gather")
    s.begin("<root>", "forward", "<root>")
    s.params(90, "<root> forward")
    s.end("<root>", "forward", "<root>")
    s.params(90, "<root> after forward")
    s.end("forward", "forward")
    s.params(30, "step after backward")
    root_only = {"step": 4, "units": ["<root>"], "ranks": [s.done()]}
    check = tl.fsdp_reshards_after_forward(root_only, "full", ["<root>"], [100])
    assert check.passed and "root the only unit" in check.detail, check.detail
    dropped = copy.deepcopy(root_only)
    dropped["ranks"][0]["params"][1][1] = 30
    _fails_naming(tl.fsdp_reshards_after_forward(dropped, "full", ["<root>"], [100]),
                  "rank 0: dropped after forward: <root>")


def test_text_timeline_marks_compute_and_collectives():
    from ddpfsdp.demos.measure.report import params_over_step_lines, timeline_lines

    step = fsdp_step()
    lines = timeline_lines(timeline(step), width=40)
    compute = next(line for line in lines if line.strip().startswith("compute"))
    comm = next(line for line in lines if line.strip().startswith("comm"))
    assert "F" in compute and "B" in compute and "O" in compute
    assert "G" in comm and "S" in comm
    flat = {"duration_s": 1.0, "params": [[0.0, 90, "a forward"], [0.5, 90, "a after forward"]]}
    shown = params_over_step_lines({"ddp": {"timeline": {"ranks": [flat]}}, "fsdp-full": {"timeline": {"ranks": [step]}}},
                                   width=20)
    assert shown[1].split("|")[1] == "█" * 20  # DDP's line holds the whole model all step
    assert len(set(shown[2].split("|")[1])) > 1  # FSDP's rises and falls
