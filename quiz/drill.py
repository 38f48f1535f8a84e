"""Sizing drills: napkin-math problems drawn from named presets and answered by the analytic model.

Each problem picks a real configuration (a model size, a GPU, a cluster, a precision and an
optimizer, all from the named presets below), asks for one figure, and computes the answer with
the analytic model's quiz functions (`QUIZ_FUNCTIONS`): nothing here types in a number. A
problem carries the function's name and arguments, so anyone can recompute it, and the working:
the formula with this problem's numbers in it, shown when an answer misses.

Problems come from a seeded generator: the same seed gives the same problems, and no prompt is
asked twice in one run. Every kind of problem belongs to a quiz topic, so drill results count
toward that topic's mastery.

No torch or textual here: the CLI, plain mode and the app import it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.buckets import DDP_BUCKET_CAP_MB, ddp_bucket_bytes
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels
from ddpfsdp.demos.theory import presets
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import OPTIMIZER_STATES, PRECISIONS, residual_bytes
from ddpfsdp.demos.theory.quiz_answers import QUIZ_FUNCTIONS, q_min_gpus, q_min_zero_stage, q_sampler_count
from ddpfsdp.demos.theory.sampler import sampler_indices
from ddpfsdp.demos.theory.sharding import (
    STRATEGIES,
    STRATEGY_SHARDS,
    STRATEGY_TITLES,
    ZERO_STAGES,
    resolve_group_size,
    shard_ways,
)
from ddpfsdp.demos.theory.state import bytes_per_param, model_state
from ddpfsdp.quiz import grading
from ddpfsdp.quiz.drill_context import context_parallel_problem
from ddpfsdp.quiz.drill_experts import expert_parallel_problem
from ddpfsdp.quiz.drill_pipeline import pipeline_problem
from ddpfsdp.quiz.drill_scale import checkpoint_problem, hierarchical_problem, straggler_problem
from ddpfsdp.quiz.grading import Grade, QuantityError
from ddpfsdp.quiz.loader import BYTE_UNITS, UNITS

# --- named presets -------------------------------------------------------------------------------


# Models and GPUs are the interview's presets too; they live with the analytic model.
MODELS = presets.MODELS

# Memory as sold, in decimal GB; the drill budgets model state against it.
GPUS: dict[str, int] = {name: gpu.memory_bytes for name, gpu in presets.GPUS.items()}

GPUS_PER_NODE = 8

# name -> GPUs; every cluster is made of nodes of 8, and HSDP shards within a node.
CLUSTERS: dict[str, int] = {
    "a node of 8": 8,
    "2 nodes of 8": 16,
    "4 nodes of 8": 32,
    "16 nodes of 8": 128,
    "64 nodes of 8": 512,
}

PRECISION_TEXT: dict[str, str] = {
    "fp32": "fp32 throughout",
    "bf16-mixed": "bf16-mixed (fp32 weights held, bf16 compute)",
    "bf16-master": "bf16 with fp32 master weights (the ZeRO paper's recipe: bf16 params and grads held, "
    "fp32 master copy and moments in the optimizer)",
    "bf16": "pure bf16 (params, grads and optimizer state all bf16)",
}
"""The recipe; what each strategy's implementation keeps under it is named beside the strategy."""

OPTIMIZER_TEXT: dict[str, str] = {
    "adamw": "AdamW",
    "adam": "Adam",
    "sgd-momentum": "SGD with momentum",
    "sgd": "plain SGD (no state)",
}

STRATEGY_TEXT: dict[str, str] = {
    "ddp": "DDP",
    "zro": "zro",  # the implementation that follows in brackets names ZeroRedundancyOptimizer
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "grad-op": "FSDP grad-op (SHARD_GRAD_OP)",
    "zero3": "ZeRO-3 / FSDP full sharding",
    "hsdp": f"HSDP (sharded within each node of {GPUS_PER_NODE}, replicated across nodes)",
}


def strategy_text(strategy: str, precision: str) -> str:
    """The strategy in bold and the implementation whose numbers the problem grades, for this precision."""
    return f"**{STRATEGY_TEXT[strategy]}** (as {implementation(strategy, precision).name})"


# --- problems --------------------------------------------------------------------------------------


class CalcCall(TypedDict):
    """The analytic model's function that computes an answer, and its arguments: anyone can recompute it."""

    fn: str
    args: dict[str, Any]  # the function's keyword arguments, its own names


class ProblemDocument(TypedDict):
    """A drill problem as `ddpfsdp drill --json` prints it."""

    id: str
    kind: str
    topic: str
    prompt: str
    answer: float
    unit: str
    asked_in: str
    answer_text: str
    tolerance: float
    calc: CalcCall
    working: str


