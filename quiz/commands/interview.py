"""`ddpfsdp interview`: a design scenario taken step by step, graded by the analytic model."""

from __future__ import annotations

import json

import click

FAMILY_NAMES = ("fit", "faster", "scale", "pipeline", "plan")


class Seed(click.ParamType):
    name = "seed"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            seed = int(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a whole number; give a seed such as 7 (the same seed gives the same "
                      "scenario)", param, ctx)
        if seed < 0:
            self.fail(f"{seed} is negative; give a seed of 0 or more, such as 7", param, ctx)
        return seed


def _preset(kind: str, presets_of, what: str):
    def check(ctx, param, value):
        if value is None:
            return None
        from ddpfsdp.demos.theory import presets

        try:
            return presets.find(presets_of(presets), value, what).name
        except ValueError as error:
            raise click.BadParameter(str(error), ctx, param) from None

    return check


@click.command()
@click.option("--plain", is_flag=True, help="Line by line on plain stdin/stdout, for small terminals and screen readers.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole scenario with every step's answer as JSON, and exit.")
@click.option("--seed", type=Seed(), default=None, metavar="S",
              help="Fix the scenario: the same seed gives the same scenario (--json uses 0 when none is given).")
@click.option("--family", type=click.Choice(FAMILY_NAMES, case_sensitive=False), default=None,
              help="fit: make a model fit; faster: make a step faster; scale: from one node to many; "
              "pipeline: past one node, pipeline across slow links; plan: tensor, pipeline and data-parallel "
              "degrees for a thousand GPUs. Default: drawn.")
@click.option("--model", "model", default=None, metavar="PRESET",
              callback=_preset("model", lambda p: p.MODELS, "model preset"),
              help="Pin the model: GPT-3-XL-like, Llama-2-7B-like, Llama-2-13B-like, Llama-2-70B-like, Llama-3.1-405B-like.")
@click.option("--cluster", "cluster", default=None, metavar="PRESET",
              callback=_preset("cluster", lambda p: p.CLUSTERS, "cluster preset"),
              help="Pin the nodes: \"DGX H100\", \"HGX H200\", \"DGX A100 80GB\", \"DGX A100 40GB\".")
def interview(plain: bool, as_json: bool, seed: int | None, family: str | None, model: str | None,
              cluster: str | None) -> None:
    """A design interview: a job set up from named presets, taken step by step, each step graded.

    Memory under DDP, the lowest strategy that fits, bytes per rank, compute and communication time,
    exposed communication, activations and checkpointing, two follow-ups that change one condition,
    and an explanation with talking points. Every answer comes from the analytic model (`ddpfsdp
    calc`); the debrief scores each skill and names the simulated demo that measures the same
    configuration with the real PyTorch strategy code. Each step is saved the moment it is graded.

    \b
    Examples:
      ddpfsdp interview                          the app, on the interview screen
      ddpfsdp interview --plain --family faster  line by line; s skips, q stops
      ddpfsdp interview --json --seed 1          the scenario with every answer, as JSON
      ddpfsdp interview --family plan            tensor, pipeline and data-parallel degrees
    """
    if as_json and plain:
        raise click.UsageError("choose one of --json and --plain")
    from ddpfsdp.quiz.interview import generate

    if seed is None and as_json:
        seed = 0
    try:
        scenario = generate.generate(seed, family, model, cluster) if seed is not None else None
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if as_json:
        from ddpfsdp.quiz.interview import debrief

        click.echo(json.dumps({**scenario.to_dict(), "simulate": debrief.simulation(scenario).to_dict()}, indent=2))
        return
    if scenario is None:
        scenario = _drawn(generate, family, model, cluster)
    from ddpfsdp.quiz.plain_console import plain_without_terminal

    plain = plain or plain_without_terminal("interview")
    if plain:
        from ddpfsdp.quiz.app import default_demo_runner
        from ddpfsdp.quiz.interview.plain import run_interview_plain

        raise SystemExit(run_interview_plain(scenario, runner=default_demo_runner))

    from ddpfsdp.quiz.app import make_app

    app = make_app(interview=scenario)
    try:
        app.run()
    finally:
        app.stop_all_runs()


def _drawn(generate, family, model, cluster):
    import random

    try:
        return generate.generate(random.SystemRandom().randrange(2**31), family, model, cluster)
    except ValueError as error:
        raise click.UsageError(str(error)) from None

