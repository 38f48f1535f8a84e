"""The memory kata: per-GPU bytes of parameters, gradients and optimizer state for DDP and the ZeRO
stages, judged against the analytic model `ddpfsdp calc` prints (`theory.state.model_state`) over
generated cases. ZeRO-1 and ZeRO-2 are DeepSpeed's there, whose optimizer steps its own master copy of
the rank's partition even when the parameters are fp32 already; ZeRO-3 under fp32 and bf16-mixed is
FSDP2's, which keeps none (`theory.implementations`)."""

from __future__ import annotations

import random
from typing import Any

from ddpfsdp.demos.result.schema import JsonObject
from ddpfsdp.demos.katas.claims import Mismatch
from ddpfsdp.demos.katas.judge import Case, PureJudge

GENERATED_CASES = 48
STRATEGIES = ("ddp", "zero1", "zero2", "zero3")
PRECISIONS = ("fp32", "bf16-mixed", "bf16-master")
OPTIMIZERS = ("adamw", "sgd-momentum", "sgd")
FIELDS = ("params_bytes", "grads_bytes", "optimizer_bytes")


class Memory(PureJudge):
    check_name = "equals_calc"
    oracle = "ddpfsdp calc"

    def cases(self, world_size: int, seed: int) -> list[Case]:
        rng = random.Random(seed)
        cases = [self._case(7_500_000_000, 64, "zero3", "bf16-master", "adamw"),
                 self._case(1_000_003, 3, "zero1", "fp32", "adamw")]
        while len(cases) < GENERATED_CASES:
            cases.append(self._case(rng.choice([1_000_003, 124_000_000, 1_300_000_000, 7_000_000_000, 70_000_000_001]),
                                    rng.choice([1, 2, 3, 8, 12, 64, 1024]), rng.choice(STRATEGIES),
                                    rng.choice(PRECISIONS), rng.choice(OPTIMIZERS)))
        return cases

    def _case(self, params: int, gpus: int, strategy: str, precision: str, optimizer: str) -> Case:
        values = {"params": params, "gpus": gpus, "strategy": strategy, "precision": precision, "optimizer": optimizer}
        return Case(", ".join(f"{key}={value}" for key, value in values.items()), values)

    def answer(self, params: JsonObject) -> dict[str, int]:
        from ddpfsdp.demos.theory.state import model_state

        state = model_state(params["params"], params["gpus"], params["strategy"], params["precision"],
                            params["optimizer"])
        return {field: state[field] for field in FIELDS}

    def compare(self, got: Any, expected: dict[str, int]) -> Mismatch | None:
        if not isinstance(got, dict):
            return {"index": None, "got": f"a {type(got).__name__}", "expected": f"a dict of {', '.join(FIELDS)}",
                    "why": "not a dict"}
        for field in FIELDS:
            if field not in got:
                return {"index": None, "got": f"no {field}", "expected": expected[field], "why": f"{field} is missing"}
            if got[field] != expected[field]:
                return {"index": None, "got": got[field], "expected": expected[field], "why": f"{field} differs"}
        return None


MEMORY = Memory()
