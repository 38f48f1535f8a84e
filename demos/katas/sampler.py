"""The sampler kata: the indices DistributedSampler gives one rank in one epoch, judged against torch's
own sampler over generated cases (dataset sizes the replicas divide and do not, smaller than the replicas,
shuffled or not, with and without drop_last), each rank running its share of them."""

from __future__ import annotations

import contextlib
import random
from typing import Any

from ddpfsdp.demos.result.schema import JsonObject
from ddpfsdp.demos.katas.claims import Mismatch
from ddpfsdp.demos.katas.judge import Case, PureJudge, compare_lists

GENERATED_CASES = 60


def _label(params: JsonObject) -> str:
    flags = [f"shuffle seed={params['seed']} epoch={params['epoch']}" if params["shuffle"] else "no shuffle"]
    if params["drop_last"]:
        flags.append("drop_last")
    return (f"dataset_len={params['dataset_len']}, num_replicas={params['num_replicas']}, rank={params['rank']}, "
            + ", ".join(flags))


class Sampler(PureJudge):
    check_name = "equals_distributed_sampler"
    oracle = "DistributedSampler"

    def cases(self, world_size: int, seed: int) -> list[Case]:
        rng = random.Random(seed)
        # The corners first: fewer samples than replicas (padding wraps more than once; drop_last leaves none),
        # a size the replicas divide, one they do not.
        shapes = [(3, 4, True, False), (3, 4, True, True), (2, 5, False, False), (12, 4, True, False),
                  (10, 3, True, True), (10, 3, False, False), (1, 1, True, False)]
        shapes += [(rng.randint(1, 40), rng.randint(1, 6), rng.random() < 0.7, rng.random() < 0.4)
                   for _ in range(GENERATED_CASES - len(shapes))]
        cases = []
        for length, replicas, shuffle, drop_last in shapes:
            params = {"dataset_len": length, "num_replicas": replicas, "rank": rng.randrange(replicas),
                      "shuffle": shuffle, "seed": rng.randrange(1000), "epoch": rng.randrange(6), "drop_last": drop_last}
            cases.append(Case(_label(params), params))
        return cases

    def answer(self, params: JsonObject) -> list[int]:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(range(params["dataset_len"]), num_replicas=params["num_replicas"],
                                     rank=params["rank"], shuffle=params["shuffle"], seed=params["seed"],
                                     drop_last=params["drop_last"])
        sampler.set_epoch(params["epoch"])
        return list(sampler)

    def compare(self, got: Any, expected: list) -> Mismatch | None:
        return compare_lists(got, expected)

    @contextlib.contextmanager
    def forbid(self) -> Any:
        from torch.utils.data.distributed import DistributedSampler

        from ddpfsdp.demos.katas.comm import KataForbidden

        def refuse(self: Any) -> Any:
            raise KataForbidden("DistributedSampler", "DistributedSampler is the answer sampler-indices asks you to "
                                                      "write; compute the indices yourself")

        original = DistributedSampler.__iter__
        DistributedSampler.__iter__ = refuse
        try:
            yield
        finally:
            DistributedSampler.__iter__ = original


SAMPLER = Sampler()
