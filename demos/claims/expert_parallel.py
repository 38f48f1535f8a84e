"""The claims an MoE run with expert parallelism illustrates (`demo moe`), as pure functions of what it
recorded (`result.expert_record`, in the result's `moe` block) and of the analytic model's figures
(`theory.expert_parallel`).

Each returns a Check whose detail states the numbers, so a test can hand it numbers that break the claim
and watch it fail. Counts of slots and bytes are exact; the loss per step against one process within
rtol 1e-4 in fp32 (`claims.training.LOSS_RTOL_FP32`), the compared step's output and gradients within
1e-4 of their largest magnitude; the aux loss recomputed in float64 within 1e-5 of torch's fp32 value.

Time is judged only where causality decides it: every rank's combine all-to-all returns after the last
rank of its group has computed its experts, since it carries their outputs. Whether the busiest rank is
the one that finishes last is reported, not judged: on CPU processes sharing a machine's cores the
scheduler decides which rank runs late as much as the load does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddpfsdp.demos.base.units import format_bytes
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.expert_record import ExpertRank, ExpertReference, LayerRouting
from ddpfsdp.demos.result.schema import ExpertRun
from ddpfsdp.demos.theory.expert_parallel import SWITCH_AUX_ALPHA, all_to_all_bytes, dropped_slots, switch_aux_loss

LOSS_RTOL = 1e-4  # fp32, as claims.training.LOSS_RTOL_FP32
OUTPUT_RTOL = 1e-4  # of the largest magnitude of the compared tensor
AUX_RTOL = 1e-5

Run = ExpertRun | Mapping[str, Any]


def _run(run: Run) -> ExpertRun:
    return ExpertRun.from_json(run)


def _layers(rank: ExpertRank) -> list[LayerRouting]:
    return list(rank.get("layers") or [])


def _groups(run: ExpertRun) -> dict[int, list[ExpertRank]]:
    """The ranks of each ep group, in their order in the group."""
    groups: dict[int, list[ExpertRank]] = {}
    for rank in sorted(run.ranks, key=lambda r: (r["ep_group"], r["ep_rank"])):
        groups.setdefault(rank["ep_group"], []).append(rank)
    return groups


def _mib(n: float) -> str:
    return format_bytes(n, "MiB", digits=3)


# ----------------------------------------------------------------------------- the same MoE on one process


def moe_matches_single_process(losses: Sequence[float], reference: ExpertReference | None,
                               rtol: float = LOSS_RTOL) -> Check:
    """The expert-parallel run's loss per step, and the compared step's output and every gradient, equal
    the same MoE's on one process given the same batches and expert choices."""
    if not reference:
        return Check("moe_matches_single_process", False, "no one-process reference was run", {})
    ref = list(reference["losses"])
    steps = [i for i, (a, b) in enumerate(zip(losses, ref)) if abs(a - b) > rtol * abs(b)]
    if len(losses) != len(ref):
        steps.append(-1)
    output_rel = reference["logits_max_diff"] / max(reference["logits_max_abs"], 1e-30)
    grads = [(g["name"], g["max_diff"] / max(g["max_abs"], 1e-30)) for g in reference["grads"]]
    worst_name, worst = max(grads, key=lambda item: item[1]) if grads else ("none", float("inf"))
    grads_off = [name for name, rel in grads if rel > OUTPUT_RTOL]
    passed = not steps and output_rel <= OUTPUT_RTOL and bool(grads) and not grads_off
    agreed = f"{reference['own_choices_agree']:,} of {reference['slots']:,}"
    detail = (f"loss per step {', '.join(f'{x:.6f}' for x in losses)} vs one process "
              f"{', '.join(f'{x:.6f}' for x in ref)} (rtol {rtol:g}); the first step's output differs by "
              f"{output_rel:.2e} of its largest value, the {len(grads)} gradients by at most {worst:.2e} "
              f"({worst_name}; tolerance {OUTPUT_RTOL:g}); the reference replayed the run's expert choices, its own "
              f"router picks the same expert for {agreed} routed slots")
    if steps:
        detail += f"; steps off: {', '.join(str(s) for s in steps if s >= 0) or 'a different number of steps'}"
    if grads_off:
        detail += f"; gradients off: {', '.join(grads_off[:4])}"
    return Check("moe_matches_single_process", passed, detail,
                 {"losses": list(losses), "reference": ref, "output_rel": output_rel, "worst_grad_rel": worst,
                  "worst_grad": worst_name, "own_choices_agree": reference["own_choices_agree"],
                  "slots": reference["slots"]})


