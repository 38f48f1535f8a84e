"""Model shapes by preset name, and their exact parameter counts, without importing torch.

The analytic model and the quiz size models from here; `ddpfsdp.demos.train.models` builds the same
shapes as torch modules, and a test checks that the two counts agree.

The GPT decoder: token embedding (vocab x d) and learned position embedding (seq x d); each block
has LayerNorm, attention (fused qkv d x 3d with bias, output projection d x d with bias),
LayerNorm, MLP (d x 4d and 4d x d, with biases); a final LayerNorm; an untied LM head (d x vocab,
no bias).

The ViT classifier: a patch embedding (a conv with kernel = stride = patch, with bias), a class
token and a learned position embedding over (image/patch)^2 + 1 tokens; pre-norm blocks shaped as
the GPT's (non-causal attention); a final LayerNorm and a linear head (with bias) on the class
token. "base" is ViT-B/16 and "large" ViT-L/16 at 224 pixels with 1000 classes (304,326,632
parameters, the figure usually quoted as 304M); "tiny" and "small" are sized for CPU processes.

The ResNet: a stem (conv without bias, BatchNorm), four stages of BasicBlocks (two 3x3 convs
without bias, each followed by BatchNorm; a 1x1 conv + BatchNorm shortcut where the shape changes),
global average pooling and a linear head. "18" and "34" are the ImageNet ResNet-18/34 (7x7
stride-2 stem, max-pool, 224 pixels, 1000 classes: 11,689,512 and 21,797,672 parameters); "tiny"
and "small" use a 3x3 stride-1 stem without max-pool on 32-pixel images, as CIFAR ResNets do.
BatchNorm running statistics are buffers, not parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class GPTShape:
    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab: int

    # The one statement of the GPT's layout: each parameter tensor's elements, by its name in `models.GPT`,
    # in registration order. Every count below, the FSDP units and the analytic model read it.
    def embedding_tensors(self) -> dict[str, int]:
        return {"embeddings.token.weight": self.vocab * self.d_model,
                "embeddings.position.weight": self.seq_len * self.d_model}

    def block_tensors(self) -> dict[str, int]:
        """One block's tensors, by their names inside the block."""
        d = self.d_model
        return {"ln_attn.weight": d, "ln_attn.bias": d, "attn.qkv.weight": 3 * d * d, "attn.qkv.bias": 3 * d,
                "attn.proj.weight": d * d, "attn.proj.bias": d, "ln_mlp.weight": d, "ln_mlp.bias": d,
                "mlp.fc.weight": 4 * d * d, "mlp.fc.bias": 4 * d, "mlp.proj.weight": 4 * d * d, "mlp.proj.bias": d}

    def head_tensors(self) -> dict[str, int]:
        """The final LayerNorm and the untied LM head (no bias)."""
        d = self.d_model
        return {"head.ln.weight": d, "head.ln.bias": d, "head.out.weight": d * self.vocab}

    def tensors(self) -> dict[str, int]:
        """Every parameter tensor of the model, by its name in `models.GPT`, in registration order."""
        block = self.block_tensors()
        blocks = {f"blocks.{i}.{name}": numel for i in range(self.layers) for name, numel in block.items()}
        return {**self.embedding_tensors(), **blocks, **self.head_tensors()}

    @property
    def block_params(self) -> int:
        return sum(self.block_tensors().values())

    @property
    def embedding_params(self) -> int:
        return sum(self.embedding_tensors().values())

    @property
    def head_params(self) -> int:
        """Final LayerNorm and the LM head."""
        return sum(self.head_tensors().values())

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

