"""LoRA and QLoRA: a frozen base model, small trained adapters, and their memory per GPU under DDP or FSDP.

All theory; nothing here is measured.

- Adapters (Hu et al., 2021, "LoRA"): a Linear of d_in x d_out gets B (d_out x r) and A (r x d_in),
  r (d_in + d_out) trained parameters. On a GPT block (qkv d -> 3d, projection d -> d, MLP d -> 4d and
  4d -> d) that is 6 r d for the attention's two and 16 r d for all four.
- The base is frozen: no gradients and no optimizer state, only its weights, in bf16 (2 bytes), int8
  (1 byte, LLM.int8's per-row scales left out) or NF4 (QLoRA, Dettmers et al., 2023): 4 bits a weight
  plus an fp32 absolute maximum per block of 64 (0.5 bit a weight), or with double quantization 8-bit
  constants and a second fp32 level per 256 of them: 8/64 + 32/(64 x 256) = 0.127 bit. Only the blocks'
  Linear weights are quantized; embeddings, norms, biases and the head stay bf16.
- The adapters train in fp32 with Adam: 4 + 4 + 8 = 16 bytes per trained parameter.
- Under DDP every GPU holds all of it. Under FSDP (fully sharded) the frozen base is sharded too; 4-bit
  weights can be, because bitsandbytes stores them in a float dtype FSDP accepts (`bnb_4bit_quant_storage`,
  the FSDP-QLoRA work of Answer.AI and bitsandbytes, 2024). The adapters' state is sharded with it.
  Activations are not smaller: the backward still runs through every frozen layer to reach the adapters
  below it.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

from ddpfsdp.demos.base.shapes import GPTShape
from ddpfsdp.demos.theory.arguments import read_choice, read_count

BASES: dict[str, float] = {"bf16": 2.0, "int8": 1.0, "nf4": 0.5}
"""Bytes per quantized weight, before the quantization constants."""

NF4_BLOCK = 64
NF4_DQ_BLOCK = 256
TARGETS: dict[str, int] = {"attention": 6, "all": 16}
"""Adapter parameters per block, in units of r x d: qkv and the projection; or those and the MLP's two."""
ADAPTER_BYTES = 4 + 4 + 8  # fp32 weights, fp32 gradients, Adam's two fp32 moments


def nf4_constant_bytes_per_param(double_quant: bool) -> float:
    """fp32 absmax per 64 weights (4/64 bytes); double quantization: 1 byte per 64 and fp32 per 64 x 256."""
    if double_quant:
        return 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_DQ_BLOCK)
    return 4 / NF4_BLOCK


def base_bytes_per_param(base: str, double_quant: bool = True) -> float:
    name = read_choice(base, BASES, "base weights")
    return BASES[name] + (nf4_constant_bytes_per_param(double_quant) if name == "nf4" else 0.0)


def adapter_params(shape: GPTShape, rank: int, targets: str = "all") -> int:
    r = read_count(rank, "LoRA rank")
    return TARGETS[read_choice(targets, TARGETS, "LoRA targets")] * r * shape.d_model * shape.layers


def quantized_params(shape: GPTShape) -> int:
    """The blocks' four Linear weights: 12 d^2 per block (what QLoRA quantizes)."""
    return 12 * shape.d_model * shape.d_model * shape.layers


class LoraSection(TypedDict):
    """The `lora` section of the `ddpfsdp.calc/1` document: per-GPU bytes of the frozen base and the
    adapters' state under DDP and FSDP, against full fine-tuning."""

    theory: bool
    base: str
    double_quant: bool
    rank: int
    targets: str
    params: int
    quantized_params: int
    adapter_params: int
    adapter_share: float
    base_bytes: float  # the quantized weights' bytes are fractional per parameter
    adapter_state_bytes: int
    ddp_bytes_per_gpu: float
    fsdp_bytes_per_gpu: int
    full_finetune_ddp_bytes_per_gpu: int
    full_finetune_fsdp_bytes_per_gpu: int


def lora_memory(shape: GPTShape, *, rank: int, gpus: int, base: str = "nf4", targets: str = "all",
                double_quant: bool = True) -> LoraSection:
    """Per-GPU bytes of the frozen base and the adapters' state, under DDP and under FSDP over `gpus`."""
    world = read_count(gpus, "gpus")
    quantized = quantized_params(shape)
    rest = shape.params - quantized
    base_bytes = math.ceil(quantized * base_bytes_per_param(base, double_quant)) + rest * BASES["bf16"]
    adapters = adapter_params(shape, rank, targets)
    adapter_bytes = adapters * ADAPTER_BYTES
    full_bytes = shape.params * 16  # full fine-tuning with bf16-mixed Adam: 4 + 4 + 8
    return {
        "theory": True,
        "base": read_choice(base, BASES, "base weights"),
        "double_quant": double_quant,
        "rank": read_count(rank, "LoRA rank"),
        "targets": targets,
        "params": shape.params,
        "quantized_params": quantized,
        "adapter_params": adapters,
        "adapter_share": adapters / shape.params,
        "base_bytes": base_bytes,
        "adapter_state_bytes": adapter_bytes,
        "ddp_bytes_per_gpu": base_bytes + adapter_bytes,
        "fsdp_bytes_per_gpu": math.ceil((base_bytes + adapter_bytes) / world),
        "full_finetune_ddp_bytes_per_gpu": full_bytes,
        "full_finetune_fsdp_bytes_per_gpu": math.ceil(full_bytes / world),
    }


def q_lora_bytes_per_gpu(*, layers: Any, d_model: Any, vocab: Any, seq_len: Any, rank: Any, gpus: Any,
                         base: str = "nf4", targets: str = "all", strategy: str = "fsdp",
                         double_quant: Any = True) -> int:
    """Per-GPU bytes of a frozen base and its LoRA adapters' fp32 Adam state, under ddp or fsdp."""
    from ddpfsdp.demos.theory.arguments import read_flag

    shape = GPTShape(layers=read_count(layers, "layers"), d_model=read_count(d_model, "d_model"), heads=1,
                     seq_len=read_count(seq_len, "seq len"), vocab=read_count(vocab, "vocab"))
    memory = lora_memory(shape, rank=rank, gpus=gpus, base=base, targets=targets, double_quant=read_flag(double_quant))
    return memory[f"{read_choice(strategy, ('ddp', 'fsdp'), 'strategy')}_bytes_per_gpu"]


QUIZ_FUNCTIONS = {"lora_bytes_per_gpu": q_lora_bytes_per_gpu}
