"""The mixture-of-experts MLP of `demo moe`: a top-k router, E experts shaped like the GPT block's MLP, a
capacity per expert, and the Switch Transformer's load-balancing loss.

    model = build_moe_gpt("tiny", seed=0, experts=4, top_k=2, capacity_factor=1.0)

Each block's MLP is replaced by an `MoE` layer. For the T tokens of one group (one rank's batch, GShard's
"group"), in this order:
  route     router logits x·W_r (d x E, no bias), a softmax in fp32, each token's top-k experts; a slot's
            gate is its expert's probability (not renormalised over the k), so the router learns through
            the gates
  capacity  C = ceil(cf·T·k/E) slots per expert (`theory.expert_parallel.expert_capacity`), taken
            first choices first, each in token order (GShard's priority); a slot over C is dropped: that
            expert adds nothing to that token, whose representation the residual connection carries on
  dispatch  the kept slots sorted by expert and handed, with the count per expert, to the layer's
            `dispatch`: on one process (`LocalDispatch`) every expert is here; under expert parallelism
            (`parallel.expert_parallel`) an all-to-all takes each slot to its expert's rank and a second
            one brings the output back
  combine   each output weighted by its gate and added into its token
  aux loss  alpha·E·sum_i f_i·P_i per group, f_i the share of the group's T·k slots the router sent to
            expert i (before capacity), P_i the mean probability it got (the Switch Transformer's loss in
            Megatron-LM's top-k form, alpha = 0.01); the mean over groups. It reaches the gradient through an
            identity whose backward adds it (Megatron-LM's MoEAuxLossAutoScaler), so the loss a step
            reports is the language model's alone.

A layer can be told the expert choices to make (`forced`): the one-process reference replays the choices
an expert-parallel run made, so a near-tie that a last-bit difference breaks the other way (the reference
computes on other shapes) cannot make two correct runs disagree.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Protocol, TypedDict

import torch
import torch.nn.functional as F
from torch import nn

from ddpfsdp.demos.theory.expert_parallel import SWITCH_AUX_ALPHA, expert_capacity
from ddpfsdp.demos.train.models import INIT_STD, build_model


class DispatchNote(TypedDict, total=False):
    """What a dispatch's latest call moved: the rows its experts computed; under expert parallelism the
    slots sent to and received from each rank, and (when stamping) when the experts and the combine ended."""

    computed: int
    sent: list[int]
    received: list[int]
    experts_done_ns: int
    combine_done_ns: int


class RoutingTrace(DispatchNote, total=False):
    """One group's routing in one forward (`result.expert_record.LayerRouting`, before its times are made
    relative)."""

    tokens: int
    capacity: int
    loads: list[int]
    kept: list[int]
    probs: list[float]
    aux: float


class Dispatch(Protocol):
    """Where a layer's kept slots go: rows sorted by expert, the count per expert (all E); back come the
    experts' outputs in the same order. `last` says what the latest call moved."""

    last: DispatchNote

    def __call__(self, rows: torch.Tensor, counts: torch.Tensor, experts: Experts) -> torch.Tensor: ...


class Experts(nn.Module):
    """E experts, each the GPT block's MLP (d x 4d and 4d x d with biases, 8d² + 5d parameters), stacked on a
    leading expert dimension; `first` is the index of the first one among all the layer's experts."""

    def __init__(self, count: int, d_model: int, *, first: int = 0, device: Any = None) -> None:
        super().__init__()
        self.first = first
        self.fc_weight = nn.Parameter(torch.empty(count, d_model, 4 * d_model, device=device))
        self.fc_bias = nn.Parameter(torch.empty(count, 4 * d_model, device=device))
        self.proj_weight = nn.Parameter(torch.empty(count, 4 * d_model, d_model, device=device))
        self.proj_bias = nn.Parameter(torch.empty(count, d_model, device=device))

    @property
    def count(self) -> int:
        return self.fc_weight.shape[0]

    def forward(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Rows sorted by expert, `counts[e]` of them for local expert e: each slice through its expert."""
        outputs, start = [], 0
        for e, n in enumerate(counts):
            part = rows[start:start + n]
            start += n
            hidden = F.gelu(part @ self.fc_weight[e] + self.fc_bias[e])
            outputs.append(hidden @ self.proj_weight[e] + self.proj_bias[e])
        return torch.cat(outputs) if outputs else rows[:0]

    def take(self, first: int, count: int) -> None:
        """Keep experts first .. first + count - 1 only (what one expert-parallel rank holds)."""
        for name, param in list(self.named_parameters(recurse=False)):
            local = first - self.first
            setattr(self, name, nn.Parameter(param.detach()[local:local + count].clone()))
        self.first = first


class LocalDispatch:
    """Every expert on this process: the rows go straight to them."""

    def __init__(self) -> None:
        self.last = DispatchNote()

    def __call__(self, rows: torch.Tensor, counts: torch.Tensor, experts: Experts) -> torch.Tensor:
        computed = experts(rows, counts.tolist())
        self.last = DispatchNote(computed=int(rows.shape[0]))
        return computed


class _AddAuxGrad(torch.autograd.Function):
    """Identity on the layer's output whose backward also gives the aux loss a gradient of 1: the loss is in
    the step's gradient without being in the loss it reports (Megatron-LM's MoEAuxLossAutoScaler)."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux)
        return output

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        (aux,) = ctx.saved_tensors
        return grad, torch.ones_like(aux)


