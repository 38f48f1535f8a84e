"""The types of a design interview: the job's setup, one step, the whole scenario; and how figures read.

A step carries the analytic model's function and arguments that compute its answer (`fn`, `args`),
so anyone can recompute it; nothing here types in a number.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, NotRequired, TypedDict

from ddpfsdp.demos.theory import plan3d, planning, steptime
from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS
from ddpfsdp.demos.theory.presets import Cluster, ModelPreset
from ddpfsdp.quiz.drill import OPTIMIZER_TEXT, PRECISION_TEXT, CalcCall

SCHEMA = "ddpfsdp.interview/1"

SKILLS: dict[str, str] = {
    "memory": "Memory",
    "strategy": "Strategy",
    "communication": "Communication",
    "time": "Step time",
    "activations": "Activations",
    "explanation": "Explanation",
}

STEP_KINDS: dict[str, tuple[str, str]] = {
    "model-state": ("memory", "memory"),
    "fit-strategy": ("strategy", "sharding"),
    "hsdp-group": ("strategy", "sharding"),
    "wire-bytes": ("communication", "comm"),
    "compute-time": ("time", "comm"),
    "comm-time": ("time", "comm"),
    "exposed-share": ("time", "comm"),
    "activations": ("activations", "precision"),
    "checkpoint": ("activations", "precision"),
    "explain-fit": ("explanation", "sharding"),
    "explain-faster": ("explanation", "comm"),
    "explain-scale": ("explanation", "collectives"),
    "pipeline-microbatches": ("strategy", "pipeline"),
    "pipeline-step-time": ("time", "pipeline"),
    "explain-pipeline": ("explanation", "pipeline"),
    "plan-3d": ("strategy", "at-scale"),
    "plan-memory": ("memory", "at-scale"),
    "explain-plan": ("explanation", "at-scale"),
}
"""Every kind of step: (its skill, the quiz topic its answers count toward). Each kind is one card."""

FUNCTIONS = {**QUIZ_FUNCTIONS, **steptime.QUIZ_FUNCTIONS, **planning.QUIZ_FUNCTIONS, **plan3d.QUIZ_FUNCTIONS}
"""Every function a step may name: the analytic model's quiz functions, step time, plans and 3-D plans."""


def compute(fn: str, args: dict[str, Any]) -> Any:
    return FUNCTIONS[fn](**args)


class ShapeArgs(TypedDict):
    """The transformer's shape, as the analytic model's functions name it."""

    layers: int
    d_model: int
    vocab: int
    seq_len: int


class Links(TypedDict):
    """The cluster's two links, as the step-time functions name them."""

    gpus_per_node: int
    intra_bytes_per_s: float
    intra_latency_s: float
    inter_bytes_per_s: float
    inter_latency_s: float


class CommArgs(ShapeArgs, Links):
    """What the communication functions (`steptime.step_comm_times`, `comm_time_s`) take."""

    params: int
    gpus: int
    strategy: str
    precision: str
    units: int
    group_size: NotRequired[int]  # HSDP: the ranks that shard among themselves


class TimeArgs(CommArgs):
    """What the step-time functions (`steptime.step_times`, `exposed_share`) take besides."""

    tokens: int
    peak_flops_per_s: float
    mfu: float


class SetupDocument(TypedDict):
    """A Setup as `ddpfsdp interview --json` prints it: its fields, and what follows from them."""

    model: str
    params: int
    layers: int
    d_model: int
    vocab: int
    cluster: str
    gpu: str
    gpu_mem_bytes: int
    peak_flops_per_s: float
    gpus_per_node: int
    nodes: int
    intra: str
    intra_bytes_per_s: float
    intra_latency_s: float
    inter: str
    inter_bytes_per_s: float
    inter_latency_s: float
    seq_len: int
    micro_batch: int
    precision: str
    optimizer: str
    mfu: float
    gpus: int
    units: int
    global_batch_tokens: int


