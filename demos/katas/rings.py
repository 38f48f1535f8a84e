"""The collective katas: ring all-reduce, ring reduce-scatter, ring all-gather, all-reduce in halves,
recursive doubling and all-to-all, each judged against torch.distributed's own collective on the same
inputs, and on the messages and bytes each rank sent (counted by the dispatch mode, never by the
learner's code).

Inputs are small whole numbers in float32, so every order of summation gives the same result exactly and
a mismatch is a wrong chunk, not rounding. Sizes include 1 element, fewer elements than ranks, and sizes
the world size does not divide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ddpfsdp.demos.katas import claims
from ddpfsdp.demos.katas.judge import Case, Judge, first_mismatch, flat_measured
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.schema import JsonObject

ELEMENT_BYTES = 4  # float32


def _values(numel: int, seed: int, case: int, rank: int, device: Any) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + case * 1009 + rank)
    return torch.randint(-8, 9, (numel,), generator=generator).to(torch.float32).to(device)


def _elements(count: int) -> str:
    return f"{count} element{'s' if count != 1 else ''}"


def _all_gather_single() -> Any:
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _reduce_scatter_single() -> Any:
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass
class Prepared:
    case: Case
    index: int
    input: torch.Tensor
    expected: torch.Tensor
    got: Any = None
    input_after: Any = None


class TensorCollective(Judge):
    """A collective the learner writes: in place on one tensor (`inplace`), or (output, input) like torch's."""

    oracle = ""  # the torch call named in a mismatch
    inplace = True

    def sizes(self, world_size: int) -> list[int]:
        """The `n` of each case: the tensor's elements (in place), or the elements per rank's chunk."""
        raise NotImplementedError

    def shapes(self, size: int, world_size: int) -> tuple[int, int]:
        """(input elements, output elements) of a case of `size`."""
        return size, size

    def torch_answer(self, tensor: torch.Tensor, world_size: int, output_numel: int) -> torch.Tensor:
        raise NotImplementedError

    def cases(self, world_size: int, seed: int) -> list[Case]:
        cases = []
        for index, size in enumerate(self.sizes(world_size)):
            numel_in, numel_out = self.shapes(size, world_size)
            label = _elements(numel_in) if self.inplace else f"input {numel_in}, output {_elements(numel_out)}"
            cases.append(Case(label, {"size": size, "input": numel_in, "output": numel_out, "seed": seed, "index": index}))
        return cases

    def prepare(self, case: Case, rank: int, world_size: int, device: Any) -> Prepared:
        index = case.params["index"]
        tensor = _values(case.params["input"], case.params["seed"], index, rank, device)
        expected = self.torch_answer(tensor.clone(), world_size, case.params["output"])
        return Prepared(case, index, tensor, expected)

    def call(self, prepared: Prepared, learner: Any, comm: Any) -> None:
        if self.inplace:
            tensor = prepared.input.clone()
            learner(comm, tensor)
            prepared.got = tensor
        else:
            output = torch.zeros_like(prepared.expected)
            given = prepared.input.clone()
            learner(comm, output, given)
            prepared.got, prepared.input_after = output, given

    def measure(self, prepared: Prepared, ledger: Any) -> JsonObject:
        mismatch = first_mismatch(prepared.got, prepared.expected, rtol=0, atol=0)
        what = "the output"
        if mismatch is None and prepared.input_after is not None:
            changed = first_mismatch(prepared.input_after, prepared.input, rtol=0, atol=0)
            if changed is not None:
                mismatch, what = {**changed, "why": "the input was changed"}, "the input"
        return {"mismatch": mismatch, "what": what, **ledger.summary()}

    def _equals(self, name: str, cases: list[Case], measured: list, world_size: int) -> Check:
        runs = flat_measured(measured)
        mismatches = [(rank, cases[i].label, m["mismatch"]) for rank, i, m in runs if m["mismatch"] is not None]
        what = next((m["what"] for _, _, m in runs if m["mismatch"] is not None), "")
        return claims.equals_oracle(name, self.oracle, mismatches, len(runs), "" if what == "the output" else what)


def _sent_elements(numbers: JsonObject) -> int:
    return sum(elements for _, elements, _ in numbers["sends"])


