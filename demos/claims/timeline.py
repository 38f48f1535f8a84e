"""The claims a step's timeline can show or refute: overlap, resharding, prefetching, exposed time.

Pure functions of a result's `timeline` (one entry per rank; see demos/measure/timeline.py), so a
test can hand them a broken timeline and watch them fail. Order claims compare the order in which
the host reached each edge (`seq`), which is what FSDP's and DDP's code decides; durations come
from the step's clock.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.measure import lanes
from ddpfsdp.demos.result.schema import CommOp, Timeline
from ddpfsdp.demos.result.step_record import CollectiveSpan, Exposed, RankStep, Span

# A result's timeline, typed or in its JSON form; each rank's record keeps measure.timeline's shape.
Recorded = Timeline | Mapping[str, Any] | None

ROOT_UNIT = "<root>"


def _timeline(timeline: Recorded) -> Timeline:
    return Timeline() if timeline is None else Timeline.from_json(timeline)


def _ranks(timeline: Recorded) -> list[RankStep]:
    return [r for r in _timeline(timeline).ranks if r]


def timeline_records_every_collective(timeline: Recorded, per_op: Mapping[str, CommOp | Mapping[str, Any]]) -> Check:
    """Every rank's timeline holds the collectives counted in the same step, each one completed."""
    ranks = _ranks(timeline)
    expected = {op: int(CommOp.from_json(v).count or 0) for op, v in per_op.items()}
    misses = []
    miscounted, unstamped = False, []
    for r in ranks:
        seen: dict[str, int] = {}
        for c in r.get("collectives", []):
            seen[c["op"]] = seen.get(c["op"], 0) + 1
        incomplete = sum(1 for c in r.get("collectives", []) if c.get("completed_s") is None)
        off = [f"{op} {seen.get(op, 0)} of {expected.get(op, 0)}" for op in sorted({*seen, *expected})
               if seen.get(op, 0) != expected.get(op, 0)]
        miscounted, unstamped = miscounted or bool(off), [*unstamped, incomplete]
        if off or incomplete:
            unfinished = [f"{incomplete} without completion"] if incomplete else []
            misses.append(f"rank {r.get('rank')}: " + ", ".join([*off, *unfinished]))
    passed = bool(ranks) and not misses
    if not ranks:
        detail = f"no timeline recorded: none of the collectives per rank {expected} can be found in it"
    else:
        detail = (f"{len(ranks)} ranks recorded; collectives per rank {expected}"
                  + (f"; off: {'; '.join(misses)}" if misses else ", every one issued and completed"))
    return Check("timeline_records_every_collective", passed, detail,
                 {"ranks": len(ranks), "expected": expected, "miscounted": miscounted, "without_completion": unstamped})


def ddp_overlaps_allreduce_with_backward(timeline: Recorded, bucket_mb: float) -> Check:
    """With two or more buckets, the first bucket's all-reduce is issued while backward still computes.

    "Still computes": some unit's backward begins after the all-reduce was issued. With one bucket
    the reducer can only launch it once every gradient is ready, so no unit's backward follows it:
    the check then states that, and holds the run to it.
    """
    ranks = _ranks(timeline)
    per_rank = []
    misses = []
    for r in ranks:
        reduces = lanes.backward_collectives(r, "all_reduce")
        if not reduces:
            misses.append(f"rank {r.get('rank')}: no all_reduce in backward")
            continue
        first = reduces[0]
        later_units = [s["unit"] for s in lanes.unit_spans(r, "backward") if s["seq_start"] > first["seq"]]
        backward = lanes.span(r, "backward")
        window = [(backward["start_s"], backward["end_s"])] if backward else []
        inflight = lanes.union(lanes.collective_interval(c) for c in reduces)
        total = lanes.length(inflight)
        hidden = lanes.length(lanes.intersect(inflight, window)) / total if total > 0 else 0.0
        per_rank.append({"buckets": len(reduces), "units_after_first": len(later_units), "hidden_share": hidden})
        overlapped = bool(later_units)
        if len(reduces) >= 2 and not overlapped:
            misses.append(f"rank {r.get('rank')}: first of {len(reduces)} all-reduces issued after every unit's backward began")
        if len(reduces) == 1 and overlapped:
            misses.append(f"rank {r.get('rank')}: one bucket, yet {len(later_units)} units began backward after its all-reduce")
    if not per_rank:
        return Check("ddp_overlaps_allreduce_with_backward", False, "no timeline with an all-reduce in backward"
                     + (f": {'; '.join(misses)}" if misses else ""), {})
    buckets = per_rank[0]["buckets"]
    hidden = ", ".join(f"{p['hidden_share']:.0%}" for p in per_rank)
    if buckets >= 2:
        detail = (f"{buckets} buckets: the first all-reduce was issued with {per_rank[0]['units_after_first']} units' "
                  f"backward still to run; share of all-reduce time under backward per rank: {hidden}")
    else:
        detail = (f"1 bucket (bucket_cap_mb {bucket_mb:g} holds every gradient): its all-reduce starts only once "
                  f"every gradient is ready, so nothing overlaps (--bucket-mb below the gradients' size gives "
                  f"several); share under backward per rank: {hidden}")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("ddp_overlaps_allreduce_with_backward", not misses, detail,
                 {"buckets": buckets, "ranks": per_rank})


