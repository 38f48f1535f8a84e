"""The steps an interviewer takes in order: memory, the strategy that fits, traffic, time, activations.

Each builder returns a Step whose answer the analytic model computes from the step's own function
and arguments, with the working written from the same figures.
"""

from __future__ import annotations

from ddpfsdp.demos.theory import overlap, planning, steptime
from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.activations import transformer_activation_bytes
from ddpfsdp.demos.theory.buckets import DDP_BUCKET_CAP_MB
from ddpfsdp.demos.theory.working_set import DEEPSPEED_REDUCE_BUCKET_ELEMENTS
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown, precision_for, residual_bytes
from ddpfsdp.demos.theory.sharding import ZERO_STAGES
from ddpfsdp.demos.theory.state import bytes_per_param, model_state
from ddpfsdp.quiz.interview.scenario import Option, Setup, Step, compute, new_step, gb, gib, pct, per_s, secs

STRATEGY_NAMES: dict[str, str] = {
    "ddp": "DDP",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3 / FSDP full sharding",
    "hsdp": "HSDP",
}

OPTION_TEXTS: dict[str, str] = {
    "ddp": "DDP: nothing sharded",
    "zero1": "ZeRO-1: optimizer state sharded",
    "zero2": "ZeRO-2: gradients and optimizer state sharded",
    "zero3": "ZeRO-3 / FSDP full: parameters, gradients and optimizer state sharded",
}

def _per_param(setup: Setup) -> str:
    per = bytes_per_param_breakdown(setup.precision, setup.optimizer)
    return f"params {per['params']} + grads {per['grads']} + optimizer {per['optimizer']} = {per['total']} bytes per parameter"


def model_state_ddp(setup: Setup) -> Step:
    args = {"params": setup.params, "gpus": setup.gpus, "strategy": "ddp", "precision": setup.precision,
            "optimizer": setup.optimizer}
    answer = compute("model_state_bytes", args)
    return new_step("model-state", title="Model state under DDP",
        prompt="Start with plain **DDP**. How much **model state** does each GPU hold between steps "
        "(parameters + gradients + optimizer state; no activations)? Answer in GB (1e9 bytes).",
        unit="GB", answer=answer, tolerance=0.05, fn="model_state_bytes", args=args,
        working=f"{setup.precision} with {setup.optimizer}: {_per_param(setup)}. DDP shards nothing, so every GPU "
        f"holds all of it: {bytes_per_param_breakdown(setup.precision, setup.optimizer)['total']} B × "
        f"{setup.params / 1e9:g}e9 = {gb(answer)}, against {gb(setup.gpu_mem_bytes)} of memory.",
    )


def stage_options(setup: Setup) -> tuple[Option, ...]:
    options = []
    for stage, strategy in enumerate(ZERO_STAGES):
        held = model_state(setup.params, setup.gpus, strategy, setup.precision, setup.optimizer)["model_state_bytes"]
        per = bytes_per_param(strategy, setup.precision, setup.optimizer)
        verdict = "fits in" if held <= setup.gpu_mem_bytes else "does not fit in"
        options.append(Option(OPTION_TEXTS[strategy], stage, f"({per['params']} + {per['grads']} + {per['optimizer']} "
                              f"bytes per parameter) {gb(held)} per GPU {verdict} {gb(setup.gpu_mem_bytes)}",
                              detail=f"as {implementation(strategy, setup.precision).name}"))
    full = model_state(setup.params, setup.gpus, "zero3", setup.precision, setup.optimizer)["model_state_bytes"]
    options.append(Option(f"None: even ZeRO-3 does not fit on {setup.gpus} GPUs", planning.NONE_FITS,
                          f"ZeRO-3 needs {gb(full)} per GPU" + (" and it fits, so this is wrong" if full <= setup.gpu_mem_bytes else "")))
    return tuple(options)


def choice(options: tuple[Option, ...], value: object) -> int:
    """The number (from 1) of the option the analytic model's value picks."""
    return next(number for number, option in enumerate(options, start=1) if option.value == value)


