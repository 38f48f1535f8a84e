"""`ddpfsdp kata`: write the collective, the sampler, the FSDP unit yourself; have it checked on real ranks."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import click

from ddpfsdp.demos.katas.catalog import KATAS, Kata
from ddpfsdp.demos.result.schema import SCHEMA, DemoResult

DEFAULT_PROCS = 3  # an odd world: chunks N does not divide, and no power of two to lean on
MAX_PROCS = 64
WATCH_POLL_S = 0.5
# The katas derive per-case and per-rank seeds as seed x 7919 + ..., which must stay in torch.manual_seed's range.
KATA_SEED_MAX = 2**32 - 1
SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CheckOptions(TypedDict):
    """How each check of a file runs (the command's options, handed to every check of a --watch)."""

    procs: int | None
    gpus: int | None
    ranks_per_gpu: int | None  # on one GPU, the ranks sharing it (gloo with CUDA tensors)
    deadline_s: float
    seed: int
    as_json: bool
    reference: bool


def _kata(name: str) -> Kata:
    if name not in KATAS:
        raise click.UsageError(f"unknown kata {name!r}; `ddpfsdp kata list` shows them all: {', '.join(KATAS)}")
    return KATAS[name]


def _store(required: bool = True) -> Any:
    """The progress store, or a ClickException saying why it cannot be opened (None when not required)."""
    from ddpfsdp.quiz.paths import DataDirError
    from ddpfsdp.quiz.store import Store, StoreError

    try:
        store = Store.open()
    except (StoreError, DataDirError) as error:
        if not required:
            return None
        raise click.ClickException(str(error)) from None
    if store.warning:
        click.echo(f"warning: {store.warning}", err=True)
    return store


def _now():
    from ddpfsdp.quiz.store import utc_now

    return utc_now()


@click.group(context_settings=SETTINGS)
def kata() -> None:
    """Katas: write the code an interview asks for, and have it checked on real ranks.

    Each kata is a file you fill in: a ring all-reduce from send and recv, DistributedSampler's indices,
    DDP's buckets, an FSDP unit, a Megatron MLP, the 1F1B order... `check` runs it on N real processes
    (gloo, or NCCL on GPUs) through the same launcher as the demos, and judges it against torch's own
    implementation: the result on every rank, the messages and bytes each rank sent, and, when it
    deadlocks, what every rank was waiting on.

    \b
    Examples:
      ddpfsdp kata list
      ddpfsdp kata start ring-allreduce            writes ddpfsdp-katas/ring_allreduce.py
      ddpfsdp kata check ring-allreduce --watch    checks again on every save
      ddpfsdp kata check ring-allreduce --procs 4
      ddpfsdp kata hint ring-allreduce             one more hint each time
      ddpfsdp kata solution ring-allreduce         after a pass (or --give-up)
      ddpfsdp kata check ring-allreduce --reference   the reference solution through the same checks
    """


@kata.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the katas and your status as JSON.")
def list_katas(as_json: bool) -> None:
    """List every kata with its topic, level and your status (new, started, failing, passed, gave up)."""
    from ddpfsdp.quiz.katas import statuses

    store = _store(required=False)
    try:
        found = statuses(store, _now())
    finally:
        if store is not None:
            store.close()
    if as_json:
        click.echo(json.dumps({"schema": "ddpfsdp.katas/1", "katas": [s.to_dict() for s in found]}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Katas: ddpfsdp kata start NAME, then ddpfsdp kata check NAME", title_justify="left")
    for column in ("kata", "topic", "level", "status", "what you write"):
        table.add_column(column, no_wrap=column != "what you write")
    style = {"passed": "green", "failing": "red", "started": "yellow", "gave up": "magenta"}
    for status in found:
        state = status.state + (", due" if status.due else "")
        table.add_row(status.name, status.kata.topic, str(status.kata.level),
                      f"[{style.get(status.state, 'dim')}]{state}[/]", status.kata.summary)
    Console().print(table)


@kata.command()
@click.argument("name")
def show(name: str) -> None:
    """Show a kata's task: what to write, how it is called and how it is checked."""
    entry = _kata(name)
    click.echo(f"{entry.title} ({entry.name}, {entry.topic}, level {entry.level})\n")
    click.echo(entry.statement)
    click.echo(f"\nYou define: {entry.signature}")


@kata.command()
@click.argument("name")
@click.option("--dir", "folder", type=click.Path(path_type=Path), default=None,
              help="The folder to write the file in.  [default: ./ddpfsdp-katas]")
@click.option("--force", is_flag=True, help="Overwrite the file if it exists (your work in it is lost).")
def start(name: str, folder: Path | None, force: bool) -> None:
    """Write a kata's starter file into your workspace (never over your work without --force)."""
    from ddpfsdp.quiz.katas import KataError
    from ddpfsdp.quiz.katas import start as write_starter

    entry = _kata(name)
    store = _store(required=False)
    try:
        path = write_starter(entry, store, folder, force, _now())
    except KataError as error:
        raise click.ClickException(str(error)) from None
    finally:
        if store is not None:
            store.close()
    click.echo(f"{entry.title}: wrote {path}\n")
    click.echo(entry.statement)
    click.echo(f"\nDefine {entry.signature} in {path.name}, then: ddpfsdp kata check {entry.name} --watch")


@kata.command()
@click.argument("name")
def hint(name: str) -> None:
    """Show the next hint for a kata (each one taken is recorded; a passing check with hints counts less)."""
    from ddpfsdp.quiz.katas import next_hint

    entry = _kata(name)
    store = _store()
    with store:
        number, text = next_hint(entry, store, _now())
    more = (f"{len(entry.hints) - number} more: ddpfsdp kata hint {name}" if number < len(entry.hints)
            else f"that was the last; `ddpfsdp kata solution {name} --give-up` shows the reference")
    click.echo(f"Hint {number} of {len(entry.hints)}: {text}\n({more})")


@kata.command()
@click.argument("name")
@click.option("--give-up", is_flag=True, help="Show the solution before you have passed (recorded as given up).")
def solution(name: str, give_up: bool) -> None:
    """Show a kata's reference solution and its talking points, once you have passed it (or --give-up)."""
    from ddpfsdp.quiz import katas

    entry = _kata(name)
    store = _store()
    with store:
        if not katas.has_passed(entry, store):
            if not give_up:
                raise click.ClickException(f"you have not passed {name} yet: `ddpfsdp kata check {name}` runs your file, "
                                           f"`ddpfsdp kata hint {name}` helps; `ddpfsdp kata solution {name} --give-up` "
                                           "shows it now (recorded as given up)")
            note = katas.give_up(entry, store, _now())
            click.echo(f"Given up: {note}.\n")
    click.echo(katas.solution_text(entry))
    click.echo("Talking points:")
    for point in entry.talking_points:
        click.echo(f"  - {point}")


def _gpu_placement(entry: Kata, gpus: int | None) -> tuple[int | None, int | None]:
    """(GPUs, ranks on each) for --gpus N here: N GPUs over NCCL; on a one-GPU machine N ranks sharing it over
    gloo with CUDA tensors, for a kata without point-to-point messages. A UsageError for what cannot run."""
    if gpus is None:
        return None, None
    from ddpfsdp.demos.launch.placement import cuda_device_count
    from ddpfsdp.demos.launch.sharing import GLOO_HOST_ONLY

    available = cuda_device_count()
    if available == 0:
        raise click.UsageError(f"--gpus {gpus}: this machine has no CUDA GPU torch can use; run on CPU processes: "
                               f"ddpfsdp kata check {entry.name} --procs {max(2, gpus)}")
    if gpus <= available:
        return gpus, None
    if available == 1 and not entry.p2p:
        return 1, gpus
    if available == 1:
        raise click.UsageError(
            f"--gpus {gpus}: this machine has 1 CUDA GPU, so {gpus} ranks would share it over gloo, which cannot send "
            f"CUDA tensors point to point ({', '.join(GLOO_HOST_ONLY[:5])}); run on CPU processes: "
            f"ddpfsdp kata check {entry.name} --procs {gpus}")
    raise click.UsageError(f"--gpus {gpus}: this machine has {available} CUDA GPUs; run on --gpus {available} or "
                           f"fewer, or on CPU processes: ddpfsdp kata check {entry.name} --procs {gpus}")


@kata.command()
@click.argument("name")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option("--procs", type=click.IntRange(2, MAX_PROCS), default=None,
              help=f"CPU processes (gloo ranks) to run on, 2 to {MAX_PROCS}.  [default: {DEFAULT_PROCS}]")
@click.option("--gpus", type=click.IntRange(1, MAX_PROCS), default=None, help="CUDA GPUs to run on (NCCL).")
@click.option("--watch", is_flag=True, help="Check again every time the file is saved (Ctrl+C stops).")
@click.option("--reference", is_flag=True, help="Check the kata's reference solution instead of your file.")
@click.option("--json", "as_json", is_flag=True, help=f"Print the result as JSON (schema {SCHEMA}).")
@click.option("--deadline-s", type=click.FloatRange(0.5, 60), default=None,
              help="How long a rank may wait on a peer before the run is reported as a deadlock.  [default: 3]")
@click.option("--seed", type=click.IntRange(0, KATA_SEED_MAX), default=0, show_default=True,
              help="Seed of the generated inputs.")
@click.option("--watch-checks", type=int, default=None, hidden=True)
def check(name: str, file: Path | None, procs: int | None, gpus: int | None, watch: bool, reference: bool,
          as_json: bool, deadline_s: float | None, seed: int, watch_checks: int | None) -> None:
    """Run your file for a kata on real ranks and judge it against torch.

    FILE defaults to where `ddpfsdp kata start NAME` wrote it. The exit status is 0 when every check
    passed, 1 otherwise.
    """
    from ddpfsdp.demos.katas.rank import DEFAULT_DEADLINE_S
    from ddpfsdp.quiz.katas import learner_path

    entry = _kata(name)
    if procs is not None and gpus is not None:
        raise click.UsageError("give --procs (CPU processes) or --gpus (CUDA GPUs), not both")
    if reference and file is not None:
        raise click.UsageError("--reference checks the kata's own solution; leave out FILE")
    gpus, ranks_per_gpu = _gpu_placement(entry, gpus)
    store = None if reference else _store(required=False)
    path = entry.solution_path if reference else learner_path(entry, store, file)
    options = CheckOptions(procs=procs if gpus is None else None, gpus=gpus, ranks_per_gpu=ranks_per_gpu,
                           deadline_s=deadline_s or DEFAULT_DEADLINE_S, seed=seed, as_json=as_json, reference=reference)
    try:
        if not watch:
            passed = _check_once(entry, path, store, **options)
            raise SystemExit(0 if passed else 1)
        _watch(entry, path, store, watch_checks, options)
    finally:
        if store is not None:
            store.close()


def _watch(entry: Kata, path: Path, store: Any, limit: int | None, options: CheckOptions) -> None:
    """Check now, then again whenever the file's modification time changes, until Ctrl+C (or `limit` checks)."""
    done = 0
    seen = None
    try:
        while limit is None or done < limit:
            stamp = _mtime(path)
            if stamp != seen:
                seen = stamp
                done += 1
                try:
                    _check_once(entry, path, store, **options)
                except click.ClickException as problem:  # a broken save: say so and wait for the next one
                    problem.show()
                if limit is None or done < limit:
                    click.echo(f"\nwatching {path} for changes (Ctrl+C stops)", err=True)
                continue
            time.sleep(WATCH_POLL_S)
    except KeyboardInterrupt:
        click.echo("stopped watching", err=True)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _check_once(entry: Kata, path: Path, store: Any, *, procs: int | None, gpus: int | None,
                ranks_per_gpu: int | None, deadline_s: float, seed: int, as_json: bool, reference: bool) -> bool:
    """One check of the file; True when every check passed. Nothing starts for a file that cannot run."""
    from rich.console import Console

    from ddpfsdp.demos.katas.learner_file import FileProblem, read_learner_file
    from ddpfsdp.quiz.katas import shown_path

    out, err = Console(), Console(stderr=True)
    status = err if as_json else out
    try:
        reading = read_learner_file(path, entry)
    except FileProblem as problem:
        start_it = (f"; `ddpfsdp kata start {entry.name}` writes the starter" if not path.exists() else "")
        raise click.ClickException(f"{problem}{start_it}") from None
    if reading.forbidden:
        return _refused_before_launch(entry, path, reading, store, status, as_json)
    from ddpfsdp.demos.launch.launcher import DemoRun, LaunchError

    asked = {"kata": entry.name, "file": str(path.resolve()), "deadline_s": deadline_s, "seed": seed}
    try:
        run = DemoRun("kata", asked=asked, procs=None if gpus else (procs or DEFAULT_PROCS), gpus=gpus,
                      ranks_per_gpu=ranks_per_gpu)
    except LaunchError as error:
        raise click.UsageError(str(error)) from None
    started = time.perf_counter()
    status.print(f"[bold]{entry.name}[/]: {shown_path(path)} on {run.placement.describe()}")
    try:
        for _ in run.events():
            pass
    except KeyboardInterrupt:
        run.cancel()
        left = run.leftover_pids()
        err.print("Cancelled: every rank stopped." if not left else f"Cancelled, but processes {left} are still alive.")
        sys.exit(130)
    result = run.result
    if result is None:
        error = run.error or {}
        lines = [f"{entry.name}: the ranks ended without a result: {error.get('message', 'no error was reported')}"]
        if error.get("traceback"):
            lines += ["", error["traceback"]]
        raise click.ClickException("\n".join(lines))
    return _show(entry, result, store, status, as_json, reference, time.perf_counter() - started)


def _show(entry: Kata, result: DemoResult, store: Any, status: Any, as_json: bool, reference: bool,
          elapsed_s: float) -> bool:
    from ddpfsdp.demos.katas.render import renderable, summary

    checks = result.checks
    passed, line = summary(checks)
    note = None
    if store is not None and not reference:
        from ddpfsdp.quiz.katas import record_check

        failed = [c.name for c in checks if c.passed is False]
        note = record_check(entry, store, passed, failed, _now(), elapsed_s)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return passed
    status.print(renderable(result))
    if passed:
        status.print(f"[green]✔ {line}[/]" + (" (the reference solution)" if reference else
                                              f". `ddpfsdp kata solution {entry.name}` shows the reference and its "
                                              "talking points"))
    else:
        status.print(f"[red]✘ {line}[/]. `ddpfsdp kata hint {entry.name}` gives a hint")
    if note:
        status.print(f"[dim]Card: {note}.[/]")
    return passed


def _refused_before_launch(entry: Kata, path: Path, reading: Any, store: Any, status: Any, as_json: bool) -> bool:
    """A file that names what the kata forbids fails `no_forbidden_call` without a run."""
    from ddpfsdp.demos.katas.render import check_table
    from ddpfsdp.demos.result.checks import Check
    from ddpfsdp.quiz.katas import shown_path

    uses = reading.forbidden
    detail = "; ".join(use.message(path) for use in uses[:3])
    checks = [Check("no_forbidden_call", False, detail, {"names": [u.name for u in uses], "lines": [u.line for u in uses]})]
    if store is not None:
        from ddpfsdp.quiz.katas import record_check

        record_check(entry, store, False, ["no_forbidden_call"], _now())
    if as_json:
        from ddpfsdp.demos.result.build import unlaunched

        refused = unlaunched("kata", {"kata": entry.name, "file": str(path)}, checks)
        click.echo(json.dumps(refused.to_json(), indent=2))
        return False
    status.print(f"[bold]{entry.name}[/]: {shown_path(path)} (nothing was launched)")
    status.print(check_table(checks))
    status.print(f"[red]✘ the file uses what {entry.name} asks you to write or forbids[/]")
    return False
