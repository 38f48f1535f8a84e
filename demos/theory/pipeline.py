"""Pipeline parallelism: a GPT's blocks split into stages over pp ranks, micro-batches streamed through them.

All theory; nothing here is measured. Sources: GPipe (Huang et al., 2019); 1F1B (PipeDream-Flush,
Narayanan et al., 2021); the interleaved schedule (Narayanan et al., 2021, "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", section 2.2); Korthikanti et al., 2022
(activation memory of the interleaved schedule's first stage); zero bubble (Qi et al., 2023, "Zero
Bubble Pipeline Parallelism"); the Ultra-Scale Playbook's pipeline chapter; and what torch 2.13's
`torch/distributed/pipelining/schedules.py` accepts and runs.

- Stages. The L blocks are cut into S = pp x V chunks of consecutive blocks (V chunks per rank for
  the looped schedules), the larger chunks first; rank r holds chunks r, r + pp, ..., r + (V-1)pp.
  The embeddings go with the first chunk (rank 0), the final LayerNorm and the LM head with the last
  (rank pp - 1). Each rank's share is then split by TP (about 1/tp: what TP leaves whole is not
  counted) and sharded by FSDP over dp = gpus / (pp x tp).
- Bubble. In units of t, one micro-batch's forward and backward through one rank's layers, a step
  does m·t of work per rank; GPipe and 1F1B add (pp-1)·t of fill and drain, the interleaved
  schedule (pp-1)·t/V (each chunk is 1/V of the rank's layers). `bubble_ratio` is idle over
  useful time, Megatron-LM's (Narayanan et al., 2021) and the playbook's figure: (pp-1)/m, and
  (pp-1)/(V·m) interleaved. `bubble_fraction` is idle over the whole step, what a per-rank timeline
  shows and GPipe's (K-1)/(M+K-1) for K stages and M micro-batches: (pp-1)/(m+pp-1), and
  (pp-1)/(V·m+pp-1) interleaved. Zero bubble splits the backward into B (the
  input's gradient) and W (the weights'); the paper claims, with F, B and W taking equal time, that
  ZB-H1 leaves a third of 1F1B's bubble at no more than 1F1B's peak memory, and ZB-H2 none at up to
  2pp - 1 micro-batches in flight: the paper's claims, stated as such, not derived here.
- Activations in flight (micro-batches whose saved activations a rank holds at its peak): GPipe all
  m; 1F1B min(m, pp - r) on rank r (torch: `warmup_chunks = min(n_microbatches, num_stages -
  stage_index)` forwards, then backward first); interleaved, in chunk-micro-batches,
  min((V-1)·R + 2(pp-1-r) + 1, V·m) with R = m / rounds micro-batches per round (torch's
  `_get_warmup_ops`, then one forward before the first backward), each chunk 1/V of the rank's
  layers: pp + (pp-1)/V micro-batches' worth on rank 0 when R = pp (Korthikanti et al.).
- Point to point. Per micro-batch and per stage boundary, the forward sends the boundary
  activation b·s·d (compute bytes), the backward its gradient, the same size. Each of the tp ranks
  of a stage sends the whole tensor to its peer (no scatter-gather across the TP group).
- Data parallelism under PP: torch's PipelineStage turns off an FSDP module's gradient sync and its
  reshard after backward before every micro-batch's backward and turns both back on in the reduce-grad
  action after the last (`stage.py`, `perform_reduce_grad`), and torchtitan keeps the parameters
  gathered after forward: one all-gather and one reduce-scatter per unit per step, FSDP grad-op's
  pattern over dp (resharding after every forward would gather m + 1 times).
- Step time: the bubble-free time times (1 + bubble_ratio), plus the fill's and the drain's
  boundary transfers, which nothing overlaps: 2 (S - 1) hops of one boundary tensor.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.arguments import read_choice, read_count
from ddpfsdp.demos.theory.comm import OpFigures, step_comm, total_wire_bytes
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.state import ModelState, model_state

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape

SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved", "zero-bubble")

TORCH_SCHEDULES: dict[str, str] = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zero-bubble": "ScheduleInterleavedZeroBubble",
}
"""The torch.distributed.pipelining class each schedule name stands for."""

LOOPED = ("interleaved",)
"""Schedules that take several stages per rank (V > 1)."""

DEFAULT_STAGES_PER_RANK = 2

ZB_H1_BUBBLE_SHARE = 1 / 3
"""Qi et al., 2023: with F, B and W of equal time, ZB-H1's bubble is a third of 1F1B's."""


@dataclass(frozen=True)
class Pipeline:
    """One pipeline's degrees, checked: pp ranks, m micro-batches, a schedule, V stages per rank."""

    pp: int
    microbatches: int
    schedule: str
    stages_per_rank: int

    @property
    def stages(self) -> int:
        return self.pp * self.stages_per_rank

    @property
    def torch_schedule(self) -> str:
        return TORCH_SCHEDULES[self.schedule]