@dataclass(frozen=True)
class Problem:
    id: str
    kind: str
    topic: str
    prompt: str
    answer: float  # in base units: bytes, or a count
    unit: str  # the unit it is asked in: a byte unit such as "GB", or "" for a count
    tolerance: float  # relative; 0 means the exact count
    fn: str  # a key of QUIZ_FUNCTIONS
    args: dict[str, Any]
    working: str  # the formula with this problem's numbers, shown when an answer misses

    @property
    def base_unit(self) -> str:
        return "bytes" if self.unit in BYTE_UNITS else "count"

    @property
    def answer_text(self) -> str:
        return show(self.answer, self.unit)

    @property
    def tolerance_text(self) -> str:
        return "exact" if self.tolerance == 0 else f"within {self.tolerance:.0%}"

    @property
    def answers(self) -> tuple[int, int, str] | None:
        """The answers that answer the question at all (lowest, highest, in words), where they are few: a ZeRO
        stage, an index of the dataset. One outside them is refused, not graded."""
        return answer_range(self.fn, self.args)

    @property
    def hint(self) -> str:
        if self.answers:
            return f"type {self.answers[2]}"
        if self.unit in BYTE_UNITS:
            return f"type a size such as 12.5 {self.unit}, 14.9GiB or 1.5e10 (bytes); a bare small number is read in {self.unit}"
        if self.unit == "x":
            return "type a fraction or a ratio, such as 0.25 or 1.5"
        if self.tolerance:  # a figure graded within a tolerance (milliseconds, minutes) need not be whole
            return "type a number, such as 12 or 12.5"
        return "type a whole number, such as 12"

    def to_dict(self) -> ProblemDocument:
        return {
            "id": self.id,
            "kind": self.kind,
            "topic": self.topic,
            "prompt": self.prompt,
            "answer": self.answer,
            "unit": self.base_unit,
            "asked_in": self.unit or "count",
            "answer_text": self.answer_text,
            "tolerance": self.tolerance,
            "calc": {"fn": self.fn, "args": dict(self.args)},
            "working": self.working,
        }


def answer_range(fn: str, args: Mapping[str, Any]) -> tuple[int, int, str] | None:
    """(lowest, highest, in words) of the answers a problem of `fn` can have, where they are few; outside
    them an answer answers no question of the kind (a ZeRO stage of 5, an index of -1)."""
    if fn == "min_zero_stage":
        return 0, len(ZERO_STAGES) - 1, "a ZeRO stage: 0 (plain DDP), 1, 2 or 3"
    if fn == "sampler_index":
        return 0, args["dataset_len"] - 1, f"an index of the dataset, from 0 to {args['dataset_len'] - 1}"
    return None


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    topic: str
    make: Callable[[random.Random], tuple[str, str, dict[str, Any], str, float, Callable[[float], str]]]


def _figure(number: float) -> str:
    # Four significant figures, without switching to e-notation for large figures.
    return f"{number:,.4g}" if abs(number) < 1e4 else f"{number:,.0f}"


def show(value: float, unit: str) -> str:
    if unit in BYTE_UNITS and unit != "bytes":
        return f"{_figure(value / UNITS[unit])} {unit}"
    return f"{value:,.0f}" if float(value).is_integer() else _figure(value)


def _gb(value: float) -> str:
    return f"{_figure(value / 1e9)} GB"


def _mib(value: float) -> str:
    return f"{_figure(value / 2**20)} MiB"


def _pick(rng: random.Random, options: Sequence[Any], weights: Sequence[float] | None = None) -> Any:
    return rng.choices(list(options), weights=weights)[0]


def _training_setup(rng: random.Random) -> tuple[str, str]:
    precision = _pick(rng, tuple(PRECISIONS), (1, 3, 2, 1))
    optimizer = _pick(rng, tuple(OPTIMIZER_STATES), (4, 2, 1, 1))
    return precision, optimizer


def _state_lines(params: int, gpus: int, strategy: str, precision: str, optimizer: str) -> str:
    per = bytes_per_param(strategy, precision, optimizer)
    group = resolve_group_size(strategy, gpus)
    state = model_state(params, gpus, strategy, precision, optimizer, group)
    splits = {key: shard_ways(strategy, key, gpus, group) for key in ("params", "grads", "optimizer")}
    lines = [
        f"{name} {per[key]} B × {params / 1e9:g}e9 / {splits[key]} = {_gb(state[f'{key}_bytes'])}"
        for name, key in (("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"))
    ]
    return "; ".join(lines) + f"; total {_gb(state['model_state_bytes'])}"


