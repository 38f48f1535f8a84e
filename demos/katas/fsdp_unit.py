"""The FSDP-unit kata: one Linear kept as a flat, padded 1/N shard, all-gathered for forward and freed, all-
gathered again for backward, its gradients reduce-scattered. Judged against the full Linear (the output) and
against DDP's mean gradient over ranks (each rank's shard of it), on the collectives of each phase, and on
the gathered parameters' lifetime: the dispatch mode keeps a weak reference to every all-gather's output, so
what is still alive after forward, and the most alive at once, are measured, not assumed."""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from typing import Any, TypedDict

import torch
import torch.distributed as dist

from ddpfsdp.demos.katas.judge import Case, Judge, first_mismatch, flat_measured, held_tensor_bytes
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject

ELEMENT_BYTES = 4


class UnitRun(TypedDict, total=False):
    """What the learner's unit did in one case."""

    shard: Any  # unit.shard after construction
    held_after_init: int  # bytes of tensors the unit holds then
    y: Any  # forward's output
    alive_after_forward: int  # gathered bytes still alive once forward returned
    grad_shard: Any  # unit.grad_shard after backward


@dataclass
class Prepared:
    case: Case
    weight: torch.Tensor
    bias: torch.Tensor
    x: torch.Tensor
    grad_y: torch.Tensor
    expected_y: torch.Tensor
    expected_shard: torch.Tensor
    expected_grad_shard: torch.Tensor
    got: UnitRun | None = None


def alive_bytes(ledger: Any) -> int:
    """Gathered bytes still alive. Reference counting frees a dropped tensor at once; only what a reference
    cycle keeps needs the collector, and a young-generation pass finds a cycle made during the call (a full
    collection costs most of a second in a rank that has imported torch)."""
    alive = ledger.gathered_alive_bytes()
    if alive:
        gc.collect(1)
        alive = ledger.gathered_alive_bytes()
    return alive


def _flat_padded(parts: list[torch.Tensor], world_size: int) -> torch.Tensor:
    flat = torch.cat([p.reshape(-1) for p in parts])
    padded = torch.zeros(math.ceil(flat.numel() / world_size) * world_size, dtype=flat.dtype)
    padded[: flat.numel()] = flat
    return padded


class FSDPUnit(Judge):
    def cases(self, world_size: int, seed: int) -> list[Case]:
        return [Case(f"Linear({i}, {o}), batch {b}", {"in": i, "out": o, "batch": b, "seed": seed, "index": k})
                for k, (o, i, b) in enumerate([(5, 7, 3), (4, 6, 2), (8, 3, 5)])]

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Prepared:
        p = case.params
        shared = torch.Generator().manual_seed(p["seed"] * 17 + p["index"])
        weight, bias = torch.randn(p["out"], p["in"], generator=shared), torch.randn(p["out"], generator=shared)
        mine = torch.Generator().manual_seed(p["seed"] * 17 + p["index"] * 1000 + rank + 1)
        x, grad_y = torch.randn(p["batch"], p["in"], generator=mine), torch.randn(p["batch"], p["out"], generator=mine)
        flat_grad = _flat_padded([grad_y.T @ x, grad_y.sum(0)], world_size).to(device)
        dist.all_reduce(flat_grad)  # what DDP's all-reduce leaves every rank, before its division by N
        flat_grad = flat_grad.cpu() / world_size
        shard = flat_grad.numel() // world_size
        params = _flat_padded([weight, bias], world_size)
        return Prepared(case, weight.to(device), bias.to(device), x.to(device), grad_y.to(device), x @ weight.T + bias, params[rank * shard:(rank + 1) * shard],
                        flat_grad[rank * shard:(rank + 1) * shard])

    def call(self, prepared: Prepared, learner: Any, comm: Any) -> None:
        got = UnitRun()
        prepared.got = got
        comm.mark("init")
        unit = learner(comm, prepared.weight.clone(), prepared.bias.clone())
        got["shard"] = getattr(unit, "shard", None)
        got["held_after_init"] = held_tensor_bytes(unit)
        comm.mark("forward")
        with torch.no_grad():
            got["y"] = unit.forward(prepared.x.clone())
        got["alive_after_forward"] = alive_bytes(comm.ledger)
        comm.mark("backward")
        with torch.no_grad():
            unit.backward(prepared.x.clone(), prepared.grad_y.clone())
        got["grad_shard"] = getattr(unit, "grad_shard", None)

    def measure(self, prepared: Prepared, ledger: Any) -> JsonObject:
        got = prepared.got or {}
        checks = {"shard": (got.get("shard"), prepared.expected_shard), "y": (got.get("y"), prepared.expected_y),
                  "grad_shard": (got.get("grad_shard"), prepared.expected_grad_shard)}
        mismatches = {}
        for name, (mine, expected) in checks.items():
            if mine is None:
                mismatches[name] = {"index": None, "got": "None", "expected": f"{expected.numel()} elements",
                                    "why": f"unit.{name} is not set" if name != "y" else "forward returned None"}
            else:
                mismatches[name] = first_mismatch(mine, expected, rtol=1e-5, atol=1e-5)
        return {"mismatches": mismatches, "shard_bytes": prepared.expected_shard.numel() * ELEMENT_BYTES,
                "held_after_init": got.get("held_after_init", 0), "alive_after_forward": got.get("alive_after_forward", 0),
                **ledger.summary()}

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        from ddpfsdp.demos.katas import claims

        runs = flat_measured(measured)

        def differing(name: str) -> list:
            return [(rank, cases[i].label, m["mismatches"][name]) for rank, i, m in runs if m["mismatches"][name]]

        return [
            shard_is_flat([(rank, cases[i].label, m["mismatches"]["shard"], m["held_after_init"], m["shard_bytes"])
                           for rank, i, m in runs]),
            claims.equals_oracle("output_equals_linear", "the full Linear", differing("y"), len(runs), "the output's"),
            claims.equals_oracle("grads_equal_ddp", "DDP's mean gradient (this rank's shard)", differing("grad_shard"),
                                 len(runs), "the gradient shard's"),
            collectives_per_unit([(rank, cases[i].label, m["collectives"]) for rank, i, m in runs]),
            frees_after_forward([(rank, cases[i].label, m["alive_after_forward"], m["peak_gathered_bytes"],
                                  m["shard_bytes"] * world_size) for rank, i, m in runs]),
        ]


