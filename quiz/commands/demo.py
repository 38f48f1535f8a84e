"""`ddpfsdp demo NAME`: run a demo on real processes and show what was measured."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ddpfsdp.demos import registry
from ddpfsdp.demos.result import SCHEMA

LAUNCH_PARAMS = ("gpus", "procs", "as_json", "force", "timeout_s", "verbose", "fail_rank", "fail_step", "fail_mode")


def _launch_options() -> list[click.Parameter]:
    from ddpfsdp.demos.worker import DEFAULT_TIMEOUT_S

    return [
        click.Option(
            ["--gpus"],
            type=click.IntRange(min=1),
            default=None,
            help="Run on this many CUDA GPUs with NCCL.",
        ),
        click.Option(
            ["--procs"],
            type=click.IntRange(min=1),
            default=None,
            help="Run on this many CPU processes with gloo.  [default: every visible GPU, else 2 CPU processes]",
        ),
        click.Option(["--json", "as_json"], is_flag=True, help=f"Print the result as JSON (schema {SCHEMA})."),
        click.Option(["--force"], is_flag=True, help="Launch even if the memory estimate says it will not fit."),
        click.Option(
            ["--timeout-s"],
            type=click.FloatRange(min=1),
            default=None,
            help=f"Collective timeout in seconds: how long a rank waits for a dead peer.  [default: {DEFAULT_TIMEOUT_S:g}]",
        ),
        click.Option(["--verbose", "-v"], is_flag=True, help="On a failure, also print the launcher's full output."),
        click.Option(["--fail-rank"], type=int, default=None, hidden=True),
        click.Option(["--fail-step"], type=int, default=None, hidden=True),
        click.Option(["--fail-mode"], type=click.Choice(["raise", "exit"]), default="raise", hidden=True),
    ]


def demo_args(command: click.Command, ctx: click.Context) -> list[str]:
    """The demo's own options as the user gave them, to pass on to every rank."""
    from click.core import ParameterSource

    args: list[str] = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in LAUNCH_PARAMS:
            continue
        if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name]
        if param.is_flag and not param.secondary_opts:
            if value:
                args.append(param.opts[0])
        elif param.is_flag:
            args.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.multiple:
            for item in value:
                args += [param.opts[0], str(item)]
        else:
            args += [param.opts[0], str(value)]
    return args


def _check_table(checks: list[dict[str, Any]]):
    from rich.table import Table

    table = Table(title="Checks: the claims this run illustrates", title_justify="left", expand=False)
    table.add_column("", width=1)
    table.add_column("check")
    table.add_column("what was measured")
    for check in checks:
        mark = "[green]✔[/]" if check.get("passed") else "[red]✘[/]"
        table.add_row(mark, check.get("name", "?"), check.get("detail", ""))
    return table


def _render(demo: registry.Demo, result: dict[str, Any], console) -> None:
    from ddpfsdp.demos.worker import load

    if demo.render:
        load(demo.render)(result, console)
    if result.get("checks"):
        console.print(_check_table(result["checks"]))
    # A demo's own renderer states what its figures mean on CPU; concept demos get the note here.
    if not demo.render and (result.get("config") or {}).get("backend") == "gloo":
        from ddpfsdp.demos.result import GLOO_CAVEAT

        console.print(f"[dim]{GLOO_CAVEAT}[/]")


def _save(demo: registry.Demo, args: list[str], result: dict[str, Any], console) -> None:
    try:
        from ddpfsdp.quiz.store import Store

        with Store.open() as store:
            store.save_demo_result(demo.name, args, result)
    except Exception as exc:  # noqa: BLE001 - the result on screen matters more than the copy on disk
        console.print(f"[yellow]warning:[/] the result was not saved to the progress store: {exc}")


def _run(demo: registry.Demo, command: click.Command, **params: Any) -> None:
    from rich.console import Console

    ctx = click.get_current_context()
    options = {k: v for k, v in params.items() if k not in LAUNCH_PARAMS}
    args = demo_args(command, ctx)
    _check_before_placing(demo, options, params, ctx)
    as_json = params["as_json"]
    out = Console()
    err = Console(stderr=True)
    run = _start(demo, args, params, ctx)
    _guard(demo, run.placement, options, params["force"], out)
    status = err if as_json else out
    status.print(f"[bold]{demo.name}[/] on {run.placement.describe()}: {demo.summary}")
    _follow(demo, run, status, quiet=as_json and not sys.stderr.isatty(), err=err)
    if not run.ok:
        raise click.ClickException(_failure_message(demo, run, params["verbose"]))
    result = run.result
    assert result is not None
    _save(demo, args, result, err if as_json else out)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _render(demo, result, out)


def _check_before_placing(demo: registry.Demo, options: dict[str, Any], params: dict[str, Any],
                          ctx: click.Context) -> None:
    """Refuse what needs no world size before the run is placed: placing it imports torch (seconds)."""
    from ddpfsdp.demos.worker import load

    if options.get("simulate") and (params["gpus"] is not None or params["procs"] is not None):
        raise click.UsageError("--simulate runs one process for all --world ranks; leave out --gpus and --procs", ctx)
    if demo.validate:
        try:
            load(demo.validate)(options, None)
        except click.UsageError as exc:
            raise click.UsageError(exc.message, ctx) from None


