"""The result a demo returns (schema ddpfsdp.demo/1): one typed value, to and from JSON.

Training, simulated, concept and fault demos all return this envelope (schema, demo, config, env,
checks), made in one place (`result.build`); a training result adds per-rank memory, throughput, communication, the loss, the recorded
step and the analytic model's figures. Renderers and checks read its fields. The JSON form (`to_json`)
is the documented schema: what `--json` prints, what crosses from rank 0 to the CLI and what the
progress store keeps; `from_json` reads it back, a result saved by an older version included, its
retired names read as today's (`RENAMED`).

Each block keeps the keys it does not name in `extra`, and a block read from JSON writes its keys
back in the order it read them, so a saved result goes out exactly as it came in.
No torch here, nor anything of the demos above it: the quiz reads saved results through this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from ddpfsdp.demos.result.checks import Check
from ddpfsdp.demos.result.expert_record import ExpertRank, ExpertReference
from ddpfsdp.demos.result.step_record import Exposed, RankStep

SCHEMA = "ddpfsdp.demo/1"

# A JSON object as the wire carries it: what a block does not name, and figures whose shape belongs to
# the module that measures them (a recorded step's spans, the analytic model's table).
JsonObject = dict[str, Any]

# What a training result's peak is made of (memory.ranks[r].peak_breakdown), in the order a reader
# builds it up: state, communication buffers, the rest. The tracker fills exactly these.
PEAK_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("params", "params"),  # FSDP: the local shards
    ("unsharded_params", "unsharded params"),
    ("grads", "grads"),
    ("optimizer", "optimizer state"),
    ("all_gather", "all-gather buffer"),
    ("reduce_scatter", "reduce-scatter buffer"),
    ("ddp_buckets", "DDP buckets"),
    ("buffers", "module buffers"),
    ("inputs", "inputs"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
    ("transient", "the rest (by difference)"),
)
PEAK_CATEGORY_NAMES = tuple(name for name, _ in PEAK_CATEGORIES)
STATE_KINDS = ("params", "grads", "optimizer")

# What figures from CPU ranks mean, wherever a run on gloo is shown.
GLOO_CAVEAT = ("Measured on CPU processes with gloo: memory and traffic carry over to GPUs, throughput does not "
               "represent NCCL on GPUs.")
SIMULATED_CAVEAT = ("Simulated, not measured on hardware: real sharding, real collectives issued and the real "
                    "allocation pattern of one step; no time, no NCCL, no fragmentation, so no throughput.")
FAULT_CAVEAT = ("Run on CPU processes with gloo, the fixed program first: the error texts are gloo's; NCCL reports "
                "the same bugs in its own words.")


# Names an older version wrote, as today's: its `zero1` demo, strategy and compare run were PyTorch's
# ZeroRedundancyOptimizer, calc's `zro` (calc's `zero1` is DeepSpeed's ZeRO-1, which no demo runs).
RENAMED: dict[str, str] = {"zero1": "zro", "zero1_shards_optimizer": "zro_shards_optimizer"}


def _renamed(name: Any) -> Any:
    return RENAMED.get(name, name) if isinstance(name, str) else name


def upgraded(data: Mapping[str, Any]) -> JsonObject:
    """A result's JSON with the names an older version wrote read as today's: the demo, the config's
    strategy and compare's strategies, compare's runs (their keys and labels), and the checks' names and
    the run names among their values. Keys stay in order."""
    out = dict(data)
    for key in ("demo", "label"):
        if key in out:
            out[key] = _renamed(out[key])
    config = out.get("config")
    if isinstance(config, Mapping):
        config = dict(config)
        if "strategy" in config:
            config["strategy"] = _renamed(config["strategy"])
        if isinstance(config.get("strategies"), list):
            config["strategies"] = [_renamed(name) for name in config["strategies"]]
        out["config"] = config
    if isinstance(out.get("runs"), Mapping):
        out["runs"] = {_renamed(name): run for name, run in out["runs"].items()}
    if isinstance(out.get("checks"), list):
        out["checks"] = [_upgraded_check(check) for check in out["checks"]]
    return out


def _upgraded_check(check: Any) -> Any:
    if not isinstance(check, Mapping) or _renamed(check.get("name")) == check.get("name"):
        return check
    values = check.get("values")
    return {**check, "name": _renamed(check["name"]),
            **({"values": {_renamed(k): v for k, v in values.items()}} if isinstance(values, Mapping) else {})}


class ResultError(ValueError):
    """A value that is not a ddpfsdp.demo/1 result (or one of its blocks)."""


B = TypeVar("B", bound="Block")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class Block:
    """A JSON object with named fields; the keys it does not name stay in `extra`, in order."""

    extra: JsonObject = field(default_factory=dict, kw_only=True)
    order: tuple[str, ...] = field(default=(), kw_only=True, repr=False, compare=False)

    # field -> how its JSON is read: ("one" | "list" | "map" | "map_of_maps", block type)
    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {}

    @classmethod
    def named(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in ("extra", "order"))

    @classmethod
    def defaults(cls) -> JsonObject:
        """Each named field's default, as a block built without it holds it."""
        return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
                for f in fields(cls) if f.name not in ("extra", "order")}

    @classmethod
    def from_json(cls: type[B], data: Any) -> B:
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise ResultError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
        names = set(cls.named())
        known = {key: cls._load(key, value) for key, value in data.items() if key in names}
        extra = {key: value for key, value in data.items() if key not in names}
        return cls(**known, extra=extra, order=tuple(data))

    @classmethod
    def _load(cls, key: str, value: Any) -> Any:
        kind, block = cls.NESTED.get(key, ("", Block))
        if value is None or not kind or isinstance(value, Block):
            return value
        if kind == "one":
            return block.from_json(value) if isinstance(value, Mapping) else value
        if kind == "list" and isinstance(value, list):
            return [block.from_json(v) if isinstance(v, Mapping) else v for v in value]
        if kind == "map" and isinstance(value, Mapping):
            return {k: block.from_json(v) if isinstance(v, Mapping) else v for k, v in value.items()}
        if kind == "map_of_maps" and isinstance(value, Mapping):
            return {k: {op: block.from_json(v) for op, v in inner.items() if isinstance(v, Mapping)}
                    if isinstance(inner, Mapping) else inner for k, inner in value.items()}
        return value

    def keys(self) -> list[str]:
        """The keys `to_json` writes, in its order: those read, in the order read, then fields set since to
        something other than their default (a block built in code: every field it names), then `extra`."""
        named = self.named()
        out = [key for key in self.order if key in named or key in self.extra]
        defaults = self.defaults()
        # a field the JSON did not have is written once it holds something other than its default
        out += [key for key in named if key not in out and (not self.order or getattr(self, key) != defaults[key])]
        out += [key for key in self.extra if key not in out]
        return out

    def value(self, key: str) -> Any:
        """A key's value as the block holds it: a named field typed, anything else as read."""
        return getattr(self, key) if key in self.named() else self.extra[key]

    def to_json(self) -> JsonObject:
        """The JSON object, keys in the order of `keys`."""
        return {key: _dump(self.value(key)) for key in self.keys()}


