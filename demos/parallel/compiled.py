"""torch.compile in the training demos (`--compile`), and what torch records of it.

    ddpfsdp demo ddp --procs 2 --model tiny --compile --compile-backend aot_eager --bucket-mb 1

Where compile goes (`parallel.parallelize`), as torchtitan does it:
  DDP, zro    the DDP module compiled after wrapping. Dynamo graph-breaks in DDP's own forward
               (`DistributedDataParallel._inside_ddp_forward` is on its skip list) and compiles the
               model's forward while DDP is the active module; with `torch._dynamo.config.optimize_ddp`
               at its default ("ddp_optimizer"), convert_frame.py then hands the graph to DDPOptimizer
               (torch/_dynamo/backends/distributed.py), which splits it where DDP's buckets end, so the
               backward of each piece finishes a bucket whose all-reduce can start while the next
               piece's backward runs. Nothing in it is specific to CUDA: it splits on CPU and gloo too.
  FSDP2        each block replaced by its compiled wrapper, then `fully_shard` on each: the
               all-gathers and reduce-scatters stay outside the compiled code, in FSDP's hooks on the
               wrapper (dynamo-disabled in torch, _fsdp_common._dynamo_disable), one unit per block.
  FSDP1        not offered: torch traces FSDP1 only as a whole wrapped model with its modules left
               unspecialized (torch/_dynamo/variables/builder.py, FSDPManagedNNModuleVariable, and only
               with use_orig_params=True); the per-block order is FSDP2's.
What is reported is what torch records: every graph handed to the backend (our backend wraps the real
one and keeps each graph's parameters, by the source Dynamo gives each input), the graph breaks and
their reasons (`torch._dynamo.utils.counters`), and the compile time by phase
(`torch._dynamo.utils.compilation_time_metrics`), each as the difference over the run, since both are
kept per process and compare trains four runs in one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from typing import Any, Mapping, Sequence, TypedDict

from ddpfsdp.demos.result.checks import Check

# DDPOptimizer's first piece is cut at torch.distributed._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) whatever
# DDP's bucket_cap_mb, and it asserts that this is no larger than the other pieces' cap.
DDP_OPTIMIZER_FIRST_BUCKET_MB = 1.0
# compilation_time_metrics' keys for the time spent compiling: Dynamo's frames (tracing and, inside it,
# the backend's forward compile) and the backward graphs, compiled lazily at the first backward.
COMPILE_TIME_KEYS = ("_compile.compile_inner", "backward._backward_impl")
REASON_CHARS = 240


def pick_backend(requested: str, device_type: str) -> tuple[str, str]:
    """(backend, why): the one asked for, or for auto inductor where it can build kernels, else aot_eager."""
    if requested != "auto":
        return requested, "asked for with --compile-backend"
    if device_type == "cuda":
        return "inductor", "auto: a GPU, where inductor generates Triton kernels"
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler:
        return "inductor", f"auto: inductor, with the C++ compiler {compiler} for its CPU kernels"
    return "aot_eager", ("auto: no C++ compiler found, which inductor needs on the CPU; aot_eager traces forward "
                         "and backward as inductor would and runs the graphs eagerly")


def _source_name(source: Any) -> str:
    name = getattr(source, "name", "")
    return name() if callable(name) else str(name)  # a method before torch 2.12, a property since


def parameter_name(source: Any) -> str | None:
    """The parameter a graph input is, as a dotted name under the compiled module, from its Dynamo source
    (`L['self']._modules['blocks']._modules['0']._parameters['weight']` -> `blocks.0.weight`); None for
    an input that is not a parameter."""
    text = _source_name(source) if source is not None else ""
    if "_parameters[" not in text:
        return None
    return ".".join(re.findall(r"\['([^']+)'\]", text)[1:])


class GraphBreak(TypedDict):
    reason: str
    count: int


class CompileReport(TypedDict):
    """What a compiled run's result says of the compile, as torch recorded it."""

    backend: str
    backend_reason: str
    compiled_modules: list[str]
    compile_s: float
    compile_s_after_warmup: float
    warmup_step_s: list[float]
    graphs: int
    graphs_in_timed_steps: int
    graphs_after_warmup: int
    dynamo_graphs: int
    graph_breaks: int
    graph_break_reasons: list[GraphBreak]
    graph_params: list[list[str]]
    ddp_buckets: list[list[str]] | None
    param_bytes: dict[str, int] | None


