"""What one training run is: its configuration, and how its steps are spent.

Torch-free, so the CLI can validate a demo's options (the step counts among them) before any rank
starts, and both the demo (`train.demo`) and the loop (`train.loop`) read the same definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MEASURED_STEPS = 2  # after the timed steps: one under the collective counter, one under the memory tracker


@dataclass
class RunSpec:
    """One training run's configuration (a demo's options, with the model resolved)."""

    strategy: str  # ddp | zero1 | fsdp
    arch: str = "gpt"
    model: str = "tiny"
    overrides: dict[str, int] = field(default_factory=dict)
    batch_size: int = 8
    steps: int = 8
    warmup: int = 2
    precision: str = "fp32"
    optimizer: str = "adamw"
    lr: float = 1e-3
    seed: int = 0
    checkpoint_activations: bool = False
    sharding: str | None = None
    wrap: str = "block"
    fsdp_api: int = 2
    replicas: int = 2
    bucket_mb: float = 25.0

    @property
    def timed_steps(self) -> int:
        return self.steps - self.warmup - MEASURED_STEPS