def _dump(value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_json()
    if isinstance(value, Check):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def check_from_json(data: Any) -> Check | None:
    """A check as a result carries it; None for an entry that is not one."""
    if isinstance(data, Check):
        return data
    if not isinstance(data, Mapping):
        return None
    values = data.get("values")
    passed = data.get("passed")
    reason = data.get("not_judged")
    return Check(str(data.get("name")), None if passed is None else bool(passed), str(data.get("detail", "")),
                 dict(values) if isinstance(values, Mapping) else {},
                 str(reason) if reason is not None else None)


@dataclass
class Config(Block):
    """How and where the run happened. Training runs name every field; a concept or fault demo, the
    placement and its own options (in `extra`)."""

    strategy: str | None = None
    arch: str | None = None
    model: str | None = None
    params: int | None = None
    world_size: int | None = None
    device: str | None = None
    backend: str | None = None
    precision: str | None = None
    optimizer: str | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    steps: int | None = None
    warmup: int | None = None
    sharding: str | None = None
    replicas: int | None = None
    description: str | None = None
    simulated: bool | None = None
    tp: int | None = None
    cp: int | None = None  # demo cp: the ranks each sequence is split over
    cp_split: str | None = None  # demo cp: head-tail or contiguous
    units: list[str] | None = None
    unit_params: list[int] | None = None
    bucket_mb: float | None = None
    prefetch: str | None = None
    fsdp_api: int | None = None
    wrap: str | None = None
    checkpoint_activations: bool | None = None
    sequence_parallel: bool | None = None
    strategies: list[str] | None = None  # compare: its runs, in order
    shape: str | None = None  # a simulated run: the model's shape in words
    gpu_mem_bytes: int | None = None  # a simulated run: the GPU memory it was asked to fit
    timeout_s: float | None = None  # a fault: the process-group timeout of each program
    ep: int | None = None  # an MoE run: the ranks its experts are split over
    experts: int | None = None  # an MoE run: experts per layer
    top_k: int | None = None  # an MoE run: experts each token is routed to
    capacity_factor: float | None = None  # an MoE run: slots per expert per even share

    @property
    def on_gloo(self) -> bool:
        return self.backend == "gloo" or self.device == "cpu"

    # Ranks sharing a GPU (`launch.sharing`): kept in `extra`, so a result of one rank per GPU has no such keys.
    @property
    def shared_gpu(self) -> str | None:
        """The label of a run whose ranks shared a GPU; None where each rank had its own."""
        label = self.extra.get("shared_gpu")
        return str(label) if label else None

    @property
    def ranks_per_gpu(self) -> int | None:
        value = self.extra.get("ranks_per_gpu")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def gpus(self) -> int | None:
        value = self.extra.get("gpus")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Env(Block):
    torch: str | None = None
    python: str | None = None
    device_names: list[str] | None = None
    cpu_count: int | None = None
    hostname: str | None = None


@dataclass
class RankMemory(Block):
    """What one rank held: model state after the optimizer step, and its peak of one step."""

    params: int | None = None
    grads: int | None = None
    optimizer: int | None = None
    peak: int | None = None
    peak_kind: str | None = None
    peak_breakdown: dict[str, float] | None = None
    peak_phase: str | None = None
    peak_module: str | None = None
    breakdown_source: str | None = None
    params_after_forward: int | None = None  # parameter bytes held between forward and backward
    blas_workspaces: int | None = None  # GPU: the step's cuBLAS workspaces, from torch's own sizes
    block_saved: JsonObject | None = None  # a 2-D run: the bytes one block saved for backward

    def state(self, kind: str) -> int:
        """Bytes of one model-state kind (params, grads or optimizer); 0 where not measured."""
        if kind not in STATE_KINDS:
            raise ResultError(f"{kind!r} is not a model-state kind; choose one of {', '.join(STATE_KINDS)}")
        return getattr(self, kind) or 0

    @property
    def model_state(self) -> int:
        return sum(self.state(kind) for kind in STATE_KINDS)

    def peak_parts(self) -> dict[str, float]:
        """Bytes of each category at the peak, in PEAK_CATEGORIES' order, the measured ones only."""
        parts = self.peak_breakdown or {}
        return {k: float(parts[k]) for k in PEAK_CATEGORY_NAMES if _number(parts.get(k))}

    def peak_where(self) -> str | None:
        """'backward, in blocks.3.mlp': the phase and module of the peak; None when not measured."""
        if not self.peak_phase:
            return None
        if self.peak_module:
            return f"{self.peak_phase}, in {self.peak_module}"
        return f"{self.peak_phase}, outside the model's modules"


@dataclass
class SimulatedPeak(Block):
    """A simulated step's peak on rank 0: its bytes, where it fell and what was held then."""

    bytes: int | None = None
    module: str | None = None
    unit: str | None = None
    phase: str | None = None
    categories: dict[str, int] | None = None


@dataclass
class LargestUnit(Block):
    """The FSDP unit whose all-gather brings the most bytes into being (a simulated run)."""

    name: str | None = None
    params: int | None = None
    unsharded_bytes: int | None = None


@dataclass
class Memory(Block):
    ranks: list[RankMemory] = field(default_factory=list)
    buffers: int | None = None
    param_tensors: int | None = None
    shard_row_bytes: int | None = None
    largest_param_bytes: int | None = None
    fsdp_padding_elements: int | None = None  # FSDP: elements added to pad each parameter's dim 0
    peak: SimulatedPeak | None = None  # simulated runs
    largest_unit: LargestUnit | None = None  # simulated FSDP runs

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"ranks": ("list", RankMemory),
                                                         "peak": ("one", SimulatedPeak),
                                                         "largest_unit": ("one", LargestUnit)}

    def rank(self, index: int = 0) -> RankMemory | None:
        """Rank `index`'s memory (rank 0's where the run had fewer ranks); None when none was measured."""
        if not self.ranks:
            return None
        return self.ranks[index] if 0 <= index < len(self.ranks) else self.ranks[0]


