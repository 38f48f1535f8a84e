"""Planted: a shard rounded down (params // gpus): FSDP pads, so a shard is rounded up."""

SHARDED = {"ddp": (), "zero1": ("optimizer",), "zero2": ("grads", "optimizer"), "zero3": ("params", "grads", "optimizer")}


def model_state_bytes(params, gpus, strategy, precision, optimizer):
    weight = 2 if precision == "bf16-master" else 4
    master = 4 if precision == "bf16-master" or strategy in ("zero1", "zero2") else 0
    states = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}[optimizer]
    per_param = {"params": weight, "grads": weight, "optimizer": master + 4 * states}
    return {f"{kind}_bytes": params // (gpus if kind in SHARDED[strategy] else 1) * size
            for kind, size in per_param.items()}
