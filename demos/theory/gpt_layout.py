"""How a GPT decoder's parameters are laid out: its tensors in registration order, its FSDP units,
and its largest module, from a preset's shape (`demos.shapes`) without building the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpfsdp.demos.shapes import GPTShape


def gpt_shape_of(model: Any, seq_len: int | None = None, **overrides: int | None) -> GPTShape:
    """A GPT preset's shape by name (or a shape as given), with `seq_len` and `overrides` applied."""
    from ddpfsdp.demos import shapes

    if isinstance(model, shapes.GPTShape):
        shape = model
        if seq_len is not None:
            from dataclasses import replace

            shape = replace(shape, seq_len=seq_len)
        return shape
    name = str(model).strip().lower()
    if name not in shapes.GPT_PRESETS:
        raise ValueError(f"unknown model {model!r}; choose a GPT preset: {', '.join(shapes.GPT_PRESETS)}")
    return shapes.gpt_shape(name, seq_len=seq_len, **overrides)


def gpt_unit_params(model: Any, seq_len: int | None = None, wrap: str = "block", **overrides: int | None) -> list[int]:
    """Parameters per FSDP unit of a GPT preset, in forward order, root last.

    block: embeddings, each block, head, root (empty); model: one unit, the root.
    layer: embeddings, per block its attention and its MLP (the LayerNorms stay with the block),
    head, root.
    """
    shape = gpt_shape_of(model, seq_len, **overrides)
    if wrap == "model":
        return [shape.params]
    if wrap == "layer":
        d = shape.d_model
        attention = 4 * d * d + 4 * d
        mlp = 8 * d * d + 5 * d
        rest = shape.block_params - attention - mlp
        per_block = [attention, mlp, rest]
        return [shape.embedding_params, *per_block * shape.layers, shape.head_params, 0]
    return [shape.embedding_params, *[shape.block_params] * shape.layers, shape.head_params, 0]


def gpt_param_numels(layers: int, d_model: int, vocab: int, seq_len: int) -> list[int]:
    """Elements of each parameter tensor of the GPT decoder in `demos.shapes`, in registration order.

    Token and position embeddings; per block: LayerNorm (weight, bias), qkv (weight, bias), output
    projection (weight, bias), LayerNorm, MLP up (weight, bias), MLP down (weight, bias); the final
    LayerNorm (weight, bias) and the LM head (weight, no bias).
    """
    d = d_model
    block = [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    return [vocab * d, seq_len * d, *block * layers, d, d, d * vocab]


def gpt_largest_layer_params(model: Any) -> int:
    """The largest count of parameters one module of a GPT shape holds itself (not its children):
    how DeepSpeed's `model_to_params` finds the largest layer (embeddings, the qkv projection, the
    MLP's Linears, the LM head)."""
    shape = gpt_shape_of(model)
    d = shape.d_model
    return max(shape.vocab * d, shape.seq_len * d, 3 * d * d + 3 * d, 4 * d * d + 4 * d, 4 * d * d + d)
