"""Expert parallelism: a mixture of experts whose E experts live on ep ranks, each token sent to its
top-k experts' ranks by an all-to-all and its outputs brought back by a second.

All theory; nothing here is measured. Sources: the Switch Transformer (Fedus, Zoph and Shazeer, 2021):
expert capacity = tokens / experts x capacity factor, tokens over it dropped (the residual connection
carries them on), the auxiliary loss alpha·E·sum_i f_i·P_i with alpha = 1e-2; GShard (Lepikhin et al.,
2020): top-2 gating, expert capacity and the all-to-all dispatch and combine over sharded experts;
ST-MoE (Zoph et al., 2022): the router z-loss (1/B)·sum (logsumexp of a token's logits)², weighted 1e-3;
Megatron-LM (`megatron/core/transformer/moe/moe_utils.py`): top-k capacity
ceil(cf·T·k/E) (`get_capacity(num_tokens * topk, ...)`) and the top-k aux loss with f_i over the
T·k routed slots; torch 2.13's `torch/distributed/_functional_collectives.py`, whose `all_to_all_single`
differentiates as an all-to-all with the split sizes swapped (`all_to_all_single_backward`); torchtitan,
which dispatches with `all_to_all_single_autograd` and uneven splits.

- Experts. Each expert here is the project's GPT MLP (d x 4d and 4d x d with biases, 8d² + 5d);
  an MoE layer replaces a block's MLP with E of them and a router (d x E, no bias). EP gives each
  rank E/ep whole experts; the rest of the model (attention, embeddings, router) is not split by EP.
- Capacity. ceil(cf·T·k/E) token slots per expert for T tokens routed top-k; a slot over it is
  dropped (that token's contribution from that expert is zero). Dropless implementations (torchtitan,
  MegaBlocks) instead send uneven splits and pad nothing.
- The all-to-alls. Per MoE layer a step runs four: dispatch and combine forward, and their
  gradients in backward (torch: all-to-all with the splits swapped, so each rank sends back what it
  received). With k slots per token spread evenly over the experts, a rank keeps 1/ep of its T·k
  slots and sends (ep-1)/ep of them, T·k·d·c·(ep-1)/ep bytes per all-to-all; a capacity-padded
  dispatch (GShard's dense [E, C, d] buffer) sends E·C·d·c·(ep-1)/ep whatever the routing. Of what
  a rank sends, (g-1)/(ep-1) stays in its node and (ep-g)/(ep-1) crosses the network, g the group's
  ranks per node. An all-to-all ends when its slowest rank has received everything: a rank whose
  experts draw more tokens stalls every rank's step.
- Against FSDP. Sharding the same experts with FSDP over the ep ranks gathers every expert of a layer
  (twice: forward and backward) and reduce-scatters their gradients: about 3·(ep-1)/ep of all the
  experts' bytes per rank per step, against EP's 4·T·k·d·c·(ep-1)/ep; the experts' weights move under
  FSDP, the tokens under EP.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Sequence, TypedDict

from ddpfsdp.demos.theory.arguments import read_count, read_flag
from ddpfsdp.demos.theory.comm import step_comm, total_wire_bytes
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.state import bytes_per_param

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape

SWITCH_AUX_ALPHA = 0.01
"""Fedus et al., 2021: the auxiliary load-balancing loss's weight, alpha = 10^-2."""

ST_MOE_Z_LOSS_WEIGHT = 0.001
"""Zoph et al., 2022: the router z-loss's weight, c_z = 10^-3."""

ALL_TO_ALLS_PER_LAYER = 4
"""Dispatch and combine forward, and their gradients backward."""


# ----------------------------------------------------------------------------- checks


def _exact(value: Any, what: str) -> Fraction:
    """A positive number as an exact fraction (1.25 as 5/4, not the nearest double)."""
    try:
        number = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{what} must be a number, such as 1.25 (got {value!r})") from None
    return number


