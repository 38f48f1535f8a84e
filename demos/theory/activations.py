"""Activations per GPU of a GPT-style decoder: what autograd saves in forward, and the peak early in
backward, with and without activation checkpointing. Data parallelism does not shard them."""

from __future__ import annotations

from typing import Any, TypedDict

from ddpfsdp.demos.theory.gpt_layout import gpt_shape_of
from ddpfsdp.demos.theory.precision import Precision, precision_for, residual_bytes


def _transformer_block_bytes(
    tokens: int, batch_size: int, d_model: int, spec: Precision, tp: int = 1, sequence_parallel: bool = False,
    cast: str = "autocast",
) -> int:
    """Bytes one pre-norm block saves for backward, on one of `tp` tensor-parallel ranks.

    Per token, in elements of width d: the block input (residual stream) and the input of the
    second LayerNorm (2, in r bytes), and in c = `compute_bytes`: the first LayerNorm's output
    as the qkv projection's input (1), q, k, v (3), the attention output, which is also the output
    projection's input (1), the second LayerNorm's output (1), the MLP's hidden layer before and
    after GELU (4 + 4). That is 2r + 14c bytes per element of b*s*d (no dropout; with dropout
    masks Korthikanti et al. count 34 bytes in 16-bit).
    Attention is assumed fused (F.scaled_dot_product_attention, flash or memory-efficient): no
    seq x seq score matrix is stored, and its output is laid out (b, s, heads, d/heads), so
    merging the heads for the projection is a view, not a copy.
    Under autocast the bf16 copies of the weights are saved too; they are counted in the working
    set (`working_set`), not here.

    Tensor parallelism over `tp` ranks (`tensor_parallel`) splits by heads and by the MLP's hidden
    width what lies between a column-wise and a row-wise Linear: q, k, v, the attention output and
    the MLP's hidden layer, 12c of the 14c. The rest stays whole on every rank: the two residual-stream
    tensors and the two LayerNorm outputs that feed the column-wise Linears (Korthikanti et al., 2022:
    "10 + 24/t" in their 16-bit count with dropout). Sequence parallelism shards the residual
    tensors by sequence too, (2r)/t; the Linears' inputs stay whole, since autograd saves the
    all-gathered input of each column-wise Linear (Megatron-LM saves the sharded one and gathers
    it again in backward, which would make the whole block 1/t).
    """
    elements = tokens * batch_size * d_model
    residual = 2 * residual_bytes(spec, cast) * elements // (tp if sequence_parallel else 1)
    return residual + 2 * spec.compute_bytes * elements + 12 * spec.compute_bytes * elements // tp


class ActivationBytes(TypedDict):
    """A transformer's activations per GPU (bytes): the peak early in backward, what forward leaves saved,
    one block's and the head's."""

    activation_bytes: int
    saved_bytes: int
    block_bytes: int
    head_bytes: int


