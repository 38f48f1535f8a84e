"""Model shapes by preset name, and their exact parameter counts, without importing torch.

The analytic model and the quiz size models from here; `ddpfsdp.demos.models` builds the same
shapes as torch modules, and a test checks that the two counts agree.

The GPT decoder: token embedding (vocab x d) and learned position embedding (seq x d); each block
has LayerNorm, attention (fused qkv d x 3d with bias, output projection d x d with bias),
LayerNorm, MLP (d x 4d and 4d x d, with biases); a final LayerNorm; an untied LM head (d x vocab,
no bias).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPTShape:
    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab: int

    @property
    def block_params(self) -> int:
        d = self.d_model
        layer_norms = 2 * (2 * d)
        attention = (d * 3 * d + 3 * d) + (d * d + d)
        mlp = (d * 4 * d + 4 * d) + (4 * d * d + d)
        return layer_norms + attention + mlp

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.d_model + self.seq_len * self.d_model

    @property
    def head_params(self) -> int:
        """Final LayerNorm and the LM head."""
        return 2 * self.d_model + self.d_model * self.vocab

    @property
    def params(self) -> int:
        return self.embedding_params + self.layers * self.block_params + self.head_params


GPT_PRESETS: dict[str, GPTShape] = {
    "tiny": GPTShape(layers=4, d_model=128, heads=4, seq_len=64, vocab=512),
    "small": GPTShape(layers=10, d_model=256, heads=8, seq_len=128, vocab=4096),
    "base": GPTShape(layers=12, d_model=768, heads=12, seq_len=1024, vocab=24576),
    "large": GPTShape(layers=24, d_model=1024, heads=16, seq_len=1024, vocab=24576),
    "xl": GPTShape(layers=24, d_model=2048, heads=16, seq_len=1024, vocab=24576),
}


def gpt_shape(preset: str, **overrides: int | None) -> GPTShape:
    """A preset's shape with any of layers/d_model/heads/seq_len/vocab overridden (None keeps it)."""
    if preset not in GPT_PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; choose one of {', '.join(GPT_PRESETS)}")
    base = GPT_PRESETS[preset]
    fields = {name: getattr(base, name) for name in ("layers", "d_model", "heads", "seq_len", "vocab")}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    shape = GPTShape(**fields)
    if shape.d_model % shape.heads:
        raise ValueError(f"d_model {shape.d_model} is not divisible by heads {shape.heads}")
    return shape


def model_params(arch: str, preset: str, **overrides: int | None) -> int:
    """Exact parameter count of the model a demo would build, without building it."""
    if arch == "gpt":
        return gpt_shape(preset, **overrides).params
    raise ValueError(f"unknown architecture {arch!r}; choose one of gpt")
