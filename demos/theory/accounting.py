"""The accounting conventions the table can be counted in, and what each one covers."""

from __future__ import annotations

from ddpfsdp.demos.theory.arguments import read_choice
from ddpfsdp.demos.theory.sharding import STRATEGY_TITLES, canonical_strategy

ACCOUNTINGS: tuple[str, ...] = ("ddpfsdp", "deepspeed")
"""Whose convention counts the bytes: this project's (`model_state`, `working_set`) or DeepSpeed's
estimator (`deepspeed_accounting`), which covers ZeRO-2 and ZeRO-3 with mixed-precision Adam."""

DEEPSPEED_STRATEGIES: tuple[str, ...] = ("zero2", "zero3")
DEEPSPEED_PRECISION = "bf16-master"
DEEPSPEED_OPTIMIZERS: tuple[str, ...] = ("adam", "adamw")


def check_accounting(accounting: str) -> str:
    return read_choice(accounting, ACCOUNTINGS, "accounting")


def accounting_refusal(strategy: str, accounting: str) -> str | None:
    """Why `accounting` has no figure for `strategy`, and what to use instead; None when it has."""
    strategy, accounting = canonical_strategy(strategy), check_accounting(accounting)
    if accounting == "ddpfsdp" or strategy in DEEPSPEED_STRATEGIES:
        return None
    return (
        f"DeepSpeed's estimator covers only ZeRO-2 and ZeRO-3 (estimate_zero2/zero3_model_states_mem_needs), "
        f"not {STRATEGY_TITLES[strategy]}; use zero2 or zero3 with the deepspeed accounting, or "
        "the ddpfsdp accounting for every strategy"
    )