# --- the kinds -------------------------------------------------------------------------------------


def _model_state(rng: random.Random):
    model = _pick(rng, list(MODELS.values()))
    cluster = _pick(rng, tuple(CLUSTERS))
    gpus = CLUSTERS[cluster]
    strategy = _pick(rng, STRATEGIES if gpus > GPUS_PER_NODE else STRATEGIES[:-1])
    precision, optimizer = _training_setup(rng)
    args = {"params": model.params, "gpus": gpus, "strategy": strategy, "precision": precision, "optimizer": optimizer}
    prompt = (
        f"A **{model.name}** model ({model.params / 1e9:g}B parameters) trains with {strategy_text(strategy, precision)} "
        f"on {cluster} ({gpus} GPUs), in {PRECISION_TEXT[precision]}, with {OPTIMIZER_TEXT[optimizer]}.\n\n"
        "How much **model state** does each GPU hold between steps (parameters + gradients + optimizer "
        "state; no activations, buffers or working set)? Answer in GB (1e9 bytes)."
    )
    per = bytes_per_param(strategy, precision, optimizer)

    def working(answer: float) -> str:
        return (
            f"Bytes per parameter this implementation holds under {precision} with {optimizer}: params "
            f"{per['params']} + grads {per['grads']} + optimizer {per['optimizer']} = {per['total']}. {STRATEGY_TITLES[strategy]} "
            f"({STRATEGY_SHARDS[strategy]}) divides each by how many ways it is sharded: "
            + _state_lines(model.params, gpus, strategy, precision, optimizer)
            + "."
        )

    return prompt, "model_state_bytes", args, "GB", 0.05, working


def _fit_stage(rng: random.Random):
    while True:
        model = _pick(rng, list(MODELS.values()))
        gpu = _pick(rng, tuple(GPUS))
        cluster = _pick(rng, tuple(CLUSTERS)[:3])
        gpus = CLUSTERS[cluster]
        precision, optimizer = _training_setup(rng)
        args = {"params": model.params, "gpus": gpus, "gpu_mem": GPUS[gpu], "precision": precision, "optimizer": optimizer}
        try:
            stage = q_min_zero_stage(**args)
        except ValueError:
            continue  # nothing fits this one; draw a configuration where some stage does
        # Plain DDP fitting is worth asking now and then, not most of the time.
        if stage > 0 or rng.random() < 0.25:
            break
    # One stage a line, each with the implementation whose bytes are graded, so they read as choices.
    stages = "\n".join(f"- **{stage}**: {implementation(strategy, precision).name}"
                       for stage, strategy in enumerate(ZERO_STAGES))
    prompt = (
        f"You must train a **{model.name}** model ({model.params / 1e9:g}B parameters) on {cluster} of "
        f"**{gpu}** ({gpus} GPUs, {_gb(GPUS[gpu])} each), in {PRECISION_TEXT[precision]}, with "
        f"{OPTIMIZER_TEXT[optimizer]}.\n\n"
        "What is the **lowest ZeRO stage** (0 for plain DDP) whose per-GPU model state (params + grads + optimizer "
        f"state) fits in the GPU's memory? Ignore activations and the working set. Each stage as graded:\n\n{stages}"
    )

    def working(answer: float) -> str:
        rows = []
        for stage, strategy in enumerate(ZERO_STAGES):
            held = model_state(model.params, gpus, strategy, precision, optimizer)["model_state_bytes"]
            verdict = "fits" if held <= GPUS[gpu] else "does not fit"
            per = bytes_per_param(strategy, precision, optimizer)
            rows.append(f"stage {stage} ({STRATEGY_TITLES[strategy]}, {per['params']} + {per['grads']} + "
                        f"{per['optimizer']} bytes per parameter): {_gb(held)} {verdict}")
        return (
            f"Each stage shards one more kind of model state over {gpus} GPUs. Against {_gb(GPUS[gpu])}: "
            + "; ".join(rows)
            + f". The lowest that fits is {answer:.0f}."
        )

    return prompt, "min_zero_stage", args, "", 0.0, working