def fit_strategy(setup: Setup, change: str | None = None) -> Step:
    args = {"params": setup.params, "gpus": setup.gpus, "gpu_mem": setup.gpu_mem_bytes, "precision": setup.precision,
            "optimizer": setup.optimizer}
    options = stage_options(setup)
    number = choice(options, compute("fit_stage", args))
    return new_step("fit-strategy", title="The lowest strategy that fits",
        prompt=f"Which is the **lowest** strategy whose model state per GPU fits in {gb(setup.gpu_mem_bytes)}? Ignore "
        "activations; each choice names the implementation graded.",
        unit="choice", answer=number, fn="fit_stage", args=args, options=options, change=change,
        working=f"Per GPU, what each stage's implementation holds, one more part sharded over {setup.gpus} GPUs: "
        + "; ".join(f"{o.text.split(':')[0]} {o.reason}" for o in options[:-1])
        + f". The lowest that fits is option {number}.",
    )


def _ops_text(setup: Setup, strategy: str, group_size: int | None = None) -> str:
    if strategy == "ddp":
        return "DDP all-reduces the gradients"
    if strategy in ("zero1", "zero2"):
        return f"{STRATEGY_NAMES[strategy]} reduce-scatters the gradients and all-gathers the updated parameters"
    text = (f"{STRATEGY_NAMES[strategy]} all-gathers each unit's parameters in forward and again in backward, "
            "and reduce-scatters its gradients")
    if strategy == "hsdp":
        text += (f" inside each shard group of {group_size}, then all-reduces each rank's 1/{group_size} gradient "
                 "shard across the groups")
    return text


def wire_bytes(setup: Setup, plan: str) -> Step:
    args = {"params": setup.params, "gpus": setup.gpus, "strategy": plan, "precision": setup.precision}
    answer = compute("step_wire_bytes", args)
    ops = step_comm(plan, setup.params, setup.gpus, setup.precision)
    parts = [f"{op.replace('_', '-')} of {gb(f['bytes'])} × {wire_factor(op, setup.gpus):.4g} = "
             f"{gb(f['wire_bytes_per_rank'])}" for op, f in ops.items()]
    return new_step("wire-bytes", title="Bytes each rank sends per step",
        prompt=f"We go with **{STRATEGY_NAMES[plan]}** (as {implementation(plan, setup.precision).name}), the lowest "
        f"that fits. {_ops_text(setup, plan)}, in the element sizes that implementation sends. With ring "
        "collectives (an all-reduce sends 2(n-1)/n of its buffer per rank; an all-gather or a reduce-scatter "
        "(n-1)/n), how many bytes does **each rank send per step**? Answer in GB.",
        unit="GB", answer=answer, tolerance=0.05, fn="step_wire_bytes", args=args,
        working=f"Over {setup.gpus} ranks, in {setup.precision}: " + "; ".join(parts) + f"; sum {gb(answer)} per rank.",
    )


def compute_time(setup: Setup) -> Step:
    args = {"params": setup.params, "tokens": setup.global_batch_tokens, "gpus": setup.gpus,
            "peak_flops_per_s": setup.peak_flops_per_s, "mfu": setup.mfu}
    answer = compute("compute_time_s", args)
    flops = steptime.FLOPS_PER_PARAM_TOKEN * setup.params * setup.global_batch_tokens
    rate = setup.gpus * setup.peak_flops_per_s * setup.mfu
    return new_step("compute-time", title="Compute time per step",
        prompt="Now time. Training costs about **6 FLOPs per parameter per token** (2 in forward, 4 in backward; "
        f"leave attention's own FLOPs out). At {setup.mfu:.0%} MFU, how long does **one step's compute** take "
        f"on each GPU (the whole global batch of {setup.global_batch_tokens:,} tokens, shared by {setup.gpus} GPUs)? "
        "Answer in seconds.",
        unit="s", answer=answer, tolerance=0.10, fn="compute_time_s", args=args,
        working=f"6 × {setup.params:.3g} params × {setup.global_batch_tokens:,} tokens = {flops:.4g} FLOPs; "
        f"{setup.gpus} GPUs × {setup.peak_flops_per_s:.4g} FLOP/s × {setup.mfu:.2f} = {rate:.4g} FLOP/s; "
        f"{flops:.4g} / {rate:.4g} = {secs(answer)}.",
    )


