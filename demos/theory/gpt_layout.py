"""How a GPT decoder's parameters are laid out: its tensors in registration order, its FSDP units,
and its largest module, from a preset's shape without building the model.

The layout itself is stated once, by the shape (`GPTShape.tensors` in `demos.shapes`); everything
here is read from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape


def gpt_shape_of(model: Any, seq_len: int | None = None, **overrides: int | None) -> GPTShape:
    """A GPT preset's shape by name (or a shape as given), with `seq_len` and `overrides` applied."""
    from ddpfsdp.demos.base import shapes

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
    layer: embeddings, per block the block itself (its LayerNorms, which no inner unit claims), its
    attention and its MLP, as FSDP lists them (pre-order), head, root.
    """
    shape = gpt_shape_of(model, seq_len, **overrides)
    if wrap == "model":
        return [shape.params]
    if wrap == "layer":
        block = shape.block_tensors()
        attention, mlp = (sum(n for name, n in block.items() if name.startswith(layer)) for layer in ("attn.", "mlp."))
        per_block = [shape.block_params - attention - mlp, attention, mlp]
        return [shape.embedding_params, *per_block * shape.layers, shape.head_params, 0]
    return [shape.embedding_params, *[shape.block_params] * shape.layers, shape.head_params, 0]


def gpt_param_numels(layers: int, d_model: int, vocab: int, seq_len: int) -> list[int]:
    """Elements of each parameter tensor of the GPT decoder, in registration order (`GPTShape.tensors`)."""
    from ddpfsdp.demos.base.shapes import GPTShape

    # The heads split d_model without changing any tensor's size.
    return list(GPTShape(layers=layers, d_model=d_model, heads=1, seq_len=seq_len, vocab=vocab).tensors().values())


def gpt_largest_layer_params(model: Any) -> int:
    """The largest count of parameters one module of a GPT shape holds itself (not its children):
    how DeepSpeed's `model_to_params` finds the largest layer (embeddings, the qkv projection, the
    MLP's Linears, the LM head)."""
    modules: dict[str, int] = {}
    for name, numel in gpt_shape_of(model).tensors().items():
        owner = name.rpartition(".")[0]
        modules[owner] = modules.get(owner, 0) + numel
    return max(modules.values())
