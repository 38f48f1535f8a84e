"""Activation checkpointing on vs off: peak memory saved, forward recomputed in backward.

Without checkpointing, every block keeps the activations its backward needs from forward until
backward reaches it, so the peak at the start of backward holds all of them. With checkpointing
(torch.utils.checkpoint, non-reentrant), each block keeps only its input and runs its forward
again inside backward to rebuild the rest: the peak falls by roughly all the blocks' inner
activations less one block's, and every block's forward matrix multiplies run again in backward
(all but those whose outputs backward does not need: recomputation stops early once it has
rebuilt what backward uses).

The recomputation is counted, not assumed: a dispatch mode counts matrix multiplies (mm, addmm,
bmm, baddbmm and fused attention kernels) in forward and in backward, and hooks on the blocks
count how often each block's forward runs in each phase. Step time is reported, not asserted.
"""

from __future__ import annotations

from typing import Any

import click

from ddpfsdp.demos.base.bounds import BATCH_SIZE, SEED
from ddpfsdp.demos.result.checks import Check, peak_lower_on_every_rank
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.concepts.trial import model_option

OPTIONS = [
    model_option(),
    click.Option(["--strategy"], type=click.Choice(["fsdp", "ddp"]), default="fsdp", show_default=True,
                 help="How the model is wrapped (FSDP2 per block, full sharding; or DDP)."),
    click.Option(["--batch-size"], type=BATCH_SIZE, default=8, show_default=True,
                 help="Samples per rank per step: activations grow with it."),
    click.Option(["--steps"], type=click.IntRange(1, 100), default=2, show_default=True,
                 help="Timed steps per setting."),
    click.Option(["--seed"], type=SEED, default=0, show_default=True, help="Model and data seed."),
]

# Forward matrix-multiply kernels as the dispatcher sees them (after autograd, before backends).
MATMUL_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
})