@dataclass
class StepTime(Block):
    median: float | None = None
    min: float | None = None
    max: float | None = None


@dataclass
class Throughput(Block):
    """Over all ranks, after warm-up."""

    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    step_time_s: StepTime | None = None
    timed_steps: int | None = None
    mfu: float | str | None = None  # "n/a" where the device's peak is not known
    peak_flops_per_s: float | None = None
    note: str | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"step_time_s": ("one", StepTime)}


@dataclass
class CommOp(Block):
    """One collective op per step: calls, logical tensor bytes, and what a ring sends per rank."""

    count: int | None = None
    bytes: float | None = None
    wire_bytes_per_rank: float | None = None


@dataclass
class Comm(Block):
    per_step: dict[str, CommOp] = field(default_factory=dict)
    per_group: dict[str, dict[str, CommOp]] | None = None  # a 2-D run: "tp" and "dp"
    groups: list[JsonObject] | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"per_step": ("map", CommOp),
                                                         "per_group": ("map_of_maps", CommOp)}

    @property
    def wire_bytes_per_rank(self) -> float:
        return sum(op.wire_bytes_per_rank or 0 for op in self.per_step.values())


@dataclass
class Timeline(Block):
    """One recorded step per rank. A rank's record (spans, collectives, memory samples, params held) keeps
    the shape `measure.timeline` gives it and `measure.lanes` reads."""

    step: int | None = None
    units: list[str] | None = None
    ranks: list[RankStep] = field(default_factory=list)
    exposed: Exposed | None = None

    @property
    def exposed_share(self) -> list[float]:
        return list(self.exposed.get("share") or []) if self.exposed else []


