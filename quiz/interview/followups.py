"""Follow-ups that change one condition and ask again, and the closing `explain` step of each family.

A follow-up takes the setup as it stands, changes one thing, says what changed, and returns the new
setup with its step; the next follow-up starts from there. The talking points of an explain step
are sentences computed from this scenario's own figures.
"""

from __future__ import annotations

from collections.abc import Callable

from ddpfsdp.demos.theory import overlap, planning, steptime
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.quiz_answers import q_step_wire_bytes
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.quiz.interview import steps
from ddpfsdp.quiz.interview.scenario import Option, Setup, Step, compute, new_step, gb, pct, per_s, secs

FollowUp = Callable[[Setup, str, "int | None"], tuple[Setup, str, "int | None", Step]]
"""(setup, strategy, HSDP group) as they stand -> the same after one change, and the step it asks."""

SMALLER_GPU_MEM = (40 * 10**9, 24 * 10**9)


def smaller_gpus(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    memory = next((m for m in SMALLER_GPU_MEM if m < setup.gpu_mem_bytes), setup.gpu_mem_bytes // 2)
    changed = setup.changed(gpu_mem_bytes=memory)
    change = f"The GPUs now have {gb(memory)} each, not {gb(setup.gpu_mem_bytes)}; nothing else changes."
    return changed, plan, group, steps.fit_strategy(changed, change=change)


def longer_sequences(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    changed = setup.changed(seq_len=setup.seq_len * 2)
    change = (f"Sequences are now {changed.seq_len:,} tokens instead of {setup.seq_len:,}; the micro-batch stays "
              f"{setup.micro_batch}.")
    return changed, plan, group, steps.activations(changed, plan, change=change)


def batch_doubles(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    changed = setup.changed(micro_batch=setup.micro_batch * 2)
    change = (f"The global batch doubles to {changed.global_batch_tokens:,} tokens: each GPU's micro-batch is now "
              f"{changed.micro_batch} sequences. Still {steps.plan_name(plan, group)}, on the links as they stand "
              f"({per_s(changed.inter_bytes_per_s)} per GPU between nodes).")
    return changed, plan, group, steps.exposed_share(changed, plan, change=change, group_size=group)


def more_nodes(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    changed = setup.changed(nodes=setup.nodes * 8)
    change = (f"The job grows to {changed.nodes} nodes ({changed.gpus} GPUs); each GPU keeps its micro-batch, so the "
              f"global batch grows to {changed.global_batch_tokens:,} tokens. Still {steps.plan_name(plan, group)}.")
    return changed, plan, group, steps.comm_time(changed, plan, group_size=group, change=change)


def slower_network(setup: Setup, plan: str, group: int | None) -> tuple[Setup, str, int | None, Step]:
    changed = setup.changed(inter_bytes_per_s=setup.inter_bytes_per_s / 8, inter=f"{setup.inter} at 1/8 of its speed")
    change = f"The network is 8x slower: {per_s(changed.inter_bytes_per_s)} per GPU, not {per_s(setup.inter_bytes_per_s)}."
    step = hsdp_group(changed, change)
    return changed, "hsdp", step.options[int(step.answer) - 1].value, step


def hsdp_group(setup: Setup, change: str) -> Step:
    args = {"params": setup.params, "gpus": setup.gpus, "precision": setup.precision, "optimizer": setup.optimizer,
            "gpu_mem": setup.gpu_mem_bytes, "tokens": setup.global_batch_tokens,
            "peak_flops_per_s": setup.peak_flops_per_s, "mfu": setup.mfu, "units": setup.units, **setup.links()}
    best = compute("best_hsdp_group", args)
    rows = planning.hsdp_groups(**{**args, "gpu_mem": setup.gpu_mem_bytes})
    shown = _around(rows, best, setup.gpus_per_node)
    options = tuple(
        Option(f"groups of {row['group_size']}" + (" (one group: ZeRO-3)" if row["group_size"] == setup.gpus else ""),
               row["group_size"],
               f"model state {gb(row['model_state_bytes'])} {'fits' if row['fits'] else 'does not fit'}; "
               f"step {secs(row['step_s'])} with overlap (communication {secs(row['comm_s'])})")
        for row in shown
    )
    number = steps.choice(options, best)
    return new_step("hsdp-group", title="HSDP's group size",
        prompt="Switch to **HSDP**: shard in groups of G consecutive ranks, all-reduce gradient shards across groups. "
        f"Which G fitting in {gb(setup.gpu_mem_bytes)} gives the shortest step? "
        "Overlap as graded: "
        f"{overlap.ASSUMPTIONS['hsdp']}. Ties (to {planning.TIE_FIGURES} figures) go to the G that sends least, then "
        "holds least.",
        unit="choice", answer=number, fn="best_hsdp_group", args=args, options=options, change=change,
        working="; ".join(f"G = {o.value}: {o.reason}" for o in options) + f". The best is option {number} (where "
        "steps tie, the one that communicates least, then holds least).",
    )


def _around(rows: list[dict], best: int, per_node: int, most: int = 5) -> list[dict]:
    """Up to `most` group sizes: the answer, a node, the whole world, and their neighbours."""
    wanted = {best, per_node, rows[-1]["group_size"], rows[0]["group_size"]}
    index = next(i for i, row in enumerate(rows) if row["group_size"] == best)
    wanted.update(row["group_size"] for row in rows[max(0, index - 1): index + 2])
    kept = [row for row in rows if row["group_size"] in wanted]
    while len(kept) > most:
        drop = next(row for row in kept if row["group_size"] not in (best, per_node, rows[-1]["group_size"]))
        kept.remove(drop)
    return kept


# --- the closing explanation ---------------------------------------------------------------------


def _times(setup: Setup, plan: str) -> dict:
    return steptime.step_times(**setup.time_args(plan))


def _explain(kind: str, prompt: str, points: list[str]) -> Step:
    return new_step(kind, title="Explain it", unit="explain", answer=None,
                    prompt=prompt + " Say it aloud or type notes, then compare with the talking points and grade "
                    "yourself.", talking_points=tuple(points))


def explain_fit(setup: Setup, plan: str) -> Step:
    ddp = model_state(setup.params, setup.gpus, "ddp", setup.precision, setup.optimizer)["model_state_bytes"]
    full = model_state(setup.params, setup.gpus, "zero3", setup.precision, setup.optimizer)["model_state_bytes"]
    wire = {s: q_step_wire_bytes(params=setup.params, gpus=setup.gpus, strategy=s, precision=setup.precision)
            for s in ("ddp", "zero3")}
    units = planning.gpt_units(setup.layers, setup.d_model, setup.vocab, setup.seq_len)
    spec = precision_for(setup.precision)
    return _explain("explain-fit", "Walk the interviewer through what **ZeRO-3 / FSDP full sharding** "
                    "trades for its memory here: what is sharded, what is gathered when, and what it costs.", [
        f"Sharding: every GPU keeps 1/{setup.gpus} of parameters, gradients and optimizer state: {gb(full)} per GPU "
        f"instead of DDP's {gb(ddp)}.",
        f"Each unit's parameters are all-gathered before its forward and again before its backward, then freed; "
        f"gradients are reduce-scattered: {gb(wire['zero3'])} sent per rank per step against DDP's {gb(wire['ddp'])} "
        f"({wire['zero3'] / wire['ddp']:.2f}x): three passes over the model (gather, gather, reduce-scatter) where "
        f"DDP's all-reduce makes two, the gathers in {spec.gather_bytes}-byte and the reductions in "
        f"{spec.reduce_bytes}-byte values under {setup.precision}.",
        f"The working set is about two units unsharded at once (the one computing and the one prefetched); the "
        f"largest unit here has {max(units) / 1e6:,.0f}M parameters.",
        "Prefetching the next unit's all-gather hides most of that traffic behind compute; the first all-gather and "
        "the last reduce-scatter cannot hide.",
        "Activations are not sharded by any data-parallel strategy: checkpointing or a smaller micro-batch is the "
        "lever for them."
        + (" Their dtype does follow the strategy under bf16-mixed: FSDP2's MixedPrecisionPolicy(param_dtype=bf16) "
           "makes the residual stream bf16, where DDP's autocast keeps it fp32 (2r + 14c = 32 against 36 bytes per "
           "element of a block)." if setup.precision == "bf16-mixed" else ""),
    ])


def _after_step(plan: str, t: dict) -> list[str]:
    """A talking point for the collective that hides behind nothing, where the plan has one."""
    late = [op for op, timing in t["ops"].items() if overlap.windows(plan)[op].get("none")]
    return [f"The {op.replace('_', '-')} of the updated parameters runs after the optimizer step, when nothing "
            f"computes: its {secs(t['ops'][op]['time_s'])} shows whole, however well the rest overlaps." for op in late]


def explain_faster(setup: Setup, plan: str) -> Step:
    t = _times(setup, plan)
    ops = steptime.step_comm_times(**setup.comm_args(plan))
    slowest = max(ops, key=lambda op: ops[op]["time_s"])
    return _explain("explain-faster", "Explain where this step's time goes and what you would change "
                    "first to make it faster.", [
        f"Compute {secs(t['compute_s'])} against communication {secs(t['comm_s'])}: with overlap {pct(t['exposed_share'])} "
        f"of the step is exposed, without it {pct(t['exposed_share_no_overlap'])}.",
        *_after_step(plan, t),
        f"The largest cost is the {slowest.replace('_', '-')} over {ops[slowest]['ranks']} ranks at "
        f"{per_s(ops[slowest]['bytes_per_s'])}: {secs(ops[slowest]['time_s'])}.",
        f"Inter-node bandwidth ({per_s(setup.inter_bytes_per_s)}) is {setup.intra_bytes_per_s / setup.inter_bytes_per_s:g}x "
        f"below NVLink ({per_s(setup.intra_bytes_per_s)}): HSDP keeps the gathers inside a node and sends only a "
        "1/G shard of the gradients across nodes.",
        "More tokens per GPU per step (a larger micro-batch, when memory allows) raises compute per byte sent, so "
        "more of the communication hides.",
        _reduce_dtype_point(setup, plan),
    ])


def _reduce_dtype_point(setup: Setup, plan: str) -> str:
    """Halving the gradient bytes is a lever only where the gradients are reduced in fp32."""
    held = implementation(plan, setup.precision)
    if held.reduce_bytes > 2:
        return (f"The gradients are reduced in fp32 here (as {held.name}): reducing them in bf16 (FSDP2's "
                "MixedPrecisionPolicy(reduce_dtype=torch.bfloat16), DDP's bf16_compress_hook) halves the gradient "
                "bytes, at some cost in precision.")
    return (f"The gradients are already reduced in bf16 here (as {held.name}), so halving them again is not "
            "on offer: only fewer bytes of parameters or gradients per step (or fewer ranks across the network) "
            "would cut the traffic.")


def explain_scale(setup: Setup, plan: str) -> Step:
    one = _times(setup, plan)
    many = setup.changed(nodes=setup.nodes * 8)
    t = _times(many, plan)
    return _explain("explain-scale", f"Explain what changes when this job leaves one node for "
                    f"{many.nodes}.", [
        f"A ring over n ranks sends about the same per rank at any size (2(n-1)/n of the buffer for an all-reduce), "
        f"so bytes per rank barely grow; the link they cross changes: {per_s(setup.intra_bytes_per_s)} of NVLink "
        f"inside a node against {per_s(setup.inter_bytes_per_s)} of network per GPU.",
        f"Communication per step goes from {secs(one['comm_s'])} on one node to {secs(t['comm_s'])} on {many.nodes}, "
        "while compute per GPU stays the same when each GPU keeps its micro-batch.",
        f"Exposed communication with overlap: {pct(one['exposed_share'])} on one node, {pct(t['exposed_share'])} "
        f"on {many.nodes}.",
        "Latency grows with the ring: 2(n-1) steps per all-reduce, the node-crossing ones at network latency, which "
        "is why NCCL switches to trees for small messages at scale.",
        "Remedies: HSDP (shard inside a node, all-reduce a 1/G shard across nodes), larger micro-batches, and "
        "overlapping more of the communication.",
    ])