class Compiled:
    """One run's compile: the backend, and every graph torch hands it, with the parameters each takes."""

    def __init__(self, requested: str, device_type: str) -> None:
        import torch._dynamo

        # A fresh start for each run (compare compiles four models in one process): what was compiled
        # before is forgotten, so this run's compile time and graphs are its own, and no earlier run's
        # recompilations count against Dynamo's recompile limit.
        torch._dynamo.reset()
        self.backend, self.reason = pick_backend(requested, device_type)
        self._inner = torch._dynamo.lookup_backend(self.backend)
        self.graphs: list[list[str]] = []  # per graph compiled, in order: the parameters it takes
        self.modules: list[str] = []  # the modules compiled: the DDP module, or each block
        self._marks: dict[str, tuple[dict, dict, int]] = {}
        self.mark("start")

    def __call__(self, gm: Any, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
        """The backend torch.compile is given: note the graph, then compile it with the real backend."""
        sources = [getattr(node, "_dynamo_source", None) for node in gm.graph.find_nodes(op="placeholder")]
        self.graphs.append([name for name in map(parameter_name, sources) if name is not None])
        return self._inner(gm, example_inputs, **kwargs)

    def compile_ddp(self, ddp: Any) -> None:
        """Compile the DDP module in place (its `_call_impl`): it stays the DDP object the measurements
        read (its reducer, its hooks), and DDP's forward runs inside the compiled call, as DDPOptimizer needs."""
        ddp.compile(backend=self)
        self.modules = ["<DDP>"]

    def compile_blocks(self, model: Any) -> None:
        """Each block replaced by its compiled wrapper (an OptimizedModule), as torchtitan's apply_compile
        does: `fully_shard` on the wrapper puts FSDP's hooks on it, outside the compiled forward, where
        they run in eager (in-place `Module.compile` would compile the hooks' caller and break at each)."""
        import torch

        for index, block in enumerate(model.blocks):
            model.blocks[index] = torch.compile(block, backend=self)
        self.modules = [f"blocks.{index}" for index in range(len(model.blocks))]

    def mark(self, phase: str) -> None:
        """Remember torch's counters and compile times as they stand at the end of `phase`."""
        from torch._dynamo.utils import compilation_time_metrics, counters

        snapshot = {group: dict(values) for group, values in counters.items()}
        times = {key: sum(compilation_time_metrics.get(key, [])) for key in COMPILE_TIME_KEYS}
        self._marks[phase] = (snapshot, times, len(self.graphs))

    def _between(self, first: str, last: str) -> tuple[dict[str, Counter], float, int]:
        before, before_s, before_graphs = self._marks[first]
        after, after_s, after_graphs = self._marks[last]
        diff = {group: Counter({k: v - before.get(group, {}).get(k, 0) for k, v in values.items()
                                if v - before.get(group, {}).get(k, 0) > 0})
                for group, values in after.items()}
        seconds = sum(after_s[key] - before_s[key] for key in COMPILE_TIME_KEYS)
        return diff, seconds, after_graphs - before_graphs

    def report(self, warmup_steps_s: Sequence[float], ddp_buckets: list[list[str]] | None,
               param_bytes: dict[str, int] | None) -> CompileReport:
        """What the run's result says of the compile (marks "warm-up", "timed" and "end" made)."""
        warm, warm_s, warm_graphs = self._between("start", "warm-up")
        timed, _, timed_graphs = self._between("warm-up", "timed")
        later, later_s, later_graphs = self._between("warm-up", "end")
        breaks = warm.get("graph_break", Counter()) + later.get("graph_break", Counter())
        return {
            "backend": self.backend,
            "backend_reason": self.reason,
            "compiled_modules": self.modules,
            "compile_s": warm_s,
            # the communication and memory steps run under hooks of their own, which may recompile
            "compile_s_after_warmup": later_s,
            "warmup_step_s": list(warmup_steps_s),
            "graphs": warm_graphs,
            "graphs_in_timed_steps": timed_graphs,
            "graphs_after_warmup": later_graphs,
            "dynamo_graphs": warm.get("stats", {}).get("unique_graphs", 0),
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [{"reason": _short(reason), "count": count} for reason, count in breaks.most_common()],
            "graph_params": self.graphs,
            "ddp_buckets": ddp_buckets,  # DDP and zro: the rebuilt buckets, first bucket first
            "param_bytes": param_bytes,
        }

    def describe(self) -> str:
        return f"compiled ({self.backend})"


def _short(reason: str) -> str:
    """A graph break's reason: its first line and its explanation, as Dynamo words them."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    kept = [lines[0]] + [line for line in lines[1:] if line.startswith("Explanation:")][:1] if lines else []
    text = re.sub(r"[^\s`'\"]*/site-packages/", "", " ".join(kept))  # torch's files by their place in the package
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def ddp_buckets(ddp: Any) -> tuple[list[list[str]], dict[str, int]]:
    """DDP's gradient buckets as its reducer holds them after the rebuild, and the bytes of each parameter.

    The buckets are the parameter names of each, from DDP's own logging data
    (`rebuilt_per_bucket_param_indices`: indices into the parameters DDP registered with the reducer, the
    module's trainable ones in module order), the first bucket (the model's last parameters) first."""
    data = ddp._get_ddp_logging_data()
    indices = data.get("rebuilt_per_bucket_param_indices") or ""
    params = [(name, p) for name, p in ddp.module.named_parameters() if p.requires_grad]
    names = [name for name, _ in params]
    buckets = [[names[int(i)] for i in bucket.split()] for bucket in str(indices).split(",") if bucket.strip()]
    return buckets, {name: p.numel() * p.element_size() for name, p in params}


# A piece and its bucket may disagree on the tensors at their boundary: DDPOptimizer counts parameters in
# the reverse of the order the forward graph uses them, DDP's rebuilt buckets in the order their gradients
# became ready (torch's own docstring of DDPOptimizer says its splits need not align with DDP's). A bias
# or a LayerNorm on the other side moves a fraction of a percent; a piece that misses a tenth of its
# bucket's bytes is cut elsewhere.
SPLIT_BYTES_REL = 0.10


def ddp_compiled_graph_split_at_buckets(graph_params: Sequence[Sequence[str]], buckets: Sequence[Sequence[str]],
                                        param_bytes: Mapping[str, int]) -> Check:
    """The compiled forward came in as many pieces as DDP has buckets, and each piece (in forward order)
    holds the bytes of the bucket it ends, up to the tensors at the boundary (SPLIT_BYTES_REL)."""
    pieces = [list(p) for p in graph_params if p]  # graphs without parameters (DDP's own glue) aside
    forward_buckets = [list(b) for b in reversed(buckets)]  # DDP's first bucket holds the last parameters

    def size(names: Sequence[str]) -> int:
        return sum(param_bytes.get(name, 0) for name in set(names))

    shares, moved = [], []
    for piece, bucket in zip(pieces, forward_buckets):
        shared = size(set(piece) & set(bucket))
        shares.append(shared / max(size(piece), size(bucket), 1))
        moved.extend(sorted(set(piece) ^ set(bucket)))
    same_count = len(pieces) == len(forward_buckets)
    passed = len(pieces) >= 2 and same_count and all(share >= 1 - SPLIT_BYTES_REL for share in shares)
    mib = [f"{size(p) / 2**20:.3f}" for p in pieces]
    detail = (f"{len(pieces)} compiled pieces (DDPOptimizer), {len(forward_buckets)} DDP buckets after the rebuild; "
              f"piece MiB {', '.join(mib)} (forward order); bytes each piece shares with its bucket: "
              f"{', '.join(f'{share:.1%}' for share in shares)}")
    if len(pieces) < 2:
        detail += "; one piece is no split (a bucket cap below the model's size makes several buckets)"
    elif not same_count:
        detail += ("; the counts differ (DDPOptimizer cuts its first piece at 1 MiB, DDP its first bucket at the "
                   "whole bucket_cap_mb when one is given: they agree at --bucket-mb 1 and at the default)")
    detail += f"; tensors on the other side of a boundary: {', '.join(dict.fromkeys(moved)) or 'none'}"
    return Check("ddp_compiled_graph_split_at_buckets", passed, detail,
                 {"pieces": pieces, "buckets": forward_buckets, "shared": shares})


def compiled_before_timed_steps(reports: Mapping[str, Mapping[str, Any]]) -> Check:
    """Each run's graphs were compiled in its warm-up: the timed steps ran compiled code, no compilation.
    `reports`: run name -> its compile report."""
    parts, passed = [], bool(reports)
    for name, report in reports.items():
        timed = report["graphs_in_timed_steps"]
        passed = passed and report["graphs"] > 0 and timed == 0
        steps = ", ".join(f"{s:.2f}" for s in report["warmup_step_s"])
        parts.append(f"{name}: {report['graphs']} graphs compiled in {report['compile_s']:.2f} s during the warm-up "
                     f"(its steps took {steps} s), {timed} in the timed steps")
    return Check("compiled_before_timed_steps", passed, "; ".join(parts),
                 {name: {"graphs": r["graphs"], "graphs_in_timed_steps": r["graphs_in_timed_steps"]}
                  for name, r in reports.items()})


def fsdp_blocks_compiled_without_graph_breaks(report: Mapping[str, Any], blocks: int) -> Check:
    """Every block compiled on its own before fully_shard, and no graph break: FSDP's hooks sit on each
    compiled wrapper and run in eager, outside the graphs, instead of breaking them."""
    compiled, graphs, breaks = len(report["compiled_modules"]), report["graphs"], report["graph_breaks"]
    passed = compiled == blocks > 0 and graphs >= 1 and breaks == 0
    detail = (f"{compiled} of {blocks} blocks compiled, then sharded; {graphs} graphs compiled (blocks of one class "
              f"share a graph: their parameters are its inputs), {breaks} graph breaks")
    if breaks:
        detail += f": {', '.join(r['reason'] for r in report['graph_break_reasons'])}"
    return Check("fsdp_blocks_compiled_without_graph_breaks", passed, detail,
                 {"compiled_modules": compiled, "blocks": blocks, "graphs": graphs, "graph_breaks": breaks})