def capacity_keep(choices: torch.Tensor, experts: int, capacity: int) -> torch.Tensor:
    """Which of a group's routed slots ([T, k] expert indices) fit their expert's capacity: first choices
    first, each in token order, the first `capacity` slots of each expert kept ([T, k] booleans)."""
    tokens, k = choices.shape
    in_priority = choices.t().reshape(-1)  # every token's first choice, then every second choice, ...
    onehot = F.one_hot(in_priority, experts)
    position = (onehot.cumsum(0) * onehot).sum(1) - 1  # the slot's place in its expert's queue
    return (position < capacity).view(k, tokens).t()


class MoE(nn.Module):
    """A block's MLP as a mixture of `experts` experts, top-`top_k` routing, `capacity_factor` slots per
    even share; the tokens of a forward are `groups` equal groups, each with its own capacity."""

    def __init__(self, d_model: int, experts: int, top_k: int, capacity_factor: float, *, groups: int = 1,
                 alpha: float = SWITCH_AUX_ALPHA, device: Any = None) -> None:
        super().__init__()
        self.num_experts, self.top_k, self.capacity_factor = experts, top_k, capacity_factor
        self.groups, self.alpha = groups, alpha
        self.router = nn.Linear(d_model, experts, bias=False, device=device)
        self.experts = Experts(experts, d_model, device=device)
        self.dispatch: Dispatch = LocalDispatch()
        self.forced: deque[torch.Tensor] = deque()  # expert choices to replay, one [T, k] per forward
        self.choices_log: list[torch.Tensor] | None = None  # set to a list: each forward's choices appended
        self.trace: list[RoutingTrace] | None = None  # set to a list: each group's routing appended

    def capacity(self, tokens: int) -> int:
        return expert_capacity(tokens, self.num_experts, self.top_k, self.capacity_factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        probs = self.router(tokens).float().softmax(dim=-1)
        choices = self.forced.popleft().to(tokens.device) if self.forced else probs.topk(self.top_k, dim=-1).indices
        if self.choices_log is not None:
            self.choices_log.append(choices.detach().cpu())
        gates = probs.gather(1, choices)
        size = tokens.shape[0] // self.groups
        outputs, aux = [], []
        for g in range(self.groups):
            part = slice(g * size, (g + 1) * size)
            out, group_aux = self._group(tokens[part], probs[part], choices[part], gates[part])
            outputs.append(out)
            aux.append(group_aux)
        out = _AddAuxGrad.apply(torch.cat(outputs), torch.stack(aux).mean())
        return out.view(shape)

    def _group(self, x: torch.Tensor, probs: torch.Tensor, choices: torch.Tensor,
               gates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, k, count = x.shape[0], self.top_k, self.num_experts
        capacity = self.capacity(tokens)
        keep = capacity_keep(choices, count, capacity).reshape(-1)
        routed = choices.reshape(-1)
        slots = keep.nonzero().squeeze(1)
        by_expert = torch.argsort(routed[slots], stable=True)
        slots = slots[by_expert]
        token = slots // k
        counts = torch.bincount(routed[slots], minlength=count)
        computed = self.dispatch(x[token], counts, self.experts)
        weighted = computed * gates.reshape(-1)[slots].unsqueeze(1).to(computed.dtype)
        out = torch.zeros_like(x).index_add(0, token, weighted)
        loads = torch.bincount(routed, minlength=count)
        mean_probs = probs.mean(0)
        aux = self.alpha * count * (loads.float() / (tokens * k) * mean_probs).sum()
        if self.trace is not None:
            self.trace.append(RoutingTrace(tokens=tokens, capacity=capacity, loads=loads.tolist(),
                                           kept=counts.tolist(), probs=mean_probs.tolist(), aux=float(aux.detach()),
                                           **self.dispatch.last))
        return out, aux


def moe_layers(model: nn.Module) -> list[MoE]:
    """The model's MoE layers, block by block."""
    return [module for module in model.modules() if isinstance(module, MoE)]


def _initialise(moe: MoE, layers: int, generator: torch.Generator) -> None:
    """The router and every expert drawn as the GPT draws its MLP (`models._initialise`): weights N(0, 0.02),
    the projection into the residual stream scaled by 1/sqrt(2 x layers), biases zero."""
    experts = moe.experts
    nn.init.normal_(moe.router.weight, 0.0, INIT_STD, generator=generator)
    nn.init.normal_(experts.fc_weight, 0.0, INIT_STD, generator=generator)
    nn.init.normal_(experts.proj_weight, 0.0, INIT_STD / math.sqrt(2 * max(1, layers)), generator=generator)
    nn.init.zeros_(experts.fc_bias)
    nn.init.zeros_(experts.proj_bias)


def build_moe_gpt(preset: str, *, seed: int, experts: int, top_k: int, capacity_factor: float, groups: int = 1,
                  **overrides: int | None) -> nn.Module:
    """The GPT of `preset` with every block's MLP an MoE layer, on the CPU, initialised from `seed` only
    (every rank builds the same model and keeps its own experts)."""
    model = build_model("gpt", preset, seed=seed, **overrides)
    generator = torch.Generator().manual_seed(seed + 1)  # the dense weights drew from `seed`'s own generator
    layers = len(model.blocks)
    with torch.no_grad():
        for block in model.blocks:
            block.mlp = MoE(model.shape.d_model, experts, top_k, capacity_factor, groups=groups)
            _initialise(block.mlp, layers, generator)
    return model
