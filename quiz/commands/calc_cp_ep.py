"""`ddpfsdp calc --cp N` and `--ep N --experts E`: context and expert parallelism beside the other strategies.

The options, the `context_parallel` and `expert_parallel` sections of the `ddpfsdp.calc/1` document
(`demos.theory.context_parallel`, `demos.theory.expert_parallel`) and their prose. `calc` takes the options
with `cp_ep_options`, hands them to `cp_ep_sections` after the table's estimate, and prints the sections
with `render_cp_ep`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypedDict

import click

from ddpfsdp.demos.base.bounds import FiniteFloat

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape
    from ddpfsdp.demos.theory.context_parallel import ContextParallelSection
    from ddpfsdp.demos.theory.estimate import CalcDocument
    from ddpfsdp.demos.theory.expert_parallel import ExpertParallelSection
    from ddpfsdp.demos.theory.inputs import InputsDocument

    Size = Callable[[float | None], str]

CP_EP_FIELDS = ("cp", "ep", "experts", "top_k", "capacity_factor")
# The most experts a layer takes here (DeepSeek-V3 routes among 256), and the largest capacity factor: one of
# E / top-k already gives every expert a slot for every token.
MAX_EXPERTS = 65_536
MAX_CAPACITY_FACTOR = 1000.0
DEFAULT_TOP_K = 2
"""GShard's top-2 gating; the Switch Transformer routes top-1."""

CP_EP_OPTIONS = (
    click.option("--cp", type=click.IntRange(min=2), help="Add context parallelism over CP ranks (ring attention, "
                 "the balanced causal split): activations per GPU, the ring's and Ulysses' bytes, when the ring "
                 "hides. The sequence must split into 2 x CP chunks. Needs --model or a named size (--params 7B)."),
    click.option("--ep", type=click.IntRange(min=2), help="Add expert parallelism over EP ranks: every block's MLP "
                 "becomes --experts experts shaped like it, E/EP per rank, tokens sent by all-to-all. EP must divide "
                 "the experts and --gpus. Needs --model or a named size."),
    click.option("--experts", type=click.IntRange(1, MAX_EXPERTS), help="With --ep: experts per MoE layer (E)."),
    click.option("--top-k", type=int, help=f"With --ep: experts each token goes to (1 to E). [default: {DEFAULT_TOP_K}]"),
    click.option("--capacity-factor", type=FiniteFloat(max=MAX_CAPACITY_FACTOR), help="With --ep: slots per expert = ceil(factor x tokens x top-k / "
                 "experts); slots over it are dropped. [default: none (dropless)]"),
)


@dataclass(frozen=True)
class CpEpOptions:
    """The context- and expert-parallel options as given (None: not given), and --params as typed."""

    cp: int | None
    ep: int | None
    experts: int | None
    top_k: int | None  # the default filled in once --ep is given
    capacity_factor: float | None
    params_text: str | None  # a named size ("7B") has a block shape; a bare count has none


class CpEpSections(TypedDict, total=False):
    """The sections of the `ddpfsdp.calc/1` document these options add, each where asked for."""

    context_parallel: ContextParallelSection
    expert_parallel: ExpertParallelSection


def cp_ep_options(command: Any) -> Any:
    """Add the context- and expert-parallel options to a click command (after its own, in --help)."""
    for option in reversed(CP_EP_OPTIONS):
        command = option(command)
    return command


def take_cp_ep_options(values: dict[str, Any]) -> CpEpOptions:
    """Remove these options from `values` (the command's keyword arguments), checked; return them."""
    taken = {name: values.pop(name, None) for name in CP_EP_FIELDS}
    taken["params_text"] = values.get("params")
    if taken["ep"] is None:
        given = next((name for name in CP_EP_FIELDS[2:] if taken[name] is not None), None)
        if given:
            raise click.UsageError(f"--{given.replace('_', '-')} describes a mixture of experts: add --ep N (its "
                                   "expert-parallel degree), e.g. --ep 8 --experts 64 --top-k 2")
        return CpEpOptions(**taken)
    if taken["experts"] is None:
        raise click.UsageError("--ep spreads experts over ranks: add --experts E (experts per MoE layer), "
                               "e.g. --ep 8 --experts 64")
    from ddpfsdp.demos.theory.expert_parallel import check_ep, check_moe

    top_k = DEFAULT_TOP_K if taken["top_k"] is None else taken["top_k"]
    try:
        check_moe(taken["experts"], top_k)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--top-k") from None
    try:
        check_moe(taken["experts"], top_k, taken["capacity_factor"])
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--capacity-factor") from None
    try:
        check_ep(taken["ep"], taken["experts"], values.get("gpus"))
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--ep") from None
    taken["top_k"] = top_k
    return CpEpOptions(**taken)


