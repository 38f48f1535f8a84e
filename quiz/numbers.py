"""The numbers page (`ddpfsdp numbers`, and the app's numbers screen): the figures interviews expect,
each with its source.

Where the analytic model computes a figure (bytes per parameter, model state per strategy, ring wire
factors, pipeline bubbles, compute time from FLOPs), the page calls the same function `ddpfsdp calc`
does, so the two cannot disagree; hardware figures come from the presets the drills use
(demos/theory/presets.py) or, for GPUs and links the presets do not hold, from the datasheets named
here. GB is 10^9 bytes and TFLOP/s 10^12 FLOP/s, as datasheets write them. No torch or textual here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory import presets
from ddpfsdp.demos.theory.estimate import estimate
from ddpfsdp.demos.theory.pipeline import bubble
from ddpfsdp.demos.theory.precision import PRECISIONS, bytes_per_param_breakdown
from ddpfsdp.demos.theory.steptime import FLOPS_PER_PARAM_TOKEN, compute_time_s

GB = 10**9
TERA = 10**12

# Source keys, named once; a section lists those its rows cite.
SOURCES: dict[str, str] = {
    "precision": "demos/theory/precision.py (bytes_per_param_breakdown), as `ddpfsdp calc` computes it",
    "zero": "Rajbhandari et al., 2020, \"ZeRO: Memory Optimizations Toward Training Trillion Parameter "
            "Models\", section 3.1 and Figure 1 (mixed-precision Adam: 2 + 2 + 12 bytes per parameter)",
    "calc": "demos/theory/estimate.py (estimate), the figures `ddpfsdp calc` prints",
    "a100": "NVIDIA A100 datasheet: BF16 tensor core 312 TFLOPS dense (624 with sparsity); 40 or 80 GB; "
            "NVLink 600 GB/s",
    "h100": "NVIDIA H100 datasheet: SXM BF16 1,979 TFLOPS and PCIe 1,513 TFLOPS with sparsity (half dense); "
            "80 GB; NVLink 900 GB/s (SXM); PCIe Gen5 128 GB/s",
    "h200": "NVIDIA H200 datasheet (SXM): BF16 1,979 TFLOPS with sparsity (989 dense); 141 GB HBM3e; "
            "NVLink 900 GB/s",
    "b200": "NVIDIA DGX B200 datasheet: 8 GPUs with 1,440 GB in all (180 GB each), FP8 72 PFLOPS with sparsity "
            "(9 per GPU; BF16 is half of FP8, dense half of sparse: 2,250 TFLOPS); NVLink 5, 1.8 TB/s per GPU",
    "l4": "NVIDIA L4 datasheet: BF16 tensor core 242 TFLOPS with sparsity (121 dense); 24 GB; PCIe Gen4 x16",
    "l40s": "NVIDIA L40S datasheet: BF16 tensor core 362.05 TFLOPS dense (733 with sparsity); 48 GB GDDR6; "
            "PCIe Gen4 x16 64 GB/s both ways together; no NVLink",
    "mi300x": "AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense; 192 GB HBM3",
    "presets": "demos/theory/presets.py (GPUS, LINKS), the figures the drills and interviews use",
    "pcie": "PCI Express base specification: Gen4 16 GT/s and Gen5 32 GT/s per lane, 128b/130b encoding; "
            "x16 gives lanes x rate x 128/130 / 8 bytes per second each way",
    "ib": "InfiniBand Trade Association roadmap: HDR 200 Gb/s, NDR 400 Gb/s, XDR 800 Gb/s per port; one "
          "port per GPU as in DGX systems (ConnectX-6, -7, -8)",
    "nccl": "NCCL's cost model (src/graph/tuning.cc): 3.4 us per ring step over NVLink, 14 us over the network",
    "ring": "demos/base/collectives.py (wire_factor), which `calc` and the measured collective counts use; "
            "Patarasuk and Yuan, 2009, \"Bandwidth optimal all-reduce algorithms for clusters of workstations\"",
    "gpipe": "Huang et al., 2019, \"GPipe\": the bubble is O((K-1)/(M+K-1)) of the step, K stages and M "
             "micro-batches",
    "nccl-tests": "NVIDIA nccl-tests, doc/PERFORMANCE.md: busBw = algBw * 2(n-1)/n for all-reduce, "
                  "(n-1)/n for all-gather and reduce-scatter",
    "megatron": "Narayanan et al., 2021, \"Efficient Large-Scale Language Model Training on GPU Clusters Using "
                "Megatron-LM\", section 2.2: bubble time fraction (p-1)/m, interleaved (p-1)/(v*m)",
    "pipeline": "demos/theory/pipeline.py (bubble), as `ddpfsdp calc --pp` computes it",
    "kaplan": "Kaplan et al., 2020, \"Scaling Laws for Neural Language Models\", section 2.1: C = 6N FLOPs "
              "per token (2N forward, 4N backward), attention left out",
    "palm": "Chowdhery et al., 2022, \"PaLM\", section 4.1 and Appendix B: MFU = model FLOPs per second / peak, with "
            "6N + 12*L*H*Q*T FLOPs per token (attention's own); demos/train/loop.py (flops_per_sample) "
            "counts the same for a demo's measured MFU",
    "steptime": "demos/theory/steptime.py (compute_time_s), as `ddpfsdp calc` and the drills compute it",
    "measure": "demos/measure/memory.py (PEAK_FLOPS_PER_S), the peaks a demo's MFU divides by",
}


@dataclass(frozen=True)
class GpuFigures:
    name: str
    memory_bytes: int
    bf16_flops_per_s: float  # dense
    links: str
    source: str  # a key of SOURCES


# The presets' GPUs first (their figures are the presets' own), then those the presets do not hold.
EXTRA_GPUS: tuple[GpuFigures, ...] = (
    GpuFigures("H100-PCIe-80GB", 80 * GB, 756e12, "PCIe Gen5 x16", "h100"),
    GpuFigures("L40S-48GB", 48 * GB, 362.05e12, "PCIe Gen4 x16", "l40s"),
    GpuFigures("B200-180GB", 180 * GB, 2250e12, "NVLink 5", "b200"),
)
PRESET_GPU_LINKS: dict[str, tuple[str, str]] = {
    "L4-24GB": ("PCIe Gen4 x16", "l4"),
    "A100-40GB": ("NVLink 3", "a100"),
    "A100-80GB": ("NVLink 3", "a100"),
    "H100-80GB": ("NVLink 4 (SXM)", "h100"),
    "H200-141GB": ("NVLink 4 (SXM)", "h200"),
    "MI300X-192GB": ("Infinity Fabric", "mi300x"),
}


def pcie_bytes_per_s(generation: int, lanes: int = 16) -> float:
    """One direction of a PCIe link: lanes x transfer rate x 128/130 encoding, in bytes per second."""
    rate_gt_per_s = {4: 16, 5: 32}[generation]
    return lanes * rate_gt_per_s * 1e9 * 128 / 130 / 8


def infiniband_bytes_per_s(gbit_per_s: int) -> float:
    return gbit_per_s * 1e9 / 8


@dataclass(frozen=True)
class LinkFigures:
    name: str
    bytes_per_s: float  # per GPU, each way
    step_s: float | None  # latency per ring step, where NCCL's model gives one
    source: str


def gpus() -> list[GpuFigures]:
    shown = [GpuFigures(g.name, g.memory_bytes, g.bf16_flops_per_s, *PRESET_GPU_LINKS[g.name])
             for g in presets.GPUS.values()]
    return sorted([*shown, *EXTRA_GPUS], key=lambda g: g.bf16_flops_per_s)


def links() -> list[LinkFigures]:
    preset = [LinkFigures(link.name, link.bytes_per_s, link.latency_s, "presets") for link in presets.LINKS.values()]
    extra = [
        LinkFigures("NVLink 5 (B200)", 900 * GB, None, "b200"),
        LinkFigures("PCIe Gen4 x16", pcie_bytes_per_s(4), None, "pcie"),
        LinkFigures("PCIe Gen5 x16", pcie_bytes_per_s(5), None, "pcie"),
        LinkFigures("InfiniBand XDR, 800 Gb/s per GPU", infiniband_bytes_per_s(800), None, "ib"),
    ]
    return sorted([*preset, *extra], key=lambda link: -link.bytes_per_s)


# --- the page ------------------------------------------------------------------------------------

@dataclass
class Section:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # keys of SOURCES
    numbers: dict[str, float] = field(default_factory=dict)  # the figures behind the cells, for tests


def _gb(value: float) -> str:
    return f"{value / GB:,.1f} GB" if value < 100 * GB else f"{value / GB:,.0f} GB"


def bytes_per_param_section() -> Section:
    section = Section("Bytes per parameter held, by precision and optimizer",
                      ("precision", "optimizer", "params", "grads", "opt. state", "total"), [],
                      notes=["Held between steps: activations, buckets and bf16 compute copies come on top. Adam and "
                             "AdamW keep two states (exp_avg, exp_avg_sq), SGD with momentum one, SGD none."],
                      sources=["precision", "zero"])
    for precision in PRECISIONS:
        for optimizer in ("adamw", "sgd-momentum", "sgd"):
            held = bytes_per_param_breakdown(precision, optimizer)
            section.rows.append((precision, optimizer, str(held["params"]), str(held["grads"]), str(held["optimizer"]),
                                 str(held["total"])))
            section.numbers[f"{precision}/{optimizer}"] = held["total"]
    return section


ZERO_PAPER_EXAMPLE = {"params": "7.5B", "gpus": 64, "precision": "bf16-master"}
ZERO_PAPER_GB = {"ddp": 120.0, "zero1": 31.4, "zero2": 16.6, "zero3": 1.9}  # Figure 1, as printed
PYTORCH_EXAMPLE = {"params": "7B", "gpus": 8, "precision": "bf16-mixed"}
STRATEGY_NAMES = {"ddp": "DDP", "zro": "zro (ZeroRedundancyOptimizer)", "zero1": "ZeRO-1", "zero2": "ZeRO-2",
                  "grad-op": "FSDP grad-op", "zero3": "ZeRO-3 / FSDP full", "hsdp": "HSDP"}


def model_state_section() -> Section:
    paper = estimate(**ZERO_PAPER_EXAMPLE)["strategies"]
    ours = estimate(**PYTORCH_EXAMPLE)["strategies"]
    section = Section(
        "Model state per GPU by strategy (params + grads + optimizer state)",
        ("strategy", "ZeRO paper: 7.5B, 64 GPUs, 16 B/param", "7B, 8 GPUs, bf16-mixed AdamW"), [],
        notes=["Left: the paper's mixed-precision Adam (bf16-master), which Figure 1 prints as 120, 31.4, 16.6 "
               "and 1.9 GB. Right: PyTorch's bf16-mixed (fp32 params, grads and states, 16 B/param), as each "
               "implementation holds it. Working sets and activations come on top; `ddpfsdp calc` adds them."],
        sources=["calc", "zero"])
    for strategy in ("ddp", "zro", "zero1", "zero2", "grad-op", "zero3"):
        left = paper[strategy]["model_state_bytes"] if strategy in ("ddp", "zero1", "zero2", "zero3") else None
        right = ours[strategy]["model_state_bytes"]
        section.rows.append((STRATEGY_NAMES[strategy], "–" if left is None else _gb(left), _gb(right)))
        if left is not None:
            section.numbers[f"paper/{strategy}"] = left
        section.numbers[f"pytorch/{strategy}"] = right
    return section


def gpu_section() -> Section:
    section = Section("GPUs: memory and dense bf16 peak", ("GPU", "memory", "bf16 dense", "linked by", "src"), [],
                      notes=["Datasheets print a second, doubled figure \"with sparsity\" (2:4 structured "
                             "sparsity); training runs dense, so MFU divides by the dense peak."],
                      sources=[])
    for gpu in gpus():
        if gpu.source not in section.sources:
            section.sources.append(gpu.source)
        section.rows.append((gpu.name, _gb(gpu.memory_bytes), f"{gpu.bf16_flops_per_s / TERA:,.0f} TFLOP/s", gpu.links,
                             f"[{section.sources.index(gpu.source) + 1}]"))
        section.numbers[f"{gpu.name}/memory"] = gpu.memory_bytes
        section.numbers[f"{gpu.name}/bf16"] = gpu.bf16_flops_per_s
    section.sources.append("measure")
    section.notes.append(f"A demo's measured MFU divides by the same peaks on A100, H100 and H200 "
                         f"([{len(section.sources)}]); on other GPUs it says n/a.")
    return section


def link_section() -> Section:
    section = Section("Links: bandwidth per GPU, each way", ("link", "GB/s each way", "per ring step", "src"), [],
                      notes=["Datasheets quote NVLink and PCIe with both directions added (NVLink 4: 900 GB/s, "
                             "PCIe Gen5 x16: 128 GB/s); a ring sends one way while it receives the other, so "
                             "each way is what a rank's sends get. InfiniBand is quoted per direction, in bits."],
                      sources=[])
    for link in links():
        if link.source not in section.sources:
            section.sources.append(link.source)
        step = "–" if link.step_s is None else f"{link.step_s * 1e6:g} us"
        section.rows.append((link.name, f"{link.bytes_per_s / GB:,.1f}", step,
                             f"[{section.sources.index(link.source) + 1}]"))
        section.numbers[link.name] = link.bytes_per_s
    section.sources.append("nccl")
    section.notes.append(f"Per ring step: the latency NCCL's model charges each step of a ring ([{len(section.sources)}]).")
    return section


RING_SIZES = (2, 4, 8, 64, 1024)


def collective_section() -> Section:
    section = Section("Ring collectives: bytes each rank sends per byte of buffer",
                      ("collective", "formula", *(f"N={n}" for n in RING_SIZES)), [],
                      notes=["The buffer is the full tensor (all-reduce, broadcast), the gathered output "
                             "(all-gather) or the unreduced input (reduce-scatter). An all-reduce is a "
                             "reduce-scatter and then an all-gather, hence twice. For these three, nccl-tests' "
                             "bus bandwidth is its algorithm bandwidth times the factor."],
                      sources=["ring", "nccl-tests"])
    for op, formula in (("all_reduce", "2(N-1)/N"), ("all_gather", "(N-1)/N"), ("reduce_scatter", "(N-1)/N"),
                        ("broadcast", "(N-1)/N")):
        factors = [wire_factor(op, n) for n in RING_SIZES]
        section.rows.append((op.replace("_", "-"), formula, *(f"{f:.3g}" for f in factors)))
        for n, factor in zip(RING_SIZES, factors):
            section.numbers[f"{op}/{n}"] = factor
    return section


BUBBLE_EXAMPLE = {"pp": 4, "microbatches": 16, "stages_per_rank": 2}


def bubble_section() -> Section:
    p, m, v = BUBBLE_EXAMPLE["pp"], BUBBLE_EXAMPLE["microbatches"], BUBBLE_EXAMPLE["stages_per_rank"]
    plain = bubble(p, m, "1f1b")
    interleaved = bubble(p, m, "interleaved", v)
    section = Section(
        f"Pipeline bubble (p = {p} stages, m = {m} micro-batches, v = {v} stages per rank)",
        ("measure", "formula", "value"), [
            ("idle share of the step (GPipe, 1F1B)", "(p-1)/(m+p-1)", f"{plain['bubble_fraction']:.1%}"),
            ("bubble over ideal time (Megatron-LM)", "(p-1)/m", f"{plain['bubble_ratio']:.1%}"),
            ("the same, interleaved 1F1B", "(p-1)/(v*m)", f"{interleaved['bubble_ratio']:.1%}"),
            ("idle share, interleaved", "(p-1)/(v*m+p-1)", f"{interleaved['bubble_fraction']:.1%}"),
        ],
        notes=["Two ways to state one bubble: GPipe divides the idle time by the whole step, Megatron-LM by "
               "the ideal (bubble-free) time; the step is (1 + (p-1)/m) times the ideal. 1F1B has GPipe's "
               "bubble; it lowers the activations in flight from m micro-batches to at most p."],
        sources=["gpipe", "megatron", "pipeline"],
        numbers={"fraction": plain["bubble_fraction"], "ratio": plain["bubble_ratio"],
                 "interleaved_ratio": interleaved["bubble_ratio"],
                 "interleaved_fraction": interleaved["bubble_fraction"]},
    )
    return section


MFU_EXAMPLE = {"params": 7e9, "tokens": 4 * 2**20, "gpus": 64, "gpu": "H100-80GB", "mfu": 0.4}


def mfu_section() -> Section:
    example = MFU_EXAMPLE
    peak = presets.GPUS[example["gpu"]].bf16_flops_per_s
    step_s = compute_time_s(example["params"], example["tokens"], example["gpus"], peak, example["mfu"])
    return Section(
        "Model FLOP utilisation (MFU)",
        ("quantity", "formula"), [
            ("FLOPs per token, training", f"{FLOPS_PER_PARAM_TOKEN}*N (2N forward + 4N backward)"),
            ("with attention (PaLM)", "6*N + 12*L*H*Q*T  (L layers, H heads, Q head size, T seq)"),
            ("MFU", "FLOPs per token * tokens/s / (GPUs * dense peak)"),
            ("compute time of a step", "6*N*tokens / (GPUs * peak * MFU)"),
            (f"e.g. 7B, 4M tokens, {example['gpus']} {example['gpu']} at {example['mfu']:.0%}", f"{step_s:.1f} s"),
        ],
        notes=["MFU counts the model's FLOPs only; recomputed activations do not raise it (hardware FLOP "
               "utilisation, HFU, counts them). PaLM 540B trained at 46.2% MFU (57.8% HFU)."],
        sources=["kaplan", "palm", "steptime"],
        numbers={"example_step_s": step_s},
    )


def sections() -> list[Section]:
    return [bytes_per_param_section(), model_state_section(), gpu_section(), link_section(), collective_section(),
            bubble_section(), mfu_section()]


def to_dict(page: list[Section] | None = None) -> dict:
    """The page as `ddpfsdp numbers --json` prints it: each section's cells, figures and sources."""
    return {"schema": "ddpfsdp.numbers/1", "sections": [
        {"title": s.title, "columns": list(s.columns), "rows": [list(row) for row in s.rows], "notes": s.notes,
         "sources": [SOURCES[key] for key in s.sources], "numbers": s.numbers} for s in page or sections()]}


def render(page: list[Section] | None = None) -> Group:
    """The page as rich renderables; every cell folds rather than being cut, so nothing is lost at 80 columns."""
    parts: list = [Text("The numbers: figures with their sources (GB = 10^9 bytes; theory unless a source "
                        "says measured)", style="bold")]
    for section in page or sections():
        table = Table(title=section.title, title_justify="left", title_style="bold", expand=False,
                      show_edge=False, pad_edge=False, header_style="bold")
        for column in section.columns:
            table.add_column(column, overflow="fold")
        for row in section.rows:
            table.add_row(*row)
        parts += [Text(""), table]
        parts += [Text(note, style="dim") for note in section.notes]
        for number, key in enumerate(section.sources, start=1):
            parts.append(Text(f"[{number}] {SOURCES[key]}", style="italic"))
    return Group(*parts)