# ----------------------------------------------------------------------------- the all-to-alls


def routed_all_to_all_bytes(run: Run) -> dict[int, list[int]]:
    """Per rank, the bytes each all-to-all of one step carries, in the order it issues them, as the routers'
    decisions imply: forward, layer by layer, the E counts, the S slots the rank keeps (dispatch) and the R
    slots its experts get from every router of its group (combine); backward, last layer first, the
    combine's gradient (S: it hands back what the forward combine gave it) and the dispatch's (R)."""
    run = _run(run)
    row = (run.d_model or 0) * (run.element_bytes or 0)
    counts = (run.experts or 0) * (run.count_bytes or 0)
    implied: dict[int, list[int]] = {}
    for group in _groups(run).values():
        per_rank = (run.experts or 0) // len(group)
        for rank in group:
            mine = range(rank["ep_rank"] * per_rank, (rank["ep_rank"] + 1) * per_rank)
            forward, backward = [], []
            for layer, routing in enumerate(_layers(rank)):
                kept = sum(routing["kept"])
                received = sum(_layers(other)[layer]["kept"][e] for other in group for e in mine)
                forward += [counts, kept * row, received * row]
                backward = [kept * row, received * row, *backward]
            implied[rank["rank"]] = forward + backward
    return implied


def all_to_all_bytes_match_routed_tokens(run: Run) -> Check:
    """Every rank's all-to-alls carry exactly what the routers decided, call by call in issue order: the
    kept slots this rank dispatches and the slots its experts receive from every router of its group, times
    d x element bytes (and E counts per counts all-to-all), each backward call handing back what its forward
    received (the splits swapped). Beside it, what it sent off-rank per dispatch, and theory's
    T·k·d·c·(ep-1)/ep for the same tokens routed evenly and dropless (which a router rarely does)."""
    run = _run(run)
    implied = routed_all_to_all_bytes(run)
    row = (run.d_model or 0) * (run.element_bytes or 0)
    misses, off_rank = [], []
    for rank in run.ranks:
        measured = list(rank["all_to_all_bytes"])
        expected = implied.get(rank["rank"], [])
        if measured != expected:
            apart = next((i for i, (a, b) in enumerate(zip(measured, expected)) if a != b),
                         min(len(measured), len(expected)))
            misses.append(f"rank {rank['rank']}: {len(measured)} calls, {_mib(sum(measured))} vs the routers' "
                          f"{len(expected)} calls, {_mib(sum(expected))}, first apart at call {apart}")
        off_rank += [(sum(r["sent"]) - r["sent"][rank["ep_rank"]]) * row for r in _layers(rank)]
    layers = _layers(run.ranks[0]) if run.ranks else []
    tokens = layers[0]["tokens"] if layers else 0
    theory = float(all_to_all_bytes(tokens, run.top_k or 0, run.d_model or 0, run.element_bytes or 0, run.ep or 1))
    mean_off = sum(off_rank) / len(off_rank) if off_rank else 0.0
    passed = bool(run.ranks) and not misses
    total = sum(sum(r["all_to_all_bytes"]) for r in run.ranks)
    calls = sum(len(r["all_to_all_bytes"]) for r in run.ranks)
    detail = (f"{len(run.ranks)} ranks handed {_mib(total)} to {calls} all-to-alls in the recorded step (5 per MoE "
              f"layer per rank: counts, dispatch and combine forward, their gradients backward, each handing back "
              f"what its forward received), every call's bytes {'as' if not misses else 'not as'} the routers' kept "
              f"slots imply; a dispatch sent {_mib(mean_off)} off-rank on average, where theory's even, dropless "
              f"routing of the same tokens sends {_mib(theory)}")
    if misses:
        detail += f"; off: {'; '.join(misses)}"
    return Check("all_to_all_bytes_match_routed_tokens", passed, detail,
                 {"measured": {r["rank"]: sum(r["all_to_all_bytes"]) for r in run.ranks},
                  "implied": {rank: sum(calls) for rank, calls in implied.items()},
                  "off_rank_mean_bytes": mean_off, "theory_off_rank_bytes": theory})


