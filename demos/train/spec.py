"""What one training run is: every option of the `ddp`, `zro`, `fsdp`, `compare`, `pipeline` and `cp` demos,
typed, with its default and its allowed values, each stated once.

    spec = RunSpec.for_demo("fsdp", {"precision": "bf16-mixed"}).resolved("cpu")

A process builds its spec once: the CLI from the options click parsed, a rank from the JSON the
launcher hands it (`launch.request`), a bare `torchrun` rank from its own command line. The
checks, the guard, the store's key and the training read that one value (`resolved` gives it back
unchanged once the device has filled it in).

Everything reads this: the command line (`train.options` builds each click option from a field here:
flag, type, default, choices, bounds and help), the checks of those options, the launch guard
(`launch.guard`), `strategies.prepare`, `compare`, the training loop and the simulation
(`train.simulate`). Torch-free and click-free, so the CLI can check a demo's options before any rank
starts.

Adding an option is one field of `RunSpec`: `name: type = option(default, "help", ...)` with its
choices or bounds and the demos that take it (`demos=`). The flag `--name` on those demos, click's
check of its type and bounds, the worker's parsing and RunSpec's own check follow from it, and the
result's config reports it (unless `reported=False`). Only what relates it to other options goes in
`train.options.validate`, and what it changes in a run goes where the run uses it.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, Mapping, Sequence

from ddpfsdp.demos.theory.pipeline import LOOPED, SCHEDULES as PIPELINE_SCHEDULES
from ddpfsdp.demos.theory.sharding import canonical_sharding
from ddpfsdp.demos.base import shapes
from ddpfsdp.demos.base.bounds import MAX_PROCS

ARCHS = ("gpt", "vit", "resnet")
STRATEGIES = ("ddp", "zro", "fsdp")
# What --sharding offers (no-shard is DDP by another name; the concept demos use it, the CLI does not).
SHARDING_FLAGS = ("full", "grad-op", "hybrid", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
WRAPS = ("block", "layer", "model")
# What the demos train with (calc and the interview also size bf16-master, adam and sgd-momentum).
DEMO_PRECISIONS = ("fp32", "bf16-mixed", "bf16")
DEMO_OPTIMIZERS = ("adamw", "sgd")
# How the optimizer steps: one kernel over every tensor (fused), one op per kind over lists of tensors
# (foreach), or a Python loop over the tensors (for-loop); auto: fused where torch has the kernel.
OPTIMIZER_IMPLS = ("auto", "fused", "foreach", "for-loop")
# torch.compile's backends a run may name; auto: inductor where it can build kernels, else aot_eager.
COMPILE_BACKENDS = ("auto", "inductor", "aot_eager", "eager")
FSDP_APIS = (1, 2)
# default: FSDP2 as it comes (all-gathers issued at each unit's pre-forward; in backward the next
#   unit's all-gather issued from the current unit's pre-backward), FSDP1 with BACKWARD_PRE;
# forward: also prefetch the next unit in forward (FSDP2 set_modules_to_forward_prefetch, FSDP1
#   forward_prefetch=True); off: no backward prefetch (FSDP1 backward_prefetch=None). FSDP2 has no
#   off switch: set_modules_to_backward_prefetch([]) leaves its default in place (_fsdp_state.py).
PREFETCHES = ("default", "forward", "off")
OVERRIDE_NAMES = ("layers", "d_model", "heads", "seq_len")  # a preset's shape, changed from the command line

TRAINING_DEMOS = ("ddp", "zro", "fsdp", "compare", "cp")
PIPELINE = ("pipeline",)
CONTEXT = ("cp",)  # context parallelism: ring attention over --cp ranks, FSDP over dp x cp
CP_SPLITS = ("head-tail", "contiguous")  # the sequence's split over the cp ranks: balanced or not
MOE = ("moe",)
SPEC_DEMOS = (*TRAINING_DEMOS, *PIPELINE, *MOE)  # the demos of one training run
# At scale: one rank slowed each step (straggler); a sharded checkpoint saved on N ranks and resumed on M
# (checkpoint-resume, not the `checkpoint` concept demo, which is activation checkpointing).
STRAGGLER = ("straggler",)
RESUME = ("checkpoint-resume",)
# Local SGD: the same model trained twice in one launch, plain DDP and post-local SGD (`train.local_sgd`).
LOCAL_SGD = ("local-sgd",)
AT_SCALE = (*STRAGGLER, *RESUME, *LOCAL_SGD)
RUN_DEMOS = (*SPEC_DEMOS, *AT_SCALE)  # every demo whose run is a RunSpec
AT_SCALE_STRATEGIES = ("ddp", "fsdp")  # what the at-scale demos train with (--strategy)
# compare trains each in turn, on one model and seed: (name, strategy, sharding)
COMPARE_RUNS = (("ddp", "ddp", None), ("zro", "zro", None), ("fsdp-grad-op", "fsdp", "grad-op"),
                ("fsdp-full", "fsdp", "full"))

DEFAULT_STEPS = {"cpu": 8, "cuda": 20}  # when --steps is left unset; at least min_steps(warmup)
DEFAULT_BATCH_SIZE = 4  # samples per rank per step, when --batch-size is left unset (a pipeline's: below)
# A pipeline step's batch when --batch-size is not given: this many samples per micro-batch. Enough that one
# stage's compute of a micro-batch takes several times a gloo send's latency on a loaded CPU, so the bubble
# shows the schedule rather than the wire (the interleaved schedule makes V times as many hops).
SAMPLES_PER_MICROBATCH = 16
PIPELINE_STEPS = 3  # a pipeline run's steps when --steps is left unset: one to warm up, one counted, one recorded
MOE_MODELS = {"cpu": "tiny", "cuda": "small"}  # an MoE run's GPT when --model is left unset: its reference is one process
MOE_STEPS = 4  # an MoE run's steps when --steps is left unset: the first compared with one process, the last recorded
PIPELINE_COMPARED = ("gpipe", "1f1b", "interleaved")  # what a pipeline's --compare runs, in this order
PIPELINE_MODELS = {"cpu": "tiny", "cuda": "small"}  # a pipeline's GPT when --model is left unset
# An at-scale run's GPT when --model is left unset: what it shows is between the ranks (a wait, a checkpoint's
# layout), so the model is small enough that a step on a CPU core takes less than a straggler's delay.
AT_SCALE_MODELS = PIPELINE_MODELS
# A local-SGD run trains W synchronous steps, then H x LOCAL_SGD_PERIODS + 1 local ones: torch averages at the
# first local step and after every H more, so the last step is an averaging too (`claims.local_sgd`).
LOCAL_SGD_PERIODS = 3
# The most --period and --local-sgd-warmup take: the run trains W + 3H + 1 steps twice, each measured (its
# collectives counted, the replicas compared), so this keeps the longest to minutes on two CPU cores.
MAX_LOCAL_SGD_STEPS = 100
MEASURED_STEPS = 2  # after the timed steps: one under the collective counter, one under the memory tracker
MIN_TIMED_STEPS = 1
MIN_WARMUP_STEPS = 1  # DDP issues extra broadcasts on its second iteration; the comm step must come later
SIMULATED_MODEL = "tiny"  # a simulated run's model when neither --model nor --params names one
# The largest world a simulated run takes: at the largest preset (70B) one completes within a minute on
# 2 CPU cores, with room to spare on a shared machine (36-39 s of CPU at 8192 ranks). A run's time hardly
# grows with the world since FSDP2 makes only the parameter chunks rank 0 reads (simulate.RankChunks;
# before, 8192 views per parameter: 92 s). Time it with `python tests/benchmarks/bench_simulate_worlds.py`.
MAX_SIMULATED_WORLD = 8192
# The most a run takes of the other numbers: generous beyond any model or job the demos show (a 405B
# model has 126 layers, d 16384, 128 heads), and small enough that a rank can hold the value (DDP's bucket
# cap in int64 bytes, a seed in 64 bits) and a run ends. Beyond them the command line refuses the value.
MAX_LAYERS, MAX_D_MODEL, MAX_HEADS, MAX_SEQ_LEN = 1024, 65_536, 1024, 1_048_576
MAX_BATCH_SIZE = 65_536
MAX_STEPS = 100_000
# --timed-steps-each and --save-after: each counts twice (or more) in the run, and a straggler's steps sleep,
# so a run of the largest stays within minutes to an hour, not days.
MAX_AT_SCALE_STEPS = 500
MAX_EXPERTS = 256  # experts per MoE layer: DeepSeek-V3 routes over 256; each is a copy of the block's MLP here
MAX_WARMUP = 10_000
MAX_BUCKET_MB = 1_048_576  # a tebibyte: one bucket holds every gradient of any model long before
MAX_MICROBATCHES = 4096
MAX_SEED = 2**63 - 1  # base.bounds.SEED_MAX, which imports click


def min_steps(warmup: int) -> int:
    return max(warmup, MIN_WARMUP_STEPS) + MIN_TIMED_STEPS + MEASURED_STEPS


@dataclass(frozen=True)
class Flag:
    """How an option reads on the command line, and what values it allows."""

    help: str
    demos: tuple[str, ...] = TRAINING_DEMOS
    choices: tuple[Any, ...] = ()  # the values allowed (the command line offers `offered` where it differs)
    offered: tuple[str, ...] = ()
    minimum: float | None = None
    above_minimum: bool = False  # the minimum itself is not allowed (a positive number)
    maximum: float | None = None  # the most a run can use (a number beyond it breaks a rank, or never ends)
    metavar: str | None = None  # how --help names a value given as text: COUNT (7B), SIZE (80GB)
    negatable: bool = False  # --name/--no-name
    path: bool = False  # a file to write
    folder: bool = False  # a folder to write in
    reported: bool = True  # the result's config carries it
    simulate_only: bool = False  # means something only with --simulate
    only_when_set: bool = False  # the result's config carries it only when given (not None, not False)
    per_demo: tuple[tuple[str, Any], ...] = ()  # (demo, default) where a demo's default is not the field's

    def default_for(self, demo: str, default: Any) -> Any:
        """The option's default on `demo`'s command line: its own there, else the field's."""
        return dict(self.per_demo).get(demo, default)

    def check(self, name: str, value: Any) -> None:
        """Raise ValueError, naming the flag and what it allows, for a value outside them."""
        if value is None:
            return
        if self.choices and value not in self.choices:
            raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(str(c) for c in self.choices)}")
        # nan passes every bound and infinity every lower one; JSON holds neither
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"--{flag_name(name)} must be a finite number, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"--{flag_name(name)} must be at most {self.maximum:,}, got {value}")
        if self.minimum is None:
            return
        if self.above_minimum and not value > self.minimum:
            bound = "positive" if self.minimum == 0 else f"above {self.minimum:g}"
            raise ValueError(f"--{flag_name(name)} must be {bound}, got {value}")
        if value < self.minimum:
            raise ValueError(f"--{flag_name(name)} must be at least {self.minimum:g}, got {value}")