# Real sizes people name in interviews, as GPT shapes of this project's decoder (GPT-2 blocks: a 4x
# MLP, full multi-head attention, an untied LM head), with the vocabulary chosen so the count lands
# within 0.2% of the name. Far too large to train here: a simulated run builds them on fake tensors.
GPT_SIZES: dict[str, GPTShape] = {
    "1B": GPTShape(layers=17, d_model=2048, heads=16, seq_len=4096, vocab=32768),
    "7B": GPTShape(layers=32, d_model=4096, heads=32, seq_len=4096, vocab=65536),
    "13B": GPTShape(layers=38, d_model=5120, heads=40, seq_len=4096, vocab=100352),
    "70B": GPTShape(layers=86, d_model=8192, heads=64, seq_len=4096, vocab=50304),
}


def sized_gpt_shape(size: str) -> GPTShape:
    """The GPT shape of a named size ("7B", any case)."""
    key = str(size).strip().upper()
    if key not in GPT_SIZES:
        raise ValueError(f"no GPT shape for {size!r}; choose one of {', '.join(GPT_SIZES)}")
    return GPT_SIZES[key]


def describe_gpt_shape(shape: GPTShape) -> str:
    return (f"{shape.layers} layers, d_model {shape.d_model}, {shape.heads} heads, vocab {shape.vocab:,}, "
            f"seq {shape.seq_len}: {shape.params:,} parameters")


@dataclass(frozen=True)
class ViTShape:
    layers: int
    d_model: int
    heads: int
    image_size: int
    patch: int
    classes: int
    channels: int = 3

    @property
    def patches(self) -> int:
        return (self.image_size // self.patch) ** 2

    @property
    def tokens(self) -> int:
        """Sequence length inside the encoder: the patches and the class token."""
        return self.patches + 1

    @property
    def block_params(self) -> int:
        # Same block as the GPT's; only the attention mask differs.
        return GPTShape(1, self.d_model, self.heads, 1, 1).block_params

    @property
    def embedding_params(self) -> int:
        d = self.d_model
        patch_conv = self.channels * self.patch * self.patch * d + d
        return patch_conv + d + self.tokens * d  # conv, class token, position embedding

    @property
    def head_params(self) -> int:
        """Final LayerNorm and the classifier."""
        return 2 * self.d_model + self.d_model * self.classes + self.classes

    @property
    def params(self) -> int:
        return self.embedding_params + self.layers * self.block_params + self.head_params


VIT_PRESETS: dict[str, ViTShape] = {
    "tiny": ViTShape(layers=4, d_model=128, heads=4, image_size=32, patch=4, classes=10),
    "small": ViTShape(layers=8, d_model=256, heads=8, image_size=64, patch=8, classes=100),
    "base": ViTShape(layers=12, d_model=768, heads=12, image_size=224, patch=16, classes=1000),
    "large": ViTShape(layers=24, d_model=1024, heads=16, image_size=224, patch=16, classes=1000),
}


@dataclass(frozen=True)
class ResNetShape:
    widths: tuple[int, ...]  # channels of each stage
    blocks: tuple[int, ...]  # BasicBlocks in each stage
    image_size: int
    classes: int
    stem_kernel: int  # 7 (ImageNet, stride 2, then max-pool) or 3 (CIFAR, stride 1, no pool)
    channels: int = 3

    @property
    def imagenet_stem(self) -> bool:
        return self.stem_kernel == 7

    @property
    def stem_params(self) -> int:
        w = self.widths[0]
        return self.channels * self.stem_kernel**2 * w + 2 * w

    def block_shapes(self) -> list[tuple[int, int, int]]:
        """(in_channels, out_channels, stride) of every BasicBlock, in forward order."""
        shapes = []
        in_ch = self.widths[0]
        for stage, (width, count) in enumerate(zip(self.widths, self.blocks)):
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                shapes.append((in_ch, width, stride))
                in_ch = width
        return shapes

    @staticmethod
    def basic_block_params(in_ch: int, out_ch: int, stride: int) -> int:
        convs = 9 * in_ch * out_ch + 2 * out_ch + 9 * out_ch * out_ch + 2 * out_ch
        shortcut = in_ch * out_ch + 2 * out_ch if stride != 1 or in_ch != out_ch else 0
        return convs + shortcut

    @property
    def head_params(self) -> int:
        return self.widths[-1] * self.classes + self.classes

    @property
    def params(self) -> int:
        blocks = sum(self.basic_block_params(*shape) for shape in self.block_shapes())
        return self.stem_params + blocks + self.head_params


RESNET_PRESETS: dict[str, ResNetShape] = {
    "tiny": ResNetShape(widths=(16, 32, 64, 128), blocks=(1, 1, 1, 1), image_size=32, classes=10, stem_kernel=3),
    "small": ResNetShape(widths=(32, 64, 128, 256), blocks=(2, 2, 2, 2), image_size=32, classes=100, stem_kernel=3),
    "18": ResNetShape(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), image_size=224, classes=1000, stem_kernel=7),
    "34": ResNetShape(widths=(64, 128, 256, 512), blocks=(3, 4, 6, 3), image_size=224, classes=1000, stem_kernel=7),
}

