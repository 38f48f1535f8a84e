"""The bucket kata: DDP's assignment of gradients to buckets, judged against torch's own
`dist._compute_bucket_assignment_by_size` (which runs without a process group, on meta tensors here, so
nothing is allocated) over generated parameter lists: one dtype and several, limits as DDP passes them at
construction ([sys.maxsize], or [1 MiB, cap]) and small ones that close many buckets, in index order and
in a gradient-ready order as the Reducer's rebuild passes it."""

from __future__ import annotations

import random
import sys
from typing import Any

from ddpfsdp.demos.result.schema import JsonObject
from ddpfsdp.demos.katas.claims import Mismatch
from ddpfsdp.demos.katas.judge import Case, PureJudge

GENERATED_CASES = 48
MIB = 1 << 20
DTYPES = {"float32": 4, "float16": 2, "float64": 8, "bfloat16": 2}


class Buckets(PureJudge):
    check_name = "equals_torch_assignment"
    oracle = "dist._compute_bucket_assignment_by_size"

    def cases(self, world_size: int, seed: int) -> list[Case]:
        rng = random.Random(seed)
        cases = [self._case([4000, 1_200_000, 20, 1_048_576, 280, 4], ["float32"] * 6, [MIB, 25 * MIB], None)]
        for index in range(GENERATED_CASES - 1):
            count = rng.randint(1, 10)
            mixed = index % 3 == 0
            dtypes = [rng.choice(list(DTYPES)) if mixed else "float32" for _ in range(count)]
            sizes = [DTYPES[d] * rng.choice([1, 7, 64, 300, 4096, 65_536, 262_144]) for d in dtypes]
            limits = rng.choice([[sys.maxsize], [MIB, 25 * MIB], [4096], [1024, 65_536], [300, 2048, 8192]])
            order = None
            if not mixed and rng.random() < 0.5:
                order = list(range(count))[::-1] if rng.random() < 0.6 else rng.sample(range(count), count)
            cases.append(self._case(sizes, dtypes, limits, order))
        return cases

    def _case(self, sizes: list[int], dtypes: list[str], limits: list[int], order: list[int] | None) -> Case:
        shown = ["sys.maxsize" if limit == sys.maxsize else str(limit) for limit in limits]
        label = (f"sizes_bytes={sizes}, dtypes={'float32 only' if set(dtypes) == {'float32'} else dtypes}, "
                 f"limits_bytes=[{', '.join(shown)}]" + (f", ready_order={order}" if order is not None else ""))
        return Case(label, {"sizes_bytes": sizes, "dtypes": dtypes, "limits_bytes": limits, "ready_order": order})

    def answer(self, params: JsonObject) -> list[list[int]]:
        import torch
        import torch.distributed as dist

        tensors = [torch.empty(size // DTYPES[dtype], dtype=getattr(torch, dtype), device="meta")
                   for size, dtype in zip(params["sizes_bytes"], params["dtypes"])]
        order = params["ready_order"]
        if order is None:
            buckets, _ = dist._compute_bucket_assignment_by_size(tensors, params["limits_bytes"])
        else:
            buckets, _ = dist._compute_bucket_assignment_by_size([tensors[i] for i in order], params["limits_bytes"],
                                                                 [], order)
        return [list(bucket) for bucket in buckets]

    def compare(self, got: Any, expected: list[list[int]]) -> Mismatch | None:
        try:
            mine = [list(bucket) for bucket in got]
        except TypeError:
            return {"index": None, "got": repr(got)[:60], "expected": str(expected), "why": "not a list of lists"}
        if mine == expected:
            return None
        first = next((i for i, (a, b) in enumerate(zip(mine, expected)) if a != b), min(len(mine), len(expected)))
        return {"index": None, "got": str(mine), "expected": str(expected),
                "why": f"bucket {first} differs" if first < min(len(mine), len(expected)) else "the bucket counts differ"}


BUCKETS = Buckets()