@dataclass(frozen=True)
class Setup:
    """The job an interviewer sets up: a model, a cluster, a batch, a precision and an optimizer."""

    model: str
    params: int
    layers: int
    d_model: int
    vocab: int
    cluster: str
    gpu: str
    gpu_mem_bytes: int
    peak_flops_per_s: float
    gpus_per_node: int
    nodes: int
    intra: str
    intra_bytes_per_s: float
    intra_latency_s: float
    inter: str
    inter_bytes_per_s: float
    inter_latency_s: float
    seq_len: int
    micro_batch: int  # sequences per GPU per step: one micro-batch per optimizer step, no accumulation
    precision: str
    optimizer: str
    mfu: float

    @classmethod
    def of(cls, model: ModelPreset, cluster: Cluster, **rest: Any) -> Setup:
        gpu = cluster.gpu
        return cls(
            model=model.name, params=model.params, layers=model.layers, d_model=model.d_model, vocab=model.vocab,
            cluster=cluster.name, gpu=gpu.name, gpu_mem_bytes=gpu.memory_bytes, peak_flops_per_s=gpu.bf16_flops_per_s,
            gpus_per_node=cluster.gpus_per_node, intra=cluster.intra.name, intra_bytes_per_s=cluster.intra.bytes_per_s,
            intra_latency_s=cluster.intra.latency_s, inter=cluster.inter.name, inter_bytes_per_s=cluster.inter.bytes_per_s,
            inter_latency_s=cluster.inter.latency_s, **rest,
        )

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def units(self) -> int:
        """FSDP units when each block is wrapped: the embeddings, every block, the head."""
        return self.layers + 2

    @property
    def global_batch_tokens(self) -> int:
        return self.gpus * self.micro_batch * self.seq_len

    def changed(self, **fields: Any) -> Setup:
        return replace(self, **fields)

    def shape_args(self) -> ShapeArgs:
        return ShapeArgs(layers=self.layers, d_model=self.d_model, vocab=self.vocab, seq_len=self.seq_len)

    def links(self) -> Links:
        return Links(gpus_per_node=self.gpus_per_node, intra_bytes_per_s=self.intra_bytes_per_s,
                     intra_latency_s=self.intra_latency_s, inter_bytes_per_s=self.inter_bytes_per_s,
                     inter_latency_s=self.inter_latency_s)

    def comm_args(self, strategy: str, group_size: int | None = None) -> CommArgs:
        args = CommArgs(params=self.params, gpus=self.gpus, strategy=strategy, precision=self.precision,
                        units=self.units, **self.links(), **self.shape_args())
        if group_size is not None:
            args["group_size"] = group_size
        return args

    def time_args(self, strategy: str, group_size: int | None = None) -> TimeArgs:
        return TimeArgs(**self.comm_args(strategy, group_size), tokens=self.global_batch_tokens,
                        peak_flops_per_s=self.peak_flops_per_s, mfu=self.mfu)

    def to_dict(self) -> SetupDocument:
        return {**asdict(self), "gpus": self.gpus, "units": self.units, "global_batch_tokens": self.global_batch_tokens}

    def summary(self, width: int | None = None) -> str:
        """The job on one line, to keep in view while the steps scroll. Given a `width`, the items that fit it,
        each whole, then "…" where some are left out (the job in full is one key away): a cut inside an item
        once read "seq 8,192 ×…"."""
        size = f"{self.params / 1e9:g}B"
        model = self.model if f"-{size}-" in self.model else f"{self.model} ({size})"  # Llama-2-7B-like says 7B
        items = [model, f"{self.nodes}×{self.gpus_per_node} {self.gpu}", self.precision,
                 f"seq {self.seq_len:,} × {self.micro_batch}/GPU", self.optimizer, f"{self.mfu:.0%} MFU"]
        line = " · ".join(items)
        while width is not None and len(line) > width and len(items) > 1:
            items.pop()
            line = " · ".join(items) + " · …"
        return line

    def describe(self) -> str:
        """The job as an interviewer states it, in Markdown."""
        nodes = f"{self.nodes} node{'s' if self.nodes > 1 else ''} of {self.gpus_per_node} {self.gpu}"
        return (
            f"Train a **{self.model}** model ({self.params / 1e9:g}B parameters; {self.layers} layers, d = {self.d_model}, "
            f"vocabulary {self.vocab:,}) on **{nodes}** ({self.gpus} GPUs, {gb(self.gpu_mem_bytes)} each; {self.cluster}). "
            f"Inside a node: {self.intra}, {per_s(self.intra_bytes_per_s)} per GPU each way, "
            f"{self.intra_latency_s * 1e6:g} µs per ring step. Between nodes: {self.inter}, "
            f"{per_s(self.inter_bytes_per_s)} per GPU each way, {self.inter_latency_s * 1e6:g} µs per ring step. "
            f"Sequences of {self.seq_len:,} tokens, a micro-batch of {self.micro_batch} per GPU and one micro-batch per "
            f"optimizer step, so a global batch of {self.global_batch_tokens:,} tokens. "
            f"{PRECISION_TEXT[self.precision]}; {OPTIMIZER_TEXT[self.optimizer]}. The kernels reach "
            f"{self.mfu:.0%} MFU of the GPU's {self.peak_flops_per_s / 1e12:,.4g} TFLOP/s dense bf16 peak."
        )


@dataclass(frozen=True)
class Option:
    text: str
    value: Any  # what the analytic model's function returns when this option is right
    reason: str
    detail: str = ""  # what the option stands for where its text is short, e.g. the implementation graded


class OptionDocument(TypedDict):
    text: str
    value: Any
    reason: str
    detail: NotRequired[str]


class StepDocument(TypedDict):
    """A Step as `ddpfsdp interview --json` prints it; `calc` where a function computes the answer."""

    id: str
    kind: str
    skill: str
    topic: str
    title: str
    prompt: str
    unit: str | None  # the answer's base unit (None: self-graded)
    asked_in: str
    answer: float | None
    answer_text: str
    tolerance: float
    tolerance_kind: str
    tolerance_floor: NotRequired[float]  # "%" only
    working: str
    calc: NotRequired[CalcCall]
    options: NotRequired[list[OptionDocument]]
    talking_points: NotRequired[list[str]]
    change: NotRequired[str]