def _min_gpus(rng: random.Random):
    while True:
        model = _pick(rng, list(MODELS.values()))
        gpu = _pick(rng, tuple(GPUS))
        precision, optimizer = _training_setup(rng)
        share = _pick(rng, (0.5, 0.6, 0.7, 0.8))
        budget = round(GPUS[gpu] * share)
        args = {"params": model.params, "gpu_mem": budget, "strategy": "zero3", "precision": precision, "optimizer": optimizer}
        # One GPU being enough is worth asking now and then, not most of the time.
        if q_min_gpus(**args) > 1 or rng.random() < 0.25:
            break
    prompt = (
        f"A **{model.name}** model ({model.params / 1e9:g}B parameters) trains with {strategy_text('zero3', precision)} "
        f"on **{gpu}** GPUs, in {PRECISION_TEXT[precision]}, with {OPTIMIZER_TEXT[optimizer]}. "
        f"You keep {1 - share:.0%} of each GPU for activations and the working set, so model state may use "
        f"{share:.0%} × {_gb(GPUS[gpu])} = {_gb(budget)} per GPU.\n\n"
        "What is the **fewest GPUs** on which it fits?"
    )
    per = bytes_per_param("zero3", precision, optimizer)

    def working(answer: float) -> str:
        total = per["total"] * model.params
        return (
            f"ZeRO-3 shards everything: per GPU = {per['total']} B × {model.params / 1e9:g}e9 / N = {_gb(total)} / N "
            f"≤ {_gb(budget)}, so N ≥ {_gb(total)} / {_gb(budget)} = {total / budget:.3f}, "
            f"and the fewest whole GPUs is {answer:.0f}."
        )

    return prompt, "min_gpus", args, "", 0.0, working


_COLLECTIVES_TEXT: dict[str, str] = {
    "ddp": "It all-reduces the gradients",
    "zro": "DDP all-reduces the gradients, then each rank broadcasts the parameters it updated",
    "zero2": "It reduce-scatters the gradients and, after the step, all-gathers the updated parameters",
    "grad-op": "It all-gathers each unit's parameters once, in forward, and reduce-scatters the gradients",
    "zero3": "It all-gathers the parameters in forward and again in backward, and reduce-scatters the gradients",
    "hsdp": f"It does ZeRO-3's collectives inside each node of {GPUS_PER_NODE}, then all-reduces each rank's "
    f"1/{GPUS_PER_NODE} gradient shard across the nodes",
}


def _wire_bytes(rng: random.Random):
    model = _pick(rng, list(MODELS.values()))
    cluster = _pick(rng, tuple(CLUSTERS))
    gpus = CLUSTERS[cluster]
    choices = ("ddp", "zro", "zero2", "grad-op", "zero3", "hsdp")
    strategy = _pick(rng, choices if gpus > GPUS_PER_NODE else choices[:-1])
    precision = _pick(rng, ("fp32", "bf16-mixed", "bf16"), (1, 3, 1))
    args = {"params": model.params, "gpus": gpus, "strategy": strategy, "precision": precision}
    prompt = (
        f"A **{model.name}** model ({model.params / 1e9:g}B parameters) trains with {strategy_text(strategy, precision)} "
        f"on {cluster} ({gpus} GPUs), in {PRECISION_TEXT[precision]}.\n\n"
        "With ring collectives (all-reduce sends 2(n-1)/n of its buffer per rank; all-gather, reduce-scatter "
        "and a broadcast from each rank in turn (n-1)/n), how many bytes does **each rank send per training "
        f"step**? {_COLLECTIVES_TEXT[strategy]}, in the element sizes that implementation sends. Answer in GB."
    )
    group = resolve_group_size(strategy, gpus)

    def working(answer: float) -> str:
        ops = step_comm(strategy, model.params, gpus, precision, group)
        held = implementation(strategy, precision)
        sizes = ("all_gather", "broadcast")
        parts = [f"{held.name} sends parameters in {held.gather_bytes}-byte and gradients in "
                 f"{held.reduce_bytes}-byte elements"]
        for op, figures in ops.items():
            ranks = gpus // group if (strategy == "hsdp" and op == "all_reduce") else (group if strategy == "hsdp" else gpus)
            factor = "2" if op == "all_reduce" else "1"
            factor_text = f"{factor}×({ranks}-1)/{ranks}" if factor == "2" else f"({ranks}-1)/{ranks}"
            what = "parameters" if op in sizes else "gradients"
            parts.append(
                f"{op.replace('_', '-')} of {what}: {factor_text} × {_gb(figures['bytes'])} = {_gb(figures['wire_bytes_per_rank'])}"
            )
        return "; ".join(parts) + f"; sum {_gb(answer)} per rank per step."

    return prompt, "step_wire_bytes", args, "GB", 0.05, working


