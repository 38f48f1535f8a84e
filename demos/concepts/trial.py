"""One configuration of a model-based concept demo, measured step by step.

A trial builds the seeded model, wraps it with `ddpfsdp.demos.parallel.parallelize.parallelize`, and runs:
  warm-up steps       lazy initialisation, optimizer state, DDP's bucket rebuild: kept out of figures
  1 comm step         under CommCounter: every collective of one training step, per op
  1 memory step       forward and backward under PeakMemory (the optimizer step runs after it)
  timed steps         a plain loop under StepTimer
and then releases everything it built, so the next configuration starts from the same memory.
Every rank runs the same trial; figures are per rank.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypedDict

import click

if TYPE_CHECKING:
    from ddpfsdp.demos.measure.comm import PerOp

WARMUP_STEPS = 2
PRESETS = ("tiny", "small", "base", "large", "xl")


def model_option(default_help: str = "tiny on CPU, small on GPU") -> click.Option:
    return click.Option(["--model"], type=click.Choice(PRESETS), default=None,
                        help=f"GPT preset (default: {default_help}).")


def default_model(device_type: str) -> str:
    """The preset a concept demo trains without --model: tiny on CPU, small on a GPU."""
    return "tiny" if device_type == "cpu" else "small"


def resolve_model(ctx: Any, model: str | None) -> str:
    return model if model is not None else default_model(ctx.device.type)


@dataclass
class Setup:
    """A wrapped model and the batches it trains on."""

    prepared: Any  # ddpfsdp.demos.parallel.strategies.Prepared
    batches: list[Any]  # this rank's batches, cycled through
    params: int
    blocks: list[Any]  # the transformer blocks, for hooks
    steps_done: int = 0

    @property
    def model(self) -> Any:
        return self.prepared.model


def rank_batches(ctx: Any, shape: Any, *, batch_size: int, seed: int, count: int) -> list[Any]:
    """`count` batches for this rank: consecutive global batches, this rank's slice of each."""
    from torch.utils.data import default_collate

    from ddpfsdp.demos.train.data import make_dataset

    global_batch = batch_size * ctx.world_size
    dataset = make_dataset("gpt", shape, seed=seed, num_samples=global_batch * count)
    batches = []
    for index in range(count):
        start = index * global_batch + ctx.rank * batch_size
        batches.append(default_collate([dataset[i] for i in range(start, start + batch_size)]))
    return batches


def setup(ctx: Any, *, model: str, strategy: str, batch_size: int, seed: int, checkpoint_activations: bool = False,
          batch_count: int = 1, **run: Any) -> Setup:
    """`run`: the wrapping's options (sharding, wrap, optimizer, lr, ...), defaults from RunSpec."""
    from ddpfsdp.demos.train.data import pinned
    from ddpfsdp.demos.train.models import build_model, count_params
    from ddpfsdp.demos.train.spec import RunSpec
    from ddpfsdp.demos.parallel.parallelize import World, parallelize

    net = build_model("gpt", model, seed=seed)
    net.checkpoint_activations = checkpoint_activations
    params = count_params(net)
    blocks = list(net.blocks)
    batches = [pinned(batch, ctx.device)  # so that the non_blocking copy to a GPU is asynchronous
               for batch in rank_batches(ctx, net.shape, batch_size=batch_size, seed=seed, count=batch_count)]
    prepared = parallelize(net, RunSpec.from_options(run, strategy), World(ctx.world_size), ctx.device)
    return Setup(prepared, batches, params, blocks)


def forward_backward(s: Setup, *, loss_scale: float = 1.0, on_backward: Callable[[], None] | None = None) -> Any:
    """One forward and backward on the next batch; returns the loss (detached)."""
    from ddpfsdp.demos.train.data import compute_loss

    batch = s.batches[s.steps_done % len(s.batches)]
    s.steps_done += 1
    with s.prepared.autocast():
        loss = compute_loss("gpt", s.model, batch)
    if on_backward is not None:
        on_backward()
    (loss * loss_scale).backward()
    return loss.detach()


def train_step(s: Setup) -> Any:
    loss = forward_backward(s)
    s.prepared.optimizer.step()
    s.prepared.optimizer.zero_grad(set_to_none=True)
    return loss


def warmup_steps(s: Setup) -> int:
    return WARMUP_STEPS if s.prepared.strategy in ("ddp", "zro") else 1


class TrialFigures(TypedDict):
    """What `measure` found of one trial's steady-state step, on this rank."""

    comm: PerOp
    peak_bytes: int | None  # None without `memory`
    peak_kind: str | None
    model_state: dict[str, int]  # bytes by kind: params, grads, optimizer
    step_time_s: dict[str, float] | None  # median, min, max; None without timed steps


def measure(ctx: Any, s: Setup, *, timed_steps: int = 2, memory: bool = True) -> TrialFigures:
    """Warm up, then count one step's collectives, track one forward/backward's peak, time the rest."""
    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.measure.memory import PeakMemory, StepTimer, model_state_bytes

    # DDP rebuilds its buckets after the first step and broadcasts the new order in the second;
    # neither belongs to a steady-state step. FSDP is steady after one.
    for _ in range(warmup_steps(s)):
        train_step(s)
    with CommCounter() as counter:
        train_step(s)
    peak = None
    if memory:
        with PeakMemory(ctx.device) as peak:
            forward_backward(s)
        s.prepared.optimizer.step()
    state = model_state_bytes(s.model, s.prepared.optimizer)
    s.prepared.optimizer.zero_grad(set_to_none=True)
    timer = StepTimer(ctx.device)
    timer.start()
    for _ in range(timed_steps):
        with timer.step():
            train_step(s)
    timer.stop()
    return {
        "comm": counter.per_op(),
        "peak_bytes": peak.peak_bytes if peak else None,
        "peak_kind": peak.peak_kind if peak else None,
        "model_state": state,
        "step_time_s": timer.summary() if timed_steps else None,
    }


def release(s: Setup) -> None:
    """Drop a trial's model, optimizer and batches so that the next trial's memory starts level."""
    s.prepared = None
    s.batches = []
    s.blocks = []
    gc.collect()


def units_with_params(unit_params: list[int]) -> int:
    """FSDP units that manage parameters of their own (an empty root issues no collectives)."""
    return sum(1 for count in unit_params if count > 0)


def cpu_note(ctx: Any) -> str | None:
    if ctx.device.type == "cuda":
        return None
    from ddpfsdp.demos.result.schema import GLOO_CAVEAT

    return GLOO_CAVEAT
