"""Topology: GPUs in nodes, a fast link inside a node, a slower one between nodes, and what each collective
runs on.

All theory, the alpha-beta model of `steptime` with a link per hop; nothing here is measured.

- Links. Inside a node NVLink (450 GB/s per GPU each way on H100), between nodes one NIC per GPU
  (400 Gb/s InfiniBand NDR: 50 GB/s each way). A fabric is oversubscribed o:1 when the switches above
  a leaf carry 1/o of what the leaf's ports can inject: a collective among the nodes of one leaf (a
  rack) gets each NIC's full speed, one that crosses leaves gets 1/o of it when every GPU sends at once,
  as a data-parallel collective does. `rack_nodes` is the nodes under one leaf (1: every hop between
  nodes crosses the oversubscribed tier).
- A flat ring over all N GPUs moves 2(N-1)/N of the buffer through every GPU and is paced by its
  slowest hop: as one ring it runs at the NIC's speed (over the tier's share of it) even though most
  of its hops are NVLink. (NCCL runs several rings at once, channels that leave a node through
  different NICs, and trees: what the hierarchical schedule below does explicitly.)
- Hierarchical all-reduce (Horovod's NCCLHierarchicalAllreduce: an NCCL reduce-scatter in the node, an
  MPI all-reduce across nodes, an NCCL all-gather in the node; Goyal et al., 2017, section 4, used the
  same three phases with a reduce to one GPU and a broadcast back): with g GPUs in each of k nodes, (1) reduce-scatter inside the node, g ranks over NVLink: each GPU then
  holds the node's sum of 1/g of the buffer; (2) all-reduce that 1/g across the k nodes, g rings at
  once, each GPU on its own NIC; (3) all-gather inside the node. Per GPU, NVLink carries
  2(g-1)/g of the buffer and the NIC 2(k-1)/k of a 1/g share: g times less through the network than
  one flat ring puts through its slowest hop.
- HSDP in shard groups of a node: the all-gathers and reduce-scatters (ZeRO-3's, 3 x (g-1)/g of the
  parameters) stay on NVLink, and only the all-reduce of each GPU's 1/g gradient shard across the
  replicas crosses the network: the same split as the hierarchical all-reduce.
- Scaling. Strong scaling keeps the global batch: compute per GPU falls as 1/N while a ring's bytes
  per GPU do not (2(N-1)/N of the gradients whatever N), so the exposed communication share grows.
  Weak scaling keeps the batch per GPU: ideally twice the GPUs process twice the samples in the same
  step time. "Doubled the GPUs, gained 10%": the efficiency is 1.1 / 2 = 55%; under strong scaling
  with a fixed communication time that means communication (and whatever else did not shrink) was
  (1/1.1 - 1/2) / (1 - 1/2) = 82% of the step before; under weak scaling the step grew by 2 / 1.1 -
  1 = 82% of its old length.

Torch-free: the quiz and calc import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypedDict

from ddpfsdp.demos.base.units import parse_bytes
from ddpfsdp.demos.theory.arguments import read_count
from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.presets import LINKS, NETWORK_STEP_S, NVLINK_STEP_S
from ddpfsdp.demos.theory.steptime import collective_calls, collective_time_s

LINK_NAMES = {"intra": "inside a node", "inter": "between nodes"}


class LinksDocument(TypedDict):
    """A topology as the `ddpfsdp.calc/1` document gives it (`links` of the topology section, `topology` of
    the plan)."""

    gpus: int
    gpus_per_node: int
    nodes: int
    intra_bytes_per_s: float
    inter_bytes_per_s: float
    oversubscription: float
    rack_nodes: int
    inter_bytes_per_s_across_racks: float
    intra_latency_s: float
    inter_latency_s: float


class TimedCollective(TypedDict):
    """One collective (or `calls` of it) on one link: its group, bytes and the alpha-beta model's time."""

    op: str
    link: str  # intra or inter
    ranks: int
    nodes: int
    bytes: float
    bytes_per_s: float
    wire_bytes_per_gpu: float
    latency_s: float
    bandwidth_s: float
    time_s: float
    calls: int


