"""The demo models: exact counts against the torch-free presets, wrapping units, seeded init."""

from __future__ import annotations

import pytest
import torch

from ddpfsdp.demos.base import shapes
from ddpfsdp.demos.train.models import build_model, count_params, iter_unit_names

CPU_SIZED = [("gpt", "tiny"), ("gpt", "small"), ("vit", "tiny"), ("vit", "small"),
             ("resnet", "tiny"), ("resnet", "small")]
BIG = [("gpt", "base"), ("gpt", "large"), ("gpt", "xl"), ("vit", "base"), ("vit", "large"),
       ("resnet", "18"), ("resnet", "34")]


def test_every_preset_is_covered():
    listed = {(arch, name) for arch, table in shapes.PRESETS.items() for name in table}
    assert listed == set(CPU_SIZED) | set(BIG)


@pytest.mark.parametrize("arch,preset", CPU_SIZED)
def test_built_model_has_the_presets_count(arch, preset):
    model = build_model(arch, preset, seed=0)
    assert count_params(model) == shapes.model_params(arch, preset)


@pytest.mark.parametrize("arch,preset", BIG)
def test_big_presets_count_on_meta(arch, preset):
    model = build_model(arch, preset, seed=0, device="meta")
    assert all(p.is_meta for p in model.parameters())
    assert count_params(model) == shapes.model_params(arch, preset)


@pytest.mark.parametrize("preset, overrides", [("tiny", {}), ("small", {"layers": 3, "seq_len": 40}), ("base", {})])
def test_the_gpt_layout_is_the_models_own_tensors(preset, overrides):
    """`GPTShape.tensors`, which the counts, the FSDP units and the analytic model read, names every
    parameter of the built model with its size, in registration order; the unit counts follow from it."""
    from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels, gpt_unit_params
    from ddpfsdp.demos.parallel.strategies import _unit_modules, _unit_report

    shape = shapes.shape_for("gpt", preset, **overrides)
    model = build_model("gpt", preset, seed=0, device="meta", **overrides)
    assert shape.tensors() == {name: p.numel() for name, p in model.named_parameters()}
    assert gpt_param_numels(shape.layers, shape.d_model, shape.vocab, shape.seq_len) == list(shape.tensors().values())
    for wrap in ("block", "layer", "model"):
        assert gpt_unit_params(shape, wrap=wrap) == _unit_report(model, _unit_modules(model, wrap))[1], wrap


def test_published_counts():
    # Independent of this project's own arithmetic: the figures the papers and timm/torchvision quote.
    assert shapes.model_params("vit", "base") == 86_567_656
    assert shapes.model_params("vit", "large") == 304_326_632
    assert shapes.model_params("resnet", "18") == 11_689_512
    assert shapes.model_params("resnet", "34") == 21_797_672


@pytest.mark.parametrize(
    "arch,overrides",
    [("gpt", {"layers": 2, "d_model": 64, "heads": 2, "seq_len": 32}),
     ("vit", {"layers": 2, "d_model": 64, "heads": 2, "image_size": 16, "patch": 8}),
     ("resnet", {"image_size": 16, "classes": 7})],
)
def test_overrides_change_model_and_count_alike(arch, overrides):
    model = build_model(arch, "tiny", seed=0, **overrides)
    assert count_params(model) == shapes.model_params(arch, "tiny", **overrides)
    assert count_params(model) != shapes.model_params(arch, "tiny") or arch == "resnet"


def test_bad_names_and_overrides_are_value_errors():
    with pytest.raises(ValueError, match="choose one of tiny"):
        shapes.model_params("vit", "huge")
    with pytest.raises(ValueError, match="choose one of gpt, vit, resnet"):
        shapes.model_params("mlp", "tiny")
    with pytest.raises(ValueError, match="heads cannot be set for resnet"):
        shapes.model_params("resnet", "tiny", heads=4)
    with pytest.raises(ValueError, match="not divisible by patch"):
        shapes.model_params("vit", "tiny", patch=5)
    # None means "keep the preset", as click passes unset options.
    assert shapes.model_params("resnet", "18", layers=None, heads=None) == 11_689_512


def test_default_presets_exist():
    for arch in shapes.PRESETS:
        for device_type in ("cpu", "cuda"):
            assert shapes.default_preset(arch, device_type) in shapes.PRESETS[arch]


@pytest.mark.parametrize("arch", ["gpt", "vit", "resnet"])
def test_units_hold_every_parameter_in_forward_order(arch):
    model = build_model(arch, "tiny", seed=0)
    units = model.units()
    in_units = {id(p) for unit in units for p in unit.parameters()}
    assert in_units == {id(p) for p in model.parameters()}  # the root holds nothing of its own
    assert sum(count_params(u) for u in units) == count_params(model)  # no unit nests another
    names = list(iter_unit_names(model, units))
    assert names[1:-1] == [f"blocks.{i}" for i in range(len(model.blocks))]
    assert names[0] in ("embeddings", "patch_embed", "stem") and names[-1] == "head"

    seen = []
    hooks = [u.register_forward_pre_hook(lambda m, a, n=n: seen.append(n)) for n, u in zip(names, units)]
    model(_inputs(model, batch=2))
    for h in hooks:
        h.remove()
    assert seen == names


