"""The activation estimate against what autograd really saves for backward, on the project's GPT.

The tensors saved for backward are caught with saved_tensors_hooks at the end of a real forward
pass and counted once per storage; parameters (and, under autocast, their bf16 copies, which the
model counts in the working set) are left out.
"""

from __future__ import annotations

import contextlib
import copy
import functools

import pytest

torch = pytest.importorskip("torch")

from ddpfsdp.demos.theory.activations import gpt_activation_bytes  # noqa: E402
from ddpfsdp.demos.base import shapes  # noqa: E402
from ddpfsdp.demos.train.models import build_model  # noqa: E402


@functools.cache
def _built(preset: str):
    """One model per preset for the module: each case works on a copy of it."""
    return build_model("gpt", preset, seed=0)


def saved_activation_bytes(preset: str, batch_size: int, precision: str, checkpoint: bool) -> int:
    model = copy.deepcopy(_built(preset))
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.checkpoint_activations = checkpoint
    shape = shapes.gpt_shape(preset)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, shape.vocab, (batch_size, shape.seq_len), generator=generator)
    targets = torch.randint(0, shape.vocab, (batch_size, shape.seq_len), generator=generator)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    bf16_weights: dict[int, list] = {}  # numel -> the weights of that size, as bf16
    if precision == "bf16-mixed":
        for p in model.parameters():
            bf16_weights.setdefault(p.numel(), []).append(p.detach().to(torch.bfloat16).reshape(-1))
    seen: dict[int, int] = {}

    def is_autocast_weight_copy(tensor) -> bool:
        # A bf16 storage holding exactly a weight's values (saved transposed, so compare storages).
        if tensor.dtype != torch.bfloat16 or precision != "bf16-mixed":
            return False
        flat = torch.empty(0, dtype=torch.bfloat16).set_(tensor.untyped_storage())
        return any(torch.equal(flat, w) for w in bf16_weights.get(flat.numel(), []))

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in params and key not in seen and not is_autocast_weight_copy(tensor):
            seen[key] = storage.nbytes()
        return tensor

    autocast = (
        torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext()
    )
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast:
        logits = model(tokens)
        torch.nn.functional.cross_entropy(logits.view(-1, shape.vocab), targets.view(-1))
    return sum(seen.values())


@pytest.mark.parametrize(
    ("preset", "batch_size", "precision", "checkpoint"),
    [
        ("tiny", 8, "fp32", False),
        ("small", 2, "fp32", False),
        ("small", 2, "bf16", False),
        ("small", 2, "bf16-mixed", False),
        ("small", 2, "fp32", True),
    ],
)
def test_saved_activations_match_the_estimate(preset, batch_size, precision, checkpoint):
    measured = saved_activation_bytes(preset, batch_size, precision, checkpoint)
    estimate = gpt_activation_bytes(preset, batch_size, checkpoint_activations=checkpoint, precision=precision)
    assert measured == pytest.approx(estimate["saved_bytes"], rel=0.02), (measured, estimate)
