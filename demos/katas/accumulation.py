"""The gradient-accumulation kata: k micro-batches per rank, one synchronisation, gradients equal to one
big-batch step. The oracle is one process's gradient of the mean loss over every rank's micro-batches,
computed on every rank from the same seed; the all-reduces are counted with the number of micro-batch losses
computed before each, so a sync after every micro-batch is seen even though its result is the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ddpfsdp.demos.katas.judge import Case, Judge, first_mismatch, flat_measured
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject

IN, HIDDEN, OUT = 5, 4, 3


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT))


def _batch(seed: int, case: int, rank: int, micro: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 7919 + case * 104_729 + rank * 613 + micro)
    return torch.randn(size, IN, generator=generator), torch.randn(size, OUT, generator=generator)


@dataclass
class Prepared:
    case: Case
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]]
    expected: dict[str, torch.Tensor]
    device: Any = None
    got: dict[str, torch.Tensor | None] | None = None  # each parameter's .grad after the learner's code
    losses: int = 0


class Accumulation(Judge):
    def cases(self, world_size: int, seed: int) -> list[Case]:
        return [Case(f"{k} micro-batch{'es' if k != 1 else ''} of {size}", {"k": k, "size": size, "seed": seed, "index": i})
                for i, (k, size) in enumerate([(1, 4), (3, 2), (4, 3)])]

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Prepared:
        k, size, seed, index = (case.params[key] for key in ("k", "size", "seed", "index"))
        batches = {(r, j): _batch(seed, index, r, j, size) for r in range(world_size) for j in range(k)}
        model = _model(seed)
        inputs = torch.cat([batches[key][0] for key in sorted(batches)])
        targets = torch.cat([batches[key][1] for key in sorted(batches)])
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        expected = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
        return Prepared(case, [(x.to(device), y.to(device)) for x, y in (batches[(rank, j)] for j in range(k))], expected,
                        device)

    def call(self, prepared: Prepared, learner: Any, comm: Any) -> None:
        model = _model(prepared.case.params["seed"]).to(prepared.device)
        comm.mark(0)

        def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            prepared.losses += 1
            comm.mark(prepared.losses)
            return torch.nn.functional.mse_loss(output, target)

        learner(comm, model, [(x.clone(), y.clone()) for x, y in prepared.micro_batches], loss_fn)
        prepared.got = {name: None if p.grad is None else p.grad.detach().clone() for name, p in model.named_parameters()}

    def measure(self, prepared: Prepared, ledger: Any) -> JsonObject:
        mismatch = None
        for name, expected in prepared.expected.items():
            got = (prepared.got or {}).get(name)
            found = {"index": None, "got": "None", "expected": "a gradient", "why": "no gradient"} if got is None \
                else first_mismatch(got, expected, rtol=1e-4, atol=1e-6)
            if found is not None:
                mismatch = {**found, "param": name}
                break
        return {"mismatch": mismatch, "losses": prepared.losses, "grad_elements": sum(e.numel() for e in prepared.expected.values()),
                **ledger.summary()}

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        from ddpfsdp.demos.katas import claims

        runs = flat_measured(measured)
        mismatches = [(rank, cases[i].label, m["mismatch"]) for rank, i, m in runs if m["mismatch"] is not None]
        what = mismatches[0][2].get("param", "") if mismatches else ""
        return [claims.equals_oracle("grads_equal_big_batch", "the big-batch step", mismatches, len(runs),
                                     f"{what}.grad" if what else ""),
                one_sync_per_step([(rank, cases[i].label, cases[i].params["k"], m["grad_elements"], m["collectives"])
                                   for rank, i, m in runs])]


def one_sync_per_step(runs: list[tuple[int, str, int, int, list[list[Any]]]]) -> Check:
    """All-reduces start only after the last micro-batch's loss, and carry each gradient element once."""
    for rank, case, k, grad_elements, collectives in runs:
        reduces = [(elements, marker) for op, elements, _, _, marker in collectives if op == "all_reduce"]
        early = [marker for _, marker in reduces if marker is not None and marker < k]
        if early:
            return Check("one_sync_per_step", False,
                         f"rank {rank}, {case}: all-reduced after micro-batch {early[0]} of {k}: accumulate the "
                         "micro-batches locally and synchronise once, after the last (DDP: no_sync() on the first k-1)",
                         {"rank": rank, "case": case, "after": early[0], "k": k})
        sent = sum(elements for elements, _ in reduces)
        if sent != grad_elements:
            return Check("one_sync_per_step", False,
                         f"rank {rank}, {case}: all-reduced {sent} elements; the gradients are {grad_elements}, each "
                         "synchronised once", {"rank": rank, "case": case, "all_reduced": sent, "gradients": grad_elements})
    return Check("one_sync_per_step", True, "every all-reduce came after the last micro-batch's loss and carried each "
                                            "gradient element once")


ACCUMULATION = Accumulation()
