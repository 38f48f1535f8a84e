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
from typing import Any, TypedDict

from ddpfsdp.demos.katas.claims import Mismatch, equals_oracle
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject



Measured = list[list[tuple[int, JsonObject]]]  # per rank, (case index, the judge's numbers) for each case it ran


@dataclass(frozen=True)
class Case:
    label: str  # a reviewer's name for it: "13 elements", "p=4, m=8"
    params: JsonObject  # JSON: every rank builds the same cases


class Judge:
    """The base of every kata's judge; see the module's docstring for what each method does."""

    def cases(self, world_size: int, seed: int) -> list[Case]:
        raise NotImplementedError

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Any:
        raise NotImplementedError

    def call(self, prepared: Any, learner: Any, comm: Any) -> Any:
        raise NotImplementedError

    def measure(self, prepared: Any, ledger: Any) -> JsonObject:
        raise NotImplementedError

    def checks(self, cases: list[Case], measured: Measured, world_size: int) -> list[Check]:
        raise NotImplementedError


def first_mismatch(got: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-6) -> Mismatch | None:
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


def flat_measured(measured: Measured) -> list[tuple[int, int, JsonObject]]:
    """(rank, case index, numbers) over every rank, in rank then case order."""
    return [(rank, index, numbers) for rank, runs in enumerate(measured) for index, numbers in runs]


class PureCall(TypedDict):
    """One call of a pure kata's function: its case, torch's answer, and the learner's."""

    case: Case
    expected: Any
    got: Any


class PureJudge(Judge):
    """A kata whose learner function is pure (no comm): each case is a call with keyword arguments, compared
    with what torch (or the analytic model) returns for the same arguments. Subclasses give the cases,
    `answer` (the oracle) and `compare` (None when equal, else a mismatch)."""

    check_name = ""
    oracle = ""

    def answer(self, params: JsonObject) -> Any:
        raise NotImplementedError

    def compare(self, got: Any, expected: Any) -> Mismatch | None:
        raise NotImplementedError

    def arguments(self, params: JsonObject) -> JsonObject:
        """The learner function's keyword arguments of a case (the case's params less bookkeeping)."""
        return {key: value for key, value in params.items() if not key.startswith("_")}

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> PureCall:
        return {"case": case, "expected": self.answer(case.params), "got": None}

    def forbid(self) -> Any:
        """A context in which the oracle itself refuses to run (the answer the learner must not call)."""
        import contextlib

        return contextlib.nullcontext()

    def call(self, prepared: PureCall, learner: Any, comm: Any) -> None:
        with self.forbid():
            prepared["got"] = learner(**self.arguments(prepared["case"].params))

    def measure(self, prepared: PureCall, ledger: Any) -> JsonObject:
        return {"mismatch": self.compare(prepared["got"], prepared["expected"]), "got": _jsonable(prepared["got"])}

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        mismatches = [(None, cases[i].label, m["mismatch"]) for _, i, m in runs if m["mismatch"] is not None]
        return [equals_oracle(self.check_name, self.oracle, mismatches, len(runs))]


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)[:200]
    return value


def compare_lists(got: Any, expected: list, what: str = "position") -> Mismatch | None:
    """Where a returned list first differs from the expected one (a length or a type counts)."""
    if hasattr(got, "tolist"):
        got = got.tolist()
    if not isinstance(got, (list, tuple)):
        return {"index": None, "got": f"a {type(got).__name__}", "expected": f"a list of {len(expected)}",
                "why": "not a list"}
    got = list(got)
    for index, (mine, theirs) in enumerate(zip(got, expected)):
        if mine != theirs:
            return {"index": [index], "got": mine, "expected": theirs, "why": f"{what} {index} differs"}
    if len(got) != len(expected):
        return {"index": None, "got": f"{len(got)} items", "expected": f"{len(expected)}",
                "why": "the lengths differ"}
    return None


def held_tensor_bytes(obj: Any, exclude: tuple[Any, ...] = (), depth: int = 6) -> int:
    """Bytes of tensor storage an object holds, through its attributes, containers and an optimizer's state:
    each storage once, those of `exclude` (tensors) not at all, a storage resized to nothing as 0, and no
    tensor's .grad."""
    import torch

    skip = {t.untyped_storage().data_ptr() for t in exclude if isinstance(t, torch.Tensor)}
    seen_objects: set[int] = set()
    storages: dict[int, int] = {}

    def visit(value: Any, level: int) -> None:
        if level > depth or id(value) in seen_objects:
            return
        seen_objects.add(id(value))
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            if storage.data_ptr() not in skip and storage.nbytes():
                storages[storage.data_ptr()] = storage.nbytes()
            return  # not its .grad: gradients are not what the object keeps between steps
        if isinstance(value, dict):
            for key, item in value.items():
                visit(key, level + 1)
                visit(item, level + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                visit(item, level + 1)
        elif hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value) \
                and type(value).__module__.split(".")[0] not in ("ddpfsdp", "builtins"):
            for item in vars(value).values():
                visit(item, level + 1)
        elif isinstance(value, torch.nn.Module) or isinstance(value, torch.optim.Optimizer):
            for item in vars(value).values():
                visit(item, level + 1)

    visit(obj, 0)
    return sum(storages.values())