def _timing_lines(setup: Setup, plan: str, group_size: int | None = None) -> list[str]:
    lines = []
    for op, t in steptime.step_comm_times(**setup.comm_args(plan, group_size)).items():
        steps = f"{t['intra_steps']} × {setup.intra_latency_s * 1e6:g} µs"
        if t["inter_steps"]:
            steps += f" + {t['inter_steps']} × {setup.inter_latency_s * 1e6:g} µs"
        lines.append(
            f"{op.replace('_', '-')} over {t['ranks']} ranks on {per_s(t['bytes_per_s'])}: {t['calls']} calls × ({steps}) "
            f"= {secs(t['latency_s'])}, plus {gb(t['wire_bytes'])} / {per_s(t['bytes_per_s'])} = {secs(t['bandwidth_s'])}; "
            f"{secs(t['time_s'])}"
        )
    return lines


def calls_text(setup: Setup, plan: str, group_size: int | None = None) -> str:
    """The calls each collective of `plan` takes, as its implementation issues them (`steptime.collective_calls`)."""
    if plan in ("zero3", "hsdp"):
        return (f"one call per FSDP unit ({setup.units} units: the embeddings, {setup.layers} blocks, the head), "
                "the all-gather twice")
    calls = {op: t["calls"] for op, t in steptime.step_comm_times(**setup.comm_args(plan, group_size)).items()}
    if plan in ("zero1", "zero2"):
        return (f"DeepSpeed reduces the gradients in buckets of {DEEPSPEED_REDUCE_BUCKET_ELEMENTS:.0e} elements "
                f"(its reduce_bucket_size), {calls['reduce_scatter']} here, and all-gathers the updated parameters in "
                f"one call per parameter group ({calls['all_gather']} here)")
    return (f"one all-reduce per DDP gradient bucket: DDP fills buckets of {DDP_BUCKET_CAP_MB} MiB (the first 1 MiB) "
            f"with whole gradients in the order they arrive, never splitting a tensor, so {calls['all_reduce']} "
            "buckets here (the model laid out as a GPT-style decoder: a fused qkv, an output projection and two MLP "
            "matrices per block)")


RING_MODEL = (
    "Each collective costs its ring steps times the step latency (2(n-1) steps for an all-reduce, n-1 for the others; "
    "of them, 2(k-1) or k-1 cross between k nodes and pay the network's latency) plus its wire bytes over the "
    "bandwidth; a ring that spans nodes runs at the network's bandwidth."
)


def comm_time(setup: Setup, plan: str, group_size: int | None = None, change: str | None = None) -> Step:
    args = setup.comm_args(plan, group_size)
    answer = compute("comm_time_s", args)
    return new_step("comm-time", title="Communication time per step",
        prompt=f"{RING_MODEL} Calls: {calls_text(setup, plan, group_size)}. How long does **one step's communication** take "
        "if nothing overlaps? Answer in seconds.",
        unit="s", answer=answer, tolerance=0.10, fn="comm_time_s", args=args, change=change,
        working="; ".join(_timing_lines(setup, plan, group_size)) + f". Total {secs(answer)}.",
    )


def plan_name(plan: str, group_size: int | None = None) -> str:
    return f"HSDP in groups of {group_size}" if plan == "hsdp" else STRATEGY_NAMES[plan]


WINDOW_NAMES = {"forward": "in forward", "backward": "in backward", "none": "in neither"}


def _in_windows(plan: str, ops: dict) -> str:
    """'all-gather 3.2 s, half in forward and half in backward; reduce-scatter 1.5 s in backward'."""
    parts = []
    for op, timing in ops.items():
        shares = overlap.windows(plan)[op]
        where = " and ".join(("half " if share == 0.5 else "") + WINDOW_NAMES[window] for window, share in shares.items())
        parts.append(f"{op.replace('_', '-')} {secs(timing['time_s'])} {where}")
    return "; ".join(parts)