def _whole(value: Any, what: str) -> int:
    """A whole number, zero and negatives let through for the caller's own message."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return read_count(value, what)


def check_moe(experts: Any, top_k: Any, capacity_factor: Any = None) -> tuple[int, int, Fraction | None]:
    """(E, k, capacity factor) checked; a ValueError says what to change. No factor means dropless."""
    count = _whole(experts, "experts")
    k = _whole(top_k, "top-k")
    if count < 1:
        raise ValueError(f"a mixture of experts needs at least 1 expert (got {count})")
    if not 1 <= k <= count:
        raise ValueError(f"top-k {k} must be from 1 to the {count} experts: a token cannot go to more experts "
                         "than there are; lower --top-k or raise --experts")
    factor = None
    if capacity_factor is not None:
        factor = _exact(capacity_factor, "capacity factor")
        if factor <= 0:
            raise ValueError(f"capacity factor {capacity_factor} leaves no slot for any token: give a positive "
                             "factor, such as 1.0 or 1.25 (capacity = ceil(factor x tokens x top-k / experts))")
    return count, k, factor


def check_ep(ep: Any, experts: int, gpus: int | None = None) -> int:
    """The EP degree, checked: it must divide the experts (whole experts per rank) and the GPUs."""
    degree = read_count(ep, "ep")
    if degree < 1:
        raise ValueError(f"ep must be at least 1 (got {degree})")
    if experts % degree:
        fitting = ", ".join(str(e) for e in range(1, experts + 1) if experts % e == 0 and e > 1)
        raise ValueError(f"{experts} experts do not split evenly over ep {degree}: each rank holds whole experts; "
                         f"choose ep from {fitting or 'none (one expert)'}, or a multiple of {degree} experts")
    if gpus is not None and gpus % degree:
        raise ValueError(f"ep {degree} does not divide the {gpus} GPUs; choose ep from "
                         + ", ".join(str(e) for e in range(2, gpus + 1) if gpus % e == 0 and experts % e == 0)
                         + ", or change --gpus")
    return degree


# ----------------------------------------------------------------------------- routing


def expert_capacity(tokens: int, experts: int, top_k: int, capacity_factor: Fraction | float) -> int:
    """Token slots per expert: ceil(cf·T·k/E) (Switch: T/E·cf for k = 1; Megatron-LM for top-k)."""
    return math.ceil(_exact(capacity_factor, "capacity factor") * tokens * top_k / experts)


def dropped_slots(loads: Sequence[int], capacity: int) -> int:
    """Routed slots over capacity, summed over the experts: sum of max(0, load - C)."""
    return sum(max(0, int(load) - capacity) for load in loads)


def rank_loads(loads: Sequence[int], ep: int) -> list[int]:
    """Slots each EP rank's experts receive, experts placed in order (rank r holds E/ep consecutive)."""
    per_rank = len(loads) // ep
    return [sum(loads[r * per_rank:(r + 1) * per_rank]) for r in range(ep)]


def switch_aux_loss(fractions: Sequence[float], probs: Sequence[float], alpha: float = SWITCH_AUX_ALPHA) -> float:
    """alpha·E·sum_i f_i·P_i: f_i the share of routed slots sent to expert i, P_i the mean router
    probability it got; alpha at a perfectly uniform routing (f_i = P_i = 1/E)."""
    if len(fractions) != len(probs) or not fractions:
        raise ValueError("give one f_i and one P_i per expert")
    return alpha * len(fractions) * sum(float(f) * float(p) for f, p in zip(fractions, probs))


def router_z_loss(logits: Sequence[Sequence[float]], weight: float = 1.0) -> float:
    """ST-MoE's z-loss: the mean over tokens of (logsumexp of the token's router logits)², times `weight`."""
    if not logits:
        raise ValueError("give at least one token's router logits")
    total = 0.0
    for row in logits:
        top = max(row)
        total += (top + math.log(sum(math.exp(x - top) for x in row))) ** 2
    return weight * total / len(logits)


# ----------------------------------------------------------------------------- bytes


def expert_params(d_model: int) -> int:
    """One expert, the project's GPT MLP: d x 4d and 4d x d weights with their biases, 8d² + 5d."""
    return 8 * d_model * d_model + 5 * d_model


def all_to_all_bytes(tokens: int, top_k: int, d_model: int, element_bytes: int, ep: int, *,
                     experts: int | None = None, capacity: int | None = None) -> Fraction:
    """Bytes one rank sends in one dispatch (or combine) all-to-all: its T·k slots routed evenly,
    (ep-1)/ep of them off the rank; or, capacity-padded, its whole [E, C, d] buffer's (ep-1)/ep."""
    slots = tokens * top_k if capacity is None else (experts or 0) * capacity
    if capacity is not None and not experts:
        raise ValueError("a capacity-padded all-to-all needs the expert count")
    return Fraction(slots * d_model * element_bytes * (ep - 1), ep)


def all_to_all_link_shares(ranks: int, ranks_per_node: int) -> dict[str, Fraction]:
    """Of what one rank sends in an all-to-all over `ranks` (an equal slice to each other rank), the
    shares that stay in its node and that cross the network, with `ranks_per_node` of the group per node."""
    local = min(ranks, max(1, ranks_per_node))
    if ranks == 1:
        return {"intra": Fraction(0), "inter": Fraction(0)}
    return {"intra": Fraction(local - 1, ranks - 1), "inter": Fraction(ranks - local, ranks - 1)}


class AllToAll(TypedDict):
    """The MoE layers' all-to-alls one rank runs per step: calls, bytes per call, bytes."""

    calls: int
    bytes_per_call: int
    bytes: int


class AllToAllByLink(AllToAll):
    """`AllToAll`, split into what stays in the node and what crosses the network."""

    intra_bytes: int
    inter_bytes: int


