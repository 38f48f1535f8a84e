"""Planning a 3-D job: tensor, pipeline and data-parallel degrees for a model on a cluster, ranked.

All theory; nothing here is measured. It composes the model's own parts: `pipeline` (stages, the
bubble, activations in flight, boundary bytes), `tensor_parallel`'s plan (4 all-reduces of b·s·d per
block and micro-batch), `state` (model state under ZeRO-1, DDP or FSDP over dp), `activations`, and
`topology` (which link each group's collective runs on).

For every tp (a power of two up to two nodes' worth, dividing the heads), every pp dividing the GPUs
left (at most one block per stage) and dp = N / (tp x pp), with m = global batch / (dp x b)
micro-batches per step (1F1B needs m >= pp):

- Memory per GPU, the fullest pipeline rank: its parameters after TP's split (1/tp of each block; what
  TP leaves whole is not counted), model state over dp (`dp_mode`: zero1, ZeRO-1 as calc's column
  counts it, the default; ddp; fsdp, ZeRO-3 at rest plus the stage's gathered parameters and unsharded
  gradients, which torch's PipelineStage keeps from the first micro-batch to the last:
  `set_reshard_after_backward(False)`, `set_requires_gradient_sync(False)` in stage.py), and the
  activations of the micro-batches 1F1B holds in flight (min(m, pp - r) on rank r). Without
  checkpointing if that fits the GPU, else with every block checkpointed, else it does not fit.
- Time per step: compute at `mfu` of the peak (6 FLOPs per parameter per token; 8 with checkpointing,
  which runs each forward twice), times 1 + (pp-1)/m for the bubble; plus TP's all-reduces, all on the
  critical path (4 per block per micro-batch, 6 with checkpointing, on NVLink while tp fits a node);
  plus the pipeline's fill and drain, 2(pp-1) boundary hops that nothing overlaps (the steady state's
  sends overlap compute); plus dp's collectives of the rank's parameters, counted as not overlapped
  (a bound: Megatron-LM can overlap the gradient reduce-scatter with the last backward).
- Links: TP inside a node while tp <= GPUs per node; the pipeline's boundaries cross nodes once a node
  holds fewer stages than pp; a dp group runs over the network whenever its ranks sit in different
  nodes (its ring is paced by the slowest hop), at 1/oversubscription across racks.

Candidates within 1% of the fastest step tie (`TIE_SHARE`) and rank by fewer pipeline stages. For GPT-3
175B on 1,024 A100-80GB in DGX nodes of 8, with Megatron-LM's global batch, the first is what Megatron-LM
ran (Narayanan et al., 2021, Table 1: tp 8, pp 8, dp 16, global batch 1,536); tp 8 with 16 or 32 stages
follow within 1%.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from ddpfsdp.demos.base.shapes import GPT_PRESETS, GPT_SIZES, GPTShape
from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.arguments import read_choice, read_count
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.pipeline import in_flight, stage_layers, stage_params
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.steptime import FLOPS_PER_PARAM_TOKEN, collective_time_s
from ddpfsdp.demos.theory.topology import LinksDocument, Topology

PLAN_SHAPES: dict[str, GPTShape] = {
    # GPT-3 175B (Brown et al., 2020, Table 2.1): 96 layers, d_model 12,288, 96 heads of 128, context 2,048,
    # GPT-2's vocabulary of 50,257.
    "175B": GPTShape(layers=96, d_model=12288, heads=96, seq_len=2048, vocab=50257),
}

DP_MODES: dict[str, str] = {"zero1": "zero1", "ddp": "ddp", "fsdp": "zero3"}
"""dp mode -> the strategy whose model state it holds at rest."""
DP_COMM: dict[str, str] = {"zero1": "zero1", "ddp": "ddp", "fsdp": "grad-op"}
"""dp mode -> the strategy whose collectives it runs once per step (FSDP under PP: one gather, one reduce)."""

DEFAULT_GLOBAL_BATCH = 1536  # sequences: Megatron-LM's GPT-3 175B run (Narayanan et al., 2021, Table 1)
DEFAULT_MFU = 0.5
DEFAULT_TOP = 3
RECOMPUTE_FLOPS = 8 / 6  # checkpointing runs each block's forward again: 2 more FLOPs per parameter per token

TIE_SHARE = 0.01
"""Steps within 1% of the fastest tie: the model leaves out more than that (uneven stages, the embeddings and
the head on the end stages, the steady state's sends, kernels slower on smaller matrices), and each of those
grows with the stages, so among tied candidates the fewest pipeline stages rank first."""

TERMS = ("compute_s", "recompute_s", "bubble_s", "tp_s", "pp_s", "dp_s")


def plan_shape(name: str) -> GPTShape:
    """The shape the planner splits: a preset (tiny..xl), a named size (1B..70B) or GPT-3 175B."""
    key = str(name).strip()
    for table in (GPT_PRESETS, GPT_SIZES, PLAN_SHAPES):
        for size, shape in table.items():
            if size.lower() == key.lower():
                return shape
    known = ", ".join([*GPT_SIZES, *PLAN_SHAPES])
    raise ValueError(f"a plan splits the model's blocks and heads, so it needs their shape: give --model (a GPT "
                     f"preset) or a named size, --params {known}")


class JobDocument(TypedDict):
    """The `job` of the plan section: the shape, the cluster's size and the training set-up."""

    params: int
    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab: int
    gpus: int
    gpus_per_node: int
    gpu_mem_bytes: int
    peak_flops_per_s: float
    mfu: float
    precision: str
    optimizer: str
    global_batch: int
    micro_batch: int
    dp_mode: str
    schedule: str


class Degrees(TypedDict):
    tp: int
    pp: int
    dp: int


class StageMemory(TypedDict):
    """The fullest pipeline rank's bytes per GPU."""

    rank: int
    local_params: int
    model_state_bytes: int
    working_bytes: int
    activation_bytes: int
    in_flight: float
    total_bytes: int


class TpTraffic(TypedDict):
    link: str
    calls: int
    wire_bytes: float
    time_s: float


class PpTraffic(TypedDict):
    link: str
    boundary_bytes: int
    wire_bytes: int
    time_s: float


class DpTraffic(TypedDict):
    link: str
    ops: list[str]
    wire_bytes: float
    time_s: float


class PlanComm(TypedDict, total=False):
    """Each parallel dimension's traffic per step per GPU; a dimension of degree 1 has none."""

    tp: TpTraffic
    pp: PpTraffic
    dp: DpTraffic


class Terms(TypedDict):
    """The seconds a step spends on each term."""

    compute_s: float
    recompute_s: float
    bubble_s: float
    tp_s: float
    pp_s: float
    dp_s: float


class Candidate(Degrees):
    """One (tp, pp, dp) weighed: why it cannot run, or its memory, traffic, bubble and step."""

    valid: bool
    reason: str | None
    microbatches: NotRequired[int]  # these only when valid
    checkpoint_activations: NotRequired[bool]
    fits: NotRequired[bool]
    memory: NotRequired[StageMemory]
    comm: NotRequired[PlanComm]
    bubble_ratio: NotRequired[float]
    bubble_fraction: NotRequired[float]
    terms: NotRequired[Terms]
    step_s: NotRequired[float]


class Loser(Degrees):
    """A candidate left out of the plan's first ones, and what it loses by."""

    fits: bool
    step_s: float
    total_bytes: int
    loses_by: str
    reason: str


class Invalid(Degrees):
    reason: str


class PlanSection(TypedDict):
    """The `plan` section of the `ddpfsdp.calc/1` document."""

    theory: bool
    job: JobDocument
    topology: LinksDocument
    candidates: list[Candidate]
    others: list[Loser]
    invalid: list[Invalid]
    loses_by: dict[str, int]  # candidates by the kind of reason they lose
    cluster: NotRequired[str]  # calc's cluster preset


@dataclass(frozen=True)
class Job:
    """A model to train on a cluster: everything a plan is computed from."""

    shape: GPTShape
    topo: Topology
    gpu_mem_bytes: int
    peak_flops_per_s: float
    mfu: float = DEFAULT_MFU
    precision: str = "bf16-master"
    optimizer: str = "adam"
    global_batch: int = DEFAULT_GLOBAL_BATCH
    micro_batch: int = 1
    dp_mode: str = "zero1"

    def document(self) -> JobDocument:
        return {"params": self.shape.params, "layers": self.shape.layers, "d_model": self.shape.d_model,
                "heads": self.shape.heads, "seq_len": self.shape.seq_len, "vocab": self.shape.vocab,
                "gpus": self.topo.gpus, "gpus_per_node": self.topo.gpus_per_node, "gpu_mem_bytes": self.gpu_mem_bytes,
                "peak_flops_per_s": self.peak_flops_per_s, "mfu": self.mfu, "precision": self.precision,
                "optimizer": self.optimizer, "global_batch": self.global_batch, "micro_batch": self.micro_batch,
                "dp_mode": self.dp_mode, "schedule": "1f1b"}


def check_job(*, shape: GPTShape, topo: Topology, gpu_mem_bytes: int, peak_flops_per_s: float, mfu: Any = DEFAULT_MFU,
              precision: str = "bf16-master", optimizer: str = "adam", global_batch: Any = DEFAULT_GLOBAL_BATCH,
              micro_batch: Any = 1, dp_mode: str = "zero1") -> Job:
    """The job, checked; a ValueError says what to change."""
    share = float(mfu)
    if not 0 < share <= 1:
        raise ValueError(f"MFU is a share of the peak, in (0, 1]; got {mfu!r}")
    if not peak_flops_per_s > 0:
        raise ValueError("the GPU's peak FLOP/s must be positive")
    precision_for(precision)
    return Job(shape, topo, int(gpu_mem_bytes), float(peak_flops_per_s), share, precision, optimizer,
               read_count(global_batch, "global batch"), read_count(micro_batch, "micro-batch"),
               read_choice(dp_mode, DP_MODES, "dp mode"))


# ----------------------------------------------------------------------------- one candidate


def degrees(job: Job) -> list[Degrees]:
    """Every (tp, pp, dp) the planner weighs: tp a power of two up to two nodes, pp dividing what is left."""
    gpus, per_node = job.topo.gpus, job.topo.gpus_per_node
    found: list[Degrees] = []
    tp = 1
    while tp <= min(gpus, 2 * per_node):
        if gpus % tp == 0:
            rest = gpus // tp
            found += [{"tp": tp, "pp": pp, "dp": rest // pp} for pp in range(1, rest + 1) if rest % pp == 0
                      and pp <= job.shape.layers]
        tp *= 2
    return found


def refusal(job: Job, tp: int, pp: int, dp: int) -> str | None:
    """Why these degrees cannot run at all, or None."""
    if job.shape.heads % tp:
        return f"tp {tp} does not divide the {job.shape.heads} heads"
    per_step = dp * job.micro_batch
    if job.global_batch % per_step:
        return (f"the global batch of {job.global_batch:,} sequences is not a whole number of micro-batches of "
                f"{job.micro_batch} on each of dp {dp:,} replicas")
    m = job.global_batch // per_step
    if pp > 1 and m < pp:
        return f"1F1B needs m >= pp: {m} micro-batch(es) for {pp} stages"
    return None


def _memory(job: Job, tp: int, pp: int, dp: int, m: int, checkpoint: bool) -> StageMemory:
    """The fullest pipeline rank: model state, working set and activations in flight (bytes)."""
    shape, held = job.shape, implementation(DP_MODES[job.dp_mode], job.precision)
    layers = stage_layers(shape.layers, pp)
    params = stage_params(shape, pp)
    worst: StageMemory | None = None
    for rank in range(pp):
        local = math.ceil(params[rank] / tp)
        state = model_state(local, dp, DP_MODES[job.dp_mode], job.precision, job.optimizer)["model_state_bytes"]
        working = local * (held.gather_bytes + held.reduce_bytes) if job.dp_mode == "fsdp" else 0
        saved = transformer_activation_bytes(
            layers=sum(layers[rank]), d_model=shape.d_model, tokens=shape.seq_len, batch_size=job.micro_batch,
            head_outputs=shape.vocab, head_tokens=shape.seq_len, precision=job.precision,
            checkpoint_activations=checkpoint, tp=tp)
        per_microbatch = saved["saved_bytes"] - (0 if rank == pp - 1 else saved["head_bytes"])
        flight = in_flight(pp, m, "1f1b", 1, rank)["microbatches"]
        total = state + working + round(per_microbatch * flight)
        if worst is None or total > worst["total_bytes"]:
            worst = {"rank": rank, "local_params": local, "model_state_bytes": state, "working_bytes": working,
                     "activation_bytes": round(per_microbatch * flight), "in_flight": flight, "total_bytes": total}
    assert worst is not None  # pp >= 1 ranks
    return worst


def _comm(job: Job, tp: int, pp: int, dp: int, m: int, checkpoint: bool, local: int) -> PlanComm:
    """Each dimension's traffic per step per GPU: the link, wire bytes and seconds on the critical path."""
    topo, shape = job.topo, job.shape
    boundary = job.micro_batch * shape.seq_len * shape.d_model * precision_for(job.precision).compute_bytes
    lat = {"intra_latency_s": topo.intra_latency_s, "inter_latency_s": topo.inter_latency_s}
    out: PlanComm = {}
    if tp > 1:
        nodes = math.ceil(tp / topo.gpus_per_node)
        link, bandwidth = topo.link_for(nodes)
        calls = (6 if checkpoint else 4) * max(sum(chunk) for chunk in stage_layers(shape.layers, pp)) * m
        timing = collective_time_s("all_reduce", calls * boundary, tp, bytes_per_s=bandwidth, nodes=nodes,
                                   calls=calls, **lat)
        out["tp"] = {"link": link, "calls": calls, "wire_bytes": timing["wire_bytes"], "time_s": timing["time_s"]}
    if pp > 1:
        crosses = pp > max(1, topo.gpus_per_node // tp)
        link, bandwidth = topo.link_for(2 if crosses else 1)
        latency = topo.inter_latency_s if crosses else topo.intra_latency_s
        hop_s = latency + boundary / bandwidth
        out["pp"] = {"link": link, "boundary_bytes": boundary, "wire_bytes": 2 * m * boundary,
                     "time_s": 2 * (pp - 1) * hop_s}
    if dp > 1:
        per_node_stride = tp * pp
        nodes = dp if per_node_stride >= topo.gpus_per_node else math.ceil(dp * per_node_stride / topo.gpus_per_node)
        nodes = min(nodes, topo.nodes)
        link, bandwidth = topo.link_for(nodes)
        ops = step_comm(DP_COMM[job.dp_mode], local, dp, job.precision)
        timings = [collective_time_s(op, figures["bytes"], dp, bytes_per_s=bandwidth, nodes=nodes, **lat)
                   for op, figures in ops.items()]
        out["dp"] = {"link": link, "ops": sorted(ops), "wire_bytes": sum(t["wire_bytes"] for t in timings),
                     "time_s": sum(t["time_s"] for t in timings)}
    return out


def evaluate(job: Job, tp: int, pp: int, dp: int) -> Candidate:
    """One candidate: memory, activation checkpointing, traffic by link, bubble and the step's terms."""
    reason = refusal(job, tp, pp, dp)
    row: Candidate = {"tp": tp, "pp": pp, "dp": dp, "valid": reason is None, "reason": reason}
    if reason:
        return row
    m = job.global_batch // (dp * job.micro_batch)
    memory = _memory(job, tp, pp, dp, m, checkpoint=False)
    checkpoint = memory["total_bytes"] > job.gpu_mem_bytes
    if checkpoint:
        memory = _memory(job, tp, pp, dp, m, checkpoint=True)
    fits = memory["total_bytes"] <= job.gpu_mem_bytes
    comm = _comm(job, tp, pp, dp, m, checkpoint, memory["local_params"])
    tokens = job.global_batch * job.shape.seq_len
    compute = FLOPS_PER_PARAM_TOKEN * job.shape.params * tokens / (job.topo.gpus * job.peak_flops_per_s * job.mfu)
    recompute = compute * (RECOMPUTE_FLOPS - 1) if checkpoint else 0.0
    bubble_ratio = (pp - 1) / m
    terms: Terms = {"compute_s": compute, "recompute_s": recompute, "bubble_s": (compute + recompute) * bubble_ratio,
                    "tp_s": comm["tp"]["time_s"] if "tp" in comm else 0.0,
                    "pp_s": comm["pp"]["time_s"] if "pp" in comm else 0.0,
                    "dp_s": comm["dp"]["time_s"] if "dp" in comm else 0.0}
    row.update(microbatches=m, checkpoint_activations=checkpoint, fits=fits, memory=memory, comm=comm,
               bubble_ratio=bubble_ratio, bubble_fraction=(pp - 1) / (m + pp - 1), terms=terms,
               step_s=sum(terms.values()))
    return row


# ----------------------------------------------------------------------------- the plan


def _loses(row: Candidate, best: Candidate, job: Job, tie_s: float) -> tuple[str, str]:
    """(kind, why) this candidate loses to the best: memory; a tie (a step within `tie_s`, the fastest's
    plus `TIE_SHARE`) lost on the number of stages; or the term it spends most time on beyond the best."""
    from ddpfsdp.demos.base.units import format_bytes

    if not row["fits"]:
        return "memory", (f"needs {format_bytes(row['memory']['total_bytes'])} per GPU against "
                          f"{format_bytes(job.gpu_mem_bytes)}, even with every block checkpointed")
    if row["step_s"] <= tie_s:
        return "tie", (f"within 1% of the first ({row['step_s'] / best['step_s'] - 1:+.1%}), ranked after it for "
                       f"its {row['pp']} pipeline stages against {best['pp']}")
    extra = {term: row["terms"][term] - best["terms"][term] for term in TERMS if term != "compute_s"}
    term = max(extra, key=extra.get)
    more = f"{extra[term]:.3g} s more per step"
    slower = f"{row['step_s'] / best['step_s'] - 1:.1%} slower"
    if term == "tp_s" and row["comm"].get("tp", {}).get("link") == "inter":
        return "tp-across-nodes", (f"tp {row['tp']} spans {math.ceil(row['tp'] / job.topo.gpus_per_node)} nodes: "
                                   f"its all-reduces cross the network, {more} ({slower})")
    texts = {
        "recompute_s": ("recompute", f"fits only with every block checkpointed: the second forward costs {more}"),
        "bubble_s": ("bubble", f"bubble (pp-1)/m = {row['pp'] - 1}/{row['microbatches']}: {more}"),
        "tp_s": ("tp", f"TP's all-reduces on the critical path: {more}"),
        "pp_s": ("pp", f"the pipeline's fill and drain over the network: {more}"),
        "dp_s": ("dp", f"data-parallel traffic of {row['memory']['local_params']:,} parameters per GPU over dp "
                       f"{row['dp']}: {more}"),
    }
    kind, why = texts[term]
    return kind, f"{why} ({slower})"


def ranked(rows: list[Candidate]) -> list[Candidate]:
    """Fastest first; but steps within `TIE_SHARE` of the fastest tie, and the tied go fewest stages first."""
    by_time = sorted(rows, key=lambda row: (row["step_s"], row["pp"], row["tp"]))
    if not by_time:
        return []
    limit = by_time[0]["step_s"] * (1 + TIE_SHARE)
    tied = sorted((row for row in by_time if row["step_s"] <= limit), key=lambda row: (row["pp"], row["step_s"]))
    return tied + [row for row in by_time if row["step_s"] > limit]


def plan(job: Job, top: int = DEFAULT_TOP) -> PlanSection:
    """The `plan` section of `ddpfsdp calc --json`: the best candidates, ranked, and why the others lose."""
    rows = [evaluate(job, **chosen) for chosen in degrees(job)]
    valid = [row for row in rows if row["valid"]]
    fitting = ranked([row for row in valid if row["fits"]])
    if not fitting:
        least = min(valid, key=lambda row: row["memory"]["total_bytes"], default=None)
        raise ValueError("no tp x pp x dp fits this model in the GPUs' memory"
                         + (f" (the least is {least['memory']['total_bytes'] / 1e9:,.1f} GB per GPU at tp "
                            f"{least['tp']}, pp {least['pp']})" if least else "")
                         + ": add GPUs, use larger ones, or shard more of the model state over dp (zero1, or fsdp)")
    best = fitting[0]
    tie_s = min(row["step_s"] for row in fitting) * (1 + TIE_SHARE)
    others: list[Loser] = []
    for row in valid:
        if row in fitting[:top]:
            continue
        kind, why = _loses(row, best, job, tie_s)
        others.append({"tp": row["tp"], "pp": row["pp"], "dp": row["dp"], "fits": row["fits"],
                       "step_s": row["step_s"], "total_bytes": row["memory"]["total_bytes"], "loses_by": kind,
                       "reason": why})
    kinds: dict[str, int] = {}
    for other in others:
        kinds[other["loses_by"]] = kinds.get(other["loses_by"], 0) + 1
    return {
        "theory": True,
        "job": job.document(),
        "topology": job.topo.document(),
        "candidates": fitting[:top],
        "others": sorted(others, key=lambda other: (not other["fits"], other["step_s"])),
        "invalid": [{"tp": r["tp"], "pp": r["pp"], "dp": r["dp"], "reason": r["reason"]} for r in rows if not r["valid"]],
        "loses_by": kinds,
    }


# ----------------------------------------------------------------------------- quiz answers


def degrees_text(tp: int, pp: int, dp: int) -> str:
    return f"tp {tp} x pp {pp} x dp {dp}"


def job_from_args(*, gpus: Any, gpus_per_node: Any, gpu_mem: Any, peak_flops_per_s: Any, intra_bytes_per_s: Any,
         inter_bytes_per_s: Any, model: str | None = None, layers: Any = None, d_model: Any = None, heads: Any = None,
         vocab: Any = None, seq_len: Any = None, global_batch: Any = DEFAULT_GLOBAL_BATCH, micro_batch: Any = 1,
         precision: str = "bf16-master", optimizer: str = "adam", mfu: Any = DEFAULT_MFU, dp_mode: str = "zero1",
         intra_latency_s: Any = 0.0, inter_latency_s: Any = 0.0) -> Job:
    """The job the quiz functions describe: a named shape (`model`) or one given by its sizes."""
    from ddpfsdp.demos.base.units import parse_bytes
    from ddpfsdp.demos.theory.bandwidth import parse_rate
    from ddpfsdp.demos.theory.topology import check_topology

    if model is not None:
        shape = plan_shape(model)
    else:
        shape = GPTShape(layers=read_count(layers, "layers"), d_model=read_count(d_model, "d_model"),
                         heads=read_count(heads, "heads"), seq_len=read_count(seq_len, "seq len"),
                         vocab=read_count(vocab, "vocab"))
    topo = check_topology(gpus=gpus, gpus_per_node=gpus_per_node, intra_bytes_per_s=parse_rate(intra_bytes_per_s),
                          inter_bytes_per_s=parse_rate(inter_bytes_per_s), intra_latency_s=float(intra_latency_s),
                          inter_latency_s=float(inter_latency_s))
    return check_job(shape=shape, topo=topo, gpu_mem_bytes=parse_bytes(gpu_mem), peak_flops_per_s=float(peak_flops_per_s),
                     mfu=mfu, precision=precision, optimizer=optimizer, global_batch=global_batch,
                     micro_batch=micro_batch, dp_mode=dp_mode)


def q_plan_degrees(*, rank: Any = 1, **job: Any) -> str:
    """The degrees the planner ranks `rank`-th (1: best), as "tp T x pp P x dp D"; `job` as `job_from_args` takes it."""
    place = read_count(rank, "rank")
    chosen = plan(job_from_args(**job), top=place)["candidates"]
    if place > len(chosen):
        raise ValueError(f"only {len(chosen)} candidate(s) fit; there is no {place}th")
    row = chosen[place - 1]
    return degrees_text(row["tp"], row["pp"], row["dp"])


def q_plan_memory_bytes(*, tp: Any, pp: Any, dp: Any, **job: Any) -> int:
    """Bytes per GPU on the fullest pipeline rank of these degrees (model state, working set, activations in
    flight; with every block checkpointed where that is what fits)."""
    row = evaluate(job_from_args(**job), read_count(tp, "tp"), read_count(pp, "pp"), read_count(dp, "dp"))
    if not row["valid"]:
        raise ValueError(row["reason"])
    return row["memory"]["total_bytes"]


QUIZ_FUNCTIONS = {"plan_degrees": q_plan_degrees, "plan_memory_bytes": q_plan_memory_bytes}