@dataclass
class FaultPhase(Block):
    """One program of a failure-lab demo, broken or fixed: what each rank recorded, and its symptom."""

    program: str | None = None
    wall_s: float | None = None
    ranks: list[JsonObject] = field(default_factory=list)  # each rank's record, as faults.rank writes it
    analyzer: JsonObject | None = None  # torch's flight-recorder analyzer, for a hang
    symptom: list[str] = field(default_factory=list)


@dataclass
class FaultLab(Block):
    """A failure-lab result's own block: the bug, its cause and fix, and the two runs."""

    name: str | None = None
    summary: str | None = None
    cause: str | None = None
    fix: str | None = None
    hangs: bool | None = None
    timeout_s: float | None = None
    broken: FaultPhase | None = None
    fixed: FaultPhase | None = None

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"broken": ("one", FaultPhase), "fixed": ("one", FaultPhase)}


@dataclass
class Diverged(Block):
    """Where a run's loss stopped being a number. JSON has no nan or infinity, so the protocol writes such
    a loss as null; this keeps which it was, and from which step."""

    step: int | None = None  # counted from 1: the first step whose loss, the mean over the ranks, is not finite
    loss: str | None = None  # "nan", "inf" or "-inf"

    @classmethod
    def of(cls, losses: Sequence[float | None]) -> Diverged | None:
        """The first loss that is not a finite number, or None when every loss is one (or missing)."""
        for step, value in enumerate(losses, start=1):
            if isinstance(value, float) and not math.isfinite(value):
                return cls(step=step, loss=str(value))
        return None


@dataclass
class VersusRow(Block):
    """One figure of a simulated run beside the analytic model's."""

    figure: str | None = None
    simulated: float | None = None
    theory: float | None = None
    diff_percent: float | None = None


@dataclass
class ExpertRun(Block):
    """An MoE run's own figures (`demo moe`): every rank's routing in the recorded step, what each rank
    holds and sent, and the one-process reference (`result.expert_record`)."""

    experts: int | None = None
    top_k: int | None = None
    capacity_factor: float | None = None
    ep: int | None = None
    layers: int | None = None
    d_model: int | None = None
    element_bytes: int | None = None  # of the tokens the all-to-alls carry
    count_bytes: int | None = None  # of each count the counts all-to-all carries
    expert_params: int | None = None  # one expert's parameters
    dense_params: int | None = None  # everything but the experts: attention, embeddings, routers, head
    shard_row_bytes: int | None = None  # the dense part: one dim-0 row of each parameter (FSDP's padding)
    ranks: list[ExpertRank] = field(default_factory=list)
    reference: ExpertReference | None = None