# ----------------------------------------------------------------------------- capacity


def dropped_tokens_match_router(run: Run) -> Check:
    """Slots dropped over capacity, counted as the slots routed minus the rows the experts computed (each ep
    group, each layer), equal what the routers' loads imply, sum of max(0, load - C); each expert took
    min(load, C) slots of each rank."""
    run = _run(run)
    k = run.top_k or 0
    implied = counted = 0
    misses = []
    for group_id, group in _groups(run).items():
        for layer in range(len(_layers(group[0]))):
            rows = [_layers(rank)[layer] for rank in group]
            routed = sum(r["tokens"] * k for r in rows)
            computed = sum(r["computed"] for r in rows)
            expected = sum(dropped_slots(r["loads"], r["capacity"]) for r in rows)
            implied += expected
            counted += routed - computed
            if routed - computed != expected:
                misses.append(f"group {group_id} layer {layer}: {routed - computed} dropped, the routers imply {expected}")
            for rank, r in zip(group, rows):
                if list(r["kept"]) != [min(load, r["capacity"]) for load in r["loads"]]:
                    misses.append(f"rank {rank['rank']} layer {layer}: kept {r['kept']} of loads {r['loads']} at "
                                  f"capacity {r['capacity']}")
    slots = sum(r["tokens"] * k for rank in run.ranks for r in _layers(rank))
    capacity = _layers(run.ranks[0])[0]["capacity"] if run.ranks and _layers(run.ranks[0]) else 0
    passed = bool(run.ranks) and not misses
    detail = (f"{counted:,} of {slots:,} routed slots dropped over capacity ({capacity} slots per expert per rank, "
              f"capacity factor {run.capacity_factor:g}), counted as routed minus computed; the routers' loads "
              f"imply {implied:,}; a dropped slot adds nothing to its token, whose residual carries it on")
    if misses:
        detail += f"; off: {'; '.join(misses[:4])}"
    return Check("dropped_tokens_match_router", passed, detail,
                 {"dropped": counted, "implied": implied, "slots": slots, "capacity": capacity})


# ----------------------------------------------------------------------------- the load-balancing loss


def aux_loss_matches_measured_load(run: Run, alpha: float = SWITCH_AUX_ALPHA) -> Check:
    """The Switch load-balancing loss each rank's layer added to the gradient, recomputed from the load it
    measured per expert (f_i = load_i / (T·k)) and its mean router probabilities (P_i): alpha·E·sum f_i·P_i."""
    run = _run(run)
    k = run.top_k or 0
    misses, values = [], []
    for rank in run.ranks:
        for layer, r in enumerate(_layers(rank)):
            fractions = [load / (r["tokens"] * k) for load in r["loads"]]
            recomputed = switch_aux_loss(fractions, r["probs"], alpha)
            values.append(recomputed)
            if abs(recomputed - r["aux"]) > AUX_RTOL * abs(recomputed):
                misses.append(f"rank {rank['rank']} layer {layer}: {r['aux']:.6g} vs {recomputed:.6g}")
    worst = max(values, default=0.0)
    passed = bool(values) and not misses
    detail = (f"{len(values)} layer-rank losses recomputed from the measured loads and router probabilities, "
              f"{min(values, default=0.0):.5f} to {worst:.5f}, each as torch computed it (rtol {AUX_RTOL:g}); "
              f"alpha = {alpha:g} is its value at a perfectly even routing, so the worst is {worst / alpha:.3f}x even")
    if misses:
        detail += f"; off: {'; '.join(misses[:4])}"
    return Check("aux_loss_matches_measured_load", passed, detail,
                 {"recomputed": values, "alpha": alpha, "worst_over_even": worst / alpha if alpha else None})


# ----------------------------------------------------------------------------- who waits


