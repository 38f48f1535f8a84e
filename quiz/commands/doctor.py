"""`ddpfsdp doctor`: what this machine can run."""

from __future__ import annotations

import json

import click


def _gib(num_bytes: int | None) -> str:
    return "unknown" if num_bytes is None else f"{num_bytes / 2**30:.1f} GiB"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(as_json: bool) -> None:
    """Show torch's build, GPUs, NCCL and gloo, CPU cores and RAM, and what demos use here."""
    from ddpfsdp.quiz.plain_console import trimmed_console
    from rich.table import Table

    from rich.text import Text

    from ddpfsdp.demos.base.prose import Prose
    from ddpfsdp.demos.launch.hardware import detect
    from ddpfsdp.quiz.paths import DataDirError, data_dir, location

    hardware = detect()
    # A data directory that cannot be used is one of the findings: every other command stops on it.
    try:
        home, problem = data_dir(), None
    except DataDirError as error:
        home, problem = location()[0], str(error)
    if as_json:
        report = hardware.to_dict() | {"data_dir": str(home), "data_dir_problem": problem}
        click.echo(json.dumps(report, indent=2))
        return

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("torch", f"{hardware.torch_version} ({hardware.torch_build} build)")
    if hardware.gpus:
        for gpu in hardware.gpus:
            table.add_row(
                f"cuda:{gpu.index}",
                f"{gpu.name}, {_gib(gpu.total_memory_bytes)}, compute capability {gpu.capability}",
            )
    else:
        reason = "torch has no CUDA build" if hardware.torch_build == "CPU" else "no CUDA device visible"
        table.add_row("GPUs", f"none ({reason}); demos run on CPU processes with gloo")
    yes_no = lambda ok: "[green]available[/]" if ok else "[red]not available[/]"  # noqa: E731
    table.add_row("NCCL", yes_no(hardware.nccl_available))
    table.add_row("gloo", yes_no(hardware.gloo_available))
    table.add_row("CPU cores", str(hardware.cpu_count))
    table.add_row(
        "RAM", f"{_gib(hardware.ram_total_bytes)} total, {_gib(hardware.ram_available_bytes)} available"
    )
    table.add_row("python", f"{hardware.python} on {hardware.platform}")
    table.add_row("data directory", str(home) if problem is None else f"[red]cannot be used:[/] {problem}")
    table.add_row("demos use", hardware.default_launch.describe() + " by default")
    # a command to copy stays on one line however the cell wraps
    table.add_row("training demos", Prose(Text("need 2 ranks (by default here: "
                  f"{hardware.default_launch.describe_for(2)}): " + "; or ".join(hardware.data_parallel_commands))))
    table.add_row("placements", Prose(Text("\n".join(hardware.placements))))
    trimmed_console().print(table)