def _ddp_buckets(rng: random.Random):
    model = _pick(rng, [m for m in MODELS.values() if m.params <= 13 * 10**9])
    grad_bytes = _pick(rng, (4, 2), (3, 1))
    cap = _pick(rng, (None, 10, 25, 50, 100, 200), (3, 1, 1, 1, 1, 1))
    args = {
        "layers": model.layers, "d_model": model.d_model, "vocab": model.vocab, "seq_len": model.seq_len,
        "grad_bytes": grad_bytes, "bucket_cap_mb": cap,
    }
    d = model.d_model
    cap_text = "left at its default (25 MiB)" if cap is None else f"set to {cap}"
    prompt = (
        f"DDP wraps a GPT-style decoder shaped like **{model.name}**: {model.layers} pre-norm blocks of width "
        f"d = {d}, vocabulary {model.vocab}, context {model.seq_len} ({model.shape_params / 1e9:.2f}B parameters in "
        "this shape). Each block has LayerNorm, qkv (d×3d + bias), output projection (d×d + bias), LayerNorm, "
        "MLP up (d×4d + bias) and down (4d×d + bias); then token and position embeddings, a final LayerNorm and "
        "an untied LM head (d×vocab). Gradients are "
        f"{'fp32' if grad_bytes == 4 else 'bf16'} ({grad_bytes} bytes) and `bucket_cap_mb` is {cap_text}.\n\n"
        "Once DDP has rebuilt its buckets (the first iteration all-reduces one bucket of everything; the second "
        "rebuilds them in the order gradients arrived), **how many gradient buckets** does it all-reduce per "
        "step? Assume gradients become ready in reverse registration order (head first, embeddings last)."
    )

    def working(answer: float) -> str:
        numels = gpt_param_numels(model.layers, d, model.vocab, model.seq_len)
        sizes = ddp_bucket_bytes([n * grad_bytes for n in reversed(numels)], cap)
        first = "1 MiB (bucket_cap_mb left at its default)" if cap is None else f"{cap} MiB (an explicit bucket_cap_mb applies to the first bucket too)"
        cap_bytes = (cap or DDP_BUCKET_CAP_MB) * 2**20
        total = sum(numels) * grad_bytes
        return (
            f"A bucket closes as soon as it holds at least its cap, and a tensor is never split: first bucket "
            f"{first}, then {cap or DDP_BUCKET_CAP_MB} MiB. In backward order: head d×vocab = {_mib(d * model.vocab * grad_bytes)}, "
            f"then per block MLP down 4d² = {_mib(4 * d * d * grad_bytes)}, up 4d² = {_mib(4 * d * d * grad_bytes)}, "
            f"projection d² = {_mib(d * d * grad_bytes)}, qkv 3d² = {_mib(3 * d * d * grad_bytes)} (plus small biases "
            f"and LayerNorms), embeddings last. Bucket sizes in MiB: {_ends(sizes)}: {len(sizes)} buckets. "
            f"(Total/cap = {_mib(total)} / {cap_bytes / 2**20:g} MiB = {total / cap_bytes:,.0f} would be wrong: "
            "tensors larger than the cap each take a bucket.)"
        )

    return prompt, "ddp_buckets", args, "", 0.05, working


def _ends(sizes: Sequence[int], shown: int = 6) -> str:
    texts = [f"{size / 2**20:.4g}" for size in sizes]
    if len(texts) <= 2 * shown:
        return ", ".join(texts)
    return ", ".join(texts[:shown]) + ", …, " + ", ".join(texts[-3:])


def _sampler_index(rng: random.Random):
    replicas = _pick(rng, (2, 3, 4, 6, 8))
    length = rng.randint(replicas + 1, 12 * replicas + 5)
    rank = rng.randrange(replicas)
    drop_last = rng.random() < 0.4
    per_rank = q_sampler_count(dataset_len=length, num_replicas=replicas, drop_last=drop_last)
    # The last draw is where padding and trimming show; ask it half the time.
    position = per_rank if rng.random() < 0.5 else rng.randint(1, per_rank)
    args = {"dataset_len": length, "num_replicas": replicas, "rank": rank, "position": position, "drop_last": drop_last}
    prompt = (
        f"`DistributedSampler(dataset, num_replicas={replicas}, rank={rank}, shuffle=False, "
        f"drop_last={drop_last})` over a dataset of **{length}** samples (indices 0–{length - 1}).\n\n"
        f"What is the **{_ordinal(position)} index** rank {rank} receives in an epoch?"
    )

    def working(answer: float) -> str:
        indices = sampler_indices(length, replicas, rank, drop_last)
        total = per_rank * replicas
        if drop_last and length % replicas:
            sizing = (
                f"drop_last: num_samples = ceil(({length} - {replicas}) / {replicas}) = {per_rank}; "
                f"total_size = {total}, so the list is cut to indices 0–{total - 1}"
            )
        else:
            sizing = f"num_samples = ceil({length} / {replicas}) = {per_rank}; total_size = {total}"
            padding = total - length
            if padding > 0:
                # Padding repeats the list from its start; when it is longer than the list, more than once.
                repeated = (list(range(length)) * math.ceil(padding / length))[:padding]
                shown = ", ".join(map(str, repeated[:8])) + ("…" if padding > 8 else "")
                sizing += f", so the list is padded with {padding} {'index' if padding == 1 else 'indices'} repeated from its start ({shown})"
        return f"{sizing}. Rank {rank} takes every {_ordinal(replicas)} index from position {rank}: {indices}; the {_ordinal(position)} is {answer:.0f}."

    return prompt, "sampler_index", args, "", 0.0, working


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


