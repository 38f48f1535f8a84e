"""`ddpfsdp demo NAME`: run a demo on real processes and show what was measured."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ddpfsdp.demos import registry
from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.registry import load
from ddpfsdp.demos.result.schema import GLOO_CAVEAT, DemoResult
from ddpfsdp.quiz.commands.results import check_table, save_result


def _render(demo: registry.Demo, result: DemoResult, console) -> None:
    if demo.render:
        load(demo.render)(result, console)
    if result.checks:
        console.print(check_table(result.checks))
    # A demo's own renderer states what its figures mean on CPU; concept demos get the note here.
    config = result.config
    if not demo.render and config.shared_gpu:
        console.print(f"[yellow]{config.shared_gpu}[/]")
    elif not demo.render and config.backend == "gloo":
        console.print(f"[dim]{GLOO_CAVEAT}[/]")


def _run(demo: registry.Demo, **params: Any) -> None:
    from ddpfsdp.quiz.plain_console import trimmed_console

    from ddpfsdp.demos.launch.request import LAUNCH_PARAMS

    ctx = click.get_current_context()
    asked = _asked(demo, {k: v for k, v in params.items() if k not in LAUNCH_PARAMS}, params, ctx)
    as_json = params["as_json"]
    out = trimmed_console()
    err = trimmed_console(stderr=True)
    run = _start(demo, asked, params, ctx)
    _guard(demo, run.placement, run.asked, params["force"], out)
    status = err if as_json else out
    status.print(f"[bold]{demo.name}[/] on {run.placement.describe()}{_degrees(run)}: {demo.summary}")
    _follow(demo, run, status, quiet=as_json and not sys.stderr.isatty(), err=err)
    if not run.ok:
        raise click.ClickException(_failure_message(demo, run, params["verbose"]))
    result = run.result
    assert result is not None
    save_result(demo, asked, result, err if as_json else out)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        _render(demo, result, out)


def _degrees(run: Any) -> str:
    """The run's mesh where it has more than one dimension: `--tp 2` starts 4 ranks, as dp_shard 2 x tp 2."""
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.train.spec import RunSpec

    if not isinstance(run.asked, RunSpec):
        return ""
    try:
        dims = ParallelDims.of(run.asked, run.placement.world_size)
    except ValueError:
        return ""
    return f" as {dims.describe()}" if len(dims.mesh_shape) > 1 else ""


def _asked(demo: registry.Demo, options: dict[str, Any], params: dict[str, Any], ctx: click.Context) -> Any:
    """What the demo is asked, from the options click parsed: its RunSpec or its options, checked for
    all that needs no world size before the run is placed (placing it imports torch, seconds)."""
    from ddpfsdp.demos.launch import request

    if options.get("simulate") and any(params[name] is not None for name in ("gpus", "procs", "ranks_per_gpu")):
        raise click.UsageError("--simulate runs one process for all --world ranks; leave out --gpus, --procs and "
                               "--ranks-per-gpu", ctx)
    try:
        asked = request.typed(demo, options)
        request.validate(demo, asked)
    except click.UsageError as exc:
        raise click.UsageError(exc.message, ctx) from None
    return asked


def _start(demo: registry.Demo, asked: Any, params: dict[str, Any], ctx: click.Context):
    """The run, placed and checked for its world size (not yet started)."""
    from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError

    try:
        return DemoRun(
            demo.name,
            asked=asked,
            gpus=params["gpus"],
            procs=params["procs"],
            ranks_per_gpu=params["ranks_per_gpu"],
            timeout_s=params["timeout_s"],
            fail_rank=params["fail_rank"],
            fail_step=params["fail_step"],
            fail_mode=params["fail_mode"],
        )
    except LaunchError as exc:
        raise click.UsageError(str(exc), ctx) from None


def _guard(demo: registry.Demo, placement: Any, spec: Any, force: bool, out) -> None:
    """Refuse a training run the analytic model says will not fit, unless forced; warn when forced."""
    # A simulated run allocates nothing real, so there is nothing for the launch guard to estimate.
    if (demo.kind != "training" and not placement.shared) or placement.device == "fake":
        return
    from ddpfsdp.demos.launch.guard import check_launch

    verdict = check_launch(demo.name, spec, placement, force=force)
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
        # A simulated world is one process, whatever --world says.
        stopped = ("the simulation's one process stopped" if run.placement.device == "fake"
                   else f"all {run.placement.world_size} ranks stopped")
        err.print(f"Cancelled: {stopped}." if not left else f"Cancelled, but processes {left} are still alive.")
        sys.exit(130)


def _show(demo: registry.Demo, event: Event, progress, task) -> None:
    kind = event["event"]
    if kind == "progress":
        metrics = "  ".join(
            # the protocol writes a loss that is not a finite number (a diverged run's) as null
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} not finite" if v is None else f"{k} {v}"
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
    elif cause is not None and cause.message and error.get("message") == cause.message:
        message = [f"{demo.name}: {cause.message}"]  # no rank reported: the agent's account is all there is
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
    from ddpfsdp.demos.launch.request import launch_options

    params = [*load(demo.options), *launch_options()]
    command = DemoCommand(
        demo.name,
        params=params,
        help=demo.summary[0].upper() + demo.summary[1:] + ".",
        short_help=demo.summary,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    command.callback = lambda **kwargs: _run(demo, **kwargs)
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
    return [name for name, demo in registry.DEMOS.items() if not demo.runner
            and any(option in param.opts or option in param.secondary_opts for param in load(demo.options))]


class DemoGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(registry.DEMOS)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        refusal = registry.retired(args[0], args[1:]) if args else None
        if refusal:
            raise click.UsageError(refusal, ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        demo = registry.DEMOS.get(cmd_name)
        if demo is not None and demo.runner:  # the failure lab starts its own ranks, with its own command
            from ddpfsdp.quiz.commands.fault import fault

            return fault
        return _make_command(demo) if demo else None


@click.group(cls=DemoGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def demo() -> None:
    """Run a demo on real processes: DDP or FSDP training, or one concept, measured in this run.

    Every demo runs on every visible GPU with NCCL, or on 2 CPU processes with gloo where there is
    no GPU; --gpus N or --procs N chooses. Where the GPUs are fewer than the ranks a demo needs (one
    GPU, two ranks), the ranks share them over gloo with CUDA tensors; --ranks-per-gpu K sets how many.
    Results are saved, so the quiz can show them as evidence.

    \b
    Examples:
      ddpfsdp demo fsdp --procs 2 --model tiny
      ddpfsdp demo fsdp --gpus 4 --sharding grad-op
      ddpfsdp demo fsdp --gpus 1 --ranks-per-gpu 2
      ddpfsdp demo compare --json > compare.json
      ddpfsdp demo allreduce --procs 4
    """