class LinkLoad(TypedDict):
    """What one link carries per GPU, and for how long."""

    wire_bytes_per_gpu: float
    time_s: float


class FlatRing(TimedCollective):
    """One ring all-reduce over every GPU."""

    by_link: dict[str, LinkLoad]


class Hierarchical(TypedDict):
    """The hierarchical all-reduce: its phases, each on its link."""

    phases: list[TimedCollective]
    by_link: dict[str, LinkLoad]
    time_s: float


class HsdpByLink(TypedDict):
    """HSDP's collectives per step, each on the link its group runs over."""

    group_size: int
    replicas: int
    ops: list[TimedCollective]
    by_link: dict[str, LinkLoad]
    time_s: float


class TopologySection(TypedDict):
    """The `topology` section of the `ddpfsdp.calc/1` document: the gradients' all-reduce, flat and
    hierarchical, and HSDP in groups of a node (None on one node)."""

    theory: bool
    links: LinksDocument
    all_reduce_bytes: int
    flat_ring: FlatRing
    hierarchical: Hierarchical
    hsdp: HsdpByLink | None


class ScalingSection(TypedDict):
    """The `scaling` section of the `ddpfsdp.calc/1` document: what a throughput gain says under strong and
    under weak scaling."""

    theory: bool
    gpus_before: int
    gpus_after: int
    gpu_ratio: float
    throughput_ratio: float
    efficiency: float
    strong_fixed_share_before: float
    strong_explained: bool
    weak_step_ratio: float


