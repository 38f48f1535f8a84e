"""Click types for the numbers a command line takes: finite, and within what a run can use.

    click.Option(["--lr"], type=FiniteFloat(min=0, min_open=True))
    click.Option(["--seed"], type=SEED)

Python's float() reads "nan", "inf" and "1e400" (infinity), and click's ranges let both through: nan
compares false with every bound, infinity is above every lower one. A run given either fails on its
ranks (a bucket of infinite bytes, a timeout no clock can hold) or stores "Infinity", which is not
JSON. FiniteFloat refuses them while the command line is parsed, with a message that says what to give.
"""

from __future__ import annotations

import math

import click

# The most CPU processes or GPU ranks one launch here takes: each process loads torch (hundreds of MB), so
# more is a cluster's job (`--simulate --world N` sizes one). Advice names --procs only up to it.
MAX_PROCS = 128
SEED_MAX = 2**63 - 1  # torch.manual_seed takes [-2**63, 2**64 - 1] (torch/random.py); Python's random any int
SEED = click.IntRange(0, SEED_MAX)
# Samples per rank per step in a concept demo, which trains a small model for a few steps on any machine.
MAX_BATCH_SIZE = 4096
BATCH_SIZE = click.IntRange(1, MAX_BATCH_SIZE)


class FiniteFloat(click.FloatRange):
    """A float range that refuses nan and infinity (and what overflows to it, such as 1e400)."""

    def convert(self, value, param, ctx):
        number = value if isinstance(value, float) else click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number; give one such as {self._example()}", param, ctx)
        return super().convert(number, param, ctx)

    def _example(self) -> str:
        low = 0.0 if self.min is None else float(self.min)
        high = math.inf if self.max is None else float(self.max)
        example = max(low, 1.0) if high >= 1.0 else (low + high) / 2
        return f"{example:g}"