def moe_step_all_to_all(tokens: int, top_k: int, d_model: int, element_bytes: int, ep: int, layers: int, *,
                        recompute: bool = False, experts: int | None = None,
                        capacity: int | None = None) -> AllToAll:
    """Bytes one rank sends in the MoE layers' all-to-alls per step: four per layer (six when the
    forward is recomputed under checkpointing)."""
    calls = (ALL_TO_ALLS_PER_LAYER + (2 if recompute else 0)) * layers
    one = all_to_all_bytes(tokens, top_k, d_model, element_bytes, ep, experts=experts, capacity=capacity)
    return {"calls": calls, "bytes_per_call": round(one), "bytes": round(one * calls)}


def fsdp_expert_bytes(expert_count_params: int, ranks: int, precision: str) -> int:
    """Bytes one rank sends per step if FSDP shards the same experts over the same ranks: two all-gathers
    of every expert's parameters and one reduce-scatter of their gradients (`comm.step_comm`, zero3)."""
    return total_wire_bytes(step_comm("zero3", expert_count_params, ranks, precision))


# ----------------------------------------------------------------------------- calc's section


class ExpertMemory(TypedDict):
    """Parameters and model state per rank under expert parallelism."""

    expert_params: int
    experts_per_rank: int
    expert_params_per_rank: int
    expert_params_total: int
    dense_params: int
    params_per_rank: int
    expert_state_bytes_per_rank: int
    model_state_bytes_per_rank: int


class ExpertParallelSection(ExpertMemory):
    """The `expert_parallel` section of the `ddpfsdp.calc/1` document."""

    theory: bool
    ep: int
    experts: int
    top_k: int
    capacity_factor: float | None  # None: dropless
    tokens_per_rank: int
    routed_slots_per_rank: int
    capacity_per_expert: int | None
    padded_slots_per_expert_share: float | None
    all_to_all: AllToAllByLink
    all_to_all_padded: AllToAll | None
    link_shares: dict[str, float]  # intra, inter
    fsdp_expert_bytes_per_step: int
    fsdp_over_ep: float | None
    fsdp_gathered_experts_bytes: int