def _nested(inner: str, outer: str) -> bool:
    return outer != ROOT_UNIT and inner.startswith(outer + ".")


def _post_order(names: Sequence[str]) -> list[str]:
    """Units in the order their forwards finish (inner before outer), from their pre-order names."""
    out: list[str] = []
    stack: list[str] = []
    for name in names:
        while stack and not _nested(name, stack[-1]):
            out.append(stack.pop())
        stack.append(name)
    return out + stack[::-1]


def _with_params(units: Sequence[str], unit_params: Sequence[int]) -> tuple[list[str], bool]:
    """Non-root units that hold parameters, in forward (pre-)order, and whether the root holds any."""
    held = dict(zip(units, unit_params))
    return [u for u in units if u != ROOT_UNIT and held.get(u, 0) > 0], held.get(ROOT_UNIT, 0) > 0


def _reshard_misses(expected: Sequence[str], dropped: Sequence[str]) -> str:
    """Which units kept their parameters after forward where they should have dropped them, and the reverse."""
    kept = [u for u in expected if u not in dropped]
    unexpected = [u for u in dropped if u not in expected]
    parts = ([f"kept their parameters after forward: {', '.join(kept)}"] if kept else []) + (
        [f"dropped after forward: {', '.join(unexpected)}"] if unexpected else [])
    return "; ".join(parts) or f"dropped after forward in another order: {', '.join(dropped)}"


def fsdp_reshards_after_forward(timeline: Recorded, sharding: str, units: Sequence[str],
                                unit_params: Sequence[int]) -> Check:
    """full / hybrid: parameter bytes fall right after each unit's forward (one drop per unit);
    grad-op: they do not fall until backward. The root never drops: FSDP keeps its parameters after
    forward, since backward needs them first (FSDP2 _fsdp_state.py lazy init, FSDP1 _post_forward_reshard)."""
    ranks = _ranks(timeline)
    held = dict(zip(units, unit_params))
    followed = [u for u in _timeline(timeline).units or [] if held.get(u, 0) > 0]
    resharding = sharding != "grad-op"
    expected = [u for u in followed if resharding and u != ROOT_UNIT]
    misses = []
    drops_by_rank = []
    falls_in_backward = []
    for r in ranks:
        pairs = lanes.param_drops_after_forward(r)
        dropped = [u for u in followed if u in pairs and pairs[u][1] < pairs[u][0]]
        missing = [u for u in followed if u not in pairs]
        drops_by_rank.append(len(dropped))
        forward_high = max((pairs[u][0] for u in pairs), default=0)
        backward = [h for _, h, label in r.get("params", []) if label.endswith(" after backward")]
        falls_in_backward.append(bool(backward) and min(backward) < forward_high)
        if missing:
            misses.append(f"rank {r.get('rank')}: no forward edges for {', '.join(missing)}")
        elif dropped != expected:
            misses.append(f"rank {r.get('rank')}: {_reshard_misses(expected, dropped)}")
        elif not expected and not falls_in_backward[-1]:
            misses.append(f"rank {r.get('rank')}: parameters never fell in backward")
    if not ranks or not followed:
        misses.append("no timeline" if not ranks else "no unit with parameters was followed")
    drops = ", ".join(str(d) for d in drops_by_rank)
    if expected:
        detail = (f"{sharding}: parameter bytes fell right after the forward of {drops} of {len(followed)} units "
                  f"per rank (each unit frees its unsharded parameters once its forward is done)")
    elif resharding:
        detail = (f"{sharding}, the root the only unit: {drops} drops after forward per rank; FSDP keeps the "
                  f"root's parameters after forward (backward needs them first) and frees them in backward")
    else:
        detail = (f"grad-op: {drops} of {len(followed)} units dropped after forward per rank: the unsharded "
                  f"parameters stay until backward, where they fall")
    if not expected:
        detail += f" ({'seen on every rank' if ranks and all(falls_in_backward) else 'fall not seen'})"
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("fsdp_reshards_after_forward", not misses, detail,
                 {"sharding": sharding, "units": len(followed), "drops_per_rank": drops_by_rank,
                  "falls_in_backward": falls_in_backward})