def all_to_all_waits_for_slowest_rank(run: Run) -> Check:
    """No rank's combine all-to-all returns before the last rank of its ep group has computed its experts:
    it carries every rank's outputs, so every layer ends at the pace of the slowest rank."""
    run = _run(run)
    misses, lines, waits = [], [], []
    for group_id, group in _groups(run).items():
        for layer in range(len(_layers(group[0]))):
            rows = [_layers(rank)[layer] for rank in group]
            last = max(range(len(rows)), key=lambda i: rows[i]["experts_done_s"])
            busiest = max(range(len(rows)), key=lambda i: rows[i]["computed"])
            first_back = min(r["combine_done_s"] for r in rows)
            waits.append([r["combine_done_s"] - r["experts_done_s"] for r in rows])
            if first_back < rows[last]["experts_done_s"]:
                misses.append(f"group {group_id} layer {layer}: a combine returned "
                              f"{(rows[last]['experts_done_s'] - first_back) * 1e3:.2f} ms before rank "
                              f"{group[last]['rank']}'s experts finished")
            lines.append(f"layer {layer}: rank {group[last]['rank']} finished its experts last "
                         f"({rows[last]['computed']} rows; the busiest, rank {group[busiest]['rank']}, "
                         f"{rows[busiest]['computed']})")
    passed = bool(lines) and not misses
    detail = ("every combine all-to-all returned after the last rank of its group finished its experts: "
              if passed else "a combine all-to-all returned before its group's experts had all finished: ")
    detail += "; ".join(lines[:4])
    detail += (". Whether the busiest rank is the last is not judged here: on CPU processes sharing cores the "
               "scheduler delays ranks as much as their load does")
    if misses:
        detail += f"; off: {'; '.join(misses[:4])}"
    return Check("all_to_all_waits_for_slowest_rank", passed, detail, {"waits_s": waits})


# ----------------------------------------------------------------------------- memory


def ep_holds_experts_per_rank(run: Run) -> Check:
    """Each rank holds E/ep whole experts of every layer (its own share, exactly) and 1/N of the dense part
    (FSDP over every rank, within one dim-0 row of each parameter): EP splits the experts only."""
    run = _run(run)
    per_rank = (run.experts or 0) // (run.ep or 1)
    param_bytes = run.element_bytes or 0
    experts_bytes = (run.layers or 0) * per_rank * (run.expert_params or 0) * param_bytes
    world = len(run.ranks)
    dense_share = (run.dense_params or 0) * param_bytes / max(world, 1)
    slack = run.shard_row_bytes or 0
    misses = []
    for rank in run.ranks:
        held = list(range(rank["ep_rank"] * per_rank, (rank["ep_rank"] + 1) * per_rank))
        if rank["experts"] != held or rank["expert_param_bytes"] != experts_bytes:
            misses.append(f"rank {rank['rank']}: experts {rank['experts']} in {_mib(rank['expert_param_bytes'])}")
        if abs(rank["dense_param_bytes"] - dense_share) > slack:
            misses.append(f"rank {rank['rank']}: dense {_mib(rank['dense_param_bytes'])} vs 1/{world} "
                          f"{_mib(dense_share)}")
    whole = ((run.layers or 0) * (run.experts or 0) * (run.expert_params or 0) + (run.dense_params or 0)) * param_bytes
    held_bytes = run.ranks[0]["expert_param_bytes"] + run.ranks[0]["dense_param_bytes"] if run.ranks else 0
    passed = bool(run.ranks) and not misses
    detail = (f"each rank holds {per_rank} of {run.experts} experts per layer ({_mib(experts_bytes)}: "
              f"{run.layers} layers x {per_rank} x {run.expert_params:,} parameters) and 1/{world} of the "
              f"{run.dense_params:,} dense parameters ({_mib(dense_share)}, FSDP); rank 0 holds {_mib(held_bytes)} of "
              f"the model's {_mib(whole)}, {held_bytes / whole if whole else 0:.3f} of it")
    if misses:
        detail += f"; off: {'; '.join(misses[:4])}"
    return Check("ep_holds_experts_per_rank", passed, detail,
                 {"experts_bytes": experts_bytes, "dense_share_bytes": dense_share,
                  "measured": [{"experts": r["expert_param_bytes"], "dense": r["dense_param_bytes"]} for r in run.ranks]})


def run_checks(run: Run, losses: Sequence[float]) -> list[Check]:
    """Every named check of an MoE run."""
    run = _run(run)
    return [moe_matches_single_process(losses, run.reference), all_to_all_bytes_match_routed_tokens(run),
            dropped_tokens_match_router(run), aux_loss_matches_measured_load(run),
            all_to_all_waits_for_slowest_rank(run), ep_holds_experts_per_rank(run)]
