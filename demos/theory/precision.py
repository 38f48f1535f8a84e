"""Bytes per element under each precision recipe, and per parameter with each optimizer.

P, G and K, the bytes per parameter held for parameters, gradients and optimizer state, come from
the precision (`PRECISIONS`) and the optimizer (`OPTIMIZER_STATES`): fp32 with Adam holds
4 + 4 + 8 = 16 bytes per parameter, the ZeRO paper's mixed-precision Adam 2 + 2 + 12 = 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ddpfsdp.demos.theory.arguments import read_choice

OPTIMIZER_STATES: dict[str, int] = {"adamw": 2, "adam": 2, "sgd-momentum": 1, "sgd": 0}
"""Tensors of parameter size the optimizer keeps: Adam's two moments, SGD's momentum buffer."""


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each kind of tensor under one precision recipe."""

    name: str
    param_bytes: int  # parameters held between steps
    grad_bytes: int  # gradients held after backward
    state_bytes: int  # each optimizer state tensor (e.g. Adam's exp_avg)
    master_bytes: int  # an fp32 master copy of the parameters inside the optimizer (0: none)
    compute_bytes: int  # parameters as matmuls see them, and most activations
    residual_bytes: int  # the residual stream between blocks under autocast (`residual_bytes()`: by cast)
    gather_bytes: int  # parameters as FSDP all-gathers them (MixedPrecisionPolicy.param_dtype)
    reduce_bytes: int  # gradients as they are reduced (DDP all-reduce, FSDP reduce_dtype)
    summary: str

    def optimizer_bytes_per_param(self, optimizer: str) -> int:
        return self.master_bytes + OPTIMIZER_STATES[optimizer] * self.state_bytes


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision(
        "fp32", param_bytes=4, grad_bytes=4, state_bytes=4, master_bytes=0,
        compute_bytes=4, residual_bytes=4, gather_bytes=4, reduce_bytes=4,
        summary="everything in fp32",
    ),
    "bf16-mixed": Precision(
        "bf16-mixed", param_bytes=4, grad_bytes=4, state_bytes=4, master_bytes=0,
        compute_bytes=2, residual_bytes=4, gather_bytes=2, reduce_bytes=4,
        summary="PyTorch's mixed precision (autocast for DDP, FSDP2 MixedPrecisionPolicy(param_dtype="
        "bf16, reduce_dtype=fp32), DeepSpeed's torch_autocast): fp32 params, grads and optimizer state "
        "are held; bf16 copies exist only for compute",
    ),
    "bf16-master": Precision(
        "bf16-master", param_bytes=2, grad_bytes=2, state_bytes=4, master_bytes=4,
        compute_bytes=2, residual_bytes=2, gather_bytes=2, reduce_bytes=2,
        summary="the ZeRO paper's mixed-precision Adam (DeepSpeed's bf16 mode, Megatron): bf16 params and "
        "grads are held; the optimizer keeps an fp32 master copy beside its fp32 states",
    ),
    "bf16": Precision(
        "bf16", param_bytes=2, grad_bytes=2, state_bytes=2, master_bytes=0,
        compute_bytes=2, residual_bytes=2, gather_bytes=2, reduce_bytes=2,
        summary="everything in bf16, optimizer states too",
    ),
}


CASTS: dict[str, str] = {
    "autocast": "torch.autocast casts each op's inputs: the parameters, the embeddings' output and the residual "
    "stream stay in the held dtype (fp32 under bf16-mixed); matmuls see compute-dtype copies",
    "param-dtype": "FSDP2's MixedPrecisionPolicy(param_dtype) casts the parameters themselves before forward: the "
    "embeddings' output, and so the residual stream, the LayerNorm outputs and the logits, are in the compute dtype",
}
"""How a precision recipe is applied to the forward, which decides the residual stream's bytes."""


def residual_bytes(spec: Precision, cast: str) -> int:
    """Bytes of the residual stream when `spec` is applied by `cast` (`CASTS`)."""
    cast = read_choice(cast, CASTS, "cast")
    return spec.compute_bytes if cast == "param-dtype" else spec.residual_bytes


def precision_for(name: str) -> Precision:
    return PRECISIONS[read_choice(name, PRECISIONS, "precision")]


def check_optimizer(name: str) -> str:
    return read_choice(name, OPTIMIZER_STATES, "optimizer")


class BytesPerParam(TypedDict):
    """Bytes held per parameter of each kind, and their sum."""

    params: int
    grads: int
    optimizer: int
    total: int


def bytes_per_param_breakdown(precision: str, optimizer: str) -> BytesPerParam:
    spec = precision_for(precision)
    optimizer_bytes = spec.optimizer_bytes_per_param(check_optimizer(optimizer))
    return {
        "params": spec.param_bytes,
        "grads": spec.grad_bytes,
        "optimizer": optimizer_bytes,
        "total": spec.param_bytes + spec.grad_bytes + optimizer_bytes,
    }