def _prefetched(order: Sequence[str], gathers: Mapping[str, CollectiveSpan], spans: Mapping[str, Span]) -> int:
    """How many units' all-gathers were issued before the previous unit's compute ended."""
    count = 0
    for current, following in zip(order, order[1:]):
        if current in spans and following in gathers and gathers[following]["seq"] < spans[current]["seq_end"]:
            count += 1
    return count


def fsdp_prefetches_next_unit(timeline: Recorded, *, sharding: str, prefetch: str, fsdp_api: int,
                              units: Sequence[str], unit_params: Sequence[int]) -> Check:
    """Whether unit k+1's all-gather is issued before unit k's compute ends, in forward and backward.

    What the source says happens, in issue order on the host:
      forward   FSDP2 issues a unit's all-gather in that unit's own pre-forward unless
                set_modules_to_forward_prefetch names it (--prefetch forward); FSDP1 likewise unless
                forward_prefetch=True. Without it, overlap in forward comes only from a GPU running
                behind the host, which issue order does not show (and CPU ranks never have).
      backward  FSDP2's pre-backward of unit k issues the all-gather of the unit before it in
                post-forward order (default prefetch, no off switch); FSDP1 does with BACKWARD_PRE,
                and not with backward_prefetch=None (--prefetch off). grad-op keeps its parameters,
                so backward all-gathers nothing.
    Nested units (--wrap layer) are judged on the outermost ones: the next block against this one.
    Forward all-gathers follow pre-forward order (the root's first); backward ones the reverse of
    the order in which forwards finish.
    """
    ranks = _ranks(timeline)
    followed, root_held = _with_params(units, unit_params)
    top = [u for u in followed if not any(_nested(u, other) for other in followed if other != u)]
    pairs = max(len(top) - 1, 0)
    expect_forward = pairs if prefetch == "forward" else 0
    expect_backward = None if sharding == "grad-op" else (0 if prefetch == "off" else pairs)
    forward_order = ([ROOT_UNIT] if root_held else []) + followed
    backward_order = _post_order(followed)[::-1]
    misses, figures = [], []
    for r in ranks:
        forward_gathers = lanes.forward_collectives(r, "all_gather")
        backward_gathers = lanes.backward_collectives(r, "all_gather")
        forward_spans = {s["unit"]: s for s in lanes.unit_spans(r, "forward")}
        backward_spans = {s["unit"]: s for s in lanes.unit_spans(r, "backward")}
        if len(forward_gathers) != len(forward_order):
            misses.append(f"rank {r.get('rank')}: {len(forward_gathers)} forward all-gathers for {len(forward_order)} units")
            continue
        forward = _prefetched(top, dict(zip(forward_order, forward_gathers)), forward_spans)
        backward = None
        if expect_backward is not None:
            if len(backward_gathers) != len(backward_order):
                misses.append(f"rank {r.get('rank')}: {len(backward_gathers)} backward all-gathers for "
                              f"{len(backward_order)} resharded units")
                continue
            backward = _prefetched(top[::-1], dict(zip(backward_order, backward_gathers)), backward_spans)
        figures.append({"forward": forward, "backward": backward})
        if forward != expect_forward or backward != expect_backward:
            misses.append(f"rank {r.get('rank')}: forward {forward}, backward {backward}")
    if not ranks:
        misses.append("no timeline")
    shown = figures[0] if figures else {"forward": None, "backward": None}
    api = "FSDP2" if fsdp_api == 2 else "FSDP1"
    nested = f" (outermost {len(top)} of {len(followed)} nested units)" if len(top) != len(followed) else ""
    detail = (f"{api}, prefetch {prefetch}{nested}: forward {shown['forward']} of {pairs} next-unit all-gathers "
              f"issued before the current unit's compute ended (expected {expect_forward}"
              + ("" if prefetch == "forward" or not pairs else ": each is issued in its own unit's pre-forward") + ")")
    if expect_backward is None:
        detail += "; backward: none to prefetch (grad-op keeps the unsharded parameters)"
    else:
        detail += (f"; backward {shown['backward']} of {pairs} (expected {expect_backward}"
                   + (": the current unit's pre-backward issues the next one's" if expect_backward else "") + ")")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("fsdp_prefetches_next_unit", not misses, detail,
                 {"pairs": pairs, "expected_forward": expect_forward, "expected_backward": expect_backward,
                  "ranks": figures})


def exposed_comm(timeline: Recorded) -> Exposed:
    """Per rank: seconds and share of the step with a collective in flight and no compute running."""
    ranks = _ranks(timeline)
    return Exposed(exposed_s=[lanes.exposed_comm_s(r) for r in ranks], share=[lanes.exposed_share(r) for r in ranks],
                   comm_s=[lanes.length(lanes.comm_intervals(r)) for r in ranks],
                   step_s=[r.get("duration_s") for r in ranks])