@dataclass
class StragglerRank(Block):
    """One rank of a straggler run: its step times without and with the delay, and its first collective in the
    recorded step (with the delay) from issue to completion."""

    rank: int | None = None
    base_step_s: StepTime | None = None
    slowed_step_s: StepTime | None = None
    first_op: str | None = None
    first_issued_s: float | None = None  # from the moment the ranks were aligned (the recorded step's barrier)
    first_wait_s: float | None = None  # issue to completion

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"base_step_s": ("one", StepTime),
                                                         "slowed_step_s": ("one", StepTime)}


@dataclass
class Straggler(Block):
    """A straggler run's own block: which rank slept how long before each step, and what every rank measured."""

    slow_rank: int | None = None
    delay_s: float | None = None
    steps_each: int | None = None  # timed without the delay, then as many with it
    ranks: list[StragglerRank] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"ranks": ("list", StragglerRank)}


@dataclass
class LocalSgdStep(Block):
    """One step of one of a local-SGD run's two trainings: its mean loss and, per rank, the collectives issued
    inside the step (forward, backward, optimizer step and averaging; nothing the measurement adds) and how far
    the rank's parameters are from rank 0's after it."""

    step: int | None = None  # 0-based
    loss: float | None = None  # the mean over the ranks
    all_reduces: list[int] = field(default_factory=list)  # per rank
    all_reduce_bytes: list[int] = field(default_factory=list)  # per rank: the all-reduced buffers' logical size
    other_collectives: list[int] = field(default_factory=list)  # per rank: every other op (DDP's broadcasts)
    other_bytes: list[int] = field(default_factory=list)
    replica_diff: list[float] = field(default_factory=list)  # per rank: max |p - p on rank 0| over every element


@dataclass
class LocalSgdRun(Block):
    """One training of a local-SGD run: `ddp` (gradients all-reduced every step) or `local-sgd`."""

    name: str | None = None
    steps: list[LocalSgdStep] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"steps": ("list", LocalSgdStep)}


@dataclass
class LocalSgd(Block):
    """A local-SGD run's own block: torch's schedule and the two trainings, step by step."""

    period: int | None = None  # H: steps between averagings
    warmup: int | None = None  # W: synchronous steps first
    steps: int | None = None
    averaged_steps: list[int] = field(default_factory=list)  # torch's rule: W, W + H, ... below `steps` (0-based)
    param_bytes: int | None = None  # the parameters one replica holds (what an averaging all-reduces)
    runs: list[LocalSgdRun] = field(default_factory=list)  # ddp, then local-sgd

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"runs": ("list", LocalSgdRun)}

    def run(self, name: str) -> LocalSgdRun | None:
        return next((r for r in self.runs if r.name == name), None)


@dataclass
class CheckpointFile(Block):
    """What one rank wrote to a sharded checkpoint: its items' data, the file they went into, and its time."""

    rank: int | None = None
    items: int | None = None  # tensors (and pickled objects) this rank wrote
    data_bytes: int | None = None  # the items' own bytes: elements x element size
    file_bytes: int | None = None  # the rank's file on disk (each item serialized by torch.save)
    largest_item_bytes: int | None = None
    save_s: float | None = None  # this rank's dcp.save, wall clock


@dataclass
class StateDictMemory(Block):
    """Bytes one rank allocated above what it held, while it built a state dict (the peak of the call)."""

    rank: int | None = None
    sharded_bytes: int | None = None  # get_state_dict(model, optimizer): views of the shards held
    full_bytes: int | None = None  # full_state_dict=True, cpu_offload=True: gathered tensors (rank 0 keeps them)
    peak_kind: str | None = None


@dataclass
class StateComparison(Block):
    """Every parameter and optimizer entry after the resume against before the save, gathered whole."""

    entries: int | None = None
    equal: int | None = None
    max_abs_diff: float | None = None
    missing: list[str] = field(default_factory=list)  # entries on one side only
    differing: list[str] = field(default_factory=list)