ACTIVATION_RUNNERS: dict[str, str] = {
    "ddp": "torch.autocast casts each op's inputs, so the residual stream stays fp32",
    "zero3": "MixedPrecisionPolicy(param_dtype=bf16) casts the weights, so the residual stream is bf16",
}
"""Under bf16-mixed, how the strategy applies the precision decides the residual stream's bytes."""


def _activations(rng: random.Random):
    model = _pick(rng, [m for m in MODELS.values() if m.params <= 13 * 10**9])
    precision = _pick(rng, ("fp32", "bf16-mixed", "bf16"), (1, 3, 1))
    batch = _pick(rng, (1, 2, 4, 8))
    seq = _pick(rng, (1024, 2048, model.seq_len))
    checkpoint = rng.random() < 0.5
    strategy = _pick(rng, tuple(ACTIVATION_RUNNERS)) if precision == "bf16-mixed" else "ddp"
    args = {
        "layers": model.layers, "d_model": model.d_model, "vocab": model.vocab, "seq_len": seq,
        "batch_size": batch, "precision": precision, "checkpoint_activations": checkpoint,
        **({"strategy": strategy} if precision == "bf16-mixed" else {}),
    }
    recipe = PRECISIONS[precision]
    cast = implementation(strategy, precision).cast
    r = residual_bytes(recipe, cast)
    loss_bytes = 2 if precision == "bf16" else 4
    runner = (f", run as {implementation(strategy, precision).name} ({ACTIVATION_RUNNERS[strategy]})"
              if precision == "bf16-mixed" else "")
    prompt = (
        f"A GPT-style decoder shaped like **{model.name}** ({model.layers} layers, d = {model.d_model}, vocabulary "
        f"{model.vocab}) runs a micro-batch of b = {batch} sequence{'s' if batch > 1 else ''} of s = {seq} tokens in {PRECISION_TEXT[precision]}{runner}, "
        f"**{'with' if checkpoint else 'without'} activation checkpointing** of every block.\n\n"
        f"Use the analytic model: a block saves b·s·d·(2r + 14c) bytes (r = {r}: residual-stream bytes, "
        f"c = {recipe.compute_bytes}: compute bytes; fused attention, no s×s scores); with checkpointing a block keeps only "
        "its input (b·s·d·r) and backward recomputes one block at a time. The head keeps b·s·d·(r + c) and the loss's "
        f"log-softmax b·s·vocab·{loss_bytes}; at the peak, early in backward, add the log-softmax's gradient "
        "(or, with checkpointing, the recomputed block if larger).\n\n"
        "What is the **peak activation memory** per GPU? Answer in GiB."
    )

    def working(answer: float) -> str:
        parts = transformer_activation_bytes(
            layers=model.layers, d_model=model.d_model, tokens=seq, batch_size=batch, head_outputs=model.vocab,
            head_tokens=seq, precision=precision, checkpoint_activations=checkpoint, cast=cast,
        )
        elements = batch * seq * model.d_model
        log_softmax = batch * seq * model.vocab * loss_bytes
        gib = lambda value: f"{value / 2**30:,.4g} GiB"  # noqa: E731
        block = f"block = {batch}·{seq}·{model.d_model}·(2·{r} + 14·{recipe.compute_bytes}) = {gib(parts['block_bytes'])}"
        head = f"head = {gib(elements * (r + recipe.compute_bytes))} + log-softmax {gib(log_softmax)}"
        if checkpoint:
            body = f"{model.layers} block inputs × {gib(elements * r)} = {gib(model.layers * elements * r)}"
            extra = f"max(log-softmax gradient {gib(log_softmax)}, recomputed block {gib(parts['block_bytes'])})"
        else:
            body = f"{model.layers} blocks × {gib(parts['block_bytes'])} = {gib(model.layers * parts['block_bytes'])}"
            extra = f"log-softmax gradient {gib(log_softmax)}"
        return f"{block}; saved = {body} + {head} = {gib(parts['saved_bytes'])}; peak = saved + {extra} = {gib(answer)}."

    return prompt, "transformer_activation_bytes", args, "GiB", 0.10, working