def cp_ep_sections(taken: CpEpOptions, result: CalcDocument) -> CpEpSections:
    """The document's `context_parallel` and `expert_parallel` sections for the options taken (either may
    be absent). A value the configuration refuses is a UsageError naming the option to change."""
    if taken.cp is None and taken.ep is None:
        return {}
    inputs = result["inputs"]
    if inputs["accounting"] != "ddpfsdp" or inputs["offload"] != "none":
        raise click.UsageError("--cp and --ep are counted with the ddpfsdp accounting and no offload: drop "
                               "--accounting deepspeed and --offload to add them")
    shape = _block_shape(inputs, taken.params_text, "--cp" if taken.cp else "--ep")
    sections: CpEpSections = {}
    if taken.cp is not None:
        sections["context_parallel"] = _context_section(taken.cp, shape, inputs)
    if taken.ep is not None:
        sections["expert_parallel"] = _expert_section(taken, taken.ep, shape, inputs)
    return sections


def _context_section(cp: int, shape: GPTShape, inputs: InputsDocument) -> ContextParallelSection:
    from ddpfsdp.demos.theory.context_parallel import check_cp, context_parallel_figures

    tp = inputs.get("tp") or 1
    if inputs["gpus"] % (cp * tp):
        fitting = ", ".join(str(c) for c in range(2, inputs["gpus"] + 1) if inputs["gpus"] % (c * tp) == 0)
        raise click.BadParameter(f"cp {cp} x tp {tp} = {cp * tp} does not divide the {inputs['gpus']} GPUs; choose "
                                 f"cp from {fitting or 'none'}, or change --gpus", param_hint="--cp")
    try:
        check_cp(cp, shape.seq_len)
    except ValueError as error:
        raise click.BadParameter(f"{error} (--seq-len sets it)", param_hint="--cp") from None
    try:
        return context_parallel_figures(
            shape, cp, gpus=inputs["gpus"], batch_size=inputs["batch_size"], precision=inputs["precision"],
            checkpoint_activations=inputs["checkpoint_activations"], tp=tp,
            sequence_parallel=bool(inputs.get("sequence_parallel")), gpus_per_node=inputs["gpus_per_node"],
            links=ring_links_to_compare(),
        )
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--cp") from None


def _expert_section(taken: CpEpOptions, ep: int, shape: GPTShape, inputs: InputsDocument) -> ExpertParallelSection:
    from ddpfsdp.demos.theory.expert_parallel import expert_parallel_figures

    try:
        return expert_parallel_figures(
            shape, ep, taken.experts, taken.top_k, taken.capacity_factor, gpus=inputs["gpus"],
            batch_size=inputs["batch_size"], precision=inputs["precision"], optimizer=inputs["optimizer"],
            checkpoint_activations=inputs["checkpoint_activations"], cp=taken.cp or 1,
            gpus_per_node=inputs["gpus_per_node"],
        )
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--ep") from None


def ring_links_to_compare() -> dict[str, tuple[float, float, float]]:
    """The preset clusters' GPUs with each of their links, one row per distinct pair: name -> (peak bf16
    FLOP/s, bytes per second each way, latency per hop)."""
    from ddpfsdp.demos.theory.presets import CLUSTERS

    links: dict[str, tuple[float, float, float]] = {}
    for cluster in CLUSTERS.values():
        for link in (cluster.intra, cluster.inter):
            figures = (cluster.gpu.bf16_flops_per_s, link.bytes_per_s, link.latency_s)
            if figures not in links.values():
                links[f"{cluster.gpu.name.split('-')[0]} + {link.short}"] = figures
    return links


def _block_shape(inputs: InputsDocument, params_text: str | None, option: str) -> GPTShape:
    """The GPT shape the sections need: the preset's, or a named size's (7B, 70B), at --seq-len if given."""
    from dataclasses import replace

    from ddpfsdp.demos.base.shapes import GPT_SIZES
    from ddpfsdp.demos.theory.gpt_layout import gpt_shape_of

    if inputs["model"] is not None:
        return gpt_shape_of(inputs["model"], inputs["seq_len"])
    size = GPT_SIZES.get(str(params_text).strip().upper())
    if size is None:
        raise click.UsageError(f"{option} needs the model's shape (its width, heads and layers): give --model "
                               f"(a GPT preset) or a named size, --params {', '.join(GPT_SIZES)}")
    return replace(size, seq_len=inputs["seq_len"]) if inputs["seq_len"] else size


# ----------------------------------------------------------------------------- rendering


def render_cp_ep(sections: CpEpSections, unit: str) -> None:
    """Each section's prose, and the ring's table of links."""
    from ddpfsdp.quiz.plain_console import trimmed_console

    from ddpfsdp.demos.base.units import format_bytes

    size = lambda n: "n/a" if n is None else format_bytes(n, unit)  # noqa: E731
    console = trimmed_console()
    if "context_parallel" in sections:
        section = sections["context_parallel"]
        console.print(f"[bold]Context parallelism[/] (theory): cp {section['cp']} x tp {section['tp']} of "
                      f"{section['gpus']} GPUs, {section['seq_len']:,} tokens, {section['tokens_per_rank']:,} per rank",
                      highlight=False)
        for line in context_lines(section, size):
            console.print(f"• {line}", highlight=False)
        console.print(_pays_table(section))
        console.print("[dim]shows: what the ring's hops add per step beyond the compute they overlap; the last dK/dV "
                      "hop of each layer has no compute left to hide behind.[/]")
    if "expert_parallel" in sections:
        section = sections["expert_parallel"]
        factor = section["capacity_factor"]
        console.print(f"[bold]Expert parallelism[/] (theory): {section['experts']} experts per layer over ep "
                      f"{section['ep']}, top-{section['top_k']}, "
                      + (f"capacity factor {factor:g}" if factor is not None else "dropless"), highlight=False)
        for line in expert_lines(section, size):
            console.print(f"• {line}", highlight=False)