def option(default: Any, help_text: str, **flag: Any) -> Any:
    """A RunSpec field that is also a command-line option (see Flag for the keywords)."""
    return field(default=default, metadata={"flag": Flag(help_text, **flag)})


def flag_name(name: str) -> str:
    return name.replace("_", "-")


def _models_help() -> str:
    names = "; ".join(f"{', '.join(shapes.PRESETS[arch])} ({arch})" for arch in ARCHS)
    pairs: dict[tuple[str, str], list[str]] = {}
    for arch in ARCHS:
        pairs.setdefault((shapes.default_preset(arch, "cpu"), shapes.default_preset(arch, "cuda")), []).append(arch)
    defaults = ", ".join(f"{cpu} / {gpu} ({', '.join(archs)})" for (cpu, gpu), archs in pairs.items())
    return f"Preset: {names}. Default on CPU / GPU: {defaults}."


_FSDP = ("fsdp",)
_SIMULATED = {"reported": False, "simulate_only": True}
_BUCKETED = ("ddp", "zro", "compare")  # the demos that train with DDP's gradient buckets


@dataclass(frozen=True)
class RunSpec:
    """One training run's configuration: the demo's options, and the strategy it trains with."""

    # ddp | zro | fsdp: set by the demo (compare trains each of COMPARE_RUNS in turn); the at-scale demos take it
    # as an option
    strategy: str = option("ddp", "Train with DDP (every rank a replica, gradients all-reduced) or FSDP2 (each rank "
                                  "a shard).", demos=(*STRAGGLER, *RESUME), choices=STRATEGIES, offered=AT_SCALE_STRATEGIES,
                           per_demo=(("checkpoint-resume", "fsdp"),))
    arch: str = option("gpt", "Model family: a GPT decoder, a ViT classifier or a BasicBlock ResNet.", choices=ARCHS)
    model: str | None = option(None, _models_help(), demos=RUN_DEMOS)  # None: the device's default (`resolved`)
    layers: int | None = option(None, "Override the preset's number of blocks.", minimum=1, maximum=MAX_LAYERS)
    d_model: int | None = option(None, "Override the preset's hidden size.", minimum=1, maximum=MAX_D_MODEL)
    heads: int | None = option(None, "Override the preset's attention heads.", minimum=1, maximum=MAX_HEADS)
    seq_len: int | None = option(None, "Override the preset's sequence length (gpt).", minimum=1,
                                  maximum=MAX_SEQ_LEN)
    batch_size: int | None = option(
        None, f"Samples per rank per step. Default: {DEFAULT_BATCH_SIZE}; a pipeline's: samples per step (per replica "
              f"with --dp), split into the micro-batches, {SAMPLES_PER_MICROBATCH} x M.", minimum=1,
        maximum=MAX_BATCH_SIZE, demos=RUN_DEMOS)
    steps: int | None = option(
        None, "Training steps in all: warm-up, timed, then one communication and one memory step. "
              f"Default: {DEFAULT_STEPS['cpu']} on CPU, {DEFAULT_STEPS['cuda']} on GPU; a pipeline's "
              f"{PIPELINE_STEPS} (the first warms up, the last is recorded).", demos=SPEC_DEMOS, maximum=MAX_STEPS)
    warmup: int = option(2, "Steps before timing starts (DDP rebuilds its buckets after the first).",
                         minimum=MIN_WARMUP_STEPS, maximum=MAX_WARMUP)
    precision: str = option("fp32", "fp32; bf16-mixed (autocast for DDP, MixedPrecisionPolicy for FSDP); "
                                     "bf16 throughout.", choices=DEMO_PRECISIONS)
    optimizer: str = option("adamw", "AdamW (two fp32 states per parameter) or SGD (no state).", choices=DEMO_OPTIMIZERS)
    lr: float = option(1e-3, "Learning rate.", minimum=0, above_minimum=True)
    optimizer_impl: str = option("auto", "The optimizer's implementation: fused (one kernel for every tensor), foreach "
                                         "(one op per kind over lists of tensors), for-loop (tensor by tensor); auto: "
                                         "fused where torch has the kernel for the device, else foreach.",
                                 choices=OPTIMIZER_IMPLS)
    compile: bool = option(False, "torch.compile the model: DDP and zro after wrapping (DDPOptimizer splits the graph "
                                  "at the buckets), FSDP2 each block before fully_shard. Not FSDP1.",
                           only_when_set=True)
    compile_backend: str = option("auto", "With --compile: the backend; auto picks inductor on a GPU or where a C++ "
                                          "compiler is found, else aot_eager (no compiler needed).",
                                  choices=COMPILE_BACKENDS, reported=False)
    seed: int = option(0, "Seed of the weights and the data.", demos=RUN_DEMOS, minimum=0, maximum=MAX_SEED)
    checkpoint_activations: bool = option(False, "Recompute each block's activations in backward instead of "
                                                 "keeping them.")
    timeline: bool = option(True, "Record the communication step in time on every rank (the timed steps never are).",
                            negatable=True)
    trace: str | None = option(None, "Write the recorded step as Chrome trace-event JSON (open it in ui.perfetto.dev).",
                               path=True, reported=False, demos=(*SPEC_DEMOS, *STRAGGLER))
    bucket_mb: float = option(25.0, "DDP's bucket_cap_mb: gradients all-reduced per bucket.", demos=_BUCKETED,
                              minimum=0, above_minimum=True, maximum=MAX_BUCKET_MB)
    sharding: str | None = option(
        "full", "full (reshard after forward), grad-op (keep unsharded params until backward ends), hybrid (shard "
                "within groups, replicate across them). FSDP1 names are accepted.", demos=_FSDP, offered=SHARDING_FLAGS)
    wrap: str = option("block", "FSDP units: each block then the root, each attention/MLP layer, or the root only.",
                       demos=("fsdp", "compare"), choices=WRAPS)
    fsdp_api: int = option(2, "2: fully_shard (per-parameter DTensor shards); 1: FullyShardedDataParallel (flat "
                              "parameters).", demos=_FSDP, choices=FSDP_APIS)
    replicas: int = option(2, "hybrid: how many replicas of the sharded model (the world size must divide by it).",
                           demos=_FSDP, minimum=1, maximum=MAX_SIMULATED_WORLD)
    prefetch: str = option("default", "default: FSDP's own prefetching; forward: also prefetch the next unit in "
                                      "forward; off: no backward prefetch (FSDP1 only: FSDP2 has no switch for it).",
                           demos=_FSDP, choices=PREFETCHES)
    tp: int | None = option(None, "Tensor parallelism over N ranks inside each GPT block (column-wise then row-wise "
                                  "Linears), then FSDP over the rest: a (dp, tp) mesh of the world, dp = world / N.",
                            demos=_FSDP, minimum=2, maximum=MAX_SIMULATED_WORLD, only_when_set=True)
    sequence_parallel: bool = option(False, "With --tp: also split the LayerNorms and the residual stream by sequence "
                                            "(all-gathers and reduce-scatters in place of TP's all-reduces).",
                                     demos=_FSDP, only_when_set=True)
    # Pipeline parallelism (demo pipeline): the model cut into stages over pp ranks, a torch schedule driving
    # them, each step's batch split into micro-batches; with --dp, dp pipelines, each stage sharded over them.
    schedule: str | None = option(None, "torch's ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B or "
                                        "ScheduleInterleavedZeroBubble.", demos=PIPELINE, choices=PIPELINE_SCHEDULES,
                                  per_demo=(("pipeline", "1f1b"),))
    microbatches: int | None = option(None, "Micro-batches M each step's batch is split into.", demos=PIPELINE,
                                      minimum=1, maximum=MAX_MICROBATCHES, per_demo=(("pipeline", 4),))
    stages_per_rank: int | None = option(None, "Stages V each rank holds (interleaved only). Default: 2 for "
                                               "interleaved, else 1.", demos=PIPELINE, minimum=1,
                                        maximum=MAX_LAYERS)
    pp: int | None = option(None, "Pipeline stages over as many ranks (one pipeline). Default: the ranks over --dp.",
                            demos=PIPELINE, minimum=2, maximum=MAX_SIMULATED_WORLD)
    dp: int = option(1, "Data-parallel replicas of the pipeline: ranks = dp x pp, each stage fully_shard'ed over dp.",
                     demos=PIPELINE, minimum=1, maximum=MAX_SIMULATED_WORLD)
    compare: bool = option(False, "Run GPipe, 1F1B and interleaved in one launch on the same ranks, model and seed.",
                           demos=PIPELINE)
    # Expert parallelism (demo moe): each GPT block's MLP a mixture of experts, the experts spread over ep ranks,
    # tokens sent to them and back by all-to-alls; the rest of the model FSDP over every rank.
    ep: int | None = option(None, "Expert parallelism over N ranks (each holds experts / N whole experts); N must "
                                  "divide the world, whose ranks it borrows from data parallelism. Default: every rank.",
                            demos=MOE, minimum=2, maximum=MAX_EXPERTS, only_when_set=True)
    experts: int | None = option(None, "Experts in each MoE layer (each shaped like the block's MLP).", demos=MOE,
                                 minimum=1, maximum=MAX_EXPERTS, only_when_set=True, per_demo=(("moe", 4),))
    top_k: int | None = option(None, "Experts each token is routed to.", demos=MOE, minimum=1, maximum=MAX_EXPERTS,
                               only_when_set=True,
                               per_demo=(("moe", 2),))
    capacity_factor: float | None = option(
        None, "Slots per expert per rank, ceil(factor x tokens x top-k / experts); slots over it are dropped "
              "(a factor of experts / top-k or more drops none).",
        demos=MOE, minimum=0, above_minimum=True, maximum=float(MAX_EXPERTS), only_when_set=True,
        per_demo=(("moe", 1.0),))
    # At scale: a straggler (demo straggler), a sharded checkpoint resumed on another world (demo checkpoint-resume).
    # None on every other run, so `is_straggler` and `is_resume` read the run from its spec.
    slow_rank: int | None = option(None, "The rank slowed each step (0 to the world size - 1).", demos=STRAGGLER,
                                   minimum=0, only_when_set=True, per_demo=(("straggler", 1),))
    delay_ms: float | None = option(None, "How long the slow rank sleeps before each step's forward, in "
                                          "milliseconds (0: no straggler); less than the collective time-out.",
                                    demos=STRAGGLER, minimum=0, only_when_set=True, per_demo=(("straggler", 500.0),))
    timed_steps_each: int | None = option(None, "Steps timed without the delay and as many with it, in turn; one more "
                                                "with it is recorded in time.", demos=STRAGGLER, minimum=1,
                                          maximum=MAX_AT_SCALE_STEPS,
                                          only_when_set=True, per_demo=(("straggler", 3),))
    save_after: int | None = option(None, "Steps trained before the sharded save; the saving ranks then train as "
                                          "many more without stopping (the uninterrupted run), and the resumed "
                                          "ranks the same ones.", demos=RESUME, minimum=1, maximum=MAX_AT_SCALE_STEPS,
                                    only_when_set=True,
                                    per_demo=(("checkpoint-resume", 2),))
    resume_on: int | None = option(None, "Ranks the second launch resumes on. Default: half the saving ranks where "
                                         "they are 4 or more, else twice as many.", demos=RESUME, minimum=2,
                                   maximum=MAX_PROCS, only_when_set=True)
    dir: str | None = option(None, "The checkpoint's folder: new or empty to save there and resume from it, or "
                                   "one this demo saved to resume from it (on --resume-on ranks). Default: a "
                                   "temporary folder, removed after the run.", demos=RESUME, folder=True,
                             only_when_set=True)
    # Local SGD (demo local-sgd): None on every other run, so `is_local_sgd` reads the run from its spec.
    period: int | None = option(None, "Steps between model averagings after the warm-up (H): each rank steps alone "
                                      "and PeriodicModelAverager all-reduces the parameters every H steps. At least 2 "
                                      "(at 1 it moves as much as DDP).", demos=LOCAL_SGD, minimum=2,
                                maximum=MAX_LOCAL_SGD_STEPS, only_when_set=True, per_demo=(("local-sgd", 4),))
    local_sgd_warmup: int | None = option(None, "Synchronous steps first (W): plain DDP, gradients all-reduced every "
                                                "step, before local SGD starts.", demos=LOCAL_SGD, minimum=0,
                                          maximum=MAX_LOCAL_SGD_STEPS, only_when_set=True,
                                          per_demo=(("local-sgd", 2),))
    # Set by the run's plan, not the command line (`train.resume_plan`): which launch of a checkpoint-resume run
    # this is, "save" (train, save, train on) or "resume" (load, train on), and the folder both use.
    phase: str | None = None
    checkpoint_folder: str | None = None
    # Context parallelism (demo cp): each of --cp ranks holds S/cp tokens of every sequence, attention runs as a
    # ring over them, and FSDP shards the model over the rest of the world times cp (torchtitan's dp_shard x cp).
    cp: int | None = option(None, "Context parallelism over N ranks: each holds 1/N of every sequence, attention "
                                  "passes K/V around their ring; the other ranks are data parallel (dp = world / N), "
                                  "FSDP over dp x cp.", demos=CONTEXT, minimum=2, maximum=MAX_PROCS, only_when_set=True,
                            per_demo=(("cp", 2),))
    cp_split: str | None = option(None, "How the sequence is split over the cp ranks: head-tail (2·cp chunks, rank r "
                                        "holds chunks r and 2cp-1-r: torch's load balancer) or contiguous (rank r "
                                        "the r-th of cp chunks).", demos=CONTEXT, choices=CP_SPLITS,
                                  only_when_set=True, per_demo=(("cp", "head-tail"),))
    # One process plays rank 0 of a world of --world ranks on fake tensors (train.simulate).
    simulate: bool = option(False, "Simulate instead of running: the same strategy code on fake tensors over a fake "
                                   "process group, in one process, no GPU. Measures sharding, collectives and "
                                   "allocations, not time.", reported=False, demos=SPEC_DEMOS)
    world: int | None = option(None, f"The number of ranks to simulate (e.g. 64; at most {MAX_SIMULATED_WORLD}).",
                               **_SIMULATED)
    params: str | None = option(None, f"A named GPT size instead of --model: {', '.join(shapes.GPT_SIZES)}.",
                                metavar="COUNT", **_SIMULATED)
    gpu_mem: str | None = option(None, "Memory of one GPU (80GB, 80GiB); ddp and zro refuse a replica that "
                                       "cannot fit in it.", metavar="SIZE", **_SIMULATED)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        # Only FSDP shards: the other strategies report no sharding.
        sharding = canonical_sharding(self.sharding or "full") if self.strategy == "fsdp" else None
        object.__setattr__(self, "sharding", sharding)
        for item in option_fields():
            item.metadata["flag"].check(item.name, getattr(self, item.name))

    @classmethod
    def from_options(cls, options: Mapping[str, Any], strategy: str, sharding: str | None = None) -> RunSpec:
        """The run of a demo's parsed options; a missing option, or one left None, takes its default.

        `sharding` replaces the options' own (compare names the sharding of each of its runs).
        Raises ValueError for an option RunSpec does not have or a value it does not allow.
        """
        known = {item.name: item for item in option_fields()}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; a training run has {', '.join(known)}")
        given = {name: _typed(known[name], value) for name, value in options.items() if value is not None}
        given.pop("strategy", None)  # the one given beside the options is the run's
        if sharding is not None:
            given["sharding"] = sharding
        return cls(strategy=strategy, **given)

    @classmethod
    def for_demo(cls, demo: str, options: Mapping[str, Any]) -> RunSpec:
        """The one spec of a demo's options: compare's trains with DDP first (`runs` gives its four); a
        pipeline's shards each stage over its replicas without resharding after forward (FSDP grad-op, one
        unit per stage), as torchtitan does under pipeline parallelism, since every micro-batch would
        all-gather the stage again; cp's is FSDP full over dp x cp with its attention a ring. An option left
        out takes the demo's default. Raises ValueError as `from_options` does, and for a demo whose run is
        not a RunSpec."""
        if demo not in RUN_DEMOS:
            raise ValueError(f"{demo!r} is not a training demo; those are {', '.join(RUN_DEMOS)}")
        given = {name: value for name, value in options.items() if value is not None}
        own = {item.name: item.metadata["flag"].default_for(demo, item.default) for item in option_fields(demo)}
        given = {**{name: value for name, value in own.items() if value != DEFAULTS[name]}, **given}
        if demo == "pipeline":
            return cls.from_options({**given, "wrap": "model"}, "fsdp", sharding="grad-op")
        if demo == "moe":  # the dense part FSDP full, one unit per block; the experts are the ep step's
            return cls.from_options(given, "fsdp", sharding="full")
        if demo in AT_SCALE:  # local SGD averages DDP replicas: it takes no --strategy
            return cls.from_options(given, given.get("strategy", own.get("strategy", "ddp")))
        if demo in CONTEXT:
            return cls.from_options(given, "fsdp")
        return cls.from_options(given, COMPARE_RUNS[0][1] if demo == "compare" else demo)

    @property
    def is_straggler(self) -> bool:
        """One rank sleeps before each step (`demo straggler`)."""
        return self.delay_ms is not None

    @property
    def is_resume(self) -> bool:
        """A sharded checkpoint saved, then resumed on another world (`demo checkpoint-resume`)."""
        return self.save_after is not None

    @property
    def is_local_sgd(self) -> bool:
        """Each rank steps alone after a warm-up and the replicas are averaged every --period steps (`demo local-sgd`)."""
        return self.period is not None

    def local_sgd_steps(self) -> int:
        """A local-SGD run's steps: the warm-up, then LOCAL_SGD_PERIODS periods and the averaging step that ends them."""
        assert self.period is not None and self.local_sgd_warmup is not None, "a local-SGD run's spec"
        return self.local_sgd_warmup + LOCAL_SGD_PERIODS * self.period + 1

    def designed_wait_s(self) -> float:
        """How long the run makes a rank wait in one collective by design: a straggler's delay (0 for any other
        run). The launcher refuses one as long as the process group's time-out."""
        return (self.delay_ms or 0.0) / 1e3 if self.is_straggler else 0.0

    @property
    def is_pipeline(self) -> bool:
        """The model is cut into pipeline stages (`demo pipeline`)."""
        return self.schedule is not None

    @property
    def is_moe(self) -> bool:
        """Each block's MLP is a mixture of experts over expert-parallel ranks (`demo moe`)."""
        return self.experts is not None

    def schedules(self) -> tuple[str, ...]:
        """The pipeline schedules this run trains, in turn: the one asked, or --compare's three."""
        if not self.is_pipeline:
            return ()
        return PIPELINE_COMPARED if self.compare else (self.schedule,)

    def stages_for(self, schedule: str) -> int | None:
        """The stages V each rank holds under `schedule`: the asked V for a looped schedule, else one (a
        --compare run's non-looped schedules hold one stage whatever V was asked); None: the schedule's default."""
        if schedule in LOOPED:
            return self.stages_per_rank
        return None if self.compare else self.stages_per_rank

    @property
    def global_batch(self) -> int:
        """Samples per step over every replica: each of a pipeline's dp replicas reads its own batch."""
        assert self.batch_size is not None, "resolve the run for its device first"
        return self.batch_size * (self.dp if self.is_pipeline else 1)

    def runs(self, demo: str) -> list[RunSpec]:
        """The runs a training demo trains with this spec: itself, or compare's four in turn."""
        if demo != "compare":
            return [self]
        return [self if (strategy, sharding) == (self.strategy, self.sharding)
                else replace(self, strategy=strategy, sharding=sharding) for _, strategy, sharding in COMPARE_RUNS]

    def model_for(self, device_type: str) -> str:
        """The preset the run trains on this device: --model, else the device's default (a pipeline's own:
        a GPT small enough that its stages' compute does not drown the schedule on CPU cores)."""
        kind = "cpu" if device_type == "cpu" else "cuda"
        if self.model:
            return self.model
        if self.is_moe:
            return MOE_MODELS[kind]
        if self.is_straggler or self.is_resume or self.is_local_sgd:
            return AT_SCALE_MODELS[kind]
        return PIPELINE_MODELS[kind] if self.is_pipeline else shapes.default_preset(self.arch, kind)

    def steps_for(self, device_type: str) -> int:
        """The steps the run trains on this device: --steps, else a pipeline's PIPELINE_STEPS, a straggler's or a
        resumed run's own count, else the device's default (at least the warm-up, one timed step and the
        measured ones)."""
        kind = "cpu" if device_type == "cpu" else "cuda"
        if self.steps is not None:
            return self.steps
        if self.is_moe:
            return MOE_STEPS
        if self.is_straggler:  # warm-up, timed without the delay, timed with it, the recorded step
            return self.warmup + 2 * self.timed_steps_each + 1
        if self.is_resume:  # before the save, then after it
            return 2 * self.save_after
        if self.is_local_sgd:
            return self.local_sgd_steps()
        return PIPELINE_STEPS if self.is_pipeline else max(DEFAULT_STEPS[kind], min_steps(self.warmup))

    def batch_size_default(self) -> int:
        """Samples per step when --batch-size is left unset: a pipeline's enough for its micro-batches, else
        DEFAULT_BATCH_SIZE per rank."""
        return SAMPLES_PER_MICROBATCH * (self.microbatches or 1) if self.is_pipeline else DEFAULT_BATCH_SIZE

    def resolved(self, device_type: str) -> RunSpec:
        """The model, the step count and the batch left to the device ("cpu", or "cuda" for any accelerator)
        and the demo; the spec itself when all are given."""
        if self.model is not None and self.steps is not None and self.batch_size is not None:
            return self
        return replace(self, model=self.model_for(device_type), steps=self.steps_for(device_type),
                       batch_size=self.batch_size or self.batch_size_default())

    def key(self, demo: str, device_type: str | None = None) -> dict[str, Any]:
        """What identifies the run among a demo's saved results: every option that demo takes whose value
        is not its default (canonical: FSDP1's sharding names read as ours, numbers as numbers), with
        what `device_type` decides (the model, the steps) filled in unless it is None or the run is
        simulated. A file to write (--trace) or a folder (--dir) changes nothing measured, so it is not part of it."""
        values = {item.name: getattr(self, item.name) for item in option_fields(demo)}
        defaults = demo_defaults(demo)
        if self.batch_size == self.batch_size_default():
            values["batch_size"] = None  # the default, whether given or not
        if device_type and not self.simulate:
            values.update(model=self.model_for(device_type), steps=self.steps_for(device_type))
        return {item.name: values[item.name] for item in option_fields(demo)
                if not (item.metadata["flag"].path or item.metadata["flag"].folder)
                and values[item.name] != defaults[item.name]}

    @property
    def overrides(self) -> dict[str, int]:
        """The preset's shape changed from the command line: only what was given."""
        return {name: getattr(self, name) for name in OVERRIDE_NAMES if getattr(self, name) is not None}

    @property
    def is_context_parallel(self) -> bool:
        """Each sequence is split over --cp ranks (`demo cp`)."""
        return self.cp is not None

    @property
    def ranks_per_batch(self) -> int:
        """Ranks that read the same batch: the --tp ranks of one data-parallel group, or its --cp ranks (each
        holds part of every sequence), else each rank its own."""
        return (self.tp or 1) * (self.cp or 1)

    @property
    def timed_steps(self) -> int:
        assert self.steps is not None, "resolve the run for its device first"
        return self.steps - self.warmup - MEASURED_STEPS

    def simulated_model(self) -> tuple[str, str, dict[str, int], Any]:
        """(arch, model name, shape overrides, shape) of the model a simulated run builds: a named GPT
        size (--params) with any overrides on top of it, else --model (SIMULATED_MODEL by default).

        Raises ValueError for a size or a shape that does not exist.
        """
        if self.params:
            sized = {**vars(shapes.sized_gpt_shape(self.params)), **self.overrides}
            return "gpt", self.params.strip().upper(), sized, shapes.shape_for("gpt", "base", **sized)
        model = self.model or SIMULATED_MODEL
        return self.arch, model, self.overrides, shapes.shape_for(self.arch, model, **self.overrides)

    def reported(self) -> dict[str, Any]:
        """What a result's config says of the run: the strategy and every reported option its demo takes
        (a pipeline's options only for a pipeline run, and of a pipeline run only those), the shape
        overrides only where given."""
        config: dict[str, Any] = {"strategy": self.strategy}
        pipeline = self.is_pipeline
        for item in option_fields():
            flag = item.metadata["flag"]
            if ("pipeline" in flag.demos) != pipeline and not set(SPEC_DEMOS) <= set(flag.demos):
                continue
            value = getattr(self, item.name)
            unset = value is None or value is False
            if flag.reported and not (unset and (item.name in OVERRIDE_NAMES or flag.only_when_set)):
                config[item.name] = value
        return config