@dataclass(frozen=True)
class Topology:
    """GPUs in nodes of `gpus_per_node`, two links, and how oversubscribed the tier above a rack is."""

    gpus: int
    gpus_per_node: int
    intra_bytes_per_s: float = LINKS["nvlink4"].bytes_per_s
    inter_bytes_per_s: float = LINKS["ndr400"].bytes_per_s
    oversubscription: float = 1.0
    rack_nodes: int = 1
    intra_latency_s: float = NVLINK_STEP_S
    inter_latency_s: float = NETWORK_STEP_S

    @property
    def nodes(self) -> int:
        return max(1, self.gpus // self.gpus_per_node)

    def inter_for(self, nodes: int) -> float:
        """A GPU's network bandwidth in a collective spanning `nodes` nodes: 1/o of it beyond one rack."""
        return self.inter_bytes_per_s / (self.oversubscription if nodes > self.rack_nodes else 1.0)

    def link_for(self, nodes: int) -> tuple[str, float]:
        """The link that paces a ring over `nodes` nodes, and its bandwidth: the slowest of its hops."""
        if nodes <= 1:
            return "intra", self.intra_bytes_per_s
        return "inter", min(self.intra_bytes_per_s, self.inter_for(nodes))

    def document(self) -> LinksDocument:
        return {"gpus": self.gpus, "gpus_per_node": self.gpus_per_node, "nodes": self.nodes,
                "intra_bytes_per_s": self.intra_bytes_per_s, "inter_bytes_per_s": self.inter_bytes_per_s,
                "oversubscription": self.oversubscription, "rack_nodes": self.rack_nodes,
                "inter_bytes_per_s_across_racks": self.inter_for(self.rack_nodes + 1),
                "intra_latency_s": self.intra_latency_s, "inter_latency_s": self.inter_latency_s}


def check_topology(*, gpus: Any, gpus_per_node: Any, intra_bytes_per_s: float = LINKS["nvlink4"].bytes_per_s,
                   inter_bytes_per_s: float = LINKS["ndr400"].bytes_per_s, oversubscription: Any = 1.0,
                   rack_nodes: Any = 1, intra_latency_s: float = NVLINK_STEP_S,
                   inter_latency_s: float = NETWORK_STEP_S) -> Topology:
    """The topology, checked; a ValueError says which figure to change and how."""
    world, per_node = read_count(gpus, "gpus"), read_count(gpus_per_node, "gpus per node")
    if world > per_node and world % per_node:
        below, above = world - world % per_node, world + per_node - world % per_node
        raise ValueError(f"{world:,} GPUs do not fill whole nodes of {per_node}: give {below:,} or {above:,} GPUs, "
                         f"or a node size that divides {world:,}")
    for name, value in (("intra-node bandwidth", intra_bytes_per_s), ("inter-node bandwidth", inter_bytes_per_s)):
        if not value > 0 or math.isinf(value):
            raise ValueError(f"the {name} must be more than 0 (got {value!r}); e.g. 450GB/s for NVLink 4, 400Gbps "
                             "for an NDR InfiniBand port")
    try:
        ratio = float(oversubscription)
    except (TypeError, ValueError):
        raise ValueError(f"oversubscription is a ratio such as 2 (for 2:1), got {oversubscription!r}") from None
    if not 1 <= ratio < math.inf:
        raise ValueError(f"oversubscription is 1 (non-blocking) or more, such as 2 for 2:1 (got {oversubscription!r})")
    if min(intra_latency_s, inter_latency_s) < 0:
        raise ValueError("a latency cannot be negative")
    return Topology(world, min(per_node, world), float(intra_bytes_per_s), float(inter_bytes_per_s), ratio,
                    read_count(rack_nodes, "nodes per rack"), float(intra_latency_s), float(inter_latency_s))


def _timed(op: str, logical_bytes: float, ranks: int, nodes: int, link: str, bytes_per_s: float,
           topo: Topology, calls: int = 1) -> TimedCollective:
    timing = collective_time_s(op, logical_bytes, ranks, bytes_per_s=bytes_per_s,
                               intra_latency_s=topo.intra_latency_s, inter_latency_s=topo.inter_latency_s,
                               nodes=nodes, calls=calls)
    return {"op": op, "link": link, "ranks": ranks, "nodes": nodes, "bytes": logical_bytes, "bytes_per_s": bytes_per_s,
            "wire_bytes_per_gpu": timing["wire_bytes"], "latency_s": timing["latency_s"],
            "bandwidth_s": timing["bandwidth_s"], "time_s": timing["time_s"], "calls": calls}


def _by_link(parts: list[TimedCollective]) -> dict[str, LinkLoad]:
    links: dict[str, LinkLoad] = {name: {"wire_bytes_per_gpu": 0.0, "time_s": 0.0} for name in LINK_NAMES}
    for part in parts:
        links[part["link"]]["wire_bytes_per_gpu"] += part["wire_bytes_per_gpu"]
        links[part["link"]]["time_s"] += part["time_s"]
    return links


def flat_ring_all_reduce(size_bytes: float, topo: Topology) -> FlatRing:
    """One ring over every GPU, paced by its slowest hop."""
    link, bandwidth = topo.link_for(topo.nodes)
    part = _timed("all_reduce", size_bytes, topo.gpus, topo.nodes, link, bandwidth, topo)
    return {**part, "by_link": _by_link([part])}


def hierarchical_all_reduce(size_bytes: float, topo: Topology) -> Hierarchical:
    """Reduce-scatter in the node, all-reduce of 1/g across the nodes (g rings, a NIC each), all-gather in the node."""
    g, k = topo.gpus_per_node, topo.nodes
    phases: list[TimedCollective] = []
    if g > 1:
        phases.append(_timed("reduce_scatter", size_bytes, g, 1, "intra", topo.intra_bytes_per_s, topo))
    if k > 1:
        phases.append(_timed("all_reduce", size_bytes / g, k, k, "inter", topo.inter_for(k), topo))
    if g > 1:
        phases.append(_timed("all_gather", size_bytes, g, 1, "intra", topo.intra_bytes_per_s, topo))
    total = sum(phase["time_s"] for phase in phases)
    return {"phases": phases, "by_link": _by_link(phases), "time_s": total}


def hsdp_by_link(params: int, topo: Topology, precision: str, group_size: int | None = None,
                 units: int = 1) -> HsdpByLink:
    """HSDP's collectives per step (`comm.step_comm`), each on the link its group runs over, with the calls
    FSDP issues per unit (`steptime.collective_calls`)."""
    group = group_size or topo.gpus_per_node
    if group > topo.gpus or topo.gpus % group:
        raise ValueError(f"the shard group {group} must divide the {topo.gpus} GPUs")
    ops = step_comm("hsdp", params, topo.gpus, precision, group)
    parts: list[TimedCollective] = []
    for op, figures in ops.items():
        if op == "all_reduce":
            ranks = topo.gpus // group
            nodes = min(topo.nodes, ranks)  # one rank of each shard group; consecutive ranks fill a node first
        else:
            ranks, nodes = group, math.ceil(group / topo.gpus_per_node)
        link, bandwidth = topo.link_for(nodes)
        calls = collective_calls("hsdp", op, params=params, precision=precision, units=units)
        parts.append(_timed(op, figures["bytes"], ranks, nodes, link, bandwidth, topo, calls))
    return {"group_size": group, "replicas": topo.gpus // group, "ops": parts, "by_link": _by_link(parts),
            "time_s": sum(part["time_s"] for part in parts)}


def topology_section(topo: Topology, params: int, precision: str, units: int) -> TopologySection:
    """The gradients' all-reduce (as DDP reduces them under `precision`) flat and hierarchical, and HSDP in
    shard groups of a node across more than one node, over `units` FSDP units."""
    gradient_bytes = params * implementation("ddp", precision).reduce_bytes
    section: TopologySection = {
        "theory": True,
        "links": topo.document(),
        "all_reduce_bytes": gradient_bytes,
        "flat_ring": flat_ring_all_reduce(gradient_bytes, topo),
        "hierarchical": hierarchical_all_reduce(gradient_bytes, topo),
        "hsdp": None,
    }
    if topo.nodes > 1:
        section["hsdp"] = hsdp_by_link(params, topo, precision, topo.gpus_per_node, max(1, units))
    return section


# ----------------------------------------------------------------------------- scaling


def scaling(gpus_before: Any, gpus_after: Any, throughput_ratio: Any) -> ScalingSection:
    """What "from N1 to N2 GPUs, throughput x s" says, under strong and under weak scaling.

    efficiency = s / (N2/N1). Strong scaling (the same global batch): compute per step falls as N1/N2 and
    the rest (exposed communication, the data loader, the optimizer step) is taken to stay, so its share
    of the step at N1 was (1/s - N1/N2) / (1 - N1/N2). Weak scaling (the same batch per GPU): the step
    took (N2/N1)/s times as long.
    """
    before, after = read_count(gpus_before, "GPUs before"), read_count(gpus_after, "GPUs after")
    if after <= before:
        raise ValueError(f"scaling goes from fewer GPUs to more: {before:,} -> {after:,}; give the larger count second")
    try:
        ratio = float(throughput_ratio)
    except (TypeError, ValueError):
        raise ValueError(f"the throughput ratio is after / before, such as 1.1 for +10%, got {throughput_ratio!r}") from None
    if not 0 < ratio < math.inf:
        raise ValueError(f"the throughput ratio is after / before and must be more than 0, got {throughput_ratio!r}")
    factor = after / before
    share = (1 / ratio - 1 / factor) / (1 - 1 / factor)
    return {
        "theory": True,
        "gpus_before": before,
        "gpus_after": after,
        "gpu_ratio": factor,
        "throughput_ratio": ratio,
        "efficiency": ratio / factor,
        "strong_fixed_share_before": share,
        "strong_explained": 0 <= share <= 1,
        "weak_step_ratio": factor / ratio,
    }


def strong_scaling_speedup(gpu_ratio: float, fixed_share: float) -> float:
    """Amdahl: 1 / ((1 - f)/r + f) for a share f of the step that does not shrink with r times the GPUs."""
    if not 0 <= fixed_share <= 1:
        raise ValueError(f"a share of the step is from 0 to 1, got {fixed_share!r}")
    return 1 / ((1 - fixed_share) / gpu_ratio + fixed_share)


# ----------------------------------------------------------------------------- quiz answers


def _topology(gpus: Any, gpus_per_node: Any, intra_bytes_per_s: Any, inter_bytes_per_s: Any, oversubscription: Any,
              rack_nodes: Any, intra_latency_s: Any, inter_latency_s: Any) -> Topology:
    from ddpfsdp.demos.theory.bandwidth import parse_rate

    return check_topology(gpus=gpus, gpus_per_node=gpus_per_node, intra_bytes_per_s=parse_rate(intra_bytes_per_s),
                          inter_bytes_per_s=parse_rate(inter_bytes_per_s), oversubscription=oversubscription,
                          rack_nodes=rack_nodes, intra_latency_s=float(intra_latency_s),
                          inter_latency_s=float(inter_latency_s))


def q_hierarchical_all_reduce_ms(*, size_bytes: Any, gpus: Any, gpus_per_node: Any, intra_bytes_per_s: Any,
                                 inter_bytes_per_s: Any, oversubscription: Any = 1, rack_nodes: Any = 1,
                                 intra_latency_s: Any = 0.0, inter_latency_s: Any = 0.0) -> float:
    """Milliseconds of a hierarchical all-reduce of `size_bytes` (latency 0 unless given)."""
    topo = _topology(gpus, gpus_per_node, intra_bytes_per_s, inter_bytes_per_s, oversubscription, rack_nodes,
                     intra_latency_s, inter_latency_s)
    return hierarchical_all_reduce(float(parse_bytes(size_bytes)), topo)["time_s"] * 1e3


def q_flat_ring_all_reduce_ms(*, size_bytes: Any, gpus: Any, gpus_per_node: Any, intra_bytes_per_s: Any,
                              inter_bytes_per_s: Any, oversubscription: Any = 1, rack_nodes: Any = 1,
                              intra_latency_s: Any = 0.0, inter_latency_s: Any = 0.0) -> float:
    """Milliseconds of one flat ring all-reduce over every GPU, paced by its slowest hop."""
    topo = _topology(gpus, gpus_per_node, intra_bytes_per_s, inter_bytes_per_s, oversubscription, rack_nodes,
                     intra_latency_s, inter_latency_s)
    return flat_ring_all_reduce(float(parse_bytes(size_bytes)), topo)["time_s"] * 1e3


def q_hierarchical_inter_bytes(*, size_bytes: Any, gpus: Any, gpus_per_node: Any) -> float:
    """Bytes each GPU sends through its NIC in a hierarchical all-reduce: 2(k-1)/k x size / g."""
    topo = check_topology(gpus=gpus, gpus_per_node=gpus_per_node)
    return hierarchical_all_reduce(float(parse_bytes(size_bytes)), topo)["by_link"]["inter"]["wire_bytes_per_gpu"]


def q_scaling_efficiency(*, gpus_before: Any, gpus_after: Any, throughput_ratio: Any) -> float:
    return scaling(gpus_before, gpus_after, throughput_ratio)["efficiency"]


def q_strong_scaling_fixed_share(*, gpus_before: Any, gpus_after: Any, throughput_ratio: Any) -> float:
    """The share of the step at N1 that did not shrink, if compute fell as N1/N2 at a fixed global batch."""
    return scaling(gpus_before, gpus_after, throughput_ratio)["strong_fixed_share_before"]


QUIZ_FUNCTIONS = {
    "hierarchical_all_reduce_ms": q_hierarchical_all_reduce_ms,
    "flat_ring_all_reduce_ms": q_flat_ring_all_reduce_ms,
    "hierarchical_inter_bytes": q_hierarchical_inter_bytes,
    "scaling_efficiency": q_scaling_efficiency,
    "strong_scaling_fixed_share": q_strong_scaling_fixed_share,
}