def context_lines(section: ContextParallelSection, size: Size) -> list[str]:
    """The context-parallel section's prose: memory, balance, the ring, Ulysses."""
    cp, ring, links = section["cp"], section["ring_per_layer"], section["ring_links"]
    last = section["compute_share_unbalanced"][-1]
    where = ("within one node (NVLink)" if links["paced_by"] == "nvlink" else
             f"over {links['nodes']} nodes: {links['network_hops']} of its {links['hops']} hops cross the network, "
             "which paces every step")
    ulysses = (section["ulysses_refusal"] or
               f"Ulysses instead: {section['ulysses_per_layer']['all_to_alls']} all-to-alls per layer, "
               f"{size(section['ulysses_bytes_per_step'])} per rank per step "
               f"({section['ulysses_link_shares']['inter']:.0%} of it across nodes)")
    return [
        f"Activations per GPU: {size(section['activation_bytes'])} at cp {cp} (ring; "
        f"{size(section['activation_bytes_allgather'])} with torch's default all-gather rotation, which holds every "
        f"rank's K/V at once), against {size(section['activation_bytes_cp1'])} at cp 1.",
        f"Causal balance: the head-tail split (rank r holds chunks r and {2 * cp - 1}-r of {2 * cp}) gives each rank "
        f"1/{cp} of the work; the contiguous split gives the last rank {last:.1%} ((2cp-1)/cp²), so its step takes "
        f"{section['unbalanced_step_over_balanced']:.3g}x as long.",
        f"Ring per rank per layer: forward {ring['forward_kv_blocks']} K/V blocks of {size(section['kv_block_bytes'])}"
        + (" (the checkpointed forward runs twice)" if ring["forward_kv_blocks"] > ring["backward_kv_blocks"] else "")
        + f"; backward {ring['backward_kv_blocks']} K/V blocks and {ring['backward_dkv_blocks']} dK/dV blocks of "
        f"{size(section['dkv_block_bytes'])} (fp32, as torch accumulates them): {size(section['ring_bytes_per_step'])} "
        f"per rank per step, {where}.",
        ulysses + ".",
    ]


def _pays_table(section: ContextParallelSection) -> Any:
    from rich.table import Table

    table = Table(title=f"When the ring hides its transfer (theory, at each GPU's peak): {section['tokens_per_rank']:,} "
                  "tokens per rank", title_justify="left")
    for column in ("GPU + link", "needs tokens/rank", "hidden", "shows per step"):
        table.add_column(column, justify="left" if column == "GPU + link" else "right")
    for name, row in section["pays"].items():
        table.add_row(name, f"{row['min_tokens_per_rank']:,.0f}", "[green]yes[/]" if row["hidden"] else "[red]no[/]",
                      f"{row['exposed_s_per_step'] * 1e3:,.1f} ms")
    return table


def expert_lines(section: ExpertParallelSection, size: Size) -> list[str]:
    """The expert-parallel section's prose: memory, capacity, the all-to-alls, FSDP beside them."""
    from ddpfsdp.demos.base.units import format_count

    a2a, ep = section["all_to_all"], section["ep"]
    lines = [
        f"Parameters per rank: {section['experts_per_rank']} experts per layer, {format_count(section['expert_params_per_rank'])} "
        f"expert parameters, plus {format_count(section['dense_params'])} not split by EP (attention, embeddings, "
        f"routers); model state {size(section['model_state_bytes_per_rank'])} with the dense part replicated.",
        f"All-to-all per rank per step: {a2a['calls']} calls (dispatch and combine, forward and backward), "
        f"{size(a2a['bytes'])} for {section['routed_slots_per_rank']:,} slots routed evenly: {size(a2a['intra_bytes'])} "
        f"inside the node, {size(a2a['inter_bytes'])} across nodes.",
    ]
    if section["capacity_per_expert"] is not None:
        padded = section["all_to_all_padded"]
        lines.append(f"Capacity: {section['capacity_per_expert']:,} slots per expert; an expert drawing more drops "
                     f"the rest. Padded to capacity, the all-to-alls send {size(padded['bytes'])} per rank per step.")
    lines.append(f"FSDP over the same {ep} ranks instead gathers every expert: {size(section['fsdp_expert_bytes_per_step'])} "
                 f"per rank per step, {section['fsdp_over_ep']:,.3g}x EP's, and {size(section['fsdp_gathered_experts_bytes'])} "
                 "of gathered experts at its peak (a layer computing, the next prefetched).")
    return lines