def _tp_comm(rng: random.Random):
    model = _pick(rng, list(MODELS.values()))
    cluster = _pick(rng, tuple(CLUSTERS))
    gpus = CLUSTERS[cluster]
    tp = _pick(rng, (2, 4, 8), (1, 2, 3))
    precision = _pick(rng, ("fp32", "bf16-mixed", "bf16"), (1, 3, 1))
    batch = _pick(rng, (1, 2, 4))
    seq = _pick(rng, (2048, model.seq_len))
    sequence_parallel = rng.random() < 0.4
    args = {"layers": model.layers, "d_model": model.d_model, "seq_len": seq, "batch_size": batch, "tp": tp,
            "precision": precision, "sequence_parallel": sequence_parallel}
    compute_bytes = PRECISIONS[precision].compute_bytes
    plan = ("with **sequence parallelism**: each of those all-reduces is replaced by a reduce-scatter and an "
            "all-gather of the same b·s·d buffer, so a block has 4 of each per step"
            if sequence_parallel else "without sequence parallelism")
    prompt = (
        f"A GPT-style decoder shaped like **{model.name}** ({model.layers} blocks, d = {model.d_model}) trains on "
        f"{cluster} ({gpus} GPUs) as a 2-D mesh: tensor parallelism over **tp = {tp}** GPUs inside a node, sharded data "
        f"parallelism over dp = {gpus // tp}. Each TP group runs a micro-batch of b = {batch} sequence{'s' if batch > 1 else ''} of "
        f"s = {seq} tokens in {PRECISION_TEXT[precision]} (activations of {compute_bytes} bytes).\n\n"
        "Megatron-LM's plan splits qkv and the MLP's up-projection column-wise and the attention output and "
        "down-projection row-wise: per block and step, 2 all-reduces of the b·s·d activations in forward and 2 in "
        f"backward, {plan}. With ring collectives (all-reduce sends 2(n-1)/n of its buffer per rank, all-gather and "
        "reduce-scatter (n-1)/n), how many bytes does **each rank send per step on its TP group** for the blocks "
        "alone (leave out the embedding, the head and the loss)? Answer in GB."
    )

    def working(answer: float) -> str:
        buffer = batch * seq * model.d_model * compute_bytes
        per_collective = f"b·s·d·c = {batch}·{seq}·{model.d_model}·{compute_bytes} = {_gb(buffer)}"
        if sequence_parallel:
            sent = (f"{4 * model.layers} reduce-scatters + {4 * model.layers} all-gathers × ({tp}-1)/{tp} × "
                    f"{_gb(buffer)} = {_gb(answer)}: the same as {4 * model.layers} all-reduces, since a ring "
                    "all-reduce is a reduce-scatter then an all-gather")
        else:
            sent = f"4 × {model.layers} blocks = {4 * model.layers} all-reduces × 2×({tp}-1)/{tp} × {_gb(buffer)} = {_gb(answer)}"
        return f"Each collective moves {per_collective}; {sent} per rank per step."

    return prompt, "tp_block_wire_bytes", args, "GB", 0.05, working


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("model-state", "Per-GPU model state", "memory", _model_state),
        Kind("fit-stage", "Lowest ZeRO stage that fits", "sharding", _fit_stage),
        Kind("min-gpus", "Fewest GPUs for ZeRO-3", "sharding", _min_gpus),
        Kind("wire-bytes", "Wire bytes per rank per step", "comm", _wire_bytes),
        Kind("ddp-buckets", "DDP gradient buckets", "ddp", _ddp_buckets),
        Kind("sampler-index", "DistributedSampler indices", "sampler", _sampler_index),
        Kind("activations", "Activation memory", "precision", _activations),
        Kind("tp-comm", "TP bytes per rank per step", "two-d", _tp_comm),
        Kind("pipeline", "Pipeline bubble, micro-batches, in flight", "pipeline", pipeline_problem),
        Kind("context-parallel", "Ring attention: bytes, balance, overlap, memory", "context-parallel",
             context_parallel_problem),
        Kind("expert-parallel", "Experts: capacity, drops, all-to-all, aux loss", "expert-parallel",
             expert_parallel_problem),
        Kind("stragglers", "Slow steps at scale", "at-scale", straggler_problem),
        Kind("checkpoint", "Checkpoint size and interval", "at-scale", checkpoint_problem),
        Kind("hier-allreduce", "Hierarchical all-reduce time", "at-scale", hierarchical_problem),
    )
}

