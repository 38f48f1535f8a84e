"""How `ddpfsdp calc` prints its at-scale sections (`calc_scale`): a few lines or a narrow table each,
every figure from the section's own fields, so the table and `--json` cannot disagree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ddpfsdp.demos.base.units import format_bytes, format_count
from ddpfsdp.demos.theory.bandwidth import format_duration, format_rate

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.checkpointing import CheckpointSection
    from ddpfsdp.demos.theory.estimate import CalcDocument
    from ddpfsdp.demos.theory.inputs import InputsDocument
    from ddpfsdp.demos.theory.lora import LoraSection
    from ddpfsdp.demos.theory.optimizer_8bit import Adam8bitSection
    from ddpfsdp.demos.theory.plan3d import Candidate, PlanSection
    from ddpfsdp.demos.theory.stragglers import StragglerSection
    from ddpfsdp.demos.theory.topology import ScalingSection, TopologySection
    from ddpfsdp.quiz.commands.calc_scale import ModelFreeDocument

    Size = Callable[[float], str]

LINK_TEXT = {"intra": "inside a node", "inter": "between nodes"}


def render_scale(result: CalcDocument | ModelFreeDocument, unit: str) -> None:
    """Print every at-scale section the document holds, in a fixed order."""
    from ddpfsdp.quiz.plain_console import trimmed_console

    console = trimmed_console()
    size = lambda n: format_bytes(n, unit)  # noqa: E731
    if "stragglers" in result:
        _stragglers(console, result["stragglers"])
    model = result if "strategies" in result else None  # the sections only a model gives
    if model is not None and "checkpoint" in model:
        _checkpoint(console, model["checkpoint"], model["inputs"], size)
    if model is not None and "topology" in model:
        _topology(console, model["topology"], size)
    if "scaling" in result:
        _scaling(console, result["scaling"])
    if model is not None and "plan" in model:
        _plan(console, model["plan"], size)
    if model is not None and "adam_8bit" in model:
        _adam_8bit(console, model["adam_8bit"], size)
    if model is not None and "lora" in model:
        _lora(console, model["lora"], model["inputs"], size)


def _bullets(console: Any, title: str, lines: list[str]) -> None:
    console.print(f"[bold]{title}[/]", highlight=False)
    for line in lines:
        console.print(f"• {line}", highlight=False)


def _pct(share: float) -> str:
    return f"{share:.3%}" if 0.9999 < share < 1 or 0 < share < 0.001 else f"{share:.1%}"


def _stragglers(console: Any, s: StragglerSection) -> None:
    n, p = s["ranks"], s["p_rank"]
    lines = [f"P(slow step) = 1 - (1 - {p:g})^{n:,} = {_pct(s['p_slow_step'])}: {s['slow_steps_per_1000']:,.5g} of "
             "every 1,000 steps wait for a straggler, since a step ends only when its slowest rank joins the "
             "collectives."]
    if s["expected_step_s"] is not None:
        lines.append(f"A slow step adds {format_duration(s['delay_s'])} to a {format_duration(s['step_s'])} step; slow "
                     f"ranks of one step overlap, so on average {format_duration(s['step_s'])} + "
                     f"{format_duration(s['delay_s'])} x {_pct(s['p_slow_step'])} = "
                     f"{format_duration(s['expected_step_s'])} ({s['slowdown']:.3f}x).")
    elif s["delay_s"] is not None or s["step_s"] is not None:
        lines.append("Give both --straggler-delay and --step-time for the expected step.")
    _bullets(console, f"Stragglers (theory): {n:,} ranks, each slow in {_pct(p)} of its steps", lines)


def _checkpoint(console: Any, c: CheckpointSection, inputs: InputsDocument, size: Size) -> None:
    from ddpfsdp.demos.theory.checkpointing import MTBF_SOURCE

    gpus = inputs["gpus"]
    lines = [f"Size {size(c['total_bytes'])} ({format_count(inputs['params'])} x {c['bytes_per_param']} bytes: params as "
             f"held + optimizer state, no gradients). torch.distributed.checkpoint writes each rank's shard: "
             f"{size(c['sharded_bytes_per_rank'])} per rank on {gpus:,}; a full state dict gathered to rank 0 puts "
             f"all {size(c['gathered_rank0_bytes'])} through one rank.",
             f"Job MTBF = {c['gpu_mtbf_hours']:,.0f} h per GPU / {gpus:,} GPUs = {format_duration(c['job_mtbf_s'])} "
             f"(the default GPU MTBF is from {MTBF_SOURCE})."]
    if c["sharded_write_s"] is not None:
        bounds = [f"{size(c['sharded_bytes_per_rank'])} / {format_rate(c['rank_bytes_per_s'])} per rank"
                  if c["rank_bytes_per_s"] else None,
                  f"{size(c['total_bytes'])} / {format_rate(c['storage_bytes_per_s'])} storage"
                  if c["storage_bytes_per_s"] else None]
        young = c["at_young"]
        lines += [
            f"Write: sharded {format_duration(c['sharded_write_s'])} (the slower of "
            f"{' and '.join(b for b in bounds if b)}); gathered to rank 0 {format_duration(c['gathered_write_s'])}.",
            f"Young (1974): sqrt(2 x {format_duration(c['sharded_write_s'])} x {format_duration(c['job_mtbf_s'])}) = "
            f"{format_duration(c['young_interval_s'])} between checkpoints; Daly (2006): "
            f"{format_duration(c['daly_interval_s'])}. There: {_pct(young['checkpoint'])} checkpointing + "
            f"{_pct(young['rework'])} rework" + (f" + {_pct(young['restart'])} restarts" if young["restart"] else "")
            + f" = {_pct(young['total'])} lost.",
        ]
        if c["at_interval"] is not None:
            at = c["at_interval"]
            lines.append(f"Every {format_duration(c['interval_s'])}: C/tau {_pct(at['checkpoint'])} + tau/2M "
                         f"{_pct(at['rework'])} + R/M {_pct(at['restart'])} = {_pct(at['total'])} lost; goodput "
                         f"{_pct(at['goodput'])}.")
        lines.append("First order: failures independent and memoryless, checkpoints block training, a failure loses "
                     "half an interval on average; C, R and the interval small against the MTBF.")
    _bullets(console, f"Checkpoints (theory): {inputs['precision']} with {inputs['optimizer']}", lines)


def _topology(console: Any, t: TopologySection, size: Size) -> None:
    from rich.table import Table

    links = t["links"]
    over = f", {links['oversubscription']:g}:1 above {links['rack_nodes']} node(s)" if links["oversubscription"] > 1 else ""
    table = Table(title=f"All-reduce of the gradients, {size(t['all_reduce_bytes'])} (theory): {links['gpus']:,} GPUs "
                  f"in {links['nodes']:,} node(s) of {links['gpus_per_node']}; {format_rate(links['intra_bytes_per_s'])} "
                  f"inside, {format_rate(links['inter_bytes_per_s'])} between{over}", title_justify="left")
    for column in ("schedule", "collective", "link", "per GPU", "time"):
        table.add_column(column, justify="right" if column in ("per GPU", "time") else "left")
    flat = t["flat_ring"]
    table.add_row("flat ring", f"all-reduce, {flat['ranks']:,} ranks", LINK_TEXT[flat["link"]],
                  size(flat["wire_bytes_per_gpu"]), format_duration(flat["time_s"]), end_section=True)
    for index, phase in enumerate(t["hierarchical"]["phases"]):
        table.add_row("hierarchical" if index == 0 else "", f"{phase['op'].replace('_', '-')}, {phase['ranks']:,} ranks",
                      LINK_TEXT[phase["link"]], size(phase["wire_bytes_per_gpu"]), format_duration(phase["time_s"]))
    table.add_row("", "[bold]total[/]", "", "", f"[bold]{format_duration(t['hierarchical']['time_s'])}[/]",
                  end_section=True)
    if t["hsdp"] is not None:
        for index, op in enumerate(t["hsdp"]["ops"]):
            table.add_row(f"HSDP G={t['hsdp']['group_size']}" if index == 0 else "",
                          f"{op['op'].replace('_', '-')}, {op['ranks']:,} ranks", LINK_TEXT[op["link"]],
                          size(op["wire_bytes_per_gpu"]), format_duration(op["time_s"]))
        table.add_row("", "[bold]total[/]", "", "", f"[bold]{format_duration(t['hsdp']['time_s'])}[/]")
    console.print(table)
    console.print("• The flat ring is one ring, paced by its slowest hop; the hierarchical schedule sends only 1/g of "
                  "the buffer through each NIC, g rings at once (NCCL gets close to it with several rings through "
                  "different NICs, and trees). HSDP keeps its all-gathers and reduce-scatters inside the node and "
                  "all-reduces each 1/g gradient shard between nodes.", highlight=False)


def _scaling(console: Any, s: ScalingSection) -> None:
    factor, ratio = s["gpu_ratio"], s["throughput_ratio"]
    strong = (f"Strong scaling (the same global batch): compute per GPU falls to 1/{factor:g}; a {ratio:g}x throughput "
              f"means what did not shrink (exposed communication, input, the optimizer) was "
              f"{_pct(s['strong_fixed_share_before'])} of the step at {s['gpus_before']:,} GPUs."
              if s["strong_explained"] else
              "Strong scaling cannot explain it with a part that merely stayed: "
              + ("throughput fell, so something grew with the GPUs (more hops, a slower tier, stragglers)."
                 if ratio < 1 else "it beat linear (a cache effect, or the batch per GPU changed)."))
    lines = [strong, f"Weak scaling (the same batch per GPU): {factor:g}x the samples per step at {ratio:g}x the "
                     f"throughput means each step took {s['weak_step_ratio']:.3g}x as long."]
    _bullets(console, f"Scaling (theory): {s['gpus_before']:,} -> {s['gpus_after']:,} GPUs, throughput x {ratio:g}: "
                      f"efficiency {_pct(s['efficiency'])}", lines)


def _plan(console: Any, p: PlanSection, size: Size) -> None:
    from rich.table import Table

    job = p["job"]
    table = Table(title=f"3-D plan (theory): {format_count(job['params'])} params ({job['layers']} layers, "
                  f"d {job['d_model']:,}, {job['heads']} heads) on {job['gpus']:,} GPUs of {p['cluster']}, "
                  f"{job['global_batch']:,} x {job['seq_len']:,} tokens a step, {job['precision']} "
                  f"{job['optimizer']}, dp as {job['dp_mode']}, 1F1B, MFU {job['mfu']:.0%}", title_justify="left")
    for column in ("#", "tp x pp x dp", "m", "mem/GPU", "act. ckpt", "bubble", "step"):
        table.add_column(column, justify="left" if column in ("#", "tp x pp x dp") else "right")
    for number, row in enumerate(p["candidates"], start=1):
        table.add_row(str(number), f"{row['tp']} x {row['pp']} x {row['dp']}", f"{row['microbatches']:,}",
                      size(row["memory"]["total_bytes"]), "yes" if row["checkpoint_activations"] else "no",
                      f"{row['bubble_fraction']:.1%}", format_duration(row["step_s"]))
    console.print(table)
    for number, row in enumerate(p["candidates"], start=1):
        console.print(f"• {number}. " + candidate_line(row, size), highlight=False)
    console.print(f"[bold]Why the other {len(p['others'])} lose[/] (each against #1):", highlight=False)
    for kind, count in sorted(p["loses_by"].items(), key=lambda item: -item[1]):
        example = next(other for other in p["others"] if other["loses_by"] == kind)
        console.print(f"• {kind} ({count}): e.g. {example['tp']} x {example['pp']} x {example['dp']}: "
                      f"{example['reason']}", highlight=False)
    if p["invalid"]:
        console.print(f"• cannot run ({len(p['invalid'])}): e.g. {p['invalid'][0]['tp']} x {p['invalid'][0]['pp']} x "
                      f"{p['invalid'][0]['dp']}: {p['invalid'][0]['reason']}", highlight=False)


def candidate_line(row: Candidate, size: Size) -> str:
    """One candidate's traffic by link and the step's terms, in words."""
    parts = []
    comm = row["comm"]
    if "tp" in comm:
        parts.append(f"TP {LINK_TEXT[comm['tp']['link']]} {size(comm['tp']['wire_bytes'])}, "
                     f"{format_duration(comm['tp']['time_s'])}")
    if "pp" in comm:
        parts.append(f"PP {LINK_TEXT[comm['pp']['link']]} {size(comm['pp']['wire_bytes'])} sent, fill and drain "
                     f"{format_duration(comm['pp']['time_s'])}")
    if "dp" in comm:
        parts.append(f"DP {LINK_TEXT[comm['dp']['link']]} {size(comm['dp']['wire_bytes'])}, "
                     f"{format_duration(comm['dp']['time_s'])}")
    terms = row["terms"]
    compute = format_duration(terms["compute_s"] + terms["recompute_s"])
    return (f"{row['tp']} x {row['pp']} x {row['dp']}: " + "; ".join(parts or ["no communication"])
            + f". Compute {compute} + bubble {format_duration(terms['bubble_s'])}.")


def _adam_8bit(console: Any, a: Adam8bitSection, size: Size) -> None:
    from rich.table import Table

    from ddpfsdp.demos.theory.optimizer_8bit import state_bytes_per_param

    table = Table(title=f"8-bit Adam (bitsandbytes, theory): {state_bytes_per_param():.4f} bytes of state per "
                  "parameter against 8", title_justify="left")
    for column in ("strategy", "Adam state", "8-bit state", "model state", "with 8-bit"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name, row in a["strategies"].items():
        table.add_row(name, size(row["adam32_optimizer_bytes"]), size(row["optimizer_bytes"]),
                      size(row["adam32_model_state_bytes"]), size(row["model_state_bytes"]))
    console.print(table)


def _lora(console: Any, lora: LoraSection, inputs: InputsDocument, size: Size) -> None:
    base = "NF4 with double quantization" if lora["base"] == "nf4" and lora["double_quant"] else lora["base"]
    gpus = inputs["gpus"]
    lines = [
        f"Adapters: {format_count(lora['adapter_params'])} parameters ({lora['adapter_share']:.2%} of "
        f"{format_count(lora['params'])}), fp32 with Adam: {size(lora['adapter_state_bytes'])}. Frozen base: "
        f"{format_count(lora['quantized_params'])} block weights in {base}, the rest bf16: {size(lora['base_bytes'])}.",
        f"Per GPU: DDP {size(lora['ddp_bytes_per_gpu'])}; FSDP over {gpus:,} {size(lora['fsdp_bytes_per_gpu'])}. Full "
        f"fine-tuning (bf16-mixed Adam, 16 bytes a parameter): DDP {size(lora['full_finetune_ddp_bytes_per_gpu'])}, "
        f"FSDP {size(lora['full_finetune_fsdp_bytes_per_gpu'])}. Activations are not smaller: backward still runs "
        "through every frozen layer.",
    ]
    _bullets(console, f"LoRA (theory): rank {lora['rank']} on {lora['targets']} Linears", lines)
