"""The torch behaviour the learner questions' keys rest on, run on the installed torch (one process, CPU).

Each test pins one key to what torch does, so an upgrade that changes the behaviour fails here, next
to the question that teaches it: reentrant checkpointing behind a frozen input (prec-ac-reentrant-
frozen-input), offload_wrapper against checkpoint_wrapper (prec-ac-offload-wrapper, prec-ac-what-stays)
and FSDP2 holding the last reduce-scatter input into the next unit's backward (dbg-fsdp2-peak-above-fsdp1).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointWrapper,
    OffloadWrapper,
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)
from torch.utils.checkpoint import checkpoint


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_frozen_input_cuts_the_reentrant_checkpoint_off_the_graph(reentrant):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 8).requires_grad_(False)
    block, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
    hidden = embedding(torch.tensor([[1, 2, 3]]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = checkpoint(block, hidden, use_reentrant=reentrant)
    head(out).sum().backward()
    warned = any("None of the inputs have requires_grad=True" in str(w.message) for w in caught)
    assert head.weight.grad is not None
    assert (block.weight.grad is None) == reentrant
    assert warned == reentrant


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.forward_calls = 0

    def forward(self, x):
        self.forward_calls += 1
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("wrapper,wrapper_type,calls", [(checkpoint_wrapper, CheckpointWrapper, 2),
                                                         (offload_wrapper, OffloadWrapper, 1)])
def test_offload_wrapper_keeps_activations_where_checkpoint_wrapper_recomputes(wrapper, wrapper_type, calls):
    model = torch.nn.Sequential(_Block(), _Block())
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, _Block))
    assert all(isinstance(child, wrapper_type) for child in model)
    assert not isinstance(model, wrapper_type)  # the root is never wrapped
    model(torch.randn(4, 8, requires_grad=True)).sum().backward()
    blocks = [child._checkpoint_wrapped_module for child in model]
    assert [b.forward_calls for b in blocks] == [calls, calls]  # 2: forward, then recomputed in backward
    assert all(b.a.weight.grad is not None for b in blocks)


def test_fsdp2_holds_the_previous_units_reduce_scatter_input_into_the_next_backward():
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 6))
        fully_shard(model[0])
        fully_shard(model[1])
        fully_shard(model)
        held: list[list[int]] = []

        def retained() -> list[int]:
            ctx = model._get_fsdp_state()._comm_ctx
            states = getattr(ctx, "reduce_scatter_states", None)  # torch 2.13: a list, capped at 1 by default
            if states is None:
                states = [s for s in [getattr(ctx, "reduce_scatter_state", None)] if s is not None]
            return [s.reduce_scatter_input.numel() for s in states]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the full backward hook's note about inputs without grad
            model[0].register_full_backward_pre_hook(lambda module, grad_output: held.append(retained()))
            model(torch.randn(4, 8)).sum().backward()
        # While the first unit's backward starts, the second unit's gradients (8 x 6 + 6 elements,
        # reduce-scattered just before) are still held in their reduce-scatter input buffer.
        assert held == [[8 * 6 + 6]]
        assert retained() == []  # the end of backward lets it go
    finally:
        dist.destroy_process_group()