def option_fields(demo: str | None = None) -> list[Field]:
    """RunSpec's options in command-line order; with `demo`, only those that demo takes."""
    return [item for item in fields(RunSpec)
            if "flag" in item.metadata and (demo is None or demo in item.metadata["flag"].demos)]


def command_flags(demo: str, options: Mapping[str, Any], first: Sequence[str] = ()) -> list[str]:
    """The flags that give `demo` these options: the names in `first` as given, then every other
    option the demo takes whose value is not its default (`--no-NAME` for a negatable one turned off),
    each value quoted for a shell where it needs it."""
    taken = {item.name: item for item in option_fields(demo)}
    defaults = demo_defaults(demo)
    names = [*first, *(name for name in taken if name not in first and options.get(name, defaults[name]) != defaults[name])]
    words: list[str] = []
    for name in names:
        value = options.get(name, defaults.get(name))
        if value is True:
            words.append(f"--{flag_name(name)}")
        elif value is False and name in taken and taken[name].metadata["flag"].negatable:
            words.append(f"--no-{flag_name(name)}")
        elif value not in (None, False):
            words.append(f"--{flag_name(name)} {shlex.quote(str(value))}")
    return words


def value_type(item: Field) -> type:
    """The type of an option's values (int, float, str or bool), read from its annotation."""
    return {"int": int, "float": float, "str": str, "bool": bool}[str(item.type).split(" |")[0]]


def _typed(item: Field, value: Any) -> Any:
    """A value as the option's type (an int given as text, say); one that does not convert is left to the check."""
    kind = value_type(item)
    if kind in (int, float) and isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"--{flag_name(item.name)} must be a number, got {value!r}") from None
    return value


DEFAULTS = {item.name: item.default for item in option_fields()}


def demo_defaults(demo: str) -> dict[str, Any]:
    """Every option's default on `demo`'s command line (a demo's own where it has one)."""
    return {item.name: item.metadata["flag"].default_for(demo, item.default) for item in option_fields()}
