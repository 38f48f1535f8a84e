"""The Megatron-MLP kata: y = relu(x W1^T + b1) W2^T + b2 with W1 split by rows (column-parallel) and W2 by
columns (row-parallel) over the ranks, judged against the unsharded MLP's output and gradients (x's, and
each shard's slice of the full weights' gradients), with the all-reduces of forward and backward counted
apart: one each way, of the output's size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ddpfsdp.demos.katas.judge import Case, Judge, first_mismatch, flat_measured
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject

NAMES = ("y", "x.grad", "w1.grad", "b1.grad", "w2.grad", "b2.grad")


@dataclass
class Prepared:
    case: Case
    x: torch.Tensor
    upstream: torch.Tensor  # the gradient flowing into y
    shards: dict[str, torch.Tensor]
    expected: dict[str, torch.Tensor]
    got: dict[str, torch.Tensor | None] | None = None  # by NAMES: the output and each gradient


class Megatron(Judge):
    def cases(self, world_size: int, seed: int) -> list[Case]:
        return [Case(f"batch {b}, d={d}, hidden {hp * world_size}", {"batch": b, "d": d, "hidden": hp * world_size,
                                                                    "seed": seed, "index": i})
                for i, (b, d, hp) in enumerate([(3, 6, 2), (2, 4, 3)])]

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Prepared:
        p = case.params
        g = torch.Generator().manual_seed(p["seed"] * 13 + p["index"])
        b, d, h = p["batch"], p["d"], p["hidden"]
        w1, b1, w2, b2 = (torch.randn(h, d, generator=g), torch.randn(h, generator=g), torch.randn(d, h, generator=g),
                          torch.randn(d, generator=g))
        x, upstream = torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)
        full = {name: t.clone().requires_grad_() for name, t in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))}
        y = torch.relu(full["x"] @ full["w1"].T + full["b1"]) @ full["w2"].T + full["b2"]
        (y * upstream).sum().backward()
        rows = slice(rank * h // world_size, (rank + 1) * h // world_size)
        expected = {"y": y.detach(), "x.grad": full["x"].grad, "w1.grad": full["w1"].grad[rows],
                    "b1.grad": full["b1"].grad[rows], "w2.grad": full["w2"].grad[:, rows], "b2.grad": full["b2"].grad}
        shards = {"w1": w1[rows], "b1": b1[rows], "w2": w2[:, rows], "b2": b2}
        return Prepared(case, x.to(device), upstream.to(device), {name: t.to(device) for name, t in shards.items()},
                        expected)

    def call(self, prepared: Prepared, learner: Any, comm: Any) -> None:
        x = prepared.x.clone().requires_grad_()
        shards = {name: t.clone().contiguous().requires_grad_() for name, t in prepared.shards.items()}
        got: dict[str, torch.Tensor | None] = {}
        prepared.got = got
        comm.mark("forward")
        y = learner(comm, x, shards["w1"], shards["b1"], shards["w2"], shards["b2"])
        got["y"] = y.detach().clone() if isinstance(y, torch.Tensor) else y
        comm.mark("backward")
        (y * prepared.upstream).sum().backward()
        got["x.grad"] = x.grad
        for name in ("w1", "b1", "w2", "b2"):
            got[f"{name}.grad"] = shards[name].grad

    def measure(self, prepared: Prepared, ledger: Any) -> JsonObject:
        got = prepared.got or {}
        mismatches = {}
        for name in NAMES:
            mine = got.get(name)
            mismatches[name] = ({"index": None, "got": "None", "expected": "a gradient", "why": f"{name} is None"}
                                if mine is None else first_mismatch(mine, prepared.expected[name], rtol=1e-4, atol=1e-5))
        return {"mismatches": mismatches, "output_elements": prepared.expected["y"].numel(), **ledger.summary()}

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        from ddpfsdp.demos.katas import claims

        runs = flat_measured(measured)
        outputs = [(rank, cases[i].label, m["mismatches"]["y"]) for rank, i, m in runs if m["mismatches"]["y"]]
        grads = [(rank, cases[i].label, {**m["mismatches"][name], "name": name}) for rank, i, m in runs
                 for name in NAMES[1:] if m["mismatches"][name]]
        what = f"{grads[0][2]['name']}'s" if grads else ""
        return [claims.equals_oracle("output_equals_mlp", "the unsharded MLP", outputs, len(runs)),
                claims.equals_oracle("grads_equal_mlp", "the unsharded MLP", grads, len(runs) * (len(NAMES) - 1), what),
                one_all_reduce_each_way([(rank, cases[i].label, m["output_elements"], m["collectives"]) for rank, i, m in runs])]


def one_all_reduce_each_way(runs: list[tuple[int, str, int, list[list[Any]]]]) -> Check:
    """Forward makes one all-reduce of the output's size, backward one of the input's gradient (the same size)."""
    for rank, case, elements, collectives in runs:
        for phase, what in (("forward", "the row-parallel output's partial sums"), ("backward", "x's gradient")):
            made = [(op, size) for op, size, _, _, marker in collectives if marker == phase]
            if made != [("all_reduce", elements)]:
                shown = ", ".join(f"{op} of {size}" for op, size in made) or "no collective"
                return Check("one_all_reduce_each_way", False,
                             f"rank {rank}, {case}: {phase} made {shown}; a Megatron MLP makes one all-reduce of "
                             f"{what}, {elements} elements", {"rank": rank, "case": case, "phase": phase, "made": made})
    return Check("one_all_reduce_each_way", True, "one all-reduce in forward and one in backward, each of the "
                                                  "output's size, on every rank")


MEGATRON = Megatron()