def _memory(shape: GPTShape, experts: int, ep: int, precision: str, optimizer: str) -> ExpertMemory:
    """Parameters and model state per rank: the dense part whole, E/ep experts per MoE layer."""
    per_expert = expert_params(shape.d_model)  # the block's own MLP, which the MoE layer replaces
    router = shape.d_model * experts
    dense = shape.params - shape.layers * per_expert + shape.layers * router
    local_experts = shape.layers * (experts // ep) * per_expert
    per_param = bytes_per_param("ddp", precision, optimizer)["total"]
    return {"expert_params": per_expert, "experts_per_rank": experts // ep,
            "expert_params_per_rank": local_experts, "expert_params_total": shape.layers * experts * per_expert,
            "dense_params": dense, "params_per_rank": dense + local_experts,
            "expert_state_bytes_per_rank": local_experts * per_param,
            "model_state_bytes_per_rank": (dense + local_experts) * per_param}


def expert_parallel_figures(shape: GPTShape, ep: int, experts: int, top_k: int, capacity_factor: Any = None, *,
                            gpus: int, batch_size: int = 1, precision: str = "bf16-mixed", optimizer: str = "adamw",
                            checkpoint_activations: bool = False, cp: int = 1, gpus_per_node: int = 8,
                            ) -> ExpertParallelSection:
    """The `expert_parallel` section of `ddpfsdp calc --json`: every block's MLP an MoE of `experts`
    experts shaped like it, over `ep` ranks; memory per rank, capacity, the all-to-alls per step by
    link (routed evenly, and capacity-padded), and FSDP's traffic for the same experts beside it."""
    experts, top_k, factor = check_moe(experts, top_k, capacity_factor)
    ep = check_ep(ep, experts, gpus)
    tokens = batch_size * shape.seq_len // cp
    c = precision_for(precision).compute_bytes
    memory = _memory(shape, experts, ep, precision, optimizer)
    capacity = expert_capacity(tokens, experts, top_k, factor) if factor is not None else None
    routed = moe_step_all_to_all(tokens, top_k, shape.d_model, c, ep, shape.layers, recompute=checkpoint_activations)
    padded = (moe_step_all_to_all(tokens, top_k, shape.d_model, c, ep, shape.layers, recompute=checkpoint_activations,
                                  experts=experts, capacity=capacity) if capacity is not None else None)
    shares = all_to_all_link_shares(ep, gpus_per_node)
    fsdp = fsdp_expert_bytes(memory["expert_params_total"], ep, precision)
    gathered = 2 * experts * memory["expert_params"] * precision_for(precision).gather_bytes
    return {
        "theory": True,
        "ep": ep, "experts": experts, "top_k": top_k,
        "capacity_factor": float(factor) if factor is not None else None,
        "tokens_per_rank": tokens, "routed_slots_per_rank": tokens * top_k,
        **memory,
        "capacity_per_expert": capacity,
        "padded_slots_per_expert_share": (float(Fraction(capacity * experts, tokens * top_k))
                                          if capacity is not None else None),
        "all_to_all": {**routed, "intra_bytes": round(routed["bytes"] * shares["intra"]),
                       "inter_bytes": round(routed["bytes"] * shares["inter"])},
        "all_to_all_padded": padded,
        "link_shares": {k: float(v) for k, v in shares.items()},
        "fsdp_expert_bytes_per_step": fsdp,
        "fsdp_over_ep": fsdp / routed["bytes"] if routed["bytes"] else None,
        "fsdp_gathered_experts_bytes": gathered,
    }


# ----------------------------------------------------------------------------- quiz answers
# Keywords only, as the bank's `calc = { fn, args }` and the drills call them.


def q_capacity(*, tokens: Any, experts: Any, top_k: Any, capacity_factor: Any) -> int:
    """Token slots per expert: ceil(cf·T·k/E)."""
    count, k, factor = check_moe(experts, top_k, capacity_factor)
    return expert_capacity(read_count(tokens, "tokens"), count, k, factor)


def q_dropped(*, loads: Sequence[Any], tokens: Any, top_k: Any, capacity_factor: Any) -> int:
    """Routed slots dropped when expert i receives loads[i] of the T·k slots, at capacity ceil(cf·T·k/E)."""
    count, k, factor = check_moe(len(loads), top_k, capacity_factor)
    slots = [_whole(load, "load") for load in loads]
    if min(slots) < 0:
        raise ValueError(f"an expert's load is a count of routed slots, 0 or more (got {min(slots)})")
    t = read_count(tokens, "tokens")
    if sum(slots) != t * k:
        raise ValueError(f"the loads sum to {sum(slots)}, not the {t} x {k} = {t * k} routed slots")
    return dropped_slots(slots, expert_capacity(t, count, k, factor))


def q_all_to_all_bytes_per_step(*, tokens: Any, top_k: Any, d_model: Any, precision: str, ep: Any, layers: Any,
                                experts: Any, recompute: Any = False, capacity_factor: Any = None) -> int:
    """Bytes one rank sends in the MoE all-to-alls per step: routed evenly, or capacity-padded when a
    capacity factor is given."""
    count, k, factor = check_moe(experts, top_k, capacity_factor)
    degree = check_ep(ep, count)
    t = read_count(tokens, "tokens")
    capacity = expert_capacity(t, count, k, factor) if factor is not None else None
    return moe_step_all_to_all(t, k, read_count(d_model, "d_model"), precision_for(precision).compute_bytes, degree,
                               read_count(layers, "layers"), recompute=read_flag(recompute), experts=count,
                               capacity=capacity)["bytes"]


def q_expert_params_per_rank(*, layers: Any, d_model: Any, experts: Any, ep: Any) -> int:
    """Expert parameters one EP rank holds: layers x E/ep x (8d² + 5d)."""
    count = read_count(experts, "experts")
    degree = check_ep(ep, count)
    return read_count(layers, "layers") * (count // degree) * expert_params(read_count(d_model, "d_model"))


def q_switch_aux_loss(*, fractions: Sequence[Any], probs: Sequence[Any], alpha: Any = SWITCH_AUX_ALPHA) -> float:
    """The Switch Transformer's auxiliary load-balancing loss, alpha·E·sum f_i·P_i."""
    return switch_aux_loss([float(f) for f in fractions], [float(p) for p in probs], float(alpha))


def q_fsdp_over_ep(*, tokens: Any, top_k: Any, d_model: Any, precision: str, ep: Any, layers: Any,
                   experts: Any) -> float:
    """FSDP's bytes per rank per step for the same experts over the same ranks, over EP's all-to-alls."""
    count, k, _ = check_moe(experts, top_k)
    degree = check_ep(ep, count)
    d, n = read_count(d_model, "d_model"), read_count(layers, "layers")
    ep_bytes = moe_step_all_to_all(read_count(tokens, "tokens"), k, d, precision_for(precision).compute_bytes,
                                   degree, n)["bytes"]
    return fsdp_expert_bytes(n * count * expert_params(d), degree, precision) / ep_bytes


QUIZ_FUNCTIONS = {
    "ep_capacity": q_capacity,
    "ep_dropped": q_dropped,
    "ep_all_to_all_bytes_per_step": q_all_to_all_bytes_per_step,
    "ep_expert_params_per_rank": q_expert_params_per_rank,
    "ep_switch_aux_loss": q_switch_aux_loss,
    "ep_fsdp_over_ep": q_fsdp_over_ep,
}