@pytest.mark.parametrize("arch", ["gpt", "vit", "resnet"])
def test_layers_are_finer_than_blocks(arch):
    model = build_model(arch, "tiny", seed=0)
    block_params = {id(p) for block in model.blocks for p in block.parameters()}
    layers = model.layers()
    assert len(layers) >= 2 * len(model.blocks)
    for layer in layers:
        owned = {id(p) for p in layer.parameters()}
        assert owned and owned <= block_params
        assert not any(layer is block for block in model.blocks)


def test_init_is_seeded_and_sane():
    a = build_model("gpt", "tiny", seed=3).state_dict()
    b = build_model("gpt", "tiny", seed=3).state_dict()
    c = build_model("gpt", "tiny", seed=4).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["blocks.0.attn.qkv.weight"], c["blocks.0.attn.qkv.weight"])
    assert torch.equal(a["blocks.0.ln_attn.weight"], torch.ones(128))
    assert torch.equal(a["blocks.0.attn.qkv.bias"], torch.zeros(3 * 128))
    assert abs(a["embeddings.token.weight"].std().item() - 0.02) < 0.002
    # Building a model must not consume the caller's random numbers.
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_model("vit", "tiny", seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_resnet_buffers_are_initialised():
    model = build_model("resnet", "tiny", seed=0)
    norm = model.blocks[0].conv1.norm
    assert torch.equal(norm.running_mean, torch.zeros_like(norm.running_mean))
    assert torch.equal(norm.running_var, torch.ones_like(norm.running_var))


@pytest.mark.parametrize("arch", ["gpt", "vit", "resnet"])
def test_checkpointing_recomputes_blocks_and_keeps_results(arch):
    plain = build_model(arch, "tiny", seed=0)
    ckpt = build_model(arch, "tiny", seed=0)
    ckpt.checkpoint_activations = True
    x = _inputs(plain, batch=2)
    calls = []
    assert ckpt.checkpoint_activations and not plain.checkpoint_activations
    ckpt.layers()[0].register_forward_pre_hook(lambda *args: calls.append(1))

    torch.manual_seed(0)
    out_plain = plain(x)
    out_plain.float().square().mean().backward()
    out_ckpt = ckpt(x)
    out_ckpt.float().square().mean().backward()

    assert len(calls) == 2  # forward, then recomputed during backward
    torch.testing.assert_close(out_ckpt, out_plain)
    for (name, p), q in zip(plain.named_parameters(), ckpt.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)


def test_gpt_is_causal():
    model = build_model("gpt", "tiny", seed=0)
    x = torch.randint(0, model.shape.vocab, (1, 16))
    y = x.clone()
    y[0, 10] = (y[0, 10] + 1) % model.shape.vocab
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def _inputs(model, batch):
    shape = model.shape
    if isinstance(shape, shapes.GPTShape):
        return torch.randint(0, shape.vocab, (batch, shape.seq_len), generator=torch.Generator().manual_seed(0))
    return torch.randn(batch, shape.channels, shape.image_size, shape.image_size,
                       generator=torch.Generator().manual_seed(0))


def test_batch_norm_runs_with_bf16_weights_and_fp32_statistics():
    from ddpfsdp.demos.train.models import BatchNorm

    torch.manual_seed(0)
    x = torch.randn(4, 8, 5, 5) * 3 + 1
    reference = BatchNorm(8)
    mixed = BatchNorm(8)
    with torch.no_grad():
        mixed.weight.data = mixed.weight.data.to(torch.bfloat16)  # what a bf16 param_dtype policy does
        mixed.bias.data = mixed.bias.data.to(torch.bfloat16)
    out_ref = reference(x)
    out_mixed = mixed(x.to(torch.bfloat16))
    assert out_mixed.dtype == torch.bfloat16
    torch.testing.assert_close(out_mixed.float(), out_ref, rtol=0.02, atol=0.03)
    torch.testing.assert_close(mixed.running_mean, reference.running_mean, rtol=0.01, atol=0.01)
    torch.testing.assert_close(mixed.running_var, reference.running_var, rtol=0.01, atol=0.01)
    assert mixed.num_batches_tracked.item() == reference.num_batches_tracked.item() == 1
    mixed.eval()
    reference.eval()
    torch.testing.assert_close(mixed(x.to(torch.bfloat16)).float(), reference(x), rtol=0.02, atol=0.03)
