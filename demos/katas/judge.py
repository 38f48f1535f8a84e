"""What a kata's judge is: its cases, the torch oracle for each, the call of the learner's code, what is
measured of it on each rank, and the checks rank 0 makes of every rank's measurements.

    cases(world_size, seed)                  the generated inputs' descriptions, the same on every rank
    prepare(case, rank, world_size, device)  this rank's inputs and torch's answer for them; may run
                                             collectives, since every rank prepares every case before any
                                             learner code runs (so a learner's failure never leaves a rank
                                             inside one of the judge's own collectives)
    call(prepared, learner, comm)            runs the learner's code on the inputs (under the counting mode)
    measure(prepared, ledger)                this rank's numbers for the case, JSON: mismatches, counts
    checks(cases, measured, world_size)      rank 0: the kata's checks from every rank's measurements
                                             (measured[rank] is the list of (case index, numbers) it ran)

A pure kata (no comm) runs each case on one rank: case i on rank i % N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddpfsdp.demos.result.checks import Check


@dataclass(frozen=True)
class Case:
    label: str  # a reviewer's name for it: "13 elements", "p=4, m=8"
    params: dict[str, Any]


class Judge:
    """The base of every kata's judge; see the module's docstring for what each method does."""

    def cases(self, world_size: int, seed: int) -> list[Case]:
        raise NotImplementedError

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Any:
        raise NotImplementedError

    def call(self, prepared: Any, learner: Any, comm: Any) -> Any:
        raise NotImplementedError

    def measure(self, prepared: Any, ledger: Any) -> dict[str, Any]:
        raise NotImplementedError

    def checks(self, cases: list[Case], measured: list[list[tuple[int, dict[str, Any]]]], world_size: int) -> list[Check]:
        raise NotImplementedError


def first_mismatch(got: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-6) -> dict[str, Any] | None:
    """Where `got` first differs from `expected` beyond atol + rtol·|expected| (a shape or dtype that differs
    counts as a mismatch too), with both values; None when they agree."""
    import torch

    if not isinstance(got, torch.Tensor):
        return {"index": None, "got": repr(got)[:80], "expected": f"a tensor of shape {list(expected.shape)}",
                "why": f"got {type(got).__name__}, not a tensor"}
    if tuple(got.shape) != tuple(expected.shape):
        return {"index": None, "got": f"shape {list(got.shape)}", "expected": f"shape {list(expected.shape)}",
                "why": "the shapes differ"}
    got64, expected64 = got.detach().to("cpu", torch.float64), expected.detach().to("cpu", torch.float64)
    bad = ~((got64 - expected64).abs() <= atol + rtol * expected64.abs())
    bad |= got64.isnan() != expected64.isnan()
    if not bool(bad.any()):
        return None
    flat = int(bad.flatten().nonzero()[0])
    index = list(torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() > 1 else [flat]
    return {"index": [int(i) for i in index], "got": float(got64.flatten()[flat]),
            "expected": float(expected64.flatten()[flat]), "count": int(bad.sum()), "numel": got.numel(),
            "why": "values differ"}


def flat_measured(measured: list[list[tuple[int, dict[str, Any]]]]) -> list[tuple[int, int, dict[str, Any]]]:
    """(rank, case index, numbers) over every rank, in rank then case order."""
    return [(rank, index, numbers) for rank, runs in enumerate(measured) for index, numbers in runs]
