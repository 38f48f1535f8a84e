"""What a demo is asked to run, read once per process and passed on as a value.

    asked = request.from_args(registry.get("fsdp"), ["--model", "tiny", "--sharding", "grad-op"])
    request.validate(demo, asked, world_size=2, device="cpu")
    os.environ[request.SPEC_ENV] = request.to_json(demo, asked)      # the launcher, for its ranks
    asked = request.from_json(demo, os.environ[request.SPEC_ENV])    # a rank

A demo's options are parsed from a command line once, by the demo's click parameters (`parse`), into
the value the demo runs: a training demo's `RunSpec` (`train.spec`), a concept demo's dict of options
(`typed`). The CLI parses its own command line; the quiz parses a question's link; a rank reads the
JSON the launcher put in SPEC_ENV, or, under a bare `torchrun`/`srun` launch, parses its own command
line. Where the run is placed, the checks, the launch guard and the store's key read that value.

Importing this module does not import torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import click

from ddpfsdp.demos.base.bounds import MAX_PROCS, FiniteFloat
from ddpfsdp.demos.launch.context import DEFAULT_TIMEOUT_S
from ddpfsdp.demos.launch.hardware import DEFAULT_CPU_PROCS
from ddpfsdp.demos.registry import Demo, load
from ddpfsdp.demos.result.schema import SCHEMA
from ddpfsdp.demos.train.spec import RunSpec

SPEC_ENV = "DDPFSDP_SPEC"  # the JSON of what a rank is asked to run, set by the launcher for its ranks

Asked = RunSpec | dict[str, Any]  # a training demo's spec, or a concept demo's options

# The most a launch takes (`base.bounds.MAX_PROCS`); a collective timeout of a day already outlasts any demo.
MAX_RANKS_PER_GPU = 64
MAX_TIMEOUT_S = 86_400.0


def launch_options() -> list[click.Option]:
    """How a run is launched and shown, which changes nothing it measures: `ddpfsdp demo`'s options
    beside the demo's own, and what a saved result's key leaves out."""
    return [
        click.Option(["--gpus"], type=click.IntRange(min=1), default=None,
                     help="Run on this many CUDA GPUs with NCCL."),
        click.Option(["--procs"], type=click.IntRange(1, MAX_PROCS), default=None,
                     help="Run on this many CPU processes with gloo.  [default: every visible GPU, else 2 CPU "
                          "processes]"),
        # no lower bound here: the placement refuses 0 or less with a command that works
        click.Option(["--ranks-per-gpu"], type=click.IntRange(max=MAX_RANKS_PER_GPU), default=None,
                     help="Put K ranks on each GPU: --gpus N starts N x K ranks, over gloo with CUDA tensors where K > 1 "
                          "(real CUDA memory; time is not NCCL's).  [default: 1, or on fewer GPUs than the demo "
                          "needs ranks, as many as it needs]"),
        click.Option(["--json", "as_json"], is_flag=True, help=f"Print the result as JSON (schema {SCHEMA})."),
        click.Option(["--force"], is_flag=True, help="Launch even if the memory estimate says it will not fit."),
        click.Option(["--timeout-s"], type=FiniteFloat(1, MAX_TIMEOUT_S), default=None,
                     help="Collective timeout in seconds: how long a rank waits for a dead peer.  "
                          f"[default: {DEFAULT_TIMEOUT_S:g}]"),
        click.Option(["--verbose", "-v"], is_flag=True, help="On a failure, also print the launcher's full output."),
        click.Option(["--fail-rank"], type=int, default=None, hidden=True),
        click.Option(["--fail-step"], type=int, default=None, hidden=True),
        click.Option(["--fail-mode"], type=click.Choice(["raise", "exit"]), default="raise", hidden=True),
    ]


LAUNCH_PARAMS = frozenset(option.name for option in launch_options())


def command(demo: Demo) -> click.Command:
    """A click command that parses a demo's own options into a dict (the worker's own command line)."""
    return click.Command(demo.name, params=list(load(demo.options)), callback=lambda **kw: kw)


def parse(demo: Demo, args: Sequence[str]) -> dict[str, Any]:
    """The demo's options from a command line, every one of them (defaults filled in).

    Raises click.ClickException (a UsageError for a bad option) with click's message.
    """
    return command(demo).main(list(args), prog_name=f"ddpfsdp.demos.worker {demo.name}", standalone_mode=False)


def typed(demo: Demo, options: dict[str, Any]) -> Asked:
    """What the demo runs, from its parsed options: a training demo's RunSpec, else the options.

    Raises click.UsageError for a value the spec does not allow.
    """
    if not demo.takes_spec:
        return dict(options)
    try:
        return RunSpec.for_demo(demo.name, options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def from_args(demo: Demo, args: Sequence[str]) -> Asked:
    return typed(demo, parse(demo, args))


def validate(demo: Demo, asked: Asked, world_size: int | None = None, device: str | None = None) -> None:
    """The demo's own checks of what it is asked (its `validate` hook), for a placement when given."""
    if demo.validate:
        load(demo.validate)(asked, world_size, device)


