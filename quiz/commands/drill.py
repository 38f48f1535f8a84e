"""`ddpfsdp drill`: generated sizing problems, answered by the analytic model."""

from __future__ import annotations

import json

import click

KIND_NAMES = ("model-state", "fit-stage", "min-gpus", "wire-bytes", "ddp-buckets", "sampler-index", "activations",
              "tp-comm", "pipeline", "context-parallel", "expert-parallel", "stragglers", "checkpoint", "hier-allreduce")


@click.command()
@click.option("--plain", is_flag=True, help="Line by line on plain stdin/stdout, for small terminals and screen readers.")
@click.option("--json", "as_json", is_flag=True, help="Print --count problems as a JSON list, with answers, and exit.")
@click.option("--count", type=click.IntRange(1, 10_000), default=None, metavar="N",
              help="How many problems (--json: default 10; --plain: default endless, until q).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None, metavar="S",
              help="Fix the problems: the same seed gives the same problems (--json uses 0 when none is given).")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KIND_NAMES), metavar="KIND",
              help=f"Only this kind of problem; repeat for several. Kinds: {', '.join(KIND_NAMES)}.")
def drill(plain: bool, as_json: bool, count: int | None, seed: int | None, kinds: tuple[str, ...]) -> None:
    """Napkin-math sizing drills: per-GPU memory, what fits, traffic, buckets, sampler indices, at scale.

    Every problem is drawn from named presets (Llama-2-7B-like, H100-80GB, 2 nodes of 8, ...) and
    answered by the analytic model (`ddpfsdp calc`); a miss shows the working. Answers take units:
    "33 GB", "14.9GiB", 1.5e10 (bytes); counts are whole numbers. Results count toward topic
    mastery in `ddpfsdp progress`.

    \b
    Examples:
      ddpfsdp drill                                the app, on the drill screen
      ddpfsdp drill --plain                        line by line; q stops
      ddpfsdp drill --plain --kind sampler-index   only DistributedSampler problems
      ddpfsdp drill --json --count 5 --seed 7      five problems with answers, as JSON
    """
    if as_json and plain:
        raise click.UsageError("choose one of --json and --plain")
    if count is not None and not (as_json or plain):
        raise click.UsageError("--count goes with --json or --plain; the app drills until you leave")
    from ddpfsdp.quiz import drill as drills

    if as_json:
        stream = drills.Drill(seed if seed is not None else 0, kinds or None)
        problems, notes = [], {}
        for _ in range(count or 10):
            problems.append(next(stream))
            if stream.note:
                notes.setdefault(problems[-1].kind, stream.note)  # a kind's first round is the one to tell
        click.echo(json.dumps([p.to_dict() for p in problems], indent=2))
        for note in notes.values():  # on stderr, so the JSON on stdout stays whole
            click.echo(f"note: {note}", err=True)
        return
    from ddpfsdp.quiz.plain_console import plain_without_terminal

    plain = plain or plain_without_terminal("drill")
    if plain:
        from ddpfsdp.quiz.drill_plain import run_drill_plain

        raise SystemExit(run_drill_plain(seed=seed, kinds=kinds or None, count=count))

    from ddpfsdp.quiz.app import make_app

    app = make_app(drill=True, drill_kinds=kinds or None, seed=seed)
    try:
        app.run()
    finally:
        app.stop_all_runs()

