"""What each concept demo measured, as typed fields: the view its renderer reads (no torch).

A concept demo's result is the common envelope (demos/result/schema.py) with the demo's own measurements
beside it; `of(result)` reads one back, typed or in its JSON form, a saved result included. Keys a view
does not name stay in `extra`, so reading a result loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from ddpfsdp.demos.result.schema import Block, CommOp, Config, DemoResult, StepTime

V = TypeVar("V", bound="Measured")

NO_CALLS = CommOp(count=0, bytes=0, wire_bytes_per_rank=0)


def op(comm: Mapping[str, CommOp], name: str) -> CommOp:
    """One op's figures of a step; an op the step did not issue reads as no calls."""
    return comm.get(name) or NO_CALLS


@dataclass
class ConceptConfig(Config):
    """The placement (Config) and the concept demos' own options that their renderers show."""

    micro_batches: int | None = None  # no-sync
    global_batch_size: int | None = None  # equivalence
    blocks: int | None = None  # checkpoint


@dataclass
class Measured(Block):
    """The envelope's config and the notes every concept demo may carry."""

    config: ConceptConfig = field(default_factory=ConceptConfig)
    notes: list[str] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"config": ("one", ConceptConfig)}

    @classmethod
    def of(cls: type[V], result: DemoResult | Mapping[str, Any]) -> V:
        return cls.from_json(result.to_json() if isinstance(result, DemoResult) else result)


@dataclass
class RingTheory(Block):
    ring_wire_bytes_per_rank: float = 0.0  # allreduce: 2(N-1)/N x buffer
    wire_bytes_per_rank_each: float = 0.0  # reduce-scatter: (N-1)/N x buffer, for each of its two ops
    formula: str | None = None


@dataclass
class AllReduce(Measured):
    buffer_bytes: int = 0
    sent_bytes_per_rank: list[int] = field(default_factory=list)
    intercepted_send_bytes_per_rank: list[int] = field(default_factory=list)
    theory: RingTheory = field(default_factory=RingTheory)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {**Measured.NESTED, "theory": ("one", RingTheory)}


@dataclass
class ReduceScatter(Measured):
    buffer_bytes: int = 0
    sent_bytes_per_rank: dict[str, list[int]] = field(default_factory=dict)  # source -> bytes of each rank
    theory: RingTheory = field(default_factory=RingTheory)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {**Measured.NESTED, "theory": ("one", RingTheory)}


@dataclass
class Matmuls(Block):
    forward: int = 0
    backward: int = 0


@dataclass
class Trial(Block):
    """One configuration a wrap, reshard or checkpoint demo trained and measured."""

    label: str = ""
    sharding: str | None = None
    params: int | None = None
    units_with_params: int | None = None
    comm: dict[str, CommOp] = field(default_factory=dict)
    peak_bytes_by_rank: list[int] = field(default_factory=list)
    largest_unit_params: int | None = None
    largest_unit_bytes: int | None = None
    matmuls: Matmuls = field(default_factory=Matmuls)  # checkpoint: over the whole model
    block_matmuls: Matmuls = field(default_factory=Matmuls)  # checkpoint: inside the blocks
    step_time_s: StepTime = field(default_factory=StepTime)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {
        "comm": ("map", CommOp), "matmuls": ("one", Matmuls), "block_matmuls": ("one", Matmuls),
        "step_time_s": ("one", StepTime)}

    @property
    def peak_bytes(self) -> int | None:
        """The largest rank's peak."""
        return max(self.peak_bytes_by_rank) if self.peak_bytes_by_rank else None


@dataclass
class Trials(Measured):
    """wrap, reshard and checkpoint: the configurations tried, in order."""

    configs: list[Trial] = field(default_factory=list)
    step_time_ratio: float | None = None  # checkpoint: on / off

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {**Measured.NESTED, "configs": ("list", Trial)}


@dataclass
class StrategyTraffic(Block):
    """comm: one strategy's step, measured and by theory, per op."""

    comm: dict[str, CommOp] = field(default_factory=dict)
    theory: dict[str, CommOp] = field(default_factory=dict)
    wire_bytes_per_rank: float | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"comm": ("map", CommOp), "theory": ("map", CommOp)}


@dataclass
class Traffic(Measured):
    param_bytes: int | None = None
    # the key a saved result has carried since the first version: one strategy's traffic each
    runs: dict[str, StrategyTraffic] = field(default_factory=dict)
    fsdp_to_ddp_wire_ratio: float | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {**Measured.NESTED, "runs": ("map", StrategyTraffic)}


@dataclass
class Accumulation(Block):
    """no-sync: one way of accumulating micro-batches, and the collectives its step issued."""

    comm: dict[str, CommOp] = field(default_factory=dict)
    describe: str | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"comm": ("map", CommOp)}


@dataclass
class GradientDiff(Block):
    max_abs_diff: float = 0.0
    max_abs_grad: float = 0.0
    numel: int = 0


@dataclass
class NoSync(Measured):
    # strategy -> mode ("sync every micro-batch", "skip sync until the last") -> its step
    runs: dict[str, dict[str, Accumulation]] = field(default_factory=dict)
    gradient_diff_by_rank: dict[str, list[GradientDiff]] = field(default_factory=dict)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {**Measured.NESTED,
                                                         "runs": ("map_of_maps", Accumulation)}

    @classmethod
    def _load(cls, key: str, value: Any) -> Any:
        if key == "gradient_diff_by_rank" and isinstance(value, Mapping):
            return {strategy: [GradientDiff.from_json(row) for row in rows if isinstance(row, Mapping)]
                    for strategy, rows in value.items() if isinstance(rows, list)}
        return super()._load(key, value)

    def worst_gradient_diff(self, strategy: str) -> float:
        """The largest difference between synced and skipped gradients on any rank."""
        return max((row.max_abs_diff for row in self.gradient_diff_by_rank.get(strategy, [])), default=0.0)


@dataclass
class Losses(Block):
    losses: list[float] = field(default_factory=list)
    max_abs_weight_update: float | None = None  # the single process: its largest weight change
    max_abs_weight_diff: float | None = None  # DDP or FSDP: its largest weight difference from one process


@dataclass
class Equivalence(Measured):
    single_process: Losses = field(default_factory=Losses)
    ddp: Losses = field(default_factory=Losses)
    fsdp: Losses = field(default_factory=Losses)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {
        **Measured.NESTED, "single_process": ("one", Losses), "ddp": ("one", Losses), "fsdp": ("one", Losses)}
