"""`ddpfsdp calc`: the analytic model's per-GPU memory and traffic for every strategy, side by side."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import click

from ddpfsdp.demos.theory.accounting import ACCOUNTINGS, DEEPSPEED_OPTIMIZERS, DEEPSPEED_PRECISION, accounting_refusal
from ddpfsdp.demos.theory.inputs import CalcOptions
from ddpfsdp.demos.theory.offload import OFFLOADS, node_layout, offload_refusal
from ddpfsdp.demos.theory.precision import OPTIMIZER_STATES, PRECISIONS
from ddpfsdp.demos.base.units import parse_bytes, parse_count
from ddpfsdp.quiz.commands.calc_cp_ep import cp_ep_options, cp_ep_sections, render_cp_ep, take_cp_ep_options
from ddpfsdp.quiz.commands.calc_pipeline import pipeline_options, pipeline_section, render_pipeline, take_pipeline_options
from ddpfsdp.quiz.commands.calc_scale import model_free, scale_options, scale_sections, take_scale_options

if TYPE_CHECKING:
    from ddpfsdp.demos.theory.estimate import CalcDocument
    from ddpfsdp.demos.theory.inputs import InputsDocument
    from ddpfsdp.demos.theory.rows import StrategyRow
    from ddpfsdp.quiz.commands.calc_scale import ScaleOptions

# What the analytic model is asked about: models from a thousand parameters to 100 trillion (today's
# largest are a few trillion), on one GPU to a million (today's largest jobs use about 100,000).
PARAMS_RANGE = (1_000, 100 * 10**12)
GPUS_RANGE = (1, 1_000_000)
MAX_FSDP_UNITS = 100_000

LOWER_CASE = ("model", "precision", "optimizer", "offload", "accounting")  # options read in any case
# The names a person types; the model knows more aliases (`sharding.STRATEGY_ALIASES`).
STRATEGY_NAMES = ("ddp", "zro", "zero1", "zero2", "grad-op", "zero3", "hsdp", "fsdp", "fsdp-full", "hybrid")


# Every option of `calc`, in the order --help lists them; each lands in the CalcOptions field of its name.
CALC_OPTIONS = (
    click.option(
        "--params",
        "params",
        metavar="COUNT",
        help="Parameter count: 7B, 7.5e9, 350M, 125K, 1.3T; from 1K to 100T.",
    ),
    click.option(
        "--model",
        metavar="PRESET",
        help="A GPT preset (tiny, small, base, large, xl) instead of --params; adds activations and real FSDP units.",
    ),
    click.option(
        "--gpus",
        type=click.IntRange(*GPUS_RANGE),
        default=CalcOptions.gpus,
        show_default=True,
        help=f"GPUs in the job (N), {GPUS_RANGE[0]} to {GPUS_RANGE[1]:,}.",
    ),
    click.option(
        "--group-size",
        type=click.IntRange(min=1),
        help="HSDP shard-group size G; must divide --gpus. [default: 8 where it divides --gpus, else --gpus]",
    ),
    click.option(
        "--precision",
        type=click.Choice(tuple(PRECISIONS), case_sensitive=False),
        help="fp32; bf16-mixed (PyTorch: fp32 state, bf16 compute); bf16-master (ZeRO paper: 2+2+12 with Adam); bf16. "
        "[default: bf16-mixed; bf16-master with --accounting deepspeed]",
    ),
    click.option(
        "--optimizer",
        type=click.Choice(tuple(OPTIMIZER_STATES), case_sensitive=False),
        default=CalcOptions.optimizer,
        show_default=True,
        help="adam/adamw keep 2 states per parameter, sgd-momentum 1, sgd none.",
    ),
    click.option("--batch-size", type=click.IntRange(min=1), default=CalcOptions.batch_size, show_default=True, help="Micro-batch per GPU (sequences)."),
    click.option("--seq-len", type=click.IntRange(min=1), help="Sequence length. [default: the preset's]"),
    click.option("--checkpoint-activations", is_flag=True, help="Estimate activations with each block checkpointed."),
    click.option("--gpu-mem", default="80GB", show_default=True, metavar="SIZE", help="Memory per GPU: 80GB, 79.6GiB, 4e10."),
    click.option(
        "--fsdp-units",
        "units",
        # the model keeps a list of the units: a hundred million of them takes gigabytes
        type=click.IntRange(1, MAX_FSDP_UNITS),
        help=f"FSDP units (equal parts) assumed with --params, at most {MAX_FSDP_UNITS:,}. [default: 32]",
    ),
    click.option(
        "--unit",
        "display_unit",
        type=click.Choice(["GB", "GiB"]),
        default="GB",
        show_default=True,
        help="Print sizes in GB (1e9 bytes) or GiB (2**30 bytes).",
    ),
    click.option(
        "--strategy",
        "strategies",
        type=click.Choice(STRATEGY_NAMES, case_sensitive=False),
        multiple=True,
        help="Show only this strategy (repeatable): ddp; zro (PyTorch's ZeroRedundancyOptimizer under DDP); zero1, "
        "zero2 (DeepSpeed's stages); grad-op (FSDP SHARD_GRAD_OP); zero3 (FSDP full; DeepSpeed under bf16-master); "
        "hsdp. [default: every strategy the offload and accounting admit]",
    ),
    click.option(
        "--offload",
        type=click.Choice(OFFLOADS, case_sensitive=False),
        default=CalcOptions.offload,
        show_default=True,
        help="Model state kept in host RAM. optimizer: optimizer state + the step on the CPU (DeepSpeed "
        "offload_optimizer; ZeRO-1/2/3). all: params, grads and optimizer state of the shards (FSDP2 "
        "CPUOffloadPolicy, FSDP1 CPUOffload(offload_params=True), DeepSpeed offload_param; ZeRO-3 and HSDP). "
        "DDP has none.",
    ),
    click.option(
        "--gpus-per-node",
        type=click.IntRange(min=1),
        default=CalcOptions.gpus_per_node,
        show_default=True,
        help="GPUs (processes) sharing one host's RAM; host bytes are per node.",
    ),
    click.option(
        "--accounting",
        type=click.Choice(ACCOUNTINGS, case_sensitive=False),
        default=CalcOptions.accounting,
        show_default=True,
        help="ddpfsdp: this project's counts. deepspeed: DeepSpeed 0.19's estimate_zero2/zero3_model_states_mem_needs "
        "(ZeRO-2 and ZeRO-3, mixed-precision Adam): 18 bytes per sharded parameter where ours counts 14 "
        "(ZeRO-2) or 16 (ZeRO-3), as it adds an fp32 gradient copy for its optimizer; a ZeRO-3 working term "
        "of 4 bytes x the largest layer where ours holds two prefetched FSDP units; host RAM x 1.5.",
    ),
    click.option(
        "--largest-layer",
        metavar="COUNT",
        help="Parameters of the largest layer, DeepSpeed's ZeRO-3 working term (--accounting deepspeed). "
        "[default: the preset's largest module, or one of the --fsdp-units equal units]",
    ),
    click.option(
        "--zero-init/--no-zero-init",
        default=CalcOptions.zero_init,
        show_default=True,
        help="DeepSpeed ZeRO-3 host RAM with or without zero.Init (--accounting deepspeed).",
    ),
    click.option(
        "--tp",
        type=click.IntRange(min=2),
        help="Add the 2-D configuration: tensor parallelism over TP GPUs inside each block, FSDP over "
        "dp = --gpus / TP. TP must divide --gpus and the model's heads.",
    ),
    click.option(
        "--sequence-parallel",
        is_flag=True,
        help="With --tp: shard the LayerNorms and the residual stream by sequence (all-gather + reduce-scatter "
        "in place of each all-reduce).",
    ),
    click.option(
        "--explain",
        is_flag=True,
        help="Also print what each column follows, the traffic per step and the notes behind the figures.",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the ddpfsdp.calc/1 document (all sizes in bytes)."),
)


def _with_calc_options(command: Any) -> Any:
    for option in reversed(CALC_OPTIONS):
        command = option(command)
    return command


@click.command()
@_with_calc_options
@pipeline_options
@cp_ep_options
@scale_options
def calc(as_json: bool, explain: bool, display_unit: str, **values: Any) -> None:
    """Theory: per-GPU memory and per-step traffic of DDP, ZeRO-1/2/3, FSDP and HSDP, side by side.

    Every figure is the analytic model's estimate, not a measurement; run `ddpfsdp demo` to
    measure. The per-GPU memory tables come first; --explain adds what each column follows, the
    communication per step and the notes. Each column follows one implementation: DDP;
    ZeroRedundancyOptimizer (zro, PyTorch's optimizer-state sharding); DeepSpeed's ZeRO-1 and ZeRO-2; FSDP grad-op
    (SHARD_GRAD_OP); ZeRO-3 (FSDP2, or DeepSpeed under bf16-master); HSDP. The working set,
    activations and totals are labelled estimates.

    --offload moves model state to host RAM and prints host bytes per node and the PCIe bytes each
    GPU copies per step; a strategy with no such offload is refused with what to use instead.
    --accounting deepspeed prints DeepSpeed 0.19's estimator for ZeRO-2 and ZeRO-3 instead of
    ours. The two differ on purpose: DeepSpeed counts an fp32 copy of the gradient shard (its
    optimizer converts a whole parameter group's gradients to fp32 at once), FSDP holds one shard
    in its own dtype; DeepSpeed's ZeRO-3 working term is one layer (one module's own
    parameters), ours two FSDP units (a block each, computing and prefetched). Both are right for
    the implementation they describe.

    \b
    Examples:
      ddpfsdp calc --params 7B --gpus 8
      ddpfsdp calc --params 7B --gpus 8 --explain
      ddpfsdp calc --params 7.5e9 --gpus 64 --precision bf16-master --optimizer adam
      ddpfsdp calc --model large --gpus 8 --batch-size 8 --checkpoint-activations
      ddpfsdp calc --params 70B --gpus 64 --group-size 8 --gpu-mem 80GB
      ddpfsdp calc --params 350M --gpus 4 --json
      ddpfsdp calc --params 13B --gpus 16 --offload all --strategy zero3
      ddpfsdp calc --params 2851M --gpus 8 --accounting deepspeed --largest-layer 32M --offload optimizer
      ddpfsdp calc --params 70B --gpus 64 --tp 8 --sequence-parallel
      ddpfsdp calc --params 70B --gpus 64 --tp 8 --pp 4 --microbatches 16 --schedule interleaved
      ddpfsdp calc --params 7B --gpus 8 --seq-len 131072 --cp 8 --checkpoint-activations
      ddpfsdp calc --params 7B --gpus 64 --ep 8 --experts 64 --top-k 2 --capacity-factor 1.25

    At cluster scale, each option group adds a section (stragglers and scaling need no model):

    \b
      ddpfsdp calc --gpus 10000 --stragglers 0.001 --straggler-delay 300ms --step-time 1s
      ddpfsdp calc --gpus 512 --scaled-to 1024 --throughput-gain 1.1
      ddpfsdp calc --params 175B --gpus 512 --precision bf16-master --optimizer adam --checkpoint-bw 2GB/s
      ddpfsdp calc --params 70B --gpus 1024 --topology --oversubscription 2
      ddpfsdp calc --params 175B --gpus 1024 --plan --cluster "DGX A100 80GB" --precision bf16-master
      ddpfsdp calc --params 70B --gpus 8 --adam-8bit --lora-rank 16
    """
    from ddpfsdp.demos.theory.estimate import estimate_for

    pipeline = take_pipeline_options(values)
    cp_ep = take_cp_ep_options(values)
    scale = take_scale_options(values)
    if values["params"] is None and values["model"] is None and model_free(scale):
        _print_scale_only(scale, values["gpus"], as_json, display_unit)
        return
    options = _calc_options(values)
    _check_combinations(options)
    try:
        result = estimate_for(options)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    section = pipeline_section(pipeline, result)
    if section is not None:
        result["pipeline"] = section
    cp_ep_figures = cp_ep_sections(cp_ep, result)
    result.update(cp_ep_figures)
    result.update(scale_sections(scale, result, values["params"]))

    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _render(result, display_unit, explain)
    if section is not None:
        render_pipeline(section, result, display_unit)
    render_cp_ep(cp_ep_figures, display_unit)
    from ddpfsdp.quiz.commands.calc_scale_view import render_scale

    render_scale(result, display_unit)
    from rich.text import Text

    from ddpfsdp.demos.base.prose import Prose
    from ddpfsdp.quiz.plain_console import trimmed_console

    # its command on one line, however the prose around it wraps
    trimmed_console().print(Prose(Text(_simulate_hint(options, result["inputs"]["precision"]))), crop=False)


def _print_scale_only(scale: ScaleOptions, gpus: int, as_json: bool, unit: str) -> None:
    """Stragglers and scaling need no model: their sections alone."""
    from ddpfsdp.quiz.commands.calc_scale import model_free_document
    from ddpfsdp.quiz.commands.calc_scale_view import render_scale

    document = model_free_document(scale, gpus)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        render_scale(document, unit)


def _calc_options(values: dict[str, Any]) -> CalcOptions:
    """The options as typed, checked one by one and then as a whole, names in lower case."""
    _check_values(values["params"], values["model"], values["gpu_mem"], values["gpus"], values["group_size"])
    lowered = {name: value.lower() if name in LOWER_CASE and value else value for name, value in values.items()}
    lowered["strategies"] = [name.lower() for name in values["strategies"]] or None
    return CalcOptions(**lowered)


def _check_values(params: str | None, model: str | None, gpu_mem: str, gpus: int, group_size: int | None) -> None:
    """Refuse a count, size, preset or group size that cannot be read, naming the option at fault."""
    if params is None and model is None:
        raise click.UsageError("give --params (e.g. 7B, 7.5e9, 350M) or --model (tiny, small, base, large, xl)")
    if params is not None and model is not None:
        raise click.UsageError("give --params or --model, not both")
    try:
        count = parse_count(params) if params is not None else None
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--params") from None
    low, high = PARAMS_RANGE
    if count is not None and not low <= count <= high:
        raise click.BadParameter(
            f"{params} is {'fewer than 1K' if count < low else 'more than 100T'} parameters; "
            "give a count from 1K to 100T (e.g. 7B, 70B, 1.3T)",
            param_hint="--params",
        )
    try:
        parse_bytes(gpu_mem)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--gpu-mem") from None
    if model is not None:
        from ddpfsdp.demos.base.shapes import GPT_PRESETS

        if model.lower() not in GPT_PRESETS:
            raise click.BadParameter(
                f"unknown preset {model!r}; choose one of {', '.join(GPT_PRESETS)}", param_hint="--model"
            ) from None
    if group_size is not None and (group_size > gpus or gpus % group_size):
        raise click.BadParameter(
            f"{group_size} does not divide --gpus {gpus}; choose a divisor of {gpus}, "
            f"e.g. {', '.join(str(d) for d in _divisors(gpus))}",
            param_hint="--group-size",
        ) from None


def _check_combinations(options: CalcOptions) -> None:
    """Refuse what no implementation does, naming the option at fault and what to use instead."""
    deepspeed = options.accounting == "deepspeed"
    if deepspeed and (
        (options.precision and options.precision != DEEPSPEED_PRECISION)
        or options.optimizer not in DEEPSPEED_OPTIMIZERS
    ):
        raise click.BadParameter(
            "DeepSpeed's estimator counts only mixed-precision Adam (16-bit params and grads, fp32 master "
            "weights and moments): drop --precision (or give bf16-master) and use --optimizer adam or adamw, "
            "or use --accounting ddpfsdp",
            param_hint="--accounting",
        )
    if options.largest_layer is not None:
        if not deepspeed:
            raise click.BadParameter(
                "the largest layer is DeepSpeed's ZeRO-3 working term: add --accounting deepspeed "
                "(the ddpfsdp accounting sizes FSDP units with --model or --fsdp-units)",
                param_hint="--largest-layer",
            )
        try:
            parse_count(options.largest_layer)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--largest-layer") from None
    for name in options.strategies or ():
        refusal = accounting_refusal(name, options.accounting)
        if refusal:
            raise click.BadParameter(refusal, param_hint="--accounting") from None
        refusal = offload_refusal(name, options.offload)
        if refusal:
            raise click.BadParameter(f"{refusal} (--strategy {name})", param_hint="--offload") from None
    if deepspeed or options.offload != "none":
        try:
            node_layout(options.gpus, options.gpus_per_node)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--gpus-per-node") from None


def _simulate_hint(options: CalcOptions, precision: str) -> str:
    """The simulated demo that measures this configuration with the real FSDP code, on fake tensors."""
    from ddpfsdp.demos.base.shapes import GPT_SIZES

    params, gpus, group_size = options.params, options.gpus, options.group_size
    world = max(gpus, 2)
    named = f"--params {params.strip().upper()}" if params is not None and params.strip().upper() in GPT_SIZES else None
    nearest = None
    if options.model is None and named is None:  # the named size nearest the count, on a log scale
        count = parse_count(params)
        nearest = min(GPT_SIZES, key=lambda size: abs(math.log(parse_count(size) / count)))
    what = f"--model {options.model}" if options.model is not None else named or f"--params {nearest}"
    hybrid = f" --sharding hybrid --replicas {gpus // group_size}" if group_size and 1 < group_size < gpus else ""
    hybrid += f" --tp {options.tp}" if options.tp else ""
    precise = f" --precision {precision}" if precision in ("fp32", "bf16-mixed", "bf16") else ""
    args = f"--simulate --world {world} {what}{precise}{hybrid}"
    refusal = _simulation_refusal(args.split())
    if refusal:
        return f"No simulated run of this configuration: `ddpfsdp demo fsdp {args}` would be refused ({refusal})."
    sizes = "" if nearest is None else (
        f" It simulates a named size ({', '.join(GPT_SIZES)}) or a preset, not a bare count: {nearest} is the "
        f"nearest to {params}.")
    return (f"Measure it: `ddpfsdp demo fsdp {args}` runs the real FSDP code on fake tensors over a fake "
            f"process group of {world} ranks (ddp, zro and compare too).{sizes}")


def _simulation_refusal(args: list[str]) -> str | None:
    """What `ddpfsdp demo fsdp ARGS` would refuse before it starts, checked as that command checks it."""
    from ddpfsdp.demos import registry
    from ddpfsdp.demos.launch import request

    demo = registry.get("fsdp")
    try:
        request.validate(demo, request.from_command_line(demo, args))
    except click.ClickException as error:
        return error.message
    return None


# Column headers: a short title and what it shards, each at most 9 characters so four columns fit 80.
SHORT_TITLES = {"ddp": "DDP", "zro": "ZRO", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "grad-op": "grad-op",
                "zero3": "ZeRO-3", "hsdp": "HSDP", "2d": "2-D"}
SHORT_SHARDS = {"ddp": "no shards", "zro": "opt", "zero1": "opt", "zero2": "+ grads", "grad-op": "1 gather",
                "zero3": "+ params", "hsdp": "in groups", "2d": "dp x tp"}
REPLICATED = ("ddp", "zro", "zero1", "zero2")


def _header(name: str, inputs: InputsDocument) -> tuple[str, str]:
    """A column's short title and what it shards, each at most 9 characters."""
    if name == "2d":
        return f"2-D tp={inputs['tp']}", "tp + SP" if inputs["sequence_parallel"] else SHORT_SHARDS[name]
    return SHORT_TITLES[name] + (f" G={inputs['group_size']}" if name == "hsdp" else ""), SHORT_SHARDS[name]


def _labelled_ops(row: StrategyRow) -> list[tuple[str, dict]]:
    """A column's collectives; the 2-D one's by group (FSDP over dp, TP over tp; TP's need a block shape)."""
    if "tp_comm" not in row:
        return list(row["comm"].items())
    ops = [(f"{op} (dp)", figures) for op, figures in row["comm"].items()]
    if row["tp_comm"] is None:
        return ops + [("tp: needs a block shape", {"count": None, "bytes": None, "wire_bytes_per_rank": None})]
    return ops + [(f"{op} (tp)", figures) for op, figures in row["tp_comm"].items()]


def _divisors(number: int) -> list[int]:
    return [d for d in range(1, number + 1) if number % d == 0][:8]


def _render(result: CalcDocument, unit: str, explain: bool) -> None:
    from ddpfsdp.demos.base.units import format_bytes, format_count
    from ddpfsdp.quiz.plain_console import trimmed_console

    console = trimmed_console()
    inputs = result["inputs"]
    strategies = result["strategies"]
    size = lambda n: "n/a" if n is None else format_bytes(n, unit)  # noqa: E731
    what = f"model {inputs['model']} ({format_count(inputs['params'])} params)" if inputs["model"] else (
        f"{format_count(inputs['params'])} params"
    )
    per = result["bytes_per_param"]
    unit_meaning = "1 GB = 1e9 bytes" if unit == "GB" else "1 GiB = 2**30 bytes"
    console.print(
        f"[bold]Theory[/] (analytic model, not measured): {what} on {inputs['gpus']} GPUs, "
        f"{inputs['precision']} with {inputs['optimizer']} = {per['params']} + {per['grads']} + "
        f"{per['optimizer']} = {per['total']} bytes/param; sizes in {unit} ({unit_meaning})."
    )
    if inputs["accounting"] == "deepspeed":
        console.print(
            f"[bold]Accounting: DeepSpeed 0.19's estimator[/] (estimate_zero2/zero3_model_states_mem_needs), "
            f"largest layer {format_count(inputs['largest_layer_params'])} params, {inputs['nodes']} node(s) "
            f"of {inputs['gpus_per_node']} GPUs, host RAM x 1.5; offload {inputs['offload']}."
        )
    elif inputs["offload"] != "none":
        console.print(f"[bold]Offload {inputs['offload']}[/]: {inputs['nodes']} node(s) of {inputs['gpus_per_node']} GPUs.")
    # More than four columns do not fit 80 characters: split them where the parameters stop being whole.
    groups = [("", list(strategies))]
    if len(strategies) > 4:
        groups = [(": parameters whole on every GPU", [n for n in strategies if n in REPLICATED]),
                  (": parameters sharded at rest", [n for n in strategies if n not in REPLICATED])]
    for where, names in groups:
        if names:
            console.print(_memory_table(f"Per-GPU memory, {unit} (theory){where}",
                                        {n: strategies[n] for n in names}, inputs, size))
    deepspeed = inputs["accounting"] == "deepspeed"
    if deepspeed:
        console.print("DeepSpeed options: " + "; ".join(
            f"{row['title']}: {row['deepspeed_options']}" for row in strategies.values()), highlight=False)
    if inputs["model"] is None:
        shaped = strategies.get("2d", {}).get("shape_activation_bytes")
        two_d = (f" (the 2-D column's, from the named size's shape, would add {size(shaped)})" if shaped else "")
        console.print(f"[dim]fits: model state + working set only; activations need --model{two_d}[/]")
    if not explain:
        console.print("[dim]--explain adds what each column follows, the traffic per step and the notes.[/]")
        return
    console.print(_implementation_table(strategies, inputs["precision"]))
    console.print(_comm_table(strategies, unit, size, inputs))
    console.print("[dim]calls: ? = set by how the implementation fills its buckets[/]")
    for note in result["notes"]:
        console.print(f"• {note}", highlight=False)


def _memory_table(title: str, rows: dict[str, StrategyRow], inputs: InputsDocument, size) -> Any:
    from rich.table import Table

    memory = Table(title=title, title_justify="left")
    memory.add_column("", no_wrap=True)
    for name in rows:
        header, shards = _header(name, inputs)
        memory.add_column(f"{header}\n[dim]{shards}[/]", justify="right")
    for label, key in [
        ("params", "params_bytes"),
        ("grads", "grads_bytes"),
        ("optimizer", "optimizer_bytes"),
        ("model state", "model_state_bytes"),
        ("working set (est.)", "working_set_bytes"),
        ("activations (est.)", "activation_bytes"),
    ]:
        memory.add_row(label, *[size(row[key]) for row in rows.values()])
    memory.add_row("[bold]total (est.)[/]", *[f"[bold]{size(row['total_bytes'])}[/]" for row in rows.values()])
    verdict = lambda fits: "[green]yes[/]" if fits else "[red]no[/]"  # noqa: E731
    memory.add_row(f"fits in {size(inputs['gpu_mem_bytes'])}", *[verdict(row["fits"]) for row in rows.values()])
    if inputs["accounting"] == "deepspeed" or inputs["offload"] != "none":
        memory.add_row("host RAM per GPU", *[size(row["host_bytes_per_gpu"]) for row in rows.values()],
                       end_section=False)
        memory.add_row(f"[bold]host RAM per node[/] ({inputs['gpus_per_node']} GPUs)",
                       *[f"[bold]{size(row['host_bytes'])}[/]" for row in rows.values()])
        memory.add_row("PCIe per step (to + from host)", *[size(row["pcie_bytes_per_step"]) for row in rows.values()])
    return memory


def _implementation_table(strategies: dict[str, StrategyRow], precision: str) -> Any:
    from rich.table import Table

    table = Table(title=f"What each column follows ({precision})", title_justify="left", show_header=False)
    table.add_column("column", no_wrap=True)
    table.add_column("implementation")
    for name, row in strategies.items():
        table.add_row(SHORT_TITLES[name], row["implementation"])
    return table


def _comm_table(strategies: dict[str, StrategyRow], unit: str, size, inputs: InputsDocument) -> Any:
    from rich.table import Table

    comm = Table(title=f"Communication per step, per rank, {unit} (theory; ring)", title_justify="left")
    for column in ("strategy", "collective", "calls", "logical bytes", "wire bytes per rank"):
        comm.add_column(column, justify="left" if column in ("strategy", "collective") else "right")
    for name, row in strategies.items():
        title = _header(name, inputs)[0]
        for index, (op, figures) in enumerate(_labelled_ops(row)):
            comm.add_row(
                title if index == 0 else "",
                op,
                "?" if figures["count"] is None else str(figures["count"]),
                size(figures["bytes"]),
                size(figures["wire_bytes_per_rank"]),
            )
        comm.add_row("", "[bold]total[/]", "", "", f"[bold]{size(row['wire_bytes_per_rank'])}[/]", end_section=True)
    return comm
