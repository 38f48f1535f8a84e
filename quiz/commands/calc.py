"""`ddpfsdp calc`: the analytic model's per-GPU memory and traffic for every strategy, side by side."""

from __future__ import annotations

import json

import click

PRECISION_NAMES = ("fp32", "bf16-mixed", "bf16-master", "bf16")
OPTIMIZER_NAMES = ("adamw", "adam", "sgd-momentum", "sgd")


@click.command()
@click.option("--params", "params", metavar="COUNT", help="Parameter count: 7B, 7.5e9, 350M, 125K, 1.3T.")
@click.option(
    "--model",
    metavar="PRESET",
    help="A GPT preset (tiny, small, base, large, xl) instead of --params; adds activations and real FSDP units.",
)
@click.option("--gpus", type=click.IntRange(min=1), default=8, show_default=True, help="GPUs in the job (N).")
@click.option(
    "--group-size",
    type=click.IntRange(min=1),
    help="HSDP shard-group size G; must divide --gpus. [default: 8 where it divides --gpus, else --gpus]",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISION_NAMES, case_sensitive=False),
    default="bf16-mixed",
    show_default=True,
    help="fp32; bf16-mixed (PyTorch: fp32 state, bf16 compute); bf16-master (ZeRO paper: 2+2+12 with Adam); bf16.",
)
@click.option(
    "--optimizer",
    type=click.Choice(OPTIMIZER_NAMES, case_sensitive=False),
    default="adamw",
    show_default=True,
    help="adam/adamw keep 2 states per parameter, sgd-momentum 1, sgd none.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True, help="Micro-batch per GPU (sequences).")
@click.option("--seq-len", type=click.IntRange(min=1), help="Sequence length. [default: the preset's]")
@click.option("--checkpoint-activations", is_flag=True, help="Estimate activations with each block checkpointed.")
@click.option("--gpu-mem", default="80GB", show_default=True, metavar="SIZE", help="Memory per GPU: 80GB, 79.6GiB, 4e10.")
@click.option(
    "--fsdp-units",
    "units",
    type=click.IntRange(min=1),
    help="FSDP units (equal parts) assumed with --params. [default: 32]",
)
@click.option(
    "--unit",
    "display_unit",
    type=click.Choice(["GB", "GiB"]),
    default="GB",
    show_default=True,
    help="Print sizes in GB (1e9 bytes) or GiB (2**30 bytes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the ddpfsdp.calc/1 document (all sizes in bytes).")
def calc(
    params: str | None,
    model: str | None,
    gpus: int,
    group_size: int | None,
    precision: str,
    optimizer: str,
    batch_size: int,
    seq_len: int | None,
    checkpoint_activations: bool,
    gpu_mem: str,
    units: int | None,
    display_unit: str,
    as_json: bool,
) -> None:
    """Theory: per-GPU memory and per-step traffic of DDP, ZeRO-1/2/3 and HSDP, side by side.

    Every figure is the analytic model's estimate, not a measurement; run `ddpfsdp demo` to
    measure. Model state follows the ZeRO paper; the working set, activations and totals are
    labelled estimates.

    \b
    Examples:
      ddpfsdp calc --params 7B --gpus 8
      ddpfsdp calc --params 7.5e9 --gpus 64 --precision bf16-master --optimizer adam
      ddpfsdp calc --model large --gpus 8 --batch-size 8 --checkpoint-activations
      ddpfsdp calc --params 70B --gpus 64 --group-size 8 --gpu-mem 80GB
      ddpfsdp calc --params 350M --gpus 4 --json
    """
    from ddpfsdp.demos.theory import calc as model_calc
    from ddpfsdp.demos import units as unit_parsing

    if params is None and model is None:
        raise click.UsageError("give --params (e.g. 7B, 7.5e9, 350M) or --model (tiny, small, base, large, xl)")
    if params is not None and model is not None:
        raise click.UsageError("give --params or --model, not both")
    try:
        if params is not None:
            unit_parsing.parse_count(params)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--params") from None
    try:
        unit_parsing.parse_bytes(gpu_mem)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--gpu-mem") from None
    if model is not None:
        from ddpfsdp.demos.train.presets import GPT_PRESETS

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
    try:
        result = model_calc.estimate(
            params=params,
            model=model.lower() if model else None,
            gpus=gpus,
            group_size=group_size,
            precision=precision.lower(),
            optimizer=optimizer.lower(),
            batch_size=batch_size,
            seq_len=seq_len,
            checkpoint_activations=checkpoint_activations,
            gpu_mem=gpu_mem,
            units=units,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None

    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _render(result, display_unit)
    click.echo(_simulate_hint(params, model, gpus, group_size, precision.lower()))


def _simulate_hint(params: str | None, model: str | None, gpus: int, group_size: int | None, precision: str) -> str:
    """The simulated demo that measures this configuration with the real FSDP code, on fake tensors."""
    from ddpfsdp.demos.train.presets import GPT_SIZES

    if model is not None:
        what = f"--model {model.lower()}"
    elif params is not None and params.strip().upper() in GPT_SIZES:
        what = f"--params {params.strip().upper()}"
    else:
        what = f"--params {{{','.join(GPT_SIZES)}}}"
    world = max(gpus, 2)
    hybrid = f" --sharding hybrid --replicas {gpus // group_size}" if group_size and 1 < group_size < gpus else ""
    precise = f" --precision {precision}" if precision in ("fp32", "bf16-mixed", "bf16") else ""
    return (f"Measure it: `ddpfsdp demo fsdp --simulate --world {world} {what}{precise}{hybrid}` runs the real "
            f"FSDP code on fake tensors over a fake process group of {world} ranks (ddp, zero1 and compare too).")


SHORT_SHARDS = {"ddp": "no shards", "zero1": "opt sharded", "zero2": "+ grads", "zero3": "+ params", "hsdp": "in groups"}


def _divisors(number: int) -> list[int]:
    return [d for d in range(1, number + 1) if number % d == 0][:8]


def _render(result: dict, unit: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from ddpfsdp.demos.units import format_bytes, format_count

    console = Console()
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

    memory = Table(title=f"Per-GPU memory, {unit} (theory)", title_justify="left")
    memory.add_column("", no_wrap=True)
    for name, row in strategies.items():
        title = row["title"] + (f" G={inputs['group_size']}" if name == "hsdp" else "")
        memory.add_column(f"{title}\n[dim]{SHORT_SHARDS[name]}[/]", justify="right")
    for label, key in [
        ("params", "params_bytes"),
        ("grads", "grads_bytes"),
        ("optimizer", "optimizer_bytes"),
        ("model state", "model_state_bytes"),
        ("working set (est.)", "working_set_bytes"),
        ("activations (est.)", "activation_bytes"),
    ]:
        memory.add_row(label, *[size(row[key]) for row in strategies.values()])
    memory.add_row("[bold]total (est.)[/]", *[f"[bold]{size(row['total_bytes'])}[/]" for row in strategies.values()])
    limit = inputs["gpu_mem_bytes"]
    verdict = lambda fits: "[green]yes[/]" if fits else "[red]no[/]"  # noqa: E731
    memory.add_row(f"fits in {size(limit)}", *[verdict(row["fits"]) for row in strategies.values()])
    console.print(memory)
    if inputs["model"] is None:
        console.print("[dim]fits: model state + working set only; activations need --model[/]")

    comm = Table(title=f"Communication per step, per rank, {unit} (theory; ring)", title_justify="left")
    for column in ("strategy", "collective", "calls", "logical bytes", "wire bytes per rank"):
        comm.add_column(column, justify="left" if column in ("strategy", "collective") else "right")
    for row in strategies.values():
        for index, (op, figures) in enumerate(row["comm"].items()):
            comm.add_row(
                row["title"] if index == 0 else "",
                op,
                "?" if figures["count"] is None else str(figures["count"]),
                size(figures["bytes"]),
                size(figures["wire_bytes_per_rank"]),
            )
        comm.add_row("", "[bold]total[/]", "", "", f"[bold]{size(row['wire_bytes_per_rank'])}[/]", end_section=True)
    console.print(comm)
    console.print("[dim]calls: ? = set by how the implementation fills its buckets[/]")
    for note in result["notes"]:
        console.print(f"• {note}", highlight=False)
