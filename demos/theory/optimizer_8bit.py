"""8-bit Adam: bitsandbytes' block-wise quantized optimizer state, and what it saves per GPU.

All theory; nothing here is measured. From bitsandbytes' `optim/optimizer.py` (`Optimizer2State.init_state`):
Adam's two states are uint8 tensors of the parameter's size (1 byte each), each with an fp32 absolute
maximum per block of 2,048 elements (`absmax1`, `absmax2`: block-wise quantization, Dettmers et al.,
2022, "8-bit Optimizers via Block-wise Quantization"), and two 256-entry quantization maps shared by
every parameter. A tensor of fewer than `min_8bit_size` = 4,096 elements keeps 32-bit states. So a
large tensor costs 2 + 2 x 4 / 2048 = 2.0039 bytes of state per parameter, against Adam's 8 in fp32.

Sharded (ZeRO-1/2/3, FSDP) each rank keeps the states of its own shard, quantized in its own blocks, so
the state per GPU divides by the ways the optimizer state is sharded, as Adam's does. The parameters,
gradients and any fp32 master copy are untouched: with PyTorch's bf16-mixed recipe 4 + 4 + 2.0039 =
10.0039 bytes per parameter instead of 16.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypedDict

from ddpfsdp.demos.theory.arguments import read_count
from ddpfsdp.demos.theory.sharding import canonical_strategy, resolve_group_size, shard_ways
from ddpfsdp.demos.theory.state import ModelState, bytes_per_param

BLOCK = 2048  # elements per absmax (bitsandbytes' block_wise=True)
MIN_8BIT_SIZE = 4096  # smaller tensors keep fp32 states
STATES = 2  # Adam's exp_avg and exp_avg_sq
ABSMAX_BYTES = 4
QMAP_BYTES = 2 * 256 * 4  # the signed and unsigned dynamic maps, fp32, shared by every parameter


def tensor_state_bytes(numel: int) -> int:
    """One tensor's 8-bit Adam state: 2 uint8 states and 2 fp32 absmax per block; fp32 states when small."""
    if numel < MIN_8BIT_SIZE:
        return STATES * 4 * numel
    return STATES * (numel + ABSMAX_BYTES * math.ceil(numel / BLOCK))


def state_bytes(numels: Iterable[int]) -> int:
    """Every tensor's state, and the two quantization maps once."""
    return sum(tensor_state_bytes(n) for n in numels) + QMAP_BYTES


def state_bytes_per_param() -> float:
    """A large tensor's state per parameter: 2 + 2 x 4 / 2048."""
    return STATES * (1 + ABSMAX_BYTES / BLOCK)


class Adam8bitState(ModelState):
    """One strategy's per-GPU model state with 8-bit Adam, against 32-bit Adam."""

    strategy: str
    adam32_optimizer_bytes: int
    adam32_model_state_bytes: int
    saved_bytes: int


class Adam8bitSection(TypedDict):
    """The `adam_8bit` section of the `ddpfsdp.calc/1` document: each strategy of the table but the 2-D one."""

    theory: bool
    strategies: dict[str, Adam8bitState]


def adam_8bit_section(params: int, gpus: int, strategies: Iterable[str], precision: str,
                      group_size: int | None) -> Adam8bitSection:
    return {"theory": True, "strategies": {
        name: model_state_8bit(params, gpus, name, precision, group_size) for name in strategies if name != "2d"}}


def model_state_8bit(params: int, gpus: int, strategy: str, precision: str, group_size: int | None = None) -> Adam8bitState:
    """Per-GPU params, grads and optimizer state with 8-bit Adam (a large tensor's rate), against 32-bit Adam."""
    name = canonical_strategy(strategy)
    group = resolve_group_size(name, gpus, group_size)
    held = bytes_per_param(name, precision, "sgd")  # params, grads and any master copy: no states
    adam = bytes_per_param(name, precision, "adam")
    ways = {kind: shard_ways(name, kind, gpus, group) for kind in ("params", "grads", "optimizer")}
    params_bytes = math.ceil(params / ways["params"]) * held["params"]
    grads_bytes = math.ceil(params / ways["grads"]) * held["grads"]
    shard = math.ceil(params / ways["optimizer"])
    optimizer_bytes = shard * held["optimizer"] + STATES * (shard + ABSMAX_BYTES * math.ceil(shard / BLOCK))
    adam_bytes = shard * adam["optimizer"]
    total = params_bytes + grads_bytes + optimizer_bytes
    return {"strategy": name, "params_bytes": params_bytes, "grads_bytes": grads_bytes,
            "optimizer_bytes": optimizer_bytes, "model_state_bytes": total,
            "adam32_optimizer_bytes": adam_bytes, "adam32_model_state_bytes": params_bytes + grads_bytes + adam_bytes,
            "saved_bytes": adam_bytes - optimizer_bytes}


def q_adam8bit_model_state_bytes(*, params: Any, gpus: Any, strategy: str, precision: str, group_size: Any = None) -> int:
    """Per-GPU model state with bitsandbytes' 8-bit Adam (block-wise states of the rank's shard)."""
    world = read_count(gpus, "gpus")
    group = None if group_size is None else read_count(group_size, "group size")
    return model_state_8bit(read_count(params, "params"), world, strategy, precision, group)["model_state_bytes"]


QUIZ_FUNCTIONS = {"adam8bit_model_state_bytes": q_adam8bit_model_state_bytes}