def transformer_activation_bytes(
    *,
    layers: int,
    d_model: int,
    tokens: int,
    batch_size: int,
    head_outputs: int,
    head_tokens: int,
    precision: str,
    checkpoint_activations: bool,
    tp: int = 1,
    sequence_parallel: bool = False,
    cast: str = "autocast",
) -> ActivationBytes:
    """Estimated bytes of activations per GPU: what autograd holds at the end of forward
    (`saved_bytes`) and the peak early in backward (`activation_bytes`).

    Without checkpointing: every block's saved tensors, plus the head's. With checkpointing (each
    block under torch.utils.checkpoint) only each block's input is kept; backward recomputes one
    block at a time, so one block's full activations come back at once.
    Head: the final LayerNorm's input and the projection's input (b*s*d each) and the log-softmax
    output the loss saves (b * head_tokens * head_outputs, in fp32 except under pure bf16).
    The peak adds, at the start of backward, the log-softmax's gradient (as large as its output),
    or with checkpointing the recomputed block if that is larger.
    Data parallelism does not shard activations, but how a strategy applies the precision changes
    their dtype (`cast`: DDP's torch.autocast, or FSDP2's MixedPrecisionPolicy; `precision.CASTS`):
    under bf16-mixed FSDP2 holds a bf16 residual stream where DDP holds an fp32 one. The loss's
    log-softmax is fp32 either way: the loss is computed on logits cast to fp32 (`data.compute_loss`).
    Tensor parallelism over `tp` ranks splits each block as `_transformer_block_bytes` says, and
    the head's log-softmax by vocabulary (the loss runs on vocabulary-sharded logits); sequence
    parallelism also splits the residual stream, so each kept block input and the final
    LayerNorm's input are 1/tp.
    """
    spec = precision_for(precision)
    elements = tokens * batch_size * d_model
    block = _transformer_block_bytes(tokens, batch_size, d_model, spec, tp, sequence_parallel, cast)
    loss_bytes = 2 if spec.name in ("bf16", "bf16-master") else 4
    log_softmax = batch_size * head_tokens * head_outputs * loss_bytes // tp
    residual = elements * residual_bytes(spec, cast) // (tp if sequence_parallel else 1)
    head = residual + elements * spec.compute_bytes + log_softmax
    if checkpoint_activations:
        saved = layers * residual + head
        extra = max(log_softmax, block)
    else:
        saved = layers * block + head
        extra = log_softmax
    return {
        "activation_bytes": saved + extra,
        "saved_bytes": saved,
        "block_bytes": block,
        "head_bytes": head,
    }


def gpt_activation_bytes(
    model: Any,
    batch_size: int,
    seq_len: int | None = None,
    checkpoint_activations: bool = False,
    precision: str = "fp32",
    cast: str = "autocast",
    **overrides: int | None,
) -> ActivationBytes:
    """Activations of a GPT preset (or shape) for a micro-batch of `batch_size` sequences."""
    shape = gpt_shape_of(model, seq_len, **overrides)
    return transformer_activation_bytes(
        layers=shape.layers,
        d_model=shape.d_model,
        tokens=shape.seq_len,
        batch_size=batch_size,
        head_outputs=shape.vocab,
        head_tokens=shape.seq_len,
        precision=precision,
        checkpoint_activations=checkpoint_activations,
        cast=cast,
    )


def resnet_activation_bytes(shape: Any, batch_size: int, precision: str) -> int:
    """A rough count of what a ResNet saves for backward, per sample: per BasicBlock its input,
    the two convolutions' outputs (BatchNorm inputs), the ReLU output and the block's output
    (plus the shortcut's BatchNorm input where the shape changes); the stem's three tensors."""
    element = precision_for(precision).compute_bytes
    side = shape.image_size // (2 if shape.imagenet_stem else 1)
    elements = shape.channels * shape.image_size**2 + 3 * shape.widths[0] * side**2
    if shape.imagenet_stem:
        side //= 2
    for in_ch, out_ch, stride in shape.block_shapes():
        in_side = side
        side //= stride
        tensors = 4 + (1 if stride != 1 or in_ch != out_ch else 0)
        elements += in_ch * in_side**2 + tensors * out_ch * side**2
    return batch_size * elements * element


def model_activation_bytes(arch: str, shape: Any, batch_size: int, checkpoint_activations: bool,
                           precision: str, cast: str = "autocast") -> int | None:
    """The analytic model's activation bytes of one micro-batch of a GPT or ViT shape, with the precision
    applied by `cast` (`precision.CASTS`; a strategy's is `implementation(strategy, precision).cast`); None
    for another architecture, whose activations the analytic model does not estimate."""
    if arch == "gpt":
        return gpt_activation_bytes(shape, batch_size, None, checkpoint_activations, precision,
                                    cast=cast)["activation_bytes"]
    if arch == "vit":
        # The classifier reads the class token only: one token of `classes` logits per sample.
        return transformer_activation_bytes(
            layers=shape.layers, d_model=shape.d_model, tokens=shape.tokens, batch_size=batch_size,
            head_outputs=shape.classes, head_tokens=1, precision=precision,
            checkpoint_activations=checkpoint_activations, cast=cast,
        )["activation_bytes"]
    return None
