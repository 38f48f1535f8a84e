"""Named presets interviews quote: models by their headline size, GPUs, links and clusters.

The drill and the interview draw their configurations from here, and the analytic model answers
them; nothing here is measured. Every hardware figure names its source. Bandwidths are per GPU and
per direction: a ring sends to one neighbour while it receives from the other, so what a rank's
sends get is one direction's share of a link's quoted total. Latencies are per ring step, from
NCCL's own cost model. Torch-free, so the quiz can use it at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels

GB = 10**9


@dataclass(frozen=True)
class ModelPreset:
    """A model as interviews quote it (its headline size) and a GPT-style decoder of its shape.

    The shape feeds what needs tensors or activations (DDP buckets, activation memory): a pre-norm
    decoder with LayerNorm and a 4d GELU MLP (the project's GPT), at the layer count, width and
    vocabulary of the named model. Its parameter count is near, not equal to, the headline size,
    because the named models use other MLPs and attention layouts.
    """

    name: str
    params: int
    layers: int
    d_model: int
    vocab: int
    seq_len: int

    @property
    def shape_params(self) -> int:
        return sum(gpt_param_numels(self.layers, self.d_model, self.vocab, self.seq_len))


MODELS: dict[str, ModelPreset] = {
    preset.name: preset
    for preset in (
        ModelPreset("GPT-3-XL-like", 1_300_000_000, layers=24, d_model=2048, vocab=50257, seq_len=2048),
        ModelPreset("Llama-2-7B-like", 7_000_000_000, layers=32, d_model=4096, vocab=32000, seq_len=4096),
        ModelPreset("Llama-2-13B-like", 13_000_000_000, layers=40, d_model=5120, vocab=32000, seq_len=4096),
        ModelPreset("Llama-2-70B-like", 70_000_000_000, layers=80, d_model=8192, vocab=32000, seq_len=4096),
        ModelPreset("Llama-3.1-405B-like", 405_000_000_000, layers=126, d_model=16384, vocab=128256, seq_len=8192),
    )
}


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int  # as sold, in decimal GB
    bf16_flops_per_s: float  # dense bf16 tensor-core peak (datasheets also quote a 2x "with sparsity" figure)


GPUS: dict[str, GPU] = {
    gpu.name: gpu
    for gpu in (
        # NVIDIA L4 datasheet: BF16 tensor core 242 TFLOPS with sparsity, so 121 dense; 24 GB GDDR6.
        GPU("L4-24GB", 24 * GB, 121e12),
        # NVIDIA A100 datasheet (SXM): BF16 tensor core 312 TFLOPS dense (624 with sparsity); 40 or 80 GB.
        GPU("A100-40GB", 40 * GB, 312e12),
        GPU("A100-80GB", 80 * GB, 312e12),
        # NVIDIA H100 datasheet (SXM5): BF16 tensor core 1,979 TFLOPS with sparsity, so 989 dense; 80 GB HBM3.
        GPU("H100-80GB", 80 * GB, 989e12),
        # NVIDIA H200 datasheet (SXM): the H100's tensor cores (1,979 TFLOPS bf16 with sparsity); 141 GB HBM3e.
        GPU("H200-141GB", 141 * GB, 989e12),
        # AMD Instinct MI300X datasheet: peak bfloat16 1,307.4 TFLOPS dense (2,614.9 with sparsity); 192 GB HBM3.
        GPU("MI300X-192GB", 192 * GB, 1307.4e12),
    )
}


@dataclass(frozen=True)
class Link:
    name: str
    short: str
    bytes_per_s: float  # per GPU, per direction
    latency_s: float  # per ring step

    def describe(self) -> str:
        return f"{self.name}: {self.bytes_per_s / GB:g} GB/s per GPU each way, {self.latency_s * 1e6:g} µs per ring step"


# NCCL's cost model (src/graph/tuning.cc, hwLat, ring algorithm, Simple protocol, which large
# messages use) charges 3.4 µs per ring step over NVLink and 14 µs per step over the network.
NVLINK_STEP_S = 3.4e-6
NETWORK_STEP_S = 14e-6

LINKS: dict[str, Link] = {
    link.short: link
    for link in (
        # H100/H200 SXM datasheets: NVLink 4, 900 GB/s per GPU in both directions together (18 links of 50 GB/s).
        Link("NVLink 4", "nvlink4", 450 * GB, NVLINK_STEP_S),
        # A100 SXM datasheet: NVLink 3, 600 GB/s per GPU in both directions together (12 links of 50 GB/s).
        Link("NVLink 3", "nvlink3", 300 * GB, NVLINK_STEP_S),
        # DGX H100: one ConnectX-7 NDR InfiniBand port of 400 Gb/s per GPU, 50 GB/s each way.
        Link("InfiniBand NDR, 400 Gb/s per GPU", "ndr400", 50 * GB, NETWORK_STEP_S),
        # DGX A100: one ConnectX-6 HDR InfiniBand port of 200 Gb/s per GPU, 25 GB/s each way.
        Link("InfiniBand HDR, 200 Gb/s per GPU", "hdr200", 25 * GB, NETWORK_STEP_S),
    )
}


@dataclass(frozen=True)
class Cluster:
    """A kind of node: its GPU, how many per node, and the links inside a node and between nodes."""

    name: str
    gpu: GPU
    gpus_per_node: int
    intra: Link
    inter: Link


CLUSTERS: dict[str, Cluster] = {
    cluster.name: cluster
    for cluster in (
        Cluster("DGX H100", GPUS["H100-80GB"], 8, LINKS["nvlink4"], LINKS["ndr400"]),
        Cluster("HGX H200", GPUS["H200-141GB"], 8, LINKS["nvlink4"], LINKS["ndr400"]),
        Cluster("DGX A100 80GB", GPUS["A100-80GB"], 8, LINKS["nvlink3"], LINKS["hdr200"]),
        Cluster("DGX A100 40GB", GPUS["A100-40GB"], 8, LINKS["nvlink3"], LINKS["hdr200"]),
    )
}


def find(presets: dict, name: str, what: str):
    """A preset by name, ignoring case; a ValueError naming every choice when there is none."""
    folded = {key.lower(): value for key, value in presets.items()}
    key = str(name).strip().lower()
    if key not in folded:
        raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(presets)}")
    return folded[key]
