"""The pipeline follow-ups: the model no longer fits a node and the links between nodes are slow.

Pipeline across the nodes, one stage per node (FSDP inside each stage): how many micro-batches keep the
bubble under a target, then what the step takes with that bubble and the boundary hops over the slow
link, and the closing explanation. Every figure comes from the analytic model
(`demos.theory.pipeline`), through the step's own function and arguments.
"""

from __future__ import annotations

from ddpfsdp.demos.theory.pipeline import boundary_bytes, bubble, stage_layers
from ddpfsdp.demos.theory.quiz_answers import q_step_wire_bytes
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.quiz.interview.scenario import Setup, Step, compute, gb, new_step, pct, per_s, secs

TARGET_BUBBLE = 0.10
SLOWER = 8  # the links between nodes, this many times slower


def stages(setup: Setup) -> int:
    """One stage per node."""
    return setup.nodes


def _node_state(setup: Setup) -> int:
    """Model state per GPU if ZeRO-3 shards the whole model over one node."""
    return model_state(setup.params, setup.gpus_per_node, "zero3", setup.precision, setup.optimizer)["model_state_bytes"]


def microbatches_args(setup: Setup) -> dict:
    return {"pp": stages(setup), "target_fraction": TARGET_BUBBLE, "schedule": "1f1b"}


