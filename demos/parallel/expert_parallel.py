"""Expert parallelism: each MoE layer's E experts split over the ranks of an "ep" group, the tokens sent to
them and back by all-to-alls; `parallelize` applies it before FSDP shards the rest.

    ddpfsdp demo moe --procs 4 --ep 2 --experts 4 --top-k 2 --capacity-factor 1.0

On its own mesh of the world (`ParallelDims.ep_mesh`, (edp, ep), ep fastest), a rank of an ep group of
size N holds experts [r·E/N, (r+1)·E/N) of every layer, whole, and dispatches each MoE layer's kept slots
as torchtitan's `ExpertParallel` does (torchtitan/distributed/expert_parallel.py):
  1. counts     an all-to-all of the slots it routes to each expert (E counts, E/N to each rank), so
                every rank learns what it will receive, copied to the host as split sizes
  2. dispatch   `all_to_all_single_autograd` of the slots with those uneven splits, then `wait_tensor`;
                the rows arrive source by source and are regrouped expert by expert
  3. experts    each local expert on its rows
  4. combine    the same call with the splits swapped, bringing every output back to its token's rank
The functional collective differentiates (torch 2.13, torch/distributed/_functional_collectives.py: its
registered backward, `all_to_all_single_backward`, is an all-to-all of the gradient with the input and
output split sizes swapped), so backward runs both all-to-alls again, in reverse, and each expert's
gradient collects what every rank's tokens gave it. `torch.distributed.nn.functional.all_to_all_single`
also differentiates but warns that it is deprecated (torch/distributed/nn/functional.py).

The rest of the model is the data-parallel part: FSDP shards it over every rank and leaves the experts
alone (`fully_shard(..., ignored_params=...)`). Their gradients are made the same average FSDP's are
(`finish_backward`): divided by the data-parallel degree, since every rank's loss is a mean over its own
batch (torchtitan sets the experts' `gradient_divide_factor` to the data-parallel degree for the same
reason), and, where several ep groups hold the same experts (ep below the world), all-reduced over those
replicas (the "edp" group; Megatron-LM's expert-data-parallel group).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.train.moe_layer import DispatchNote, Experts, MoE, moe_layers


class AllToAllDispatch:
    """An MoE layer's dispatch over an ep group: counts, dispatch, this rank's experts, combine."""

    def __init__(self, group: Any, ep: int, local_experts: int, device: torch.device) -> None:
        self.group, self.ep, self.local_experts, self.device = group, ep, local_experts, device
        self.stamp = False  # set: the time this rank's experts finish and its combine returns
        self.last = DispatchNote()

    def _now_ns(self) -> int:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.time_ns()

    def __call__(self, rows: torch.Tensor, counts: torch.Tensor, experts: Experts) -> torch.Tensor:
        from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd

        wait = torch.ops._c10d_functional.wait_tensor
        with torch.no_grad():
            # even splits: E counts, E/N to each rank; back come this rank's experts' counts from each rank
            received = wait(all_to_all_single(counts, None, None, group=self.group)).view(self.ep, -1)
        send_splits = counts.view(self.ep, -1).sum(1).tolist()
        receive_splits = received.sum(1).tolist()
        arrived = wait(all_to_all_single_autograd(rows, receive_splits, send_splits, self.group))
        # the rows arrive source by source, each source's sorted by expert: regroup them expert by expert
        expert_of_row = torch.repeat_interleave(torch.arange(self.local_experts, device=counts.device).repeat(self.ep),
                                                received.reshape(-1))
        order = torch.argsort(expert_of_row, stable=True)
        computed = experts(arrived[order], received.sum(0).tolist())
        back_in_arrival_order = computed[torch.argsort(order)]
        experts_done_ns = self._now_ns() if self.stamp else None
        returned = wait(all_to_all_single_autograd(back_in_arrival_order, send_splits, receive_splits, self.group))
        self.last = DispatchNote(sent=send_splits, received=receive_splits, computed=int(arrived.shape[0]))
        if self.stamp:
            self.last.update(experts_done_ns=experts_done_ns, combine_done_ns=self._now_ns())
        return returned


@dataclass
class ExpertParallel:
    """What expert parallelism did to a model: its mesh, its groups and the experts each rank holds."""

    mesh: Any
    ep: int
    edp: int
    data_parallel: int  # the ranks whose mean loss the step descends: every rank
    ep_group: int  # which ep group this rank is in (its place in the edp dimension)
    ep_rank: int
    experts_per_rank: int
    layers: list[MoE] = field(default_factory=list)

    @classmethod
    def apply(cls, model: nn.Module, dims: ParallelDims, device: torch.device) -> ExpertParallel:
        """Keep this rank's experts of every MoE layer (moved to `device`) and dispatch over its ep group."""
        layers = moe_layers(model)
        if not layers:
            raise ValueError("expert parallelism needs MoE layers: build the model with build_moe_gpt")
        experts = layers[0].num_experts
        if experts % dims.ep:
            raise ValueError(f"{experts} experts do not split evenly over ep {dims.ep}; give --experts a multiple "
                             f"of {dims.ep}")
        mesh = dims.ep_mesh(device.type)
        ep_rank = mesh.get_local_rank("ep")
        per_rank = experts // dims.ep
        group = mesh.get_group("ep")
        for layer in layers:
            layer.experts.take(ep_rank * per_rank, per_rank)
            layer.experts.to(device)
            layer.dispatch = AllToAllDispatch(group, dims.ep, per_rank, device)
        return cls(mesh=mesh, ep=dims.ep, edp=dims.world_size // dims.ep, data_parallel=dims.dp,
                   ep_group=mesh.get_local_rank("edp"), ep_rank=ep_rank, experts_per_rank=per_rank, layers=layers)

    def params(self) -> set[nn.Parameter]:
        """The experts' parameters: held whole on this rank, left alone by FSDP."""
        return {param for layer in self.layers for param in layer.experts.parameters()}

    def finish_backward(self) -> None:
        """The experts' gradients as FSDP's are: the mean over the data-parallel ranks' losses (all-reduced
        over the replicas of these experts where ep is below the world)."""
        grads = [p.grad for layer in self.layers for p in layer.experts.parameters() if p.grad is not None]
        if not grads:
            return
        if self.edp > 1:
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=self.mesh.get_group("edp"))
            torch._foreach_copy_(grads, [chunk.view_as(g) for chunk, g in
                                         zip(flat.split([g.numel() for g in grads]), grads)])
        torch._foreach_div_(grads, float(self.data_parallel))

    def record(self, on: bool) -> None:
        """Trace every layer's routing (and stamp its experts' and combine's ends) from now on, or stop."""
        for layer in self.layers:
            layer.trace = [] if on else None
            layer.dispatch.stamp = on

    def describe(self) -> str:
        replicas = f", each set held by {self.edp} ep groups" if self.edp > 1 else ""
        return (f"expert parallelism over {self.ep} ranks: {self.experts_per_rank} whole experts per rank and "
                f"layer{replicas}, tokens dispatched and combined by all_to_all_single_autograd")