PRESETS: dict[str, dict[str, object]] = {"gpt": GPT_PRESETS, "vit": VIT_PRESETS, "resnet": RESNET_PRESETS}

# What a demo builds when --model is left unset: sized for the device it runs on.
DEFAULT_PRESETS: dict[str, dict[str, str]] = {
    "gpt": {"cpu": "small", "cuda": "base"},
    "vit": {"cpu": "small", "cuda": "base"},
    "resnet": {"cpu": "small", "cuda": "18"},
}

# The overrides each architecture accepts (click's --layers/--d-model/--heads/--seq-len and more).
OVERRIDES: dict[str, tuple[str, ...]] = {
    "gpt": ("layers", "d_model", "heads", "seq_len", "vocab"),
    "vit": ("layers", "d_model", "heads", "image_size", "patch", "classes"),
    "resnet": ("image_size", "classes"),
}


def default_preset(arch: str, device_type: str) -> str:
    """The preset a demo uses when none is named: "cpu" or "cuda" (any accelerator counts as cuda)."""
    _check_arch(arch)
    return DEFAULT_PRESETS[arch]["cpu" if device_type == "cpu" else "cuda"]


def _check_arch(arch: str) -> None:
    if arch not in PRESETS:
        raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(PRESETS)}")


def shape_for(arch: str, preset: str, **overrides: int | None) -> GPTShape | ViTShape | ResNetShape:
    """A preset's shape with overrides applied (None keeps the preset's value).

    An override that does not apply to the architecture (e.g. --heads for a ResNet) is an error,
    so a user never believes a flag changed a model it could not change.
    """
    _check_arch(arch)
    if arch == "gpt":
        return gpt_shape(preset, **overrides)
    presets = PRESETS[arch]
    if preset not in presets:
        raise ValueError(f"unknown {arch} preset {preset!r}; choose one of {', '.join(presets)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(OVERRIDES[arch]))
    if unknown:
        allowed = ", ".join(OVERRIDES[arch])
        raise ValueError(f"{', '.join(unknown)} cannot be set for {arch}; it accepts {allowed}")
    shape = replace(presets[preset], **given)
    if isinstance(shape, ViTShape):
        if shape.d_model % shape.heads:
            raise ValueError(f"d_model {shape.d_model} is not divisible by heads {shape.heads}")
        if shape.image_size % shape.patch:
            raise ValueError(f"image_size {shape.image_size} is not divisible by patch {shape.patch}")
    if isinstance(shape, ResNetShape):
        # Each stage after the first halves the resolution (and the ImageNet stem divides by 4).
        reduction = 2 ** (len(shape.widths) - 1) * (4 if shape.imagenet_stem else 1)
        if shape.image_size < reduction:
            raise ValueError(f"image_size {shape.image_size} is below the minimum of {reduction} for this ResNet")
    return shape


def model_params(arch: str, preset: str, **overrides: int | None) -> int:
    """Exact parameter count of the model a demo would build, without building it."""
    return shape_for(arch, preset, **overrides).params