def simulated_world(asked: Asked) -> int | None:
    """The simulated world's ranks of a `--simulate` run; None for a run on real ranks."""
    if isinstance(asked, RunSpec):
        return asked.world if asked.simulate else None
    return None


def cpu_procs(asked: Asked) -> int:
    """Ranks the run gets when no count is given: the smallest world its parallel degrees show what it is
    for on (`ParallelDims.fewest_ranks`), or for a concept demo two."""
    if not isinstance(asked, RunSpec):
        return DEFAULT_CPU_PROCS
    from ddpfsdp.demos.parallel.degrees import ParallelDims

    return ParallelDims.fewest_ranks(asked)


def options_of(asked: Asked) -> dict[str, Any]:
    """What was asked, as a plain dict (a start event's config)."""
    return asdict(asked) if isinstance(asked, RunSpec) else dict(asked)


def to_json(demo: Demo, asked: Asked) -> str:
    return json.dumps({"demo": demo.name, "asked": options_of(asked)})


def from_json(demo: Demo, text: str) -> Asked:
    """What `to_json` wrote, for this demo; ValueError when it was written for another."""
    data = json.loads(text)
    if data.get("demo") != demo.name:
        raise ValueError(f"{SPEC_ENV} holds a run of {data.get('demo')!r}, not of {demo.name!r}")
    if demo.takes_spec:
        return RunSpec(**data["asked"])
    return dict(data["asked"])


def from_command_line(demo: Demo, args: Sequence[str]) -> Asked:
    """What a `ddpfsdp demo` command line asks, its launch options among the words or not.

    Raises click.ClickException for words the demo does not take.
    """
    parser = click.Command(demo.name, params=[*load(demo.options), *launch_options()], callback=lambda **kw: kw)
    parsed = parser.main(list(args), prog_name=f"ddpfsdp demo {demo.name}", standalone_mode=False)
    return typed(demo, {name: value for name, value in parsed.items() if name not in LAUNCH_PARAMS})


def key(demo: Demo, asked: Asked, device: str | None = None) -> dict[str, Any]:
    """What identifies the run among the demo's saved results: the options whose values are not their
    defaults, canonical, with what the device decides (the model, a training run's steps) filled in for
    `device` ("cpu" or "cuda"; None leaves it open). So on CPU `wrap` and `wrap --model tiny` are one
    run, whatever order or spelling the options came in."""
    if isinstance(asked, RunSpec):
        return asked.key(demo.name, device)
    if device and asked.get("model", "") is None:
        from ddpfsdp.demos.concepts.trial import default_model

        asked = {**asked, "model": default_model(device)}
    defaults = {param.name: param.default for param in load(demo.options)}
    return {name: value for name, value in sorted(asked.items()) if value != defaults.get(name)}
