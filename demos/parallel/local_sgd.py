"""Post-local SGD with torch's own tools: DDP's post-local-SGD hook and a periodic model averager.

    optimizer = post_local_sgd(ddp_model, optimizer, period=4, warmup_steps=2)

What torch 2.13 does, read from its source:
  - `post_localSGD_hook` (algorithms/ddp_comm_hooks/post_localSGD_hook.py) all-reduces each gradient bucket
    over `process_group` (None: the world) while `state.iter < start_localSGD_iter`, and counts an
    iteration when it sees the last bucket of a backward. After that, with `post_local_gradient_allreduce`
    True (the default) it all-reduces over `subgroup`, and a subgroup of None becomes `dist.new_subgroups()`:
    one group per machine of `torch.cuda.device_count()` ranks (an error without CUDA). On one machine that
    group is the whole world, so the "local" steps would still all-reduce every gradient globally: DDP plus
    extra averaging. Here `post_local_gradient_allreduce=False`: after the warm-up no gradient leaves its
    rank, each rank plays a node of its own, and only the averager communicates.
  - `PeriodicModelAverager.average_parameters` (algorithms/model_averaging/averagers.py) averages when its
    own counter `step >= warmup_steps` and `(step - warmup_steps) % period == 0`, then adds one to it: called
    once per optimizer step from step 0, it averages at steps W, W + H, W + 2H, ... (0-based), the first at
    the first local step. Its group is given here as the world, explicitly.
  - What it averages (algorithms/model_averaging/utils.py): the parameters that hold a gradient, flattened
    into one buffer, divided by the group's size and all-reduced once; not buffers, not the optimizer's
    state (each rank's Adam moments stay its own).
  - `PostLocalSGDOptimizer` (distributed/optim/post_localSGD_optimizer.py) steps the wrapped optimizer, then
    calls the averager on its parameter groups, so the counter advances once per `optimizer.step()`. Its
    warm-up must equal the hook's start iteration, as torch's docstring says.
"""

from __future__ import annotations

import torch
from torch import nn


def post_local_sgd(model: nn.Module, optimizer: torch.optim.Optimizer, period: int,
                   warmup_steps: int) -> torch.optim.Optimizer:
    """Register the post-local-SGD hook on the DDP `model` and return `optimizer` wrapped to average the
    replicas every `period` steps after `warmup_steps` synchronous ones, both over the whole world."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.distributed.optim import PostLocalSGDOptimizer

    world = dist.group.WORLD
    state = PostLocalSGDState(process_group=world, subgroup=None, start_localSGD_iter=warmup_steps,
                              post_local_gradient_allreduce=False)
    model.register_comm_hook(state, post_localSGD_hook)
    averager = PeriodicModelAverager(period=period, warmup_steps=warmup_steps, process_group=world)
    return PostLocalSGDOptimizer(optim=optimizer, averager=averager)
