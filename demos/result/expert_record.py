"""What an MoE run (`demo moe`) records, in the JSON form its result's `moe` block carries (no torch).

`train.moe` writes it, `claims.expert_parallel` judges it, `measure.moe_report` draws it. Counts are
routed slots (one per token per chosen expert); times are seconds from the earliest stamp of any rank.
"""

from __future__ import annotations

from typing import TypedDict


class LayerRouting(TypedDict, total=False):
    """One MoE layer on one rank, in the recorded step."""

    tokens: int  # T: the tokens this rank routed
    capacity: int  # slots per expert for them, ceil(cf·T·k/E)
    loads: list[int]  # slots the router sent to each expert, before capacity (E)
    kept: list[int]  # slots each expert took of them, after capacity (E)
    probs: list[float]  # the mean router probability of each expert over the T tokens (E)
    aux: float  # the Switch aux loss this rank's layer put in the gradient, as torch computed it
    sent: list[int]  # slots dispatched to each rank of the ep group (the dispatch's input splits)
    received: list[int]  # slots received from each rank of the ep group (from the counts all-to-all)
    computed: int  # rows this rank's experts computed: the dispatched tensor's rows as it arrived
    experts_done_s: float  # when this rank's experts had computed them
    combine_done_s: float  # when this rank's combine all-to-all returned


class ExpertRank(TypedDict):
    """One rank of an MoE run."""

    rank: int
    ep_group: int  # which ep group (the ranks that exchange tokens) the rank belongs to
    ep_rank: int  # its place in that group
    experts: list[int]  # the experts it holds, of every layer
    expert_param_bytes: int  # its experts' parameters, measured from the tensors it holds
    dense_param_bytes: int  # the rest: its FSDP shards of the dense part
    all_to_all_bytes: list[int]  # each all-to-all of the recorded step, the bytes handed to it, in issue order
    layers: list[LayerRouting]


class GradientDiff(TypedDict):
    """One parameter's gradient in the compared step, against the one-process reference."""

    name: str
    max_diff: float
    max_abs: float  # the reference gradient's largest magnitude


class ExpertReference(TypedDict):
    """The same MoE on one process, every expert local, the same batches and expert choices."""

    losses: list[float]
    logits_max_diff: float  # the compared step's output, the largest difference over every rank's batch
    logits_max_abs: float
    grads: list[GradientDiff]
    own_choices_agree: int  # routed slots where the reference's own router picks what the run picked
    slots: int


class LayerLoad(TypedDict):
    """One MoE layer's load in the recorded step, over every rank (what a report shows of it)."""

    loads: list[int]  # slots the routers sent to each expert, before capacity
    computed: list[int]  # rows each rank's experts computed
    dropped: int  # slots over capacity
    expert_imbalance: float  # the busiest expert's load over the mean
    rank_imbalance: float  # the busiest rank's rows over the mean
    aux: float  # the mean over the ranks of the aux loss the layer added