def overlap_working(plan: str, t: dict) -> str:
    """The exposed time window by window, from `steptime.step_times`'s figures."""
    compute_s, comm, shown = t["compute_s"], t["comm_by_window_s"], t["exposed_by_window_s"]
    lines = [f"Compute {secs(compute_s)}: forward (1/3) {secs(overlap.FORWARD_SHARE * compute_s)}, backward (2/3) "
             f"{secs(overlap.BACKWARD_SHARE * compute_s)}. Communication {secs(t['comm_s'])}: {_in_windows(plan, t['ops'])}."]
    for window in ("forward", "backward"):
        if comm[window]:
            room = overlap.WINDOWS[window] * compute_s
            lines.append(f"{WINDOW_NAMES[window].capitalize()}: {secs(comm[window])} against {secs(room)} of compute, "
                         f"{secs(shown[window])} shows.")
    if comm["none"]:
        lines.append(f"In neither: {secs(comm['none'])} shows whole.")
    lines.append(f"Exposed {secs(t['exposed_s'])}: the step takes {secs(t['step_s'])}, {pct(t['exposed_share'])} "
                 f"exposed. Without overlap: {secs(t['step_no_overlap_s'])}, {pct(t['exposed_share_no_overlap'])} exposed.")
    return " ".join(lines)


EXPOSED_SHARE_TOLERANCE = 0.20
"""An exposed share is graded within a fifth of itself: it is a difference of times, each within 10%."""
EXPOSED_SHARE_FLOOR = 0.01
"""...but never tighter than 1 point, and never looser: believing everything hides (0%) fails a 3% key."""


def exposed_share(setup: Setup, plan: str, change: str | None = None, group_size: int | None = None) -> Step:
    args = setup.time_args(plan, group_size)
    answer = compute("exposed_share", args)
    times = steptime.step_times(**args)
    return new_step("exposed-share", title="Exposed communication",
        prompt=f"Collectives hide only behind compute that runs while they are in flight. With "
        f"{plan_name(plan, group_size)} (as {implementation(plan, setup.precision).name}): "
        f"{overlap.ASSUMPTIONS[plan]}. {overlap.RULE} What share of the step is **exposed communication** "
        "(nothing computing while it runs), with that overlap? Answer in percent.",
        unit="%", answer=answer, tolerance=EXPOSED_SHARE_TOLERANCE, floor=EXPOSED_SHARE_FLOOR, fn="exposed_share",
        args=args, change=change,
        working=overlap_working(plan, times),
    )


def cast_reason(plan: str, precision: str) -> str:
    """How `precision` reaches the forward in the implementation `plan` is graded as, which sets the residual
    stream's dtype: named after that implementation (DeepSpeed's modes, FSDP2's policy, DDP's autocast)."""
    held, spec = implementation(plan, precision), precision_for(precision)
    if spec.name == "fp32":
        return "everything is fp32: nothing casts, so the residual stream and every matmul are fp32"
    deepspeed = held.name.startswith("DeepSpeed")
    if held.cast == "autocast" and spec.name == "bf16-mixed":
        who = "DeepSpeed's torch_autocast mode runs the forward under torch.autocast, which" if deepspeed else "torch.autocast"
        return f"{who} casts each matmul's inputs, so the residual stream between blocks stays in the held dtype (fp32)"
    master = " (the fp32 master copy lives in the optimizer)" if spec.master_bytes else ""
    if deepspeed:
        return (f"DeepSpeed with bf16 enabled casts the model itself to bf16{master}, so the embeddings' output and "
                "the whole residual stream are bf16")
    if held.cast == "param-dtype" and spec.name == "bf16-mixed":
        return ("FSDP2's MixedPrecisionPolicy(param_dtype=bf16) casts the parameters themselves, so the embeddings' "
                "output and the whole residual stream are bf16")
    return (f"the model itself is held in bf16{master}, so nothing casts: the embeddings' output and the whole "
            "residual stream are bf16")


