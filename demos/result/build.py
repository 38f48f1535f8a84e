"""The one place a demo's result is made: from what was measured, where the run was placed, and its checks.

    result = build("fsdp", placement, env, config, checks, memory=..., comm=..., loss=...)

Every demo's rank 0 calls `build` (training, pipeline, concept, simulated, failure lab, kata): it
states where the run happened (`config.world_size`, `device`, `backend`, from the one `Placement`),
and for ranks sharing a GPU it marks what that placement changes (`shared`). The result stays
typed on the rank; the worker writes it as JSON once, and whoever reads the events reads it back once.

What ranks sharing a GPU change (`launch.sharing` says which demos can run so): the run is labelled
(config.shared_gpu, and each of compare's runs), its MFU is withheld, and the checks whose claim is about
time on N GPUs are reported as not judged, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddpfsdp.demos.base.placement import Placement
from ddpfsdp.demos.result.checks import Check, not_judged
from ddpfsdp.demos.result.schema import SCHEMA, Config, DemoResult, Env, check_from_json

# Checks whose claim is about time on N GPUs, which K ranks sharing one GPU over gloo cannot bear
# out or refute: why each is not judged there.
_TIME_ON_GPUS = ("the ranks share one GPU's compute and gloo runs each collective on the CPU after a copy to "
                 "host memory, so when a collective runs against compute says nothing of NCCL on separate GPUs")
NOT_JUDGED = {
    "ddp_overlaps_allreduce_with_backward": _TIME_ON_GPUS,
    "tp_collectives_on_critical_path": _TIME_ON_GPUS,
}
# gloo's reduce-scatter is an all-reduce and a copy, handed back as a Work with no future
# (ProcessGroupGloo::reduce_scatter_tensor_coalesced returns a LambdaWork); on CUDA tensors no host
# thread can stamp when it ends, so a timeline that counted every collective but could not stamp
# those is not judged there, while a count that is off still fails.
UNSTAMPED = ("gloo's reduce-scatter on CUDA tensors returns a Work with no future (an all-reduce and a copy), so "
             "when it completed cannot be stamped; every collective was counted")
MFU_NOTE = ("no MFU: the ranks share one GPU's compute, and gloo's collectives run on the CPU, so neither "
            "throughput nor step time is N GPUs'")


def build(demo: str, placement: Placement, env: Env | Mapping[str, Any], config: Config | Mapping[str, Any],
          checks: Sequence[Check | Mapping[str, Any]], **fields: Any) -> DemoResult:
    """A demo's result: the envelope (schema, demo, config, env, checks) around the demo's own fields, each
    typed or in its JSON form (fields the type does not name, a concept demo's measurements, go to `extra`),
    placed and marked for its placement."""
    named = set(DemoResult.named())
    config = Config.from_json(config)
    config.world_size, config.device, config.backend = placement.world_size, placement.tensor_device, placement.backend
    known = {key: DemoResult._load(key, value) for key, value in fields.items() if key in named}
    extra = {key: value for key, value in fields.items() if key not in named}
    result = DemoResult(schema=SCHEMA, demo=demo, config=config, env=Env.from_json(env),
                        checks=[c for c in map(check_from_json, checks) if c is not None], **known, extra=extra,
                        order=("schema", "demo", "config", "env", *fields, "checks"))
    return shared(result, placement)


def unlaunched(demo: str, config: Config | Mapping[str, Any], checks: Sequence[Check | Mapping[str, Any]],
               **fields: Any) -> DemoResult:
    """A result judged before any rank started (a kata's file refused on reading it): the envelope without a
    placement or an environment, `launched` false, so nothing in it reads as measured on ranks."""
    return DemoResult(schema=SCHEMA, demo=demo, config=Config.from_json(config),
                      checks=[c for c in map(check_from_json, checks) if c is not None],
                      extra={**fields, "launched": False},
                      order=("schema", "demo", "config", "checks", *fields, "launched"))


def shared(result: DemoResult, placement: Placement) -> DemoResult:
    """`result` as a run of K ranks per GPU shows it (see the module's docstring); any other placement's as it is."""
    label = placement.shared_label()
    if label is None:
        return result
    result.config.extra.update(ranks_per_gpu=placement.ranks_per_gpu, gpus=placement.gpus, shared_gpu=label)
    if result.throughput is not None:
        result.throughput.mfu, result.throughput.note = "n/a", MFU_NOTE
    result.checks = [judged_when_shared(check) for check in result.checks]
    for run in (result.runs or {}).values():
        shared(run, placement)
    result.extra["notes"] = [label, *(result.extra.get("notes") or [])]
    return result


def judged_when_shared(check: Check) -> Check:
    """A check as it stands on ranks sharing a GPU: itself, or not judged with the reason."""
    document = check.to_dict()
    if check.name in NOT_JUDGED:
        return check_from_json(not_judged(document, NOT_JUDGED[check.name]))
    values = check.values or {}
    if (check.name == "timeline_records_every_collective" and check.passed is False
            and values.get("miscounted") is False and any(values.get("without_completion") or [])):
        return check_from_json(not_judged(document, UNSTAMPED))
    return check