def check_schedule(name: Any) -> str:
    return read_choice(name, SCHEDULES, "schedule")


def torch_rounds(pp: int, microbatches: int) -> int:
    """torch's `number_of_rounds` for the looped schedules: max(1, m // pp)."""
    return max(1, microbatches // pp)


def check_pipeline(pp: Any, microbatches: Any, schedule: Any = "1f1b", stages_per_rank: Any = None,
                   layers: int | None = None) -> Pipeline:
    """The pipeline, checked as torch 2.13's schedules check it; a ValueError says what to change."""
    name = check_schedule(schedule)
    ranks = _at_least(pp, "pp", 2, "pp 1 is no pipeline: give 2 or more ranks, one stage each")
    m = _at_least(microbatches, "microbatches", 1,
                  f"a pipeline splits each batch into M micro-batches; try M = {4 * ranks} (4 x pp)")
    if stages_per_rank is None:
        v = DEFAULT_STAGES_PER_RANK if name in LOOPED else 1
    else:
        v = _at_least(stages_per_rank, "stages per rank", 1, "give 1, or 2 or more with --schedule interleaved")
    if name in LOOPED and v < 2:
        raise ValueError(f"the interleaved schedule loops over V >= 2 stages per rank (got {v}); "
                         "give --stages-per-rank 2, or --schedule 1f1b for one stage per rank")
    if name == "zero-bubble" and v != 1:
        raise ValueError(f"zero-bubble states the paper's ZB-H1 claim for one stage per rank (got {v}); torch's "
                         "looped zero-bubble schedules (ScheduleZBVZeroBubble: exactly 2 per rank) are not modelled "
                         "here; drop --stages-per-rank, or use --schedule interleaved for V > 1")
    if name not in LOOPED and v != 1:
        raise ValueError(f"{name} runs one stage per rank (got {v} stages per rank); use --schedule interleaved "
                         "for V > 1")
    if layers is not None and ranks * v > layers:
        raise ValueError(f"pp {ranks} x {v} stages per rank = {ranks * v} stages, but the model has {layers} blocks: "
                         f"each stage needs at least one; give at most {layers // v} ranks")
    if name == "1f1b" and m < ranks:
        raise ValueError(f"1F1B needs at least as many micro-batches as stages (torch's Schedule1F1B): "
                         f"{m} < {ranks}; give --microbatches {ranks} or more")
    if name in ("interleaved", "zero-bubble"):
        rounds = torch_rounds(ranks, m)
        if m % rounds:
            fitting = ", ".join(str(k * ranks) for k in range(1, 4))
            raise ValueError(f"{TORCH_SCHEDULES[name]} needs the micro-batches to be a multiple of its rounds, "
                             f"max(1, m // pp) = {rounds}: {m} is not; give a multiple of pp such as {fitting}")
    return Pipeline(ranks, m, name, v)


def _at_least(value: Any, what: str, least: int, advice: str) -> int:
    try:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        number = int(value) if isinstance(value, (int, float)) else read_count(value, what)
    except ValueError:
        raise ValueError(f"{what} must be a whole number (got {value!r}); {advice}") from None
    if number < least:
        raise ValueError(f"{what} must be at least {least} (got {number}); {advice}")
    return number


# ----------------------------------------------------------------------------- the schedule


class Bubble(TypedDict):
    """A step's work and idle time in units of t, and the idle share two ways."""

    useful_t: float
    bubble_t: float
    bubble_ratio: float
    bubble_fraction: float


def bubble(pp: int, microbatches: int, schedule: str, stages_per_rank: int = 1) -> Bubble:
    """Idle time of a step, in units of t (one micro-batch's forward + backward through a rank's layers).

    useful_t = m; bubble_t = (pp-1)/V (GPipe, 1F1B: V = 1; zero bubble: ZB-H1's claimed third of 1F1B's);
    bubble_ratio = bubble_t / useful_t; bubble_fraction = bubble_t / (useful_t + bubble_t).
    """
    schedule = check_schedule(schedule)
    # In slots of t / scale, so each share is one division of whole numbers (exact to the last bit).
    scale = stages_per_rank * (round(1 / ZB_H1_BUBBLE_SHARE) if schedule == "zero-bubble" else 1)
    return {
        "useful_t": float(microbatches),
        "bubble_t": (pp - 1) / scale,
        "bubble_ratio": (pp - 1) / (scale * microbatches),
        "bubble_fraction": (pp - 1) / (scale * microbatches + pp - 1),
    }


def microbatches_for_bubble(pp: int, target_fraction: float, schedule: str = "1f1b", stages_per_rank: int = 1) -> int:
    """The fewest micro-batches whose bubble fraction is at most `target_fraction`, among those the
    schedule accepts (1F1B: m >= pp; the looped schedules: a multiple of their rounds)."""
    if not 0 < target_fraction < 1:
        raise ValueError(f"a bubble fraction is a share of the step, in (0, 1); got {target_fraction}")
    schedule = check_schedule(schedule)
    v = stages_per_rank
    # fill / (m + fill) <= f  <=>  m >= fill * (1 - f) / f
    fill_t = bubble(pp, 1, schedule, v)["bubble_t"]
    m = max(1, math.ceil(fill_t * (1 - target_fraction) / target_fraction - 1e-9))
    while True:
        try:
            check_pipeline(pp, m, schedule, v)
        except ValueError:
            m += 1
            continue
        if bubble(pp, m, schedule, v)["bubble_fraction"] <= target_fraction + 1e-12:
            return m
        m += 1


def in_flight(pp: int, microbatches: int, schedule: str, stages_per_rank: int, rank: int) -> dict[str, float]:
    """Micro-batches whose activations rank `rank` holds at its peak.

    `chunks`: chunk-micro-batches (one micro-batch through one of the rank's V chunks);
    `microbatches`: the same in micro-batches of the rank's whole share (chunks / V).
    """
    schedule = check_schedule(schedule)
    m, v = microbatches, stages_per_rank
    if schedule == "gpipe":
        chunks = m * v
    elif schedule == "1f1b":
        chunks = min(m, pp - rank)
    elif schedule == "zero-bubble":
        chunks = min(m, pp)  # the paper's claim for ZB-H1: no more than 1F1B's peak, which rank 0 holds
    else:
        per_round = m // torch_rounds(pp, m)
        warmup = min((v - 1) * per_round + 2 * (pp - 1 - rank), m * v)
        chunks = min(warmup + 1, m * v)
    return {"chunks": chunks, "microbatches": chunks / v}


def stage_layers(layers: int, pp: int, stages_per_rank: int = 1) -> list[list[int]]:
    """Blocks per chunk of each rank: rank r holds chunks r, r + pp, ...; the larger chunks come first."""
    stages = pp * stages_per_rank
    base, extra = divmod(layers, stages)
    sizes = [base + (1 if index < extra else 0) for index in range(stages)]
    return [[sizes[rank + k * pp] for k in range(stages_per_rank)] for rank in range(pp)]


def stage_params(shape: GPTShape, pp: int, stages_per_rank: int = 1) -> list[int]:
    """Parameters each rank holds: its blocks, the embeddings on rank 0, the head on the last rank."""
    counts = []
    for rank, chunks in enumerate(stage_layers(shape.layers, pp, stages_per_rank)):
        held = sum(chunks) * shape.block_params
        held += shape.embedding_params if rank == 0 else 0
        held += shape.head_params if rank == pp - 1 else 0
        counts.append(held)
    return counts


def boundary_bytes(batch_size: int, seq_len: int, d_model: int, precision: str) -> int:
    """One micro-batch's activation at a stage boundary (b·s·d in compute bytes); its gradient is the same size."""
    return batch_size * seq_len * d_model * precision_for(precision).compute_bytes


class P2PSends(TypedDict):
    """What one pipeline rank sends point to point per step."""

    forward_sends: int
    backward_sends: int
    forward_bytes: int
    backward_bytes: int
    bytes: int


def p2p_sends(pipeline: Pipeline, rank: int, boundary: int) -> P2PSends:
    """What rank `rank` sends per step: activations forward from every chunk but the last stage,
    gradients backward from every chunk but the first."""
    m, v, pp = pipeline.microbatches, pipeline.stages_per_rank, pipeline.pp
    forward = m * (v - (1 if rank == pp - 1 else 0))
    backward = m * (v - (1 if rank == 0 else 0))
    return {"forward_sends": forward, "backward_sends": backward,
            "forward_bytes": forward * boundary, "backward_bytes": backward * boundary,
            "bytes": (forward + backward) * boundary}


def step_time_s(bubble_free_s: float, bubble_ratio: float, *, stages: int = 1, boundary: int = 0,
                bytes_per_s: float | None = None, latency_s: float = 0.0) -> dict[str, float]:
    """A step with the bubble: bubble-free time x (1 + bubble_ratio), plus the fill's and drain's hops."""
    hop_s = latency_s + (boundary / bytes_per_s if bytes_per_s else 0.0)
    exposed_p2p_s = 2 * (stages - 1) * hop_s
    step = bubble_free_s * (1 + bubble_ratio) + exposed_p2p_s
    return {"bubble_free_s": bubble_free_s, "bubble_s": bubble_free_s * bubble_ratio, "hop_s": hop_s,
            "exposed_p2p_s": exposed_p2p_s, "step_s": step}


# ----------------------------------------------------------------------------- 3-D: pp x tp x FSDP over dp


class PipelineMesh(TypedDict):
    """The 3-D mesh's degrees."""

    pp: int
    dp: int
    tp: int


class StageRow(ModelState):
    """One pipeline rank's figures (each of its dp x tp GPUs holds the same), in bytes."""

    rank: int
    layers: int
    chunk_layers: list[int]
    params: int
    local_params: int
    activation_bytes_per_microbatch: int
    in_flight_chunks: float
    in_flight_microbatches: float
    activation_bytes: int
    total_bytes: int
    p2p: P2PSends
    dp_comm: dict[str, OpFigures]
    dp_wire_bytes_per_rank: int
    fits: NotRequired[bool | None]  # set by `pipeline_figures` (None: no GPU size given)


class ZeroBubbleClaims(TypedDict):
    """What the zero-bubble paper claims, stated beside the model's figures."""

    zb_h1_bubble_share_of_1f1b: float
    zb_h2_bubble_ratio: float
    zb_h2_in_flight_first_stage: int


class PipelineSection(Bubble):
    """The `pipeline` section of the `ddpfsdp.calc/1` document."""

    theory: bool
    mesh: PipelineMesh
    schedule: str
    torch_schedule: str
    microbatches: int
    stages_per_rank: int
    stages: int
    microbatch_size: int
    global_batch: int
    step_over_bubble_free: float
    zero_bubble_claims: ZeroBubbleClaims | None  # the zero-bubble schedule's only
    boundary_bytes: int
    p2p_bytes_per_step: int
    ranks: list[StageRow]


def mesh(gpus: int, pp: int, tp: int = 1) -> PipelineMesh:
    """The (pp, dp, tp) degrees: dp = gpus / (pp x tp), which must be whole."""
    if gpus % (pp * tp):
        fitting = ", ".join(str(p) for p in range(2, gpus + 1) if gpus % (p * tp) == 0) or "none with this tp"
        raise ValueError(f"pp {pp} x tp {tp} = {pp * tp} does not divide the {gpus} GPUs (dp = gpus / (pp x tp)); "
                         f"choose pp from {fitting}, or change --gpus")
    return {"pp": pp, "dp": gpus // (pp * tp), "tp": tp}


def stage_rows(shape: GPTShape, pipeline: Pipeline, *, gpus: int, tp: int = 1, batch_size: int = 1,
               precision: str = "bf16-mixed", optimizer: str = "adamw",
               checkpoint_activations: bool = False) -> list[StageRow]:
    """Per rank of the pipeline (each of its dp x tp GPUs holds the same): its blocks and parameters,
    model state sharded over dp after TP's split, saved activations per micro-batch and in flight,
    the point-to-point bytes it sends and FSDP's traffic over dp."""
    degrees = mesh(gpus, pipeline.pp, tp)
    dp = degrees["dp"]
    layers = stage_layers(shape.layers, pipeline.pp, pipeline.stages_per_rank)
    params = stage_params(shape, pipeline.pp, pipeline.stages_per_rank)
    boundary = boundary_bytes(batch_size, shape.seq_len, shape.d_model, precision)
    rows: list[StageRow] = []
    for rank in range(pipeline.pp):
        local = math.ceil(params[rank] / tp)
        state = model_state(local, dp, "zero3", precision, optimizer)
        saved = transformer_activation_bytes(
            layers=sum(layers[rank]), d_model=shape.d_model, tokens=shape.seq_len, batch_size=batch_size,
            head_outputs=shape.vocab, head_tokens=shape.seq_len, precision=precision,
            checkpoint_activations=checkpoint_activations, tp=tp,
        )
        per_microbatch = saved["saved_bytes"] - (0 if rank == pipeline.pp - 1 else saved["head_bytes"])
        flight = in_flight(pipeline.pp, pipeline.microbatches, pipeline.schedule, pipeline.stages_per_rank, rank)
        dp_comm = step_comm("grad-op", local, dp, precision) if dp > 1 else {}
        rows.append({
            "rank": rank,
            "layers": sum(layers[rank]),
            "chunk_layers": layers[rank],
            "params": params[rank],
            "local_params": local,
            **state,
            "activation_bytes_per_microbatch": per_microbatch,
            "in_flight_chunks": flight["chunks"],
            "in_flight_microbatches": flight["microbatches"],
            "activation_bytes": round(per_microbatch * flight["microbatches"]),
            "total_bytes": state["model_state_bytes"] + round(per_microbatch * flight["microbatches"]),
            "p2p": p2p_sends(pipeline, rank, boundary),
            "dp_comm": dp_comm,
            "dp_wire_bytes_per_rank": total_wire_bytes(dp_comm) if dp_comm else 0,
        })
    return rows


def pipeline_figures(shape: GPTShape, pipeline: Pipeline, *, gpus: int, tp: int = 1, batch_size: int = 1,
                     precision: str = "bf16-mixed", optimizer: str = "adamw", checkpoint_activations: bool = False,
                     gpu_mem_bytes: int | None = None) -> PipelineSection:
    """The `pipeline` section of `ddpfsdp calc --json`: the mesh, the schedule, the bubble and one row per rank."""
    degrees = mesh(gpus, pipeline.pp, tp)
    rows = stage_rows(shape, pipeline, gpus=gpus, tp=tp, batch_size=batch_size, precision=precision,
                      optimizer=optimizer, checkpoint_activations=checkpoint_activations)
    for row in rows:
        row["fits"] = None if gpu_mem_bytes is None else row["total_bytes"] <= gpu_mem_bytes
    shown = bubble(pipeline.pp, pipeline.microbatches, pipeline.schedule, pipeline.stages_per_rank)
    boundary = boundary_bytes(batch_size, shape.seq_len, shape.d_model, precision)
    return {
        "theory": True,
        "mesh": degrees,
        "schedule": pipeline.schedule,
        "torch_schedule": pipeline.torch_schedule,
        "microbatches": pipeline.microbatches,
        "stages_per_rank": pipeline.stages_per_rank,
        "stages": pipeline.stages,
        "microbatch_size": batch_size,
        "global_batch": degrees["dp"] * pipeline.microbatches * batch_size,
        **shown,
        "step_over_bubble_free": 1 + shown["bubble_ratio"],
        "zero_bubble_claims": {"zb_h1_bubble_share_of_1f1b": ZB_H1_BUBBLE_SHARE, "zb_h2_bubble_ratio": 0.0,
                               "zb_h2_in_flight_first_stage": 2 * pipeline.pp - 1}
        if pipeline.schedule == "zero-bubble" else None,
        "boundary_bytes": boundary,
        "p2p_bytes_per_step": 2 * pipeline.microbatches * (pipeline.stages - 1) * boundary,
        "ranks": rows,
    }


# ----------------------------------------------------------------------------- quiz answers
# Keywords only, as the bank's `calc = { fn, args }`, the drills and the interview call them.


def q_bubble_fraction(*, pp: Any, microbatches: Any, schedule: str = "1f1b", stages_per_rank: Any = None) -> float:
    """Idle share of a step, GPipe's figure: (pp-1)/(m+pp-1), interleaved (pp-1)/(V·m+pp-1)."""
    p = check_pipeline(pp, microbatches, schedule, stages_per_rank)
    return bubble(p.pp, p.microbatches, p.schedule, p.stages_per_rank)["bubble_fraction"]


def q_bubble_ratio(*, pp: Any, microbatches: Any, schedule: str = "1f1b", stages_per_rank: Any = None) -> float:
    """Idle over useful time, Megatron-LM's and the playbook's figure: (pp-1)/m, interleaved (pp-1)/(V·m)."""
    p = check_pipeline(pp, microbatches, schedule, stages_per_rank)
    return bubble(p.pp, p.microbatches, p.schedule, p.stages_per_rank)["bubble_ratio"]


def q_microbatches_for_bubble(*, pp: Any, target_fraction: float, schedule: str = "1f1b",
                              stages_per_rank: Any = None) -> int:
    """The fewest micro-batches that bring the bubble fraction to `target_fraction` or below."""
    name = check_schedule(schedule)
    v = DEFAULT_STAGES_PER_RANK if stages_per_rank is None and name in LOOPED else (stages_per_rank or 1)
    return microbatches_for_bubble(read_count(pp, "pp"), float(target_fraction), name, int(v))


def q_in_flight_microbatches(*, pp: Any, microbatches: Any, schedule: str = "1f1b", stage: Any = 0,
                             stages_per_rank: Any = None) -> float:
    """Micro-batches (of the rank's whole share of layers) whose activations rank `stage` holds at its peak."""
    p = check_pipeline(pp, microbatches, schedule, stages_per_rank)
    rank = int(stage)
    if not 0 <= rank < p.pp:
        raise ValueError(f"stage {rank} is not one of the pipeline's ranks 0..{p.pp - 1}")
    return in_flight(p.pp, p.microbatches, p.schedule, p.stages_per_rank, rank)["microbatches"]


def q_p2p_bytes_per_step(*, pp: Any, microbatches: Any, batch_size: Any, seq_len: Any, d_model: Any,
                         precision: str, stages_per_rank: Any = None, schedule: str = "1f1b") -> int:
    """Bytes the whole pipeline sends point to point per step: 2 m (S-1) boundary tensors."""
    p = check_pipeline(pp, microbatches, schedule, stages_per_rank)
    boundary = boundary_bytes(read_count(batch_size, "batch size"), read_count(seq_len, "seq len"),
                              read_count(d_model, "d_model"), precision)
    return 2 * p.microbatches * (p.stages - 1) * boundary


def q_pipeline_step_time_s(*, params: Any, gpus: Any, pp: Any, microbatches: Any, micro_batch: Any, seq_len: Any,
                           d_model: Any, precision: str, peak_flops_per_s: float, mfu: float, bytes_per_s: float,
                           latency_s: float = 0.0, schedule: str = "1f1b", stages_per_rank: Any = None) -> float:
    """Seconds per step of a pipeline over `pp` stages on `gpus` GPUs (dp = gpus / pp replicas, each running m
    micro-batches of `micro_batch` sequences): the bubble-free compute (6 FLOPs per parameter per token, at
    `mfu` of the peak) x (1 + bubble_ratio), plus the fill's and drain's boundary hops over the link."""
    from ddpfsdp.demos.theory.steptime import compute_time_s

    p = check_pipeline(pp, microbatches, schedule, stages_per_rank)
    world = read_count(gpus, "gpus")
    dp = mesh(world, p.pp)["dp"]
    sequences, tokens = read_count(micro_batch, "micro-batch"), read_count(seq_len, "seq len")
    bubble_free = compute_time_s(read_count(params, "params"), dp * p.microbatches * sequences * tokens, world,
                                 float(peak_flops_per_s), float(mfu))
    ratio = bubble(p.pp, p.microbatches, p.schedule, p.stages_per_rank)["bubble_ratio"]
    boundary = boundary_bytes(sequences, tokens, read_count(d_model, "d_model"), precision)
    return step_time_s(bubble_free, ratio, stages=p.stages, boundary=boundary, bytes_per_s=float(bytes_per_s),
                       latency_s=float(latency_s))["step_s"]


QUIZ_FUNCTIONS = {
    "pipeline_bubble_fraction": q_bubble_fraction,
    "pipeline_bubble_ratio": q_bubble_ratio,
    "pipeline_microbatches_for_bubble": q_microbatches_for_bubble,
    "pipeline_in_flight": q_in_flight_microbatches,
    "pipeline_p2p_bytes": q_p2p_bytes_per_step,
    "pipeline_step_time_s": q_pipeline_step_time_s,
}