def _start(demo: registry.Demo, args: list[str], params: dict[str, Any], ctx: click.Context):
    """The run, placed and with its options checked for its world size (not yet started)."""
    from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError

    try:
        return DemoRun(
            demo.name,
            args,
            gpus=params["gpus"],
            procs=params["procs"],
            timeout_s=params["timeout_s"],
            fail_rank=params["fail_rank"],
            fail_step=params["fail_step"],
            fail_mode=params["fail_mode"],
        )
    except LaunchError as exc:
        raise click.UsageError(str(exc), ctx) from None


def _guard(demo: registry.Demo, placement: Any, options: dict[str, Any], force: bool, out) -> None:
    """Refuse a training run the analytic model says will not fit, unless forced; warn when forced."""
    # A simulated run allocates nothing real, so there is nothing for the launch guard to estimate.
    if demo.kind != "training" or placement.device == "fake":
        return
    from ddpfsdp.demos.theory.guard import check_launch

    verdict = check_launch(demo.name, options, device=placement.device, world_size=placement.world_size, force=force)
    if not verdict.proceed:
        raise click.ClickException(verdict.message)  # it names the estimate, a fit and --force
    if not verdict.fits:
        out.print(f"[yellow]warning:[/] {verdict.message}")


def _follow(demo: registry.Demo, run: Any, status, *, quiet: bool, err) -> None:
    """Start the run and show its events as a progress bar until it ends; Ctrl+C stops every rank."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[metrics]}"),
        TimeElapsedColumn(),
        console=status,
        transient=True,
        disable=quiet,
    )
    try:
        with progress:
            task = progress.add_task("starting ranks", total=None, metrics="")
            for event in run.events():
                _show(demo, event, progress, task)
    except KeyboardInterrupt:
        run.cancel()
        left = run.leftover_pids()
        err.print(
            f"Cancelled: all {run.placement.world_size} ranks stopped."
            if not left
            else f"Cancelled, but processes {left} are still alive."
        )
        sys.exit(130)


def _show(demo: registry.Demo, event: dict[str, Any], progress, task) -> None:
    kind = event["event"]
    if kind == "progress":
        metrics = "  ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in event.items()
            if k not in ("event", "step", "steps")
        )
        progress.update(task, description=demo.name, completed=event["step"] + 1, total=event["steps"],
                        metrics=metrics)
    elif kind == "log":
        progress.console.print(event["message"], markup=False, highlight=False)
    elif kind == "start":
        progress.update(task, description="running")


def _failure_message(demo: registry.Demo, run: Any, verbose: bool) -> str:
    """What failed, on which rank, with its last lines; the first rank to die when it was another."""
    error = run.error or {}
    rank = error.get("rank")
    who = f"rank {rank} failed" if rank is not None else "the run failed"
    tail = (error.get("traceback") or "").strip().splitlines()[-15:]
    cause = run.root_cause
    if cause is not None and cause.message and cause.rank is not None and cause.rank != rank:
        # Another rank died first without a word; what this rank reported followed from it.
        message = [f"{demo.name}: {cause.message}", f"Then {who}: {error.get('message', 'no message')}"]
        tail = list(cause.rank_lines)
    else:
        message = [f"{demo.name}: {who}: {error.get('message', 'no message')}"]
    if tail:
        message += ["", *tail]
    message.append(f"(exit status {run.returncode}; every rank has been stopped)")
    if verbose:
        message += ["", "The launcher's output:", run.launcher_output]
    else:
        message.append("Run again with --verbose for the launcher's full output.")
    return "\n".join(message)


def _make_command(demo: registry.Demo) -> click.Command:
    from ddpfsdp.demos.worker import load

    params = [*load(demo.options), *_launch_options()]
    command = DemoCommand(
        demo.name,
        params=params,
        help=demo.summary[0].upper() + demo.summary[1:] + ".",
        short_help=demo.summary,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    command.callback = lambda **kwargs: _run(demo, command, **kwargs)
    return command


class DemoCommand(click.Command):
    """A demo's command: an option that only other demos take is refused naming the demos that take it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            owners = _demos_taking(error.option_name)
            if owners:
                error.message = (f"{error.option_name} is not an option of `ddpfsdp demo {self.name}`; "
                                 f"{' and '.join(f'`ddpfsdp demo {name}`' for name in owners)} "
                                 f"{'takes' if len(owners) == 1 else 'take'} it")
                error.possibilities = None
            raise


def _demos_taking(option: str) -> list[str]:
    """The demos (of those built from an option list) that have `option`."""
    from ddpfsdp.demos.worker import load

    return [name for name, demo in registry.DEMOS.items() if not demo.command
            and any(option in param.opts or option in param.secondary_opts for param in load(demo.options))]


class DemoGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(registry.DEMOS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        demo = registry.DEMOS.get(cmd_name)
        if demo is not None and demo.command:  # a demo that starts its own ranks brings its own command
            from ddpfsdp.demos.worker import load

            return load(demo.command)
        return _make_command(demo) if demo else None


@click.group(cls=DemoGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def demo() -> None:
    """Run a demo on real processes: DDP or FSDP training, or one concept, measured in this run.

    Every demo runs on every visible GPU with NCCL, or on 2 CPU processes with gloo where there is
    no GPU; --gpus N or --procs N chooses. Results are saved, so the quiz can show them as evidence.

    \b
    Examples:
      ddpfsdp demo fsdp --procs 2 --model tiny
      ddpfsdp demo fsdp --gpus 4 --sharding grad-op
      ddpfsdp demo compare --json > compare.json
      ddpfsdp demo allreduce --procs 4
    """
