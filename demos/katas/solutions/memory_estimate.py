"""Per-GPU model state, as ddpfsdp calc computes it (demos/theory/state.py and implementations.py).

Bytes per parameter, before sharding: fp32 and bf16-mixed hold 4-byte parameters and gradients (PyTorch's
mixed precision keeps them in fp32 and casts copies for compute); bf16-master holds 2 and 2, and its
optimizer keeps a 4-byte master copy. Each optimizer state tensor is 4 bytes per parameter. DeepSpeed's
ZeRO-1 and ZeRO-2 step a master copy of the partition even when it is fp32 already (4 more bytes); FSDP2,
which is ZeRO-3 here under fp32 and bf16-mixed, keeps none. ZeRO-1 splits the optimizer state over the
GPUs, ZeRO-2 also the gradients, ZeRO-3 also the parameters, each split part ceil(params / gpus) long.
"""

import math

STATE_TENSORS = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
SHARDED = {"ddp": (), "zero1": ("optimizer",), "zero2": ("grads", "optimizer"), "zero3": ("params", "grads", "optimizer")}


def model_state_bytes(params, gpus, strategy, precision, optimizer):
    weight = 2 if precision == "bf16-master" else 4
    master = 4 if precision == "bf16-master" or strategy in ("zero1", "zero2") else 0
    per_param = {"params": weight, "grads": weight, "optimizer": master + 4 * STATE_TENSORS[optimizer]}
    held = {}
    for kind, size in per_param.items():
        ways = gpus if kind in SHARDED[strategy] else 1
        held[f"{kind}_bytes"] = math.ceil(params / ways) * size
    return held
