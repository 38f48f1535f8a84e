"""The at-scale drills: stragglers, checkpoints (size and interval), hierarchical all-reduce time.

Each problem is drawn from a seeded generator and answered by the analytic model's at-scale functions
(`demos.theory.at_scale`); nothing here types in a number. `quiz.drill` registers the three makers as
kinds, with the return shape of its own: (prompt, the function's name, its arguments, the unit, the
relative tolerance, the working as a function of the answer).

No torch or textual here.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from ddpfsdp.demos.theory import presets, stragglers, topology
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown

Problem = tuple[str, str, dict[str, Any], str, float, Callable[[float], str]]

RANKS = (64, 256, 512, 1024, 4096, 10_000, 16_384)
PER_RANK_P = (0.0001, 0.0005, 0.001, 0.002, 0.005)


def shown(value: float) -> str:
    """A figure as the drill prints a count or a ratio (`drill.show`)."""
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def _gb(value: float) -> str:
    return f"{value / 1e9:,.4g} GB"


# ----------------------------------------------------------------------------- stragglers


def slow_step_problem(rng: random.Random) -> Problem:
    ranks, p = rng.choice(RANKS), rng.choice(PER_RANK_P)
    args = {"p": p, "ranks": ranks}
    prompt = (
        f"A synchronous data-parallel job runs on **{ranks:,} ranks**. Each rank, independently, has a **{p:.2%}** "
        "chance of a slow step (a throttled GPU, a page fault, a noisy network neighbour), and a step ends only when "
        "its slowest rank has joined the gradient all-reduce.\n\n"
        "What **share of steps** has at least one slow rank? Answer as a fraction, such as 0.25."
    )

    def working(answer: float) -> str:
        return (f"A step is fast only if every rank is: (1 - {p:g})^{ranks:,} = {1 - answer:.4g}; so 1 - (1 - {p:g})^{ranks:,} "
                f"= {shown(answer)}. (N x p = {ranks * p:.4g} is the expected number of slow ranks per step, a bound "
                "that fails once it nears 1.)")

    return prompt, "slow_step_probability", args, "x", 0.02, working


def expected_step_problem(rng: random.Random) -> Problem:
    ranks, p = rng.choice(RANKS), rng.choice(PER_RANK_P)
    step_ms, delay_ms = rng.choice((250, 500, 800, 1000, 2000)), rng.choice((100, 200, 300, 500, 1000))
    args = {"step_ms": step_ms, "delay_ms": delay_ms, "p": p, "ranks": ranks}
    prompt = (
        f"A training step takes **{step_ms:,} ms** on every rank of a **{ranks:,}-rank** DDP job, except that each rank, "
        f"independently, has a **{p:.2%}** chance per step of running **{delay_ms:,} ms** late. The collectives make "
        "every rank wait for the slowest; several late ranks in one step overlap (the step waits for one delay, not "
        "their sum).\n\nWhat is the **expected step time**? Answer in milliseconds."
    )

    def working(answer: float) -> str:
        slow = stragglers.slow_step_probability(p, ranks)
        return (f"P(slow step) = 1 - (1 - {p:g})^{ranks:,} = {slow:.4g}; expected step = {step_ms:,} + {delay_ms:,} x "
                f"{slow:.4g} = {shown(answer)} ms.")

    return prompt, "straggler_expected_step_ms", args, "", 0.02, working


def persistent_problem(rng: random.Random) -> Problem:
    nodes = rng.choice((16, 64, 100, 128, 256))
    fast_ms = rng.choice((400, 500, 600, 800))
    slow_ms = fast_ms + rng.choice((100, 200, 300, 400))
    args = {"step_s": fast_ms / 1000, "slow_step_s": slow_ms / 1000}
    prompt = (
        f"In a DDP job on **{nodes} nodes**, one node's backward pass takes **{slow_ms} ms** where every other node's "
        f"takes **{fast_ms} ms** (a thermally throttled GPU), every step. Nothing else differs.\n\n"
        "What **share of their time** do the fast ranks spend computing rather than waiting? Answer as a fraction, "
        "such as 0.8."
    )

    def working(answer: float) -> str:
        return (f"The all-reduce of the last gradient bucket cannot finish before the slow node's backward does, so every "
                f"step takes {slow_ms} ms and the others wait {slow_ms - fast_ms} ms inside it: {fast_ms} / {slow_ms} = "
                f"{shown(answer)}, however many nodes are fast.")

    return prompt, "persistent_straggler_efficiency", args, "x", 0.02, working


def straggler_problem(rng: random.Random) -> Problem:
    make = rng.choices((slow_step_problem, expected_step_problem, persistent_problem), weights=(3, 2, 1))[0]
    return make(rng)


# ----------------------------------------------------------------------------- checkpoints

CHECKPOINT_SETUPS = (("bf16-mixed", "adamw"), ("bf16-master", "adam"), ("fp32", "adam"), ("bf16", "adamw"))
MODEL_SIZES = {"GPT-3-175B": 175 * 10**9, **{name: model.params for name, model in presets.MODELS.items()}}


def checkpoint_size_problem(rng: random.Random) -> Problem:
    name = rng.choice(tuple(MODEL_SIZES))
    params = MODEL_SIZES[name]
    gpus = rng.choice((64, 128, 256, 512, 1024))
    precision, optimizer = rng.choice(CHECKPOINT_SETUPS)
    per = bytes_per_param_breakdown(precision, optimizer)
    args = {"params": params, "precision": precision, "optimizer": optimizer, "gpus": gpus}
    prompt = (
        f"A **{name}** model ({params / 1e9:g}B parameters) trains in {precision} with {optimizer} "
        f"({per['params']} bytes per parameter held, {per['optimizer']} of optimizer state), its state sharded evenly "
        f"over **{gpus} GPUs**. Every rank saves its own shard with torch.distributed.checkpoint, enough to resume.\n\n"
        "How many bytes does **each rank write**? Answer in GB."
    )

    def working(answer: float) -> str:
        total = params * (per["params"] + per["optimizer"])
        return (f"A checkpoint holds parameters ({per['params']} B) and optimizer state ({per['optimizer']} B), not "
                f"gradients: {per['params'] + per['optimizer']} B x {params / 1e9:g}e9 = {_gb(total)}; sharded over "
                f"{gpus}: {_gb(answer)} per rank.")

    return prompt, "checkpoint_bytes", args, "GB", 0.05, working


def interval_problem(rng: random.Random) -> Problem:
    gpus = rng.choice((1024, 2048, 4096, 8192, 16_384))
    gpu_mtbf_hours = rng.choice((25_000, 50_000, 100_000))
    checkpoint_min = rng.choice((0.5, 1, 2, 5, 10))
    args = {"checkpoint_min": checkpoint_min, "gpu_mtbf_hours": gpu_mtbf_hours, "gpus": gpus}
    prompt = (
        f"A job runs on **{gpus:,} GPUs**; each GPU fails independently, on average once every **{gpu_mtbf_hours:,} "
        f"hours**, and any failure stops the whole job. A checkpoint pauses training for **{checkpoint_min:g} "
        "min**.\n\nWhat interval between checkpoints loses the least work, by Young's first-order formula? Answer in "
        "minutes."
    )

    def working(answer: float) -> str:
        mtbf = gpu_mtbf_hours / gpus
        return (f"The job's MTBF is {gpu_mtbf_hours:,} h / {gpus:,} = {mtbf:.4g} h = {mtbf * 60:.4g} min. Young: "
                f"sqrt(2 x C x M) = sqrt(2 x {checkpoint_min:g} x {mtbf * 60:.4g}) = {shown(answer)} min; there the "
                f"checkpoints and the rework each cost {checkpoint_min / answer:.2%} of the time.")

    return prompt, "young_interval_min_for_gpus", args, "", 0.05, working


def lost_share_problem(rng: random.Random) -> Problem:
    interval_min = rng.choice((30, 60, 120))
    checkpoint_min = rng.choice((1, 2, 5, 10))
    mtbf_hours = rng.choice((1, 2, 5, 10, 24))
    args = {"interval_min": interval_min, "checkpoint_min": checkpoint_min, "mtbf_hours": mtbf_hours}
    prompt = (
        f"A job checkpoints every **{interval_min} min** of training, each checkpoint pausing it for "
        f"**{checkpoint_min} min**; the job fails on average once every **{mtbf_hours} h**, and a failure loses the "
        "work since the last checkpoint (leave the restart itself out).\n\nTo first order, what **share of the "
        "time** is lost to checkpoints and recomputed work together? Answer as a fraction, such as 0.1."
    )

    def working(answer: float) -> str:
        m = mtbf_hours * 60
        return (f"Checkpoints: C/tau = {checkpoint_min}/{interval_min} = {checkpoint_min / interval_min:.4g}. Rework: a "
                f"failure lands half-way through an interval on average, tau/(2M) = {interval_min}/(2 x {m:g}) = "
                f"{interval_min / (2 * m):.4g}. Sum {shown(answer)}.")

    return prompt, "checkpoint_lost_share", args, "x", 0.03, working


def checkpoint_problem(rng: random.Random) -> Problem:
    make = rng.choices((checkpoint_size_problem, interval_problem, lost_share_problem), weights=(2, 2, 1))[0]
    return make(rng)


# ----------------------------------------------------------------------------- hierarchical all-reduce


def hierarchical_problem(rng: random.Random) -> Problem:
    cluster = rng.choice(tuple(presets.CLUSTERS.values()))
    nodes = rng.choice((2, 4, 16, 64, 128))
    size_gb = rng.choice((2, 4, 14, 28, 140))
    g = cluster.gpus_per_node
    args = {"size_bytes": size_gb * 10**9, "gpus": g * nodes, "gpus_per_node": g,
            "intra_bytes_per_s": cluster.intra.bytes_per_s, "inter_bytes_per_s": cluster.inter.bytes_per_s}
    prompt = (
        f"**{nodes} nodes of {g} GPUs** ({cluster.name}: {cluster.intra.name} inside a node at "
        f"{cluster.intra.bytes_per_s / 1e9:g} GB/s per GPU each way, {cluster.inter.name} between nodes at "
        f"{cluster.inter.bytes_per_s / 1e9:g} GB/s per GPU each way) all-reduce **{size_gb} GB** of gradients "
        f"hierarchically: a ring reduce-scatter inside each node, then each GPU all-reduces its 1/{g} across the nodes "
        "on its own NIC, then a ring all-gather inside each node. A ring sends (n-1)/n of its buffer per rank for a "
        "reduce-scatter or all-gather and 2(n-1)/n for an all-reduce; leave latency out.\n\n"
        "How long does it take? Answer in milliseconds."
    )

    def working(answer: float) -> str:
        topo = topology.check_topology(gpus=g * nodes, gpus_per_node=g, intra_bytes_per_s=cluster.intra.bytes_per_s,
                                       inter_bytes_per_s=cluster.inter.bytes_per_s, intra_latency_s=0,
                                       inter_latency_s=0)
        phases = topology.hierarchical_all_reduce(size_gb * 1e9, topo)["phases"]
        parts = [f"{phase['op'].replace('_', '-')} over {phase['ranks']} ({_gb(phase['wire_bytes_per_gpu'])} at "
                 f"{phase['bytes_per_s'] / 1e9:g} GB/s) {phase['time_s'] * 1e3:.4g} ms" for phase in phases]
        flat = 2 * (g * nodes - 1) / (g * nodes) * size_gb * 1e9 / cluster.inter.bytes_per_s
        return ("; ".join(parts) + f": {shown(answer)} ms. One flat ring over all {g * nodes} GPUs, paced by the "
                f"network, would take {flat * 1e3:,.4g} ms.")

    return prompt, "hierarchical_all_reduce_ms", args, "", 0.05, working