@dataclass(frozen=True)
class Step:
    """One question of the interview, with its answer, tolerance and working from the analytic model.

    unit: "GB" or "GiB" (answer in bytes), "s" (seconds), "%" (answer a share in 0..1, graded
    within `tolerance` of the answer, relative, but never tighter than `floor` points: a small key is not
    passed by 0), "count" (exact), "choice" (answer: the right option's number, from
    1), "explain" (self-graded against the talking points; no answer).
    """

    id: str
    kind: str
    skill: str
    topic: str
    title: str
    prompt: str
    unit: str
    answer: float | None
    tolerance: float = 0.0
    floor: float = 0.0  # "%" only: the least absolute error allowed, in shares (0.01 = 1 point)
    fn: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    working: str = ""
    options: tuple[Option, ...] = ()
    talking_points: tuple[str, ...] = ()
    change: str | None = None

    @property
    def numeric(self) -> bool:
        return self.unit in ("GB", "GiB", "s", "%", "count")

    @property
    def answer_text(self) -> str:
        if self.unit == "choice":
            return f"{int(self.answer)}. {self.options[int(self.answer) - 1].text}"
        if self.unit == "explain":
            return "self-graded"
        return show(self.answer, self.unit)

    @property
    def tolerance_text(self) -> str:
        if self.unit == "%":
            return f"within {self.tolerance:.0%} of it, or {self.floor * 100:g} point{'s' if self.floor != 0.01 else ''}"
        if self.unit in ("count", "choice"):
            return "exact"
        if self.unit == "explain":
            return "by you"
        return f"within {self.tolerance:.0%}"

    def to_dict(self) -> StepDocument:
        data: StepDocument = {
            "id": self.id, "kind": self.kind, "skill": self.skill, "topic": self.topic, "title": self.title,
            "prompt": self.prompt, "unit": BASE_UNITS[self.unit], "asked_in": self.unit, "answer": self.answer,
            "answer_text": self.answer_text, "tolerance": self.tolerance, "tolerance_kind": TOLERANCE_KINDS[self.unit],
            **({"tolerance_floor": self.floor} if self.unit == "%" else {}),
            "working": self.working,
        }
        if self.fn is not None:
            data["calc"] = {"fn": self.fn, "args": dict(self.args)}
        if self.options:
            data["options"] = [{"text": o.text, "value": o.value, "reason": o.reason, **({"detail": o.detail} if o.detail else {})}
                               for o in self.options]
        if self.talking_points:
            data["talking_points"] = list(self.talking_points)
        if self.change:
            data["change"] = self.change
        return data


def new_step(kind: str, **fields: Any) -> Step:
    """A step of a known kind, with its skill and topic from `STEP_KINDS`; its id is set when numbered."""
    skill, topic = STEP_KINDS[kind]
    return Step(id="", kind=kind, skill=skill, topic=topic, **fields)


BASE_UNITS = {"GB": "bytes", "GiB": "bytes", "s": "seconds", "%": "share", "count": "count", "choice": "option",
              "explain": None}
TOLERANCE_KINDS = {"GB": "relative", "GiB": "relative", "s": "relative", "%": "relative", "count": "exact",
                   "choice": "exact", "explain": "self"}


class ScenarioDocument(TypedDict):
    """A Scenario as `ddpfsdp interview --json` prints it (`schema` ddpfsdp.interview/1)."""

    schema: str
    id: str
    seed: int
    family: str
    title: str
    setup: SetupDocument
    plan: str
    steps: list[StepDocument]


@dataclass(frozen=True)
class Scenario:
    seed: int
    family: str
    title: str
    setup: Setup
    plan: str  # the strategy the interview goes on with: the lowest that fits
    steps: tuple[Step, ...]

    @property
    def id(self) -> str:
        return f"{self.family}-{self.seed}"

    def to_dict(self) -> ScenarioDocument:
        return {
            "schema": SCHEMA, "id": self.id, "seed": self.seed, "family": self.family, "title": self.title,
            "setup": self.setup.to_dict(), "plan": self.plan, "steps": [step.to_dict() for step in self.steps],
        }


# --- how figures read ----------------------------------------------------------------------------


def _figure(number: float) -> str:
    return f"{number:,.4g}" if abs(number) < 1e4 else f"{number:,.0f}"


def show(value: float, unit: str) -> str:
    """A value in base units as the step asks for it: 33.6 GB, 1.23 s, 45.6 ms, 12.3%, 16."""
    if unit == "GB":
        return f"{_figure(value / 1e9)} GB"
    if unit == "GiB":
        return f"{_figure(value / 2**30)} GiB"
    if unit == "s":
        return f"{_figure(value)} s" if abs(value) >= 1 else f"{_figure(value * 1e3)} ms"
    if unit == "%":
        return f"{value * 100:.1f}%"
    return f"{value:,.0f}"


def gb(value: float) -> str:
    return show(value, "GB")


def gib(value: float) -> str:
    return show(value, "GiB")


def secs(value: float) -> str:
    return show(value, "s")


def pct(value: float) -> str:
    return show(value, "%")


def per_s(value: float) -> str:
    return f"{value / 1e9:g} GB/s"