class RingAllReduce(TensorCollective):
    oracle = "dist.all_reduce"

    def sizes(self, world_size: int) -> list[int]:
        return [1, 3 * world_size + 1, 1000 + world_size]

    def torch_answer(self, tensor: torch.Tensor, world_size: int, output_numel: int) -> torch.Tensor:
        dist.all_reduce(tensor)
        return tensor

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        n_of = {c.label: c.params["input"] for c in cases}
        steps = 2 * (world_size - 1)
        sent = [(rank, cases[i].label, _sent_elements(m), steps * (n_of[cases[i].label] // world_size),
                 steps * math.ceil(n_of[cases[i].label] / world_size)) for rank, i, m in runs]
        totals = {c.label: (steps * c.params["input"], sum(_sent_elements(m) for _, i, m in runs if cases[i] == c))
                  for c in cases}
        exact = {c.label: steps for c in cases if c.params["input"] >= world_size}
        return [
            self._equals("equals_all_reduce", cases, measured, world_size),
            claims.ring_messages("ring_messages", [(rank, cases[i].label, m["sends"]) for rank, i, m in runs],
                                 world_size, steps, exact),
            claims.elements_within("ring_bytes", sent, ELEMENT_BYTES,
                                   f"2(N-1) = {steps} chunks of n/{world_size} elements per rank", totals),
        ]


class RingReduceScatter(TensorCollective):
    oracle = "dist.reduce_scatter_single"
    equals_check = "equals_reduce_scatter"
    inplace = False

    def sizes(self, world_size: int) -> list[int]:
        return [1, 3, 37]

    def shapes(self, size: int, world_size: int) -> tuple[int, int]:
        return size * world_size, size

    def torch_answer(self, tensor: torch.Tensor, world_size: int, output_numel: int) -> torch.Tensor:
        output = torch.zeros(output_numel, dtype=tensor.dtype, device=tensor.device)
        _reduce_scatter_single()(output, tensor)
        return output

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        steps = world_size - 1
        exact = {c.label: steps for c in cases}
        sent = [(rank, cases[i].label, _sent_elements(m), steps * cases[i].params["size"],
                 steps * cases[i].params["size"]) for rank, i, m in runs]
        return [
            self._equals(self.equals_check, cases, measured, world_size),
            claims.ring_messages("ring_messages", [(rank, cases[i].label, m["sends"]) for rank, i, m in runs],
                                 world_size, steps, exact),
            claims.elements_within("ring_bytes", sent, ELEMENT_BYTES,
                                   f"N-1 = {steps} chunks of one chunk's elements per rank, (N-1)/N of the full size"),
        ]


class RingAllGather(RingReduceScatter):
    oracle = "dist.all_gather_single"
    equals_check = "equals_all_gather"

    def shapes(self, size: int, world_size: int) -> tuple[int, int]:
        return size, size * world_size

    def torch_answer(self, tensor: torch.Tensor, world_size: int, output_numel: int) -> torch.Tensor:
        output = torch.zeros(output_numel, dtype=tensor.dtype, device=tensor.device)
        _all_gather_single()(output, tensor)
        return output


class AllReduceHalves(RingAllReduce):
    def sizes(self, world_size: int) -> list[int]:
        return sorted({1, world_size + 1, 10, 257})

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        return [self._equals("equals_all_reduce", cases, measured, world_size),
                one_rs_one_ag([(rank, cases[i].label, m["collectives"]) for rank, i, m in runs]),
                padding_under_n([(rank, cases[i].label, cases[i].params["input"], m["collectives"]) for rank, i, m in runs],
                                world_size)]


def one_rs_one_ag(collectives: list[tuple[int, str, list[list[Any]]]]) -> Check:
    """Each call made exactly one reduce-scatter followed by one all-gather (and nothing else)."""
    for rank, case, calls in collectives:
        ops = [op for op, *_ in calls]
        if ops != ["reduce_scatter_single", "all_gather_single"]:
            return Check("one_reduce_scatter_one_all_gather", False,
                         f"rank {rank}, {case}: called {', '.join(ops) or 'no collective'}; an all-reduce in halves is "
                         "one reduce-scatter, then one all-gather", {"rank": rank, "case": case, "ops": ops})
    return Check("one_reduce_scatter_one_all_gather", True,
                 f"one reduce-scatter then one all-gather per call, on every rank ({len(collectives)} calls)")


def padding_under_n(collectives: list[tuple[int, str, int, list[list[Any]]]], world_size: int) -> Check:
    """The reduce-scatter's input is the tensor padded to a multiple of N: fewer than N extra elements."""
    for rank, case, numel, calls in collectives:
        inputs = [elements for op, elements, *_ in calls if op == "reduce_scatter_single"]
        for elements in inputs:
            if not (elements >= numel and elements - numel < world_size and elements % world_size == 0):
                return Check("padding_under_n", False,
                             f"rank {rank}, {case}: the reduce-scatter's input has {elements} elements for a tensor of "
                             f"{numel}; padded to a multiple of {world_size} it has {math.ceil(numel / world_size) * world_size}",
                             {"rank": rank, "case": case, "input": elements, "numel": numel})
    return Check("padding_under_n", True, f"every reduce-scatter input is the tensor padded by fewer than {world_size} "
                                          "elements")


class RecursiveDoubling(RingAllReduce):
    def sizes(self, world_size: int) -> list[int]:
        return [5, 64, 1000]

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        receives = [(rank, cases[i].label, cases[i].params["input"], m["recvs"]) for rank, i, m in runs]
        return [self._equals("equals_all_reduce", cases, measured, world_size),
                log2_steps(receives, world_size), fewer_steps_than_ring(receives, world_size)]


def log2_steps(receives: list[tuple[int, str, int, list[list[int]]]], world_size: int) -> Check:
    """A power of two: every rank receives exactly log2 N whole buffers; otherwise at most floor(log2 N) + 2."""
    power = world_size & (world_size - 1) == 0
    log2 = int(math.log2(world_size))
    for rank, case, numel, messages in receives:
        count = sum(1 for _, elements, _ in messages if elements)
        if power and (count != log2 or any(elements != numel for _, elements, _ in messages)):
            sizes = sorted({elements for _, elements, _ in messages})
            return Check("log2_steps", False, f"rank {rank}, {case}: received {count} messages of {sizes} elements; "
                                              f"recursive doubling on {world_size} ranks receives log2 N = {log2} whole "
                                              f"buffers of {numel}", {"rank": rank, "case": case, "receives": count,
                                                                     "theory": log2})
        if not power and count > log2 + 2:
            return Check("log2_steps", False, f"rank {rank}, {case}: received {count} messages; with {world_size} ranks "
                                              f"(not a power of two) at most floor(log2 N) + 2 = {log2 + 2}: fold the "
                                              "extra ranks in, double, fold them out",
                         {"rank": rank, "case": case, "receives": count, "theory": log2 + 2})
    theory = f"exactly log2 N = {log2} whole buffers" if power else f"at most floor(log2 N) + 2 = {log2 + 2} messages"
    return Check("log2_steps", True, f"every rank received {theory} per call", {"theory": log2 if power else log2 + 2})


def fewer_steps_than_ring(receives: list[tuple[int, str, int, list[list[int]]]], world_size: int) -> Check:
    """The most messages any rank receives per call is below a ring's 2(N-1); the detail weighs the measured
    steps and bytes against a ring's in the alpha-beta model."""
    ring_steps = 2 * (world_size - 1)
    worst = max(receives, key=lambda r: sum(1 for _, e, _ in r[3] if e))
    rank, case, numel, messages = worst
    steps = sum(1 for _, elements, _ in messages if elements)
    received = sum(elements for _, elements, _ in messages)
    ring_elements = ring_steps * numel / world_size
    passed = steps < ring_steps
    trade = (f"measured {steps} steps and {received / numel:.2f} x the buffer per rank ({case}, rank {rank}); a ring "
             f"takes {ring_steps} steps and {ring_elements / numel:.2f} x")
    if passed and received > ring_elements:
        crossover = (ring_steps - steps) / ((received - ring_elements) / numel)
        trade += (f": with alpha seconds per step and beta per byte, doubling is faster for buffers below "
                  f"{crossover:.3g} x alpha/beta bytes")
    elif passed:
        trade += ": doubling takes fewer steps without sending more, so it wins at every size"
    else:
        trade += ": this is no latency-optimal all-reduce"
    return Check("fewer_steps_than_ring", passed, trade, {"steps": steps, "ring_steps": ring_steps,
                                                           "received_elements": received, "numel": numel})


class AllToAll(TensorCollective):
    oracle = "dist.all_to_all_single"
    inplace = False

    def sizes(self, world_size: int) -> list[int]:
        return [1, 4, 33]

    def shapes(self, size: int, world_size: int) -> tuple[int, int]:
        return size * world_size, size * world_size

    def torch_answer(self, tensor: torch.Tensor, world_size: int, output_numel: int) -> torch.Tensor:
        output = torch.zeros(output_numel, dtype=tensor.dtype, device=tensor.device)
        dist.all_to_all_single(output, tensor)
        return output

    def checks(self, cases: list[Case], measured: list, world_size: int) -> list[Check]:
        runs = flat_measured(measured)
        return [self._equals("equals_all_to_all", cases, measured, world_size),
                one_message_per_peer([(rank, cases[i].label, cases[i].params["size"], m["sends"]) for rank, i, m in runs],
                                     world_size)]


def one_message_per_peer(sends: list[tuple[int, str, int, list[list[int]]]], world_size: int) -> Check:
    """Each rank sends exactly one message of one chunk to every other rank."""
    for rank, case, chunk, messages in sends:
        to = sorted(peer for peer, _, _ in messages)
        others = [peer for peer in range(world_size) if peer != rank]
        if to != others or any(elements != chunk for _, elements, _ in messages):
            shown = ", ".join(f"{elements} to {peer}" for peer, elements, _ in messages) or "nothing"
            return Check("one_message_per_peer", False,
                         f"rank {rank}, {case}: sent {shown}; an all-to-all sends one chunk of {chunk} elements to each "
                         f"of ranks {', '.join(map(str, others))}", {"rank": rank, "case": case, "sent": messages})
    return Check("one_message_per_peer", True, f"every rank sent one chunk to each of the {world_size - 1} others: "
                                               f"(N-1)/N of its input")


RING_ALLREDUCE = RingAllReduce()
RING_REDUCE_SCATTER = RingReduceScatter()
RING_ALLGATHER = RingAllGather()
ALLREDUCE_HALVES = AllReduceHalves()
RECURSIVE_DOUBLING = RecursiveDoubling()
ALL_TO_ALL = AllToAll()
