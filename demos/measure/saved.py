"""What one module saves for backward in its forward: the bytes of activations autograd keeps.

    saved = SavedActivations(model.blocks[0])
    with saved:
        loss = model(tokens).sum()      # the module's forward runs inside
    saved.bytes                          # distinct storages saved while it ran, parameters left out

`torch.autograd.graph.saved_tensors_hooks` is entered at the module's pre-forward and left at its
forward's end, so only what this module's operations save is seen. Each storage counts once (a
tensor saved by two operations is kept once); the module's own parameters, as they are during its
forward (FSDP's unsharded ones, the TP shards of a DTensor), are not activations and are left out.
A DTensor counts its local shard, which is what this rank holds.
"""

from __future__ import annotations

from typing import Any

import torch

from ddpfsdp.demos.measure.memory import storages


class SavedActivations:
    """Counts the storages `module` saves for backward during each forward inside `with`."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.seen: dict[tuple, int] = {}
        self._params: set[tuple] = set()
        self._hooks: list[Any] = []
        self._context: Any = None

    @property
    def bytes(self) -> int:
        return sum(self.seen.values())

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():  # a DTensor's local view is taken for its storage, outside the graph
            found = storages([tensor])
        for key, size in found.items():
            if key not in self._params:
                self.seen[key] = size
        return tensor

    def _enter(self, *_: Any) -> None:
        self._params = set(storages(self.module.parameters()))
        self._context = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self._context.__enter__()

    def _leave(self, *_: Any) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None

    def __enter__(self) -> SavedActivations:
        self._hooks = [self.module.register_forward_pre_hook(self._enter),
                       self.module.register_forward_hook(self._leave, always_call=True)]
        return self

    def __exit__(self, *exc: Any) -> None:
        self._leave()
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