@dataclass
class CheckpointResume(Block):
    """A checkpoint-resume run's own block: the sharded save on N ranks, the resume on M, and the losses."""

    folder: str | None = None
    temporary: bool | None = None  # a folder the run made and removed
    saved_world: int | None = None
    resumed_world: int | None = None
    global_batch: int | None = None
    save_after: int | None = None
    state_bytes: int | None = None  # params and optimizer state, counted from the tensors before the save
    state_tensors: int | None = None
    shard_row_bytes: int | None = None  # a dim-0 row of every tensor: what an uneven shard holds beyond 1/N
    files: list[CheckpointFile] = field(default_factory=list)
    metadata_bytes: int | None = None  # the .metadata file rank 0 writes: every item's chunks and offsets
    write_s: float | None = None  # the slowest rank's dcp.save
    full_file_bytes: int | None = None  # rank 0's torch.save of the gathered state dict
    full_write_s: float | None = None
    memory: list[StateDictMemory] = field(default_factory=list)
    load_s: float | None = None  # the slowest resumed rank's dcp.load and set_state_dict
    compared: StateComparison | None = None
    losses_before: list[float] = field(default_factory=list)  # the steps before the save
    losses_uninterrupted: list[float] = field(default_factory=list)  # the saving ranks, on past the save
    losses_resumed: list[float] = field(default_factory=list)  # the resumed ranks, the same steps

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"files": ("list", CheckpointFile),
                                                         "memory": ("list", StateDictMemory),
                                                         "compared": ("one", StateComparison)}

    @property
    def data_bytes(self) -> int:
        return sum(f.data_bytes or 0 for f in self.files)

    @property
    def file_bytes(self) -> int:
        """Bytes on disk: every rank's file and the metadata."""
        return sum(f.file_bytes or 0 for f in self.files) + (self.metadata_bytes or 0)


@dataclass
class DemoResult(Block):
    """A demo's result; a compare run's `runs` hold one training result each (no schema, demo or env)."""

    schema: str | None = None
    demo: str | None = None
    config: Config = field(default_factory=Config)
    env: Env | None = None
    memory: Memory | None = None
    throughput: Throughput | None = None
    comm: Comm | None = None
    timeline: Timeline | None = None
    loss: list[float | None] | None = None  # null for a step whose loss was not finite (see `diverged`)
    diverged: Diverged | None = None
    runs: dict[str, DemoResult] | None = None
    fault: FaultLab | None = None
    wall_s: float | None = None
    theory: JsonObject | None = None
    versus_theory: list[VersusRow] | None = None  # simulated runs
    moe: ExpertRun | None = None  # an MoE run
    straggler: Straggler | None = None  # demo straggler
    checkpoint_resume: CheckpointResume | None = None  # demo checkpoint-resume
    local_sgd: LocalSgd | None = None  # demo local-sgd
    checks: list[Check] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> DemoResult:
        result = super().from_json(upgraded(data) if isinstance(data, Mapping) else data)
        if result.schema not in (None, SCHEMA):
            raise ResultError(f"schema {result.schema!r} is not {SCHEMA}: this result comes from another version")
        return result

    @classmethod
    def _load(cls, key: str, value: Any) -> Any:
        if key == "checks":
            return [c for c in map(check_from_json, value) if c is not None] if isinstance(value, list) else []
        if key == "runs" and isinstance(value, Mapping):
            return {name: DemoResult.from_json(run) for name, run in value.items()
                    if isinstance(run, (Mapping, DemoResult))}
        if key == "config":
            return Config.from_json(value) if isinstance(value, (Mapping, Config)) else Config()
        return super()._load(key, value)

    @property
    def is_training(self) -> bool:
        return self.memory is not None

    @property
    def caveat(self) -> str | None:
        """What the figures of this run do not say: gloo's, a simulation's, a fault's on CPU, or the label
        of ranks that shared a GPU."""
        if self.demo == "fault":
            return FAULT_CAVEAT
        if self.config.simulated:
            return SIMULATED_CAVEAT
        if self.config.shared_gpu:
            return self.config.shared_gpu
        if self.config.on_gloo:
            return GLOO_CAVEAT
        return None

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


DemoResult.NESTED = {"env": ("one", Env), "memory": ("one", Memory), "throughput": ("one", Throughput),
                     "comm": ("one", Comm), "timeline": ("one", Timeline), "versus_theory": ("list", VersusRow),
                     "fault": ("one", FaultLab), "straggler": ("one", Straggler),
                     "checkpoint_resume": ("one", CheckpointResume), "diverged": ("one", Diverged),
                     "local_sgd": ("one", LocalSgd)}
DemoResult.NESTED["moe"] = ("one", ExpertRun)


def as_result(value: DemoResult | Mapping[str, Any]) -> DemoResult:
    """A result whichever form it arrives in: typed, or its JSON (the wire, the store, a saved file)."""
    return DemoResult.from_json(value)
