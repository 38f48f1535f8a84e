"""The ZeRO-1 kata: an AdamW whose state each rank keeps for its shard of a flat parameter only, judged
step by step against torch.optim.AdamW on the whole parameter with the gradient averaged over ranks, and on
the bytes of tensors the learner's optimizer object holds (its state must be a shard's, not the whole's)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ddpfsdp.demos.katas.judge import Case, Judge, first_mismatch, flat_measured, held_tensor_bytes
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject

STEPS = 3
HYPER = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
SHARD_TENSORS = 3  # exp_avg, exp_avg_sq and a shard copy of the parameter
SLACK_BYTES = 1024  # step counters and the like


@dataclass
class Prepared:
    case: Case
    param: torch.Tensor
    grads: list[torch.Tensor]  # this rank's gradient at each step
    expected: list[torch.Tensor]  # the parameter after each step
    got: list[torch.Tensor] = field(default_factory=list)
    held_bytes: int = 0


class Zero1(Judge):
    def cases(self, world_size: int, seed: int) -> list[Case]:
        return [Case(f"{n} parameters, {STEPS} steps", {"numel": n, "seed": seed, "index": i})
                for i, n in enumerate([10, 64, 1001])]

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Prepared:
        numel, seed, index = case.params["numel"], case.params["seed"], case.params["index"]
        generator = torch.Generator().manual_seed(seed * 31 + index)
        param = torch.randn(numel, generator=generator)
        grads = [[torch.randn(numel, generator=generator) for _ in range(world_size)] for _ in range(STEPS)]
        reference = torch.nn.Parameter(param.clone())
        optimizer = torch.optim.AdamW([reference], foreach=False, **HYPER)
        expected = []
        for step in range(STEPS):
            reference.grad = torch.stack(grads[step]).mean(0)
            optimizer.step()
            expected.append(reference.detach().clone())
        return Prepared(case, param.to(device), [grads[step][rank].to(device) for step in range(STEPS)], expected)

    def call(self, prepared: Prepared, learner: Any, comm: Any) -> None:
        param = prepared.param.clone()
        optimizer = learner(comm, param, **HYPER)
        for step in range(STEPS):
            comm.mark(step)
            optimizer.step(prepared.grads[step].clone())
            prepared.got.append(param.clone())
        prepared.held_bytes = held_tensor_bytes(optimizer, exclude=(param,))

    def measure(self, prepared: Prepared, ledger: Any) -> JsonObject:
        mismatch = None
        for step, expected in enumerate(prepared.expected):
            got = prepared.got[step] if step < len(prepared.got) else None
            found = first_mismatch(got, expected, rtol=1e-5, atol=1e-6)
            if found is not None:
                mismatch = {**found, "step": step}
                break
        return {"mismatch": mismatch, "held_bytes": prepared.held_bytes, **ledger.summary()}

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        from ddpfsdp.demos.katas import claims

        runs = flat_measured(measured)
        mismatches = [(rank, cases[i].label, m["mismatch"]) for rank, i, m in runs if m["mismatch"] is not None]
        step = mismatches[0][2].get("step") if mismatches else None
        return [
            claims.equals_oracle("params_equal_adamw", "torch.optim.AdamW on the mean gradient", mismatches, len(runs),
                                 f"after step {step + 1}, the parameter's" if step is not None else ""),
            state_sharded([(rank, cases[i].label, cases[i].params["numel"], m["held_bytes"]) for rank, i, m in runs],
                          world_size),
            gathers_params_once([(rank, cases[i].label, m["collectives"]) for rank, i, m in runs]),
        ]


def state_sharded(held: list[tuple[int, str, int, int]], world_size: int, element_bytes: int = 4) -> Check:
    """The optimizer object holds at most SHARD_TENSORS shard-sized tensors (plus SLACK_BYTES)."""
    for rank, case, numel, held_bytes in held:
        shard_bytes = math.ceil(numel / world_size) * element_bytes
        limit = SHARD_TENSORS * shard_bytes + SLACK_BYTES
        if held_bytes > limit:
            return Check("state_sharded", False,
                         f"rank {rank}, {case}: the optimizer holds {held_bytes} bytes of tensors, "
                         f"{held_bytes / (numel * element_bytes):.2f} x the parameter; ZeRO-1 holds a shard's state: at "
                         f"most {SHARD_TENSORS} x {shard_bytes} bytes (+{SLACK_BYTES})",
                         {"rank": rank, "case": case, "held_bytes": held_bytes, "limit_bytes": limit})
    most = max(held, key=lambda h: h[3] / h[2])
    return Check("state_sharded", True, f"each rank holds at most {SHARD_TENSORS} shards' worth of optimizer tensors "
                                        f"(e.g. rank {most[0]}, {most[1]}: {most[3]} bytes)",
                 {"held_bytes": [h[3] for h in held]})


def gathers_params_once(runs: list[tuple[int, str, list[list[Any]]]]) -> Check:
    """Each step all-gathers the parameter exactly once."""
    for rank, case, collectives in runs:
        for step in range(STEPS):
            gathers = sum(1 for op, _, _, _, marker in collectives if op == "all_gather_single" and marker == step)
            if gathers != 1:
                return Check("gathers_params_once", False,
                             f"rank {rank}, {case}, step {step + 1}: {gathers} all-gathers; each rank updates its shard "
                             "and the shards are all-gathered once, into the whole parameter",
                             {"rank": rank, "case": case, "step": step, "all_gathers": gathers})
    return Check("gathers_params_once", True, "one all-gather of the parameter per step on every rank")


ZERO1 = Zero1()