def across_nodes(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    """The links between nodes slow down 8x: pipeline across the nodes; how many micro-batches?"""
    changed = setup.changed(inter_bytes_per_s=setup.inter_bytes_per_s / SLOWER,
                            inter=f"{setup.inter} at 1/{SLOWER} of its speed")
    pp, node = stages(changed), _node_state(changed)
    fits = "does not fit" if node > changed.gpu_mem_bytes else "barely fits, leaving little for activations"
    boundary = boundary_bytes(changed.micro_batch, changed.seq_len, changed.d_model, changed.precision)
    dp_wire = q_step_wire_bytes(params=changed.params, gpus=changed.gpus, strategy="ddp", precision=changed.precision)
    args = microbatches_args(changed)
    answer = compute("pipeline_microbatches_for_bubble", args)
    change = (f"The links between nodes are {SLOWER}x slower: {per_s(changed.inter_bytes_per_s)} per GPU. Inside one "
              f"node, even ZeRO-3 needs {gb(node)} per GPU against {gb(changed.gpu_mem_bytes)}: the model {fits}.")
    return changed, plan, group, new_step(
        "pipeline-microbatches", title="Pipeline across the nodes",
        prompt=f"Pipeline across the nodes: **{pp} stages**, one per node ({changed.layers} layers split "
        f"{'/'.join(str(sum(c)) for c in stage_layers(changed.layers, pp))}), FSDP over the {changed.gpus_per_node} "
        f"GPUs of each node. Only the boundary activation crosses the slow link: {gb(boundary)} per micro-batch "
        f"({changed.micro_batch} × {changed.seq_len:,} × {changed.d_model} in compute precision), and its gradient "
        f"back, where a data-parallel all-reduce of the gradients would send {gb(dp_wire)} per rank per step. "
        f"With **1F1B**, every stage taking the same time, how many **micro-batches** per step keep the bubble at or "
        f"below **{TARGET_BUBBLE:.0%}** of the step?",
        unit="count", answer=answer, fn="pipeline_microbatches_for_bubble", args=args, change=change,
        working=f"The bubble is (p-1)/(m+p-1) with p = {pp}: ({pp}-1)/(m+{pp}-1) <= {TARGET_BUBBLE:g}  <=>  m >= "
        f"{pp - 1}·(1-{TARGET_BUBBLE:g})/{TARGET_BUBBLE:g} = {(pp - 1) * (1 - TARGET_BUBBLE) / TARGET_BUBBLE:.4g}, and "
        f"torch's Schedule1F1B also wants m >= {pp}: m = {int(answer)} (bubble "
        f"{pct(bubble(pp, int(answer), '1f1b')['bubble_fraction'])}).",
    )


def step_time_args(setup: Setup) -> dict:
    microbatches = compute("pipeline_microbatches_for_bubble", microbatches_args(setup))
    return {"params": setup.params, "gpus": setup.gpus, "pp": stages(setup), "microbatches": microbatches,
            "micro_batch": setup.micro_batch, "seq_len": setup.seq_len, "d_model": setup.d_model,
            "precision": setup.precision, "peak_flops_per_s": setup.peak_flops_per_s, "mfu": setup.mfu,
            "bytes_per_s": setup.inter_bytes_per_s, "latency_s": setup.inter_latency_s}


def step_time(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    """With that many micro-batches, what does a step take, bubble and boundary hops included?"""
    args = step_time_args(setup)
    pp, m = args["pp"], args["microbatches"]
    dp = setup.gpus // pp
    tokens = dp * m * setup.micro_batch * setup.seq_len
    free = compute("compute_time_s", {"params": setup.params, "tokens": tokens, "gpus": setup.gpus,
                                      "peak_flops_per_s": setup.peak_flops_per_s, "mfu": setup.mfu})
    ratio = bubble(pp, m, "1f1b")["bubble_ratio"]
    boundary = boundary_bytes(setup.micro_batch, setup.seq_len, setup.d_model, setup.precision)
    hop = setup.inter_latency_s + boundary / setup.inter_bytes_per_s
    answer = compute("pipeline_step_time_s", args)
    change = (f"You run the pipeline with m = {m} micro-batches of {setup.micro_batch} sequence(s) on each of the "
              f"{dp} data-parallel replicas: a global batch of {tokens:,} tokens.")
    return setup, plan, group, new_step(
        "pipeline-step-time", title="A pipelined step",
        prompt=f"At {setup.mfu:.0%} MFU and 6 FLOPs per parameter per token, the step's compute with every GPU busy "
        f"takes the bubble-free time. 1F1B adds the bubble, (p-1)/m of that, and the fill and the drain each cross "
        f"the {pp - 1} boundaries once with nothing to overlap: 2·(p-1) hops of one boundary activation over the slow "
        "link (latency + bytes / bandwidth). Leave FSDP's traffic inside each node out. How long is **one step**? "
        "Answer in seconds.",
        unit="s", answer=answer, tolerance=0.10, fn="pipeline_step_time_s", args=args, change=change,
        working=f"Bubble-free: 6 × {setup.params:.3g} × {tokens:,} tokens / ({setup.gpus} × "
        f"{setup.peak_flops_per_s:.4g} × {setup.mfu:.2f}) = {secs(free)}; × (1 + {pp - 1}/{m} = {1 + ratio:.4f}) = "
        f"{secs(free * (1 + ratio))}; hops: 2 × {pp - 1} × ({setup.inter_latency_s * 1e6:g} µs + {gb(boundary)} / "
        f"{per_s(setup.inter_bytes_per_s)}) = {secs(2 * (pp - 1) * hop)}; step {secs(answer)}.",
    )


def explain(setup: Setup, plan: str) -> Step:
    """Why pipeline across slow nodes, and how many micro-batches: from this scenario's figures."""
    slow = setup.changed(inter_bytes_per_s=setup.inter_bytes_per_s / SLOWER)
    pp = stages(slow)
    m = compute("pipeline_microbatches_for_bubble", microbatches_args(slow))
    boundary = boundary_bytes(slow.micro_batch, slow.seq_len, slow.d_model, slow.precision)
    dp_wire = q_step_wire_bytes(params=slow.params, gpus=slow.gpus, strategy="ddp", precision=slow.precision)
    gpipe_m = m  # GPipe holds every micro-batch; 1F1B at most p - s
    return new_step("explain-pipeline", title="Explain it", unit="explain", answer=None,
        prompt="Explain to the interviewer whether you pipeline across the nodes, and how you choose the number of "
        "micro-batches. Say it aloud or type notes, then compare with the talking points and grade yourself.",
        talking_points=(
            f"Inside a node, ZeRO-3 needs {gb(_node_state(slow))} per GPU against {gb(slow.gpu_mem_bytes)}; across "
            f"nodes, data parallelism would push {gb(dp_wire)} per rank per step over {per_s(slow.inter_bytes_per_s)}.",
            f"A pipeline of {pp} stages, one per node, sends only {gb(boundary)} per micro-batch per boundary forward "
            "and the same gradient back, whatever the model's size; TP and FSDP stay inside the node.",
            f"The bubble is (p-1)/(m+p-1): {m} micro-batches keep it at {pct(bubble(pp, m, '1f1b')['bubble_fraction'])} "
            f"with p = {pp}; m = p would leave {pct(bubble(pp, pp, '1f1b')['bubble_fraction'])} of the step idle.",
            f"1F1B, not GPipe: the same bubble, but stage 0 holds at most {pp} micro-batches' activations, not all "
            f"{gpipe_m}.",
            "More micro-batches of the same size grow the global batch; at a fixed global batch they shrink each "
            "micro-batch and the matmuls' efficiency. Interleaving (V stages per rank) divides the bubble by V for "
            "(pV-1)/(p-1) times the boundary sends (2V-1 times on the first and last ranks), costly on slow links.",
        ))