# --- generating ------------------------------------------------------------------------------------


def compute(fn: str, args: dict[str, Any]) -> float:
    return QUIZ_FUNCTIONS[fn](**args)


def check_kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(kinds or KINDS))
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown drill kind {unknown[0]!r}; choose from {', '.join(KINDS)}")
    return chosen


class Drill:
    """An endless, seeded stream of problems that repeats a prompt only once its kind has none left.

    Kinds take turns in a seeded order, so a short run still covers every kind asked for. A kind draws
    from a finite set of presets: once MAX_DRAWS draws in a row find no prompt it has not asked, its
    prompts come round again, and `note` says so until the next problem.
    """

    MAX_DRAWS = 200  # per problem, to find a prompt not yet asked

    def __init__(self, seed: int | None = None, kinds: Iterable[str] | None = None):
        self.kinds = check_kinds(kinds)
        self.seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self._rng = random.Random(self.seed)
        self._order = list(self.kinds)
        self._rng.shuffle(self._order)
        self._asked: dict[str, set[str]] = {name: set() for name in self.kinds}
        self.count = 0
        self.note: str | None = None  # said of the last problem: its kind had no new one left

    def __iter__(self) -> Iterator[Problem]:
        return self

    def __next__(self) -> Problem:
        kind = KINDS[self._order[self.count % len(self._order)]]
        asked = self._asked[kind.name]
        self.note = None
        for _ in range(self.MAX_DRAWS):
            prompt, fn, args, unit, tolerance, working = kind.make(self._rng)
            if prompt not in asked:
                break
        else:
            self.note = f"No new {kind.name} problem is left ({len(asked)} asked): they come round again from here."
            asked.clear()
        asked.add(prompt)
        answer = compute(fn, args)
        problem = Problem(
            id=f"{kind.name}-{self.seed}-{self.count + 1}",
            kind=kind.name,
            topic=kind.topic,
            prompt=prompt,
            answer=answer,
            unit=unit,
            tolerance=tolerance,
            fn=fn,
            args=args,
            working=working(answer),
        )
        self.count += 1
        return problem


def generate(seed: int, count: int, kinds: Iterable[str] | None = None) -> list[Problem]:
    drill = Drill(seed, kinds)
    return [next(drill) for _ in range(count)]


# --- grading ---------------------------------------------------------------------------------------


def _unreadable(said: str, message: str, problem: Problem) -> str:
    """Why an answer could not be read, in one clause: the parser's own hint speaks of parameter counts or
    units, and the drill adds the hint that fits its question after it, once."""
    suffix = grading.unit_suffix(said)
    if suffix and problem.unit not in BYTE_UNITS and suffix.lower() in {u.lower() for u in BYTE_UNITS}:
        return f"{said!r} is a size in bytes, and this answer is not one"
    return message.split("; ")[0]



def grade(problem: Problem, text: str) -> Grade:
    """Raises QuantityError, with the hint for this problem, when the text is not a number."""
    said = text.strip()
    try:
        given = grading.parse_quantity(text, problem.unit)
    except QuantityError as error:
        raise QuantityError(f"{_unreadable(said, str(error), problem)}; {problem.hint}") from None
    if problem.answers and not problem.answers[0] <= given <= problem.answers[1]:
        raise QuantityError(f"{said!r} is out of range: the answer is {problem.answers[2]}")
    if given < 0:
        raise QuantityError(f"{said!r} is negative, and no answer here is; {problem.hint}")
    expected = problem.answer
    if problem.tolerance == 0:
        error = 0.0 if given == expected else math.inf
        correct = given == expected
    else:
        error = abs(given - expected) / abs(expected)
        correct = error <= problem.tolerance
    shown_given, shown_expected = show(given, problem.unit), problem.answer_text
    if correct:
        verdict = f"Correct: {shown_given}" + ("." if problem.tolerance == 0 else f" is within {problem.tolerance:.0%} of {shown_expected}.")
    else:
        verdict = f"Not quite: you said {shown_given}; the analytic model says {shown_expected} ({problem.tolerance_text})."
    return Grade(
        correct,
        1.0 if correct else 0.0,
        verdict,
        shown_expected,
        {"problem": problem.id, "text": text.strip(), "value": given, "expected": expected, "calc": {"fn": problem.fn, "args": problem.args}},
        {"relative_error": error if math.isfinite(error) else None, "expected_value": expected},
    )