def shard_is_flat(runs: list[tuple[int, str, dict | None, int, int]]) -> Check:
    """Each rank keeps one flat shard of ceil(n/N) elements, its slice of the padded parameters, and no more."""
    for rank, case, mismatch, held, shard_bytes in runs:
        if mismatch is not None:
            from ddpfsdp.demos.katas.claims import describe_mismatch

            return Check("shard_is_flat_1_over_n", False,
                         describe_mismatch(rank, case, mismatch, "its slice of the flattened, padded parameters",
                                           "unit.shard's"), {"rank": rank, "case": case, **mismatch})
        if held > shard_bytes:
            return Check("shard_is_flat_1_over_n", False,
                         f"rank {rank}, {case}: the unit holds {held} bytes of tensors after construction; its shard is "
                         f"{shard_bytes}: let the full weight and bias go", {"rank": rank, "case": case,
                                                                             "held_bytes": held, "shard_bytes": shard_bytes})
    return Check("shard_is_flat_1_over_n", True, "each rank holds one flat shard of ceil(n/N) elements, its slice of "
                                                 "the padded parameters, and nothing more")


def collectives_per_unit(runs: list[tuple[int, str, list[list[Any]]]]) -> Check:
    """Forward: one all-gather. Backward: one all-gather and one reduce-scatter. Construction: none."""
    wanted = {"init": [], "forward": ["all_gather_single"], "backward": ["all_gather_single", "reduce_scatter_single"]}
    for rank, case, collectives in runs:
        for phase, ops in wanted.items():
            made = sorted(op for op, _, _, _, marker in collectives if marker == phase)
            if made != sorted(ops):
                return Check("collectives_per_unit", False,
                             f"rank {rank}, {case}: {phase} made {', '.join(made) or 'no collective'}; an FSDP unit's "
                             f"{phase} makes {', '.join(ops) or 'none'}", {"rank": rank, "case": case, "phase": phase,
                                                                          "ops": made})
    return Check("collectives_per_unit", True, "forward: one all-gather; backward: one all-gather and one "
                                               "reduce-scatter, on every rank")


def frees_after_forward(runs: list[tuple[int, str, int, int, int]]) -> Check:
    """No gathered parameters alive after forward; at most one unit's gathered at once."""
    for rank, case, alive, peak, unit_bytes in runs:
        if alive:
            return Check("frees_after_forward", False,
                         f"rank {rank}, {case}: {alive} bytes of gathered parameters are still alive after forward; FSDP "
                         "frees them (reshard after forward) and gathers again in backward",
                         {"rank": rank, "case": case, "alive_bytes": alive})
        if peak > unit_bytes:
            return Check("frees_after_forward", False,
                         f"rank {rank}, {case}: {peak} bytes of gathered parameters alive at once; one unit is "
                         f"{unit_bytes}", {"rank": rank, "case": case, "peak_bytes": peak, "unit_bytes": unit_bytes})
    return Check("frees_after_forward", True, "nothing gathered is alive after forward, and at most one unit's "
                                              "parameters are gathered at once")


FSDP_UNIT = FSDPUnit()
