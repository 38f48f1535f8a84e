"""`ddpfsdp demo fault NAME`: a real distributed-training bug and its fix, run on real gloo ranks."""

from __future__ import annotations

import json
import sys

import click
from ddpfsdp.demos import registry
from ddpfsdp.demos.base.bounds import FiniteFloat
from ddpfsdp.demos.faults.catalog import FAULTS
from ddpfsdp.demos.faults.runner import DEFAULT_TIMEOUT_S, MAX_PROCS
from ddpfsdp.demos.result.schema import SCHEMA


def _progress_line(event: dict, timeout_s: float) -> str | None:
    if event.get("event") == "start":
        return "ranks started"
    if event.get("event") == "progress":
        fault = FAULTS.get(event.get("fault"))
        wait = f" (a hang waits the {timeout_s:g} s timeout)" if fault and fault.hangs and event.get("phase") == "broken" else ""
        return f"running the {event.get('phase')} program{wait}"
    return None


def _failure(run, verbose: bool) -> click.ClickException:
    error = run.error or {}
    lines = [f"fault {run.faults[0]}: {error.get('message', 'the run ended without a result')}"]
    if verbose and error.get("traceback"):
        lines += ["", "The ranks' stderr:", error["traceback"]]
    elif error.get("traceback"):
        lines.append("Run again with --verbose for the ranks' stderr.")
    return click.ClickException("\n".join(lines))


@click.command("fault", short_help=registry.get("fault").summary, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("name", required=False, metavar="NAME")
@click.option("--list", "list_faults", is_flag=True, help="List the faults, one per line with its summary.")
@click.option("--procs", type=click.IntRange(2, MAX_PROCS), default=2, show_default=True,
              help="CPU processes (gloo ranks) that run the programs.")
@click.option("--timeout-s", type=FiniteFloat(1, 60), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Process-group timeout of each program: how long a hung rank waits for its peers.")
@click.option("--json", "as_json", is_flag=True, help=f"Print the result as JSON (schema {SCHEMA}).")
@click.option("--verbose", "-v", is_flag=True, help="On a failure, also print the ranks' stderr.")
def fault(name: str | None, list_faults: bool, procs: int, timeout_s: float, as_json: bool, verbose: bool) -> None:
    """The failure lab: a real distributed-training bug, then its fix, on CPU processes (gloo).

    Shows the symptom exactly as torch produced it (its error, the flight recorder's collectives per
    rank, or the measured quantity that is wrong), the cause, the fix, and checks that the symptom is
    there in the broken run and gone in the fixed one.

    \b
    Examples:
      ddpfsdp demo fault --list
      ddpfsdp demo fault desync
      ddpfsdp demo fault uneven-inputs --procs 3 --timeout-s 5
      ddpfsdp demo fault unused-parameters --json
    """
    if list_faults:
        import shutil

        click.echo("\n".join(_listed(min(shutil.get_terminal_size((80, 24)).columns, 100))))
        return
    if name is None:
        raise click.UsageError("name a fault, e.g. `ddpfsdp demo fault desync`; `ddpfsdp demo fault --list` lists them")
    if name not in FAULTS:
        raise click.UsageError(f"unknown fault {name!r}; choose one of {', '.join(FAULTS)} (--list describes them)")
    _run(name, procs, timeout_s, as_json, verbose)


def _listed(width: int) -> list[str]:
    """Each fault with its summary, wrapped under the summaries' column to `width` (a name alone, then its
    summary indented, where the column would leave the summary under 30 cells)."""
    from ddpfsdp.demos.base.prose import keep_commands

    column = max(map(len, FAULTS)) + 2
    room = width - column
    lines = []
    for name, fault in FAULTS.items():
        if room < 30:
            lines += [name, *("    " + line for line in keep_commands(fault.summary, width - 4).plain.split("\n"))]
            continue
        wrapped = keep_commands(fault.summary, room).plain.split("\n")
        lines += [f"{name.ljust(column)}{wrapped[0]}", *(" " * column + line for line in wrapped[1:])]
    return lines


def _run(name: str, procs: int, timeout_s: float, as_json: bool, verbose: bool) -> None:
    from ddpfsdp.demos.faults.render import render_fault
    from ddpfsdp.demos.faults.runner import FaultRun
    from ddpfsdp.demos.launch.launcher import LaunchError
    from ddpfsdp.quiz.commands.results import check_table, save_result
    from ddpfsdp.quiz.plain_console import trimmed_console
    from rich.markup import escape

    out, err = trimmed_console(), trimmed_console(stderr=True)
    status = err if as_json else out
    try:
        run = FaultRun([name], procs=procs, timeout_s=timeout_s)
    except LaunchError as error:  # the run's own checks, for a caller that skipped click's
        raise click.UsageError(str(error)) from None
    status.print(f"[bold]fault {name}[/] on {procs} CPU processes (gloo): {escape(FAULTS[name].summary)}")
    try:
        with status.status("starting ranks") as spinner:
            for event in run.events():
                line = _progress_line(event, timeout_s)
                if line:
                    spinner.update(line)
    except KeyboardInterrupt:
        run.cancel()
        left = run.leftover_pids()
        err.print(f"Cancelled: all {procs} ranks stopped." if not left else f"Cancelled, but processes {left} are still alive.")
        sys.exit(130)
    if not run.ok or run.result is None:
        raise _failure(run, verbose)
    save_result(registry.get("fault"), [name], run.result, status)
    if as_json:
        click.echo(json.dumps(run.result.to_json(), indent=2))
        return
    render_fault(run.result, out)
    out.print(check_table(run.result.checks))