def _matmul_counter(blocks: list[Any]) -> Any:
    """A dispatch mode that counts matmuls per phase, and those that run block forwards.

    In forward, hooks on each block's children mark the matmuls inside blocks (the checkpoint
    wraps the block's body, not the block, so a recomputation runs the children again without
    calling the block itself). In backward, a recomputed forward runs with grad mode on, to
    rebuild the graph it recomputes, while gradient kernels run with it off: that tells them apart
    (hooks cannot, since an early-stopped recomputation never reaches its closing hooks).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class MatmulCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.phase = "forward"
            self.depth = 0
            self.matmuls = {"forward": 0, "backward": 0}
            self.block_matmuls = {"forward": 0, "backward": 0}
            self.block_calls = {"forward": 0, "backward": 0}  # block bodies started, per phase
            self._handles = []

        def __enter__(self):
            for block in blocks:
                children = list(block.children())
                for position, child in enumerate(children):
                    self._handles.append(child.register_forward_pre_hook(self._enter_child(position == 0)))
                    self._handles.append(child.register_forward_hook(self._leave_child))
            return super().__enter__()

        def __exit__(self, *exc):
            for handle in self._handles:
                handle.remove()
            self._handles = []
            return super().__exit__(*exc)

        def _enter_child(self, first: bool):
            def hook(module, args):
                self.depth += 1
                if first:
                    self.block_calls[self.phase] += 1
            return hook

        def _leave_child(self, module, args, output):
            self.depth -= 1

        def enter_backward(self) -> None:
            self.phase = "backward"
            self.depth = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import torch

            if func.overloadpacket.__name__ in MATMUL_OPS:
                self.matmuls[self.phase] += 1
                in_block = self.depth > 0 if self.phase == "forward" else torch.is_grad_enabled()
                if in_block:
                    self.block_matmuls[self.phase] += 1
            return func(*args, **(kwargs or {}))

    return MatmulCounter()


def _count_matmuls(s: Any) -> dict[str, dict[str, int]]:
    """One forward and backward under the matmul counter; only the counts outlive it.

    The counter holds the trial's blocks (its hooks are installed on them), so it must not survive
    into the next trial: that trial would be set up and measured with these parameters still alive.
    """
    from ddpfsdp.demos.concepts import trial

    counter = _matmul_counter(s.blocks)
    with counter:
        trial.forward_backward(s, on_backward=counter.enter_backward)
    s.prepared.optimizer.zero_grad(set_to_none=True)
    return {"matmuls": counter.matmuls, "block_matmuls": counter.block_matmuls,
            "block_forward_calls": counter.block_calls}


def run(ctx: Any, *, model: str | None, strategy: str, batch_size: int, steps: int, seed: int) -> DemoResult | None:
    from ddpfsdp.demos.concepts import trial

    model = trial.resolve_model(ctx, model)
    configs = []
    for index, enabled in enumerate((False, True)):
        label = "checkpointing on" if enabled else "checkpointing off"
        ctx.step(index, 2, phase=label)
        s = trial.setup(ctx, model=model, strategy=strategy, sharding="full", wrap="block",
                        batch_size=batch_size, seed=seed, checkpoint_activations=enabled)
        figures = trial.measure(ctx, s, timed_steps=steps)
        configs.append({
            "label": label,
            "checkpoint_activations": enabled,
            "blocks": len(s.blocks),
            "params": s.params,
            **_count_matmuls(s),
            "peak_bytes": figures["peak_bytes"],
            "peak_kind": figures["peak_kind"],
            "step_time_s": figures["step_time_s"],
        })
        trial.release(s)

    gathered = ctx.gather([(c["peak_bytes"], c["step_time_s"]) for c in configs])
    if not ctx.is_main:
        return None
    for index, config in enumerate(configs):
        config["peak_bytes_by_rank"] = [g[index][0] for g in gathered]
        config["step_time_s_by_rank"] = [g[index][1] for g in gathered]
    off, on = configs

    _log_view(ctx, configs, strategy, batch_size, steps)
    checks = [
        check_checkpoint_lowers_peak(off["peak_bytes_by_rank"], on["peak_bytes_by_rank"]),
        check_checkpoint_recomputes_forward(
            {k: off[k] for k in ("matmuls", "block_matmuls", "block_forward_calls")},
            {k: on[k] for k in ("matmuls", "block_matmuls", "block_forward_calls")},
            off["blocks"],
        ),
    ]
    off_time, on_time = off["step_time_s"]["median"], on["step_time_s"]["median"]
    return ctx.result(
        "checkpoint",
        {"model": model, "strategy": strategy, "batch_size": batch_size, "steps": steps, "seed": seed,
         "precision": "fp32", "params": off["params"], "blocks": off["blocks"]},
        checks,
        configs=configs,
        peak_saved_bytes_by_rank=[a - b for a, b in zip(off["peak_bytes_by_rank"], on["peak_bytes_by_rank"])],
        step_time_ratio=on_time / off_time if off_time else None,
        notes=[n for n in [trial.cpu_note(ctx),
                           "step time is reported, not checked: it depends on the machine and its load"] if n],
    )


def _log_view(ctx: Any, configs: list[dict], strategy: str, batch_size: int, steps: int) -> None:
    from ddpfsdp.demos.base.units import format_bytes

    off, on = configs
    ctx.log(f"{strategy.upper()} on {ctx.world_size} ranks, GPT with {off['params']:,} params and {off['blocks']} "
            f"blocks, {batch_size} samples per rank")
    for c in configs:
        calls, mm, block_mm = c["block_forward_calls"], c["matmuls"], c["block_matmuls"]
        ctx.log(f"{c['label']}:")
        ctx.log(f"  forward: {mm['forward']} matmuls ({block_mm['forward']} inside blocks), "
                f"block bodies run {calls['forward']} times")
        ctx.log(f"  backward: {mm['backward']} matmuls, of which {block_mm['backward']} recompute block "
                f"forwards ({calls['backward']} block bodies run again)")
        peaks = ", ".join(format_bytes(b, 'MiB') for b in c["peak_bytes_by_rank"])
        ctx.log(f"  peak during forward+backward, per rank: {peaks}")
        medians = ", ".join(f"{t['median']:.3f}" for t in c["step_time_s_by_rank"])
        ctx.log(f"  step time per rank (median of {steps} timed steps): {medians} s")
    saved = max(off["peak_bytes_by_rank"]) - max(on["peak_bytes_by_rank"])
    ratio = on["step_time_s"]["median"] / off["step_time_s"]["median"]
    ctx.log(f"checkpointing saved {format_bytes(saved, 'MiB')} of peak on the worst rank and ran "
            f"{on['matmuls']['backward'] - off['matmuls']['backward']} more matmuls in backward; step time "
            f"x{ratio:.2f} on rank 0 (reported, not checked)")


def check_checkpoint_lowers_peak(off_peak_by_rank: list[int], on_peak_by_rank: list[int]) -> Check:
    return peak_lower_on_every_rank(
        "checkpoint_lowers_peak",
        ("off", off_peak_by_rank),
        ("on", on_peak_by_rank),
        "checkpointing",
    )


def check_checkpoint_recomputes_forward(off: dict, on: dict, blocks: int) -> Check:
    """off/on: {"matmuls", "block_matmuls", "block_forward_calls"}, each {"forward", "backward"}.

    With checkpointing every block's body runs again in backward, and every extra backward matmul
    is one of those recomputed forwards. Recomputation stops once the last activation backward
    needs is rebuilt (non-reentrant checkpoint's early stop), so a block's final matmul, whose
    output is not saved, may be skipped: the recomputed matmuls are at most the forward's.
    """
    block_forward = off["block_matmuls"]["forward"]
    recomputed = on["block_matmuls"]["backward"]
    extra_backward = on["matmuls"]["backward"] - off["matmuls"]["backward"]
    passed = (
        blocks > 0
        and block_forward > 0
        and off["block_forward_calls"]["backward"] == 0
        and off["block_matmuls"]["backward"] == 0
        and on["block_forward_calls"]["backward"] == blocks
        and 0 < recomputed <= block_forward
        and extra_backward == recomputed
        and on["matmuls"]["forward"] == off["matmuls"]["forward"]
    )
    return Check(
        "checkpoint_recomputes_forward",
        passed,
        f"{blocks} blocks: checkpointing on re-ran {on['block_forward_calls']['backward']} block bodies in "
        f"backward (off: {off['block_forward_calls']['backward']}), recomputing {recomputed} of their "
        f"{block_forward} forward matmuls; backward ran {extra_backward} more matmuls than without "
        f"checkpointing; forward matmuls {off['matmuls']['forward']} off vs {on['matmuls']['forward']} on",
        {"blocks": blocks, "block_forward_matmuls": block_forward, "recomputed_matmuls": recomputed,
         "extra_backward_matmuls": extra_backward,
         "recomputed_block_bodies": on["block_forward_calls"]["backward"], "off": off, "on": on},
    )