def activations(setup: Setup, plan: str, change: str | None = None) -> Step:
    args = {**setup.shape_args(), "batch_size": setup.micro_batch, "precision": setup.precision,
            "checkpoint_activations": False, "strategy": plan}
    answer = compute("transformer_activation_bytes", args)
    spec = precision_for(setup.precision)
    held = implementation(plan, setup.precision)
    r = residual_bytes(spec, held.cast)
    parts = transformer_activation_bytes(
        layers=setup.layers, d_model=setup.d_model, tokens=setup.seq_len, batch_size=setup.micro_batch,
        head_outputs=setup.vocab, head_tokens=setup.seq_len, precision=setup.precision, checkpoint_activations=False,
        cast=held.cast)
    return new_step("activations", title="Activation memory",
        prompt=f"Activations, without checkpointing, with {STRATEGY_NAMES[plan]} (as {held.name}): "
        f"{cast_reason(plan, setup.precision)}. Use the analytic model: a block saves b·s·d·(2r + 14c) bytes "
        f"(r = {r}, the residual stream's bytes; c = {spec.compute_bytes}, compute bytes; fused "
        "attention keeps no s×s scores); the head keeps b·s·d·(r + c) and the loss's log-softmax b·s·vocab in fp32 "
        "(bf16 under pure bf16 or bf16-master), and the peak, early in backward, adds the log-softmax's gradient. "
        f"What is the **peak activation memory** per GPU for the micro-batch of {setup.micro_batch}? Answer in GiB.",
        unit="GiB", answer=answer, tolerance=0.10, fn="transformer_activation_bytes", args=args, change=change,
        working=f"block = {setup.micro_batch}·{setup.seq_len}·{setup.d_model}·(2·{r} + "
        f"14·{spec.compute_bytes}) = {gib(parts['block_bytes'])}; {setup.layers} blocks + head "
        f"{gib(parts['head_bytes'])} = {gib(parts['saved_bytes'])} saved; the peak adds the log-softmax gradient: "
        f"{gib(answer)}.",
    )


def checkpoint(setup: Setup, plan: str) -> Step:
    args = {"params": setup.params, "gpus": setup.gpus, "strategy": plan, "precision": setup.precision,
            "optimizer": setup.optimizer, "gpu_mem": setup.gpu_mem_bytes, **setup.shape_args(),
            "micro_batch": setup.micro_batch}
    figures = planning.memory_plan(**args)
    base = f"model state {gb(figures['model_state_bytes'])} + working set {gb(figures['working_set_bytes'])}"
    options = (
        Option("Keep every activation: no checkpointing", "keep",
               f"{base} + activations {gb(figures['activations_kept_bytes'])} = {gb(figures['kept_total_bytes'])}"),
        Option("Checkpoint every block: keep only block inputs, recompute in backward", "checkpoint",
               f"{base} + checkpointed activations {gb(figures['activations_checkpointed_bytes'])} = "
               f"{gb(figures['checkpointed_total_bytes'])}"),
        Option("Neither fits: shrink the micro-batch", "smaller-batch",
               f"even checkpointed, {gb(figures['checkpointed_total_bytes'])} against {gb(setup.gpu_mem_bytes)}"),
    )
    number = choice(options, compute("checkpoint_plan", args))
    return new_step("checkpoint", title="Checkpoint or not",
        prompt=f"With {STRATEGY_NAMES[plan]}, each GPU also holds a working set (gradient buckets, or the FSDP units "
        f"being gathered and reduced). What is the cheapest way this micro-batch fits in {gb(setup.gpu_mem_bytes)}?",
        unit="choice", answer=number, fn="checkpoint_plan", args=args, options=options,
        working="; ".join(f"{o.text.split(':')[0]}: {o.reason}" for o in options[:2])
        + f" (against {gb(setup.gpu_mem_bytes)}). "
        + (f"Neither fits: option {number}." if figures["plan"] == "smaller-batch" else f"The cheapest that fits is option {number}."),
    )
