"""One command for a machine with CUDA GPUs: every GPU path this project has, in one report.

    python tests/benchmarks/gpu_check.py                   # everything; report in ./gpu-check-report/
    python tests/benchmarks/gpu_check.py --out DIR         # the report in DIR
    python tests/benchmarks/gpu_check.py --dry-run         # list what it would run (no GPU, no torch)
    python tests/benchmarks/gpu_check.py --dry-run --gpus 8

What it runs, N being the GPUs visible (`ddpfsdp doctor` counts them first):
  machine      `ddpfsdp doctor`: torch's build, the GPUs, NCCL
  refusal      a training demo asked for one rank on one GPU (--ranks-per-gpu 1): refused before launch,
               naming only commands that run here
  N GPUs       ddp (several buckets), zro, FSDP2 and FSDP1 with full, grad-op and hybrid sharding,
               FSDP2 with --tp 2, compare, every one with its timeline; FSDP2 full writes its `--trace`.
               Where the GPUs are fewer than the ranks (2; hybrid and --tp 2: 4), the ranks share one
               GPU over gloo with CUDA tensors (--gpus 1 --ranks-per-gpu K): real CUDA memory, time
               that is not NCCL's, and the checks about time reported as not judged
  1 GPU        the same loop as a world of one rank (tests/benchmarks/gpu_rank_check.py): ddp, with
               the peak held against `torch.cuda.memory_stats` and a probe of the cuBLAS workspaces,
               zro, FSDP2 and FSDP1 full and grad-op, and a `--trace` of the DDP step
  concepts     every concept demo on N GPUs (one GPU: 2 ranks sharing it; checkpoint on one rank; the
               ring all-reduce, written with point-to-point sends gloo cannot make with CUDA tensors,
               must be refused before launch there)
  pipeline     `demo pipeline`: 1F1B with 8 micro-batches, and --compare, on 2 GPUs (NCCL) or on 2 ranks
               sharing one over gloo (the activations between stages cross through host memory there)
  moe          `demo moe`: expert parallelism on 4 GPUs as two ep groups of 2 (NCCL), on 2 GPUs, or on 2
               ranks sharing one over gloo, whose all_to_all_single has a CUDA path
  at scale     `demo straggler` on 2 GPUs (or 2 ranks sharing one), `demo checkpoint-resume`: FSDP2 saved
               on those 2 ranks, resumed on 4 in a second launch (4 GPUs, or 4 ranks sharing), and
               `demo local-sgd` (DDP, then torch's post-local SGD) on the same 2
  cp           `demo cp` on the tiny GPT over N GPUs (NCCL: cp 2 x dp N/2, its ring's sends on CUDA tensors);
               on one GPU, ranks sharing it run on gloo, which cannot send CUDA tensors: refused before launch
  faults       two of the failure lab's bugs, broken then fixed (on CPU processes: the lab runs there)
  katas        every kata's reference solution through `ddpfsdp kata check` (tests/benchmarks/gpu_kata_check.py):
               on min(N, 4) GPUs over NCCL with CUDA tensors; on one GPU the katas written with point-to-point
               messages refused before launch, the others on 2 ranks sharing it over gloo
  MFU          on N GPUs FSDP2 on the large preset in bf16-mixed, on one GPU DDP at one rank (FSDP2 at
               one rank runs about twice DDP's step, so its MFU says nothing of the demo), against
               torchtitan's published order of magnitude; DDP eager and `--compile` at one rank on the
               same preset, MFU of each, and the compiled step against the eager one (on one GPU the
               eager run is the MFU item's: one run serves both)
  compiled     `demo ddp --compile` on N GPUs, or on 2 ranks sharing one: DDPOptimizer's pieces against
               DDP's buckets on CUDA
  guard        a run that cannot fit is refused before launch, and one that fits is not

Each item runs in its own process group with its own time budget, so one that fails, hangs or runs
out of time is reported and the rest go on; nothing it started is left running. The whole stays
inside --budget-s (default 540 s, so that with start-up the check ends within 10 minutes); an item
there is no time left for is reported as not run. The report is `gpu-check.md` and `gpu-check.json`
in the output folder, with the traces the trace items wrote; every item says pass or fail with its
numbers. The exit status is 0 when nothing failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = "gpu-check-report"
DEFAULT_BUDGET_S = 540.0
MIN_ITEM_S = 20.0  # an item with less time than this left is not started
COLLECTIVE_TIMEOUT_S = "60"  # a hung collective fails the item well inside its budget
MARKER_ENV = "DDPFSDP_GPU_CHECK_ITEM"
MIB = 1024**2

CONCEPTS = ["sampler", "allreduce", "reduce-scatter", "wrap", "reshard", "comm", "no-sync", "equivalence", "checkpoint"]
ONE_RANK_CONCEPTS = ("checkpoint",)  # the concept demo the launcher runs on one rank
SHARDINGS = ("full", "grad-op", "hybrid")
FAULTS = ("uneven-inputs", "accumulation-sync")  # two of the failure lab's bugs, each broken then fixed
POINT_TO_POINT_CONCEPTS = ("allreduce",)  # refused on ranks sharing a GPU (gloo sends only host memory)

# torchtitan's published MFU for FSDP2 in bf16 (docs/performance.md): Llama 3.1 8B on 8 to 128 H100s
# reaches 33% to 39%; Llama 3 8B on 64 A100s 56% to 58%. A smaller model does less work per byte
# moved, so the check asks for the same order of magnitude: at least a tenth of the lower figure.
TORCHTITAN_MFU = {"H100": 0.33, "H200": 0.33, "A100": 0.56}
TORCHTITAN_SOURCE = "torchtitan docs/performance.md (FSDP2, bf16; 8B Llama)"

# At one rank FSDP has nobody to shard with: FSDP2 issues no all-gather or reduce-scatter and FSDP1
# falls back to NO_SHARD's all-reduce (seen on gloo, torch 2.13), so these claims have nothing to show.
NOT_JUDGED_AT_ONE_RANK = {
    "comm_matches_theory": "one rank sends nothing to compare",
    "fsdp_reduce_scatters_grads": "no reduce-scatter at one rank",
    "fsdp_all_gathers_params": "no all-gather at one rank",
    "fsdp_reshards_after_forward": "nothing is gathered, so nothing is freed after forward",
    "fsdp_prefetches_next_unit": "no all-gather to prefetch",
}


@dataclass
class Item:
    key: str  # short and unique, used in file names
    title: str
    group: str  # machine | refusal | N GPUs | 1 GPU | concepts | pipeline | moe | at scale | faults | MFU | guard | katas
    argv: list[str]  # the command, from the interpreter on
    budget_s: float
    evaluate: str  # a name in EVALUATORS
    expect: dict[str, Any] = field(default_factory=dict)  # what the evaluator holds the outcome to
    skip: str | None = None  # why it does not run on this machine


@dataclass
class Outcome:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    left_running: int = 0
    data: dict[str, Any] | None = None  # the JSON a rank-check item wrote


@dataclass
class Verdict:
    status: str  # pass | fail | skip | not run
    numbers: dict[str, Any]
    detail: str


# ----------------------------------------------------------------------------- the plan


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def _cli(python: str, *args: str) -> list[str]:
    return [python, "-m", "ddpfsdp.quiz.cli", *args]


def _rank(python: str, data: Path, demo: str, *args: str) -> list[str]:
    return [python, str(HERE / "gpu_rank_check.py"), "demo", str(data), demo, *args]


def _placed(gpus: int, ranks: int) -> tuple[list[str], int, str]:
    """The flags that put a run needing `ranks` ranks on this machine, its world, and where that is:
    one rank per GPU on all N GPUs where there are enough, else `ranks` ranks sharing one GPU."""
    if gpus >= ranks:
        return ["--gpus", str(gpus)], gpus, _gpus(gpus)
    # Sharing, gloo stages every collective through host memory: the small preset keeps the step short.
    return (["--gpus", "1", "--ranks-per-gpu", str(ranks), "--model", "small"], ranks,
            f"{ranks} ranks sharing 1 GPU (small)")


def _concept_placed(gpus: int, ranks: int) -> tuple[list[str], int, str]:
    flags, world, where = _placed(gpus, ranks)
    return [f for f in flags if f not in ("--model", "small")], world, where.replace(" (small)", "")


def _training_items(gpus: int, python: str, out: Path) -> list[Item]:
    """ddp, zro, FSDP2 and FSDP1 in every sharding, FSDP2 with --tp 2, and compare, on all N GPUs, or
    on ranks sharing one GPU where N is too few for the run."""
    run = ["--steps", "8", "--timeout-s", COLLECTIVE_TIMEOUT_S, "--json"]
    two, world, where = _placed(gpus, 2)
    items = [
        Item(f"ddp-{gpus}gpu", f"demo ddp on {where} (1 MiB buckets)", "N GPUs",
             _cli(python, "demo", "ddp", "--bucket-mb", "1", *two, *run), 120, "demo", {"world": world}),
        Item(f"zro-{gpus}gpu", f"demo zro on {where}", "N GPUs", _cli(python, "demo", "zro", *two, *run), 120,
             "demo", {"world": world}),
    ]
    for api in (2, 1):
        for sharding in SHARDINGS:
            args = ["--fsdp-api", str(api), "--sharding", sharding]
            placed, world, where = _placed(gpus, 2)
            if sharding == "hybrid":
                args += ["--replicas", "2"]
                # 2 replicas of at least 2 ranks each: 4, 6, 8 ... GPUs, else 4 ranks on one
                placed, world, where = _placed(gpus if gpus % 2 == 0 else 1, 4)
            expect: dict[str, Any] = {"world": world}
            if api == 2 and sharding == "full":
                trace = out / "trace-fsdp2-full.json"
                args += ["--trace", str(trace)]
                expect["trace"] = str(trace)
            items.append(Item(f"fsdp{api}-{sharding}-{gpus}gpu", f"demo fsdp FSDP{api} {sharding} on {where}",
                              "N GPUs", _cli(python, "demo", "fsdp", *args, *placed, *run), 120, "demo", expect))
    placed, world, where = _placed(gpus if gpus % 2 == 0 else 1, 4)
    items.append(Item(f"fsdp2-tp2-{gpus}gpu", f"demo fsdp --tp 2 on {where}", "N GPUs",
                      _cli(python, "demo", "fsdp", "--tp", "2", *placed, *run), 120, "demo", {"world": world}))
    two, world, where = _placed(gpus, 2)
    items.append(Item(f"compare-{gpus}gpu", f"demo compare on {where}", "N GPUs",
                      _cli(python, "demo", "compare", *two, *run), 180, "demo", {"world": world}))
    return items


def _one_gpu_items(python: str, out: Path, work: Path) -> list[Item]:
    """The training loop as a world of one rank: what a single GPU can run of it."""
    common = ["--model", "base", "--steps", "8"]
    trace = out / "trace-ddp-1gpu.json"
    items = [Item("ddp-1rank", "ddp as one rank on 1 GPU: peak vs torch.cuda.memory_stats, cuBLAS workspaces, --trace",
                  "1 GPU", _rank(python, work / "ddp-1rank.json", "ddp", *common, "--trace", str(trace)), 90, "peak",
                  {"world": 1, "trace": str(trace), "data": str(work / "ddp-1rank.json")}),
             Item("zro-1rank", "zro as one rank on 1 GPU", "1 GPU", _rank(python, work / "zro-1rank.json", "zro", *common),
                  90, "demo", {"world": 1, "data": str(work / "zro-1rank.json")})]
    for api in (2, 1):
        for sharding in ("full", "grad-op"):
            key = f"fsdp{api}-{sharding}-1rank"
            data = work / f"{key}.json"
            items.append(Item(key, f"fsdp FSDP{api} {sharding} as one rank on 1 GPU", "1 GPU",
                              _rank(python, data, "fsdp", "--fsdp-api", str(api), "--sharding", sharding, *common),
                              90, "demo", {"world": 1, "data": str(data), "not_judged": NOT_JUDGED_AT_ONE_RANK}))
    return items


MFU_ARGS = ["--model", "large", "--precision", "bf16-mixed", "--batch-size", "8", "--steps", "10", "--no-timeline"]


def _ddp_one_rank(python: str, work: Path, key: str, title: str, *extra: str, budget_s: float = 150,
                  **expect: Any) -> Item:
    """DDP at one rank on 1 GPU, GPT large in bf16-mixed, judged by its MFU."""
    data = work / f"{key}.json"
    return Item(key, title, "MFU", _rank(python, data, "ddp", *MFU_ARGS, *extra), budget_s, "mfu",
                {"world": 1, "data": str(data), "not_judged": NOT_JUDGED_AT_ONE_RANK, **expect})


def _eager_key(gpus: int) -> str:
    """The item whose run is DDP eager at one rank: on one GPU the MFU item itself, else one of its own."""
    return "mfu-1rank" if gpus < 2 else "mfu-ddp-eager-1rank"


def _mfu_item(gpus: int, python: str, work: Path) -> Item:
    if gpus >= 2:
        return Item(f"mfu-{gpus}gpu", f"MFU: FSDP2 full, GPT large, bf16-mixed, on {_gpus(gpus)}", "MFU",
                    _cli(python, "demo", "fsdp", *MFU_ARGS, "--gpus", str(gpus), "--timeout-s", COLLECTIVE_TIMEOUT_S,
                         "--json"), 150, "mfu", {"world": gpus})
    # At one rank FSDP2 has nobody to shard with and still pays its copies (122-133 ms a step against
    # DDP's 65 ms for GPT large on one H200): DDP's MFU is the one that says what the loop reaches.
    # The same run is the eager side of the compiled comparison.
    return _ddp_one_rank(python, work, _eager_key(gpus), "MFU: DDP eager, GPT large, bf16-mixed, one rank on 1 GPU "
                         "(also the eager side of the compiled comparison)")


def _compiled_items(gpus: int, python: str, work: Path) -> list[Item]:
    """DDP eager and compiled at one rank on the large preset in bf16-mixed (MFU of each, measured in
    turn on one GPU; on one GPU the eager run is the MFU item's), and the compiled DDP demo on 2 ranks
    (over NCCL on N GPUs, sharing the GPU over gloo on one), whose checks include DDPOptimizer's pieces
    against DDP's buckets on real CUDA."""
    eager = _eager_key(gpus)
    items = [] if gpus < 2 else [
        _ddp_one_rank(python, work, eager, "MFU: DDP eager, GPT large, bf16-mixed, one rank on 1 GPU")]
    items.append(_ddp_one_rank(python, work, "mfu-ddp-compiled-1rank",
                               "MFU: DDP compiled, GPT large, bf16-mixed, one rank on 1 GPU", "--compile",
                               budget_s=240, eager=eager))
    placed, world, where = _placed(gpus, 2)
    items.append(Item(f"ddp-compiled-{gpus}gpu", f"demo ddp --compile on {where} (1 MiB buckets: the split)",
                      "N GPUs", _cli(python, "demo", "ddp", "--compile", "--bucket-mb", "1", *placed,
                                     "--steps", "8", "--timeout-s", COLLECTIVE_TIMEOUT_S, "--json"),
                      180, "demo", {"world": world}))
    return items


def compare_compiled(rows: list[tuple[Item, Verdict, Outcome | None]]) -> list[tuple[Item, Verdict, Outcome | None]]:
    """Each compiled run beside its eager run: the eager MFU and step, and how much faster the compiled step
    is, in the compiled run's numbers (where both ran and reported a step)."""
    verdicts = {item.key: verdict for item, verdict, _ in rows}
    out = []
    for item, verdict, outcome in rows:
        eager = verdicts.get(item.expect.get("eager", ""))
        step_ms, eager_ms = verdict.numbers.get("step_ms"), eager.numbers.get("step_ms") if eager else None
        if eager is not None and step_ms and eager_ms:
            speedup = eager_ms / step_ms
            numbers = {**verdict.numbers, "eager_mfu": eager.numbers.get("mfu"), "eager_step_ms": eager_ms,
                       "speedup_vs_eager": round(speedup, 3)}
            detail = f"{verdict.detail}; compiled step {step_ms} ms against eager {eager_ms} ms: {speedup:.2f}x"
            verdict = Verdict(verdict.status, numbers, detail)
        out.append((item, verdict, outcome))
    return out


def _guard_item(gpus: int, python: str, work: Path) -> Item:
    title = "guard: a run that cannot fit is refused before launch"
    if gpus >= 2:
        return Item("guard", title, "guard",
                    _cli(python, "demo", "ddp", "--gpus", str(gpus), "--model", "xl", "--batch-size", "256", "--json"),
                    60, "guard_cli")
    data = work / "guard.json"
    return Item("guard", title + " (the guard asked for one GPU)", "guard",
                [python, str(HERE / "gpu_rank_check.py"), "guard", str(data)], 60, "guard_rank", {"data": str(data)})


def _pipeline_items(gpus: int, python: str) -> list[Item]:
    """`demo pipeline`: 1F1B with 8 micro-batches, and GPipe, 1F1B and interleaved compared, on 2 GPUs over
    NCCL, or on 2 ranks sharing one over gloo (the activations between stages then cross through host
    memory, as gloo's sends need)."""
    placed, world, where = _concept_placed(min(gpus, 2), 2)  # two stages: the tiny preset's blocks and M fit them
    run = ["--timeout-s", COLLECTIVE_TIMEOUT_S, "--json"]
    return [
        Item(f"pipeline-1f1b-{gpus}gpu", f"demo pipeline --schedule 1f1b --microbatches 8 on {where}", "pipeline",
             _cli(python, "demo", "pipeline", *placed, "--schedule", "1f1b", "--microbatches", "8", *run), 120,
             "demo", {"world": world}),
        Item(f"pipeline-compare-{gpus}gpu", f"demo pipeline --compare on {where}", "pipeline",
             _cli(python, "demo", "pipeline", *placed, "--compare", *run), 150, "demo", {"world": world}),
    ]


def _katas_item(gpus: int, python: str, work: Path) -> Item:
    data = work / "katas.json"
    where = f"{min(gpus, 4)} GPUs (NCCL)" if gpus >= 2 else "2 ranks sharing 1 GPU (gloo), point-to-point katas refused"
    return Item("katas", f"every kata's reference solution, ddpfsdp kata check --reference, on {where}", "katas",
                [python, str(HERE / "gpu_kata_check.py"), str(data), "--gpus", str(gpus)], 180, "katas",
                {"data": str(data)})


def _moe_items(gpus: int, python: str) -> list[Item]:
    """`demo moe`: the experts over two ep groups of 2 on 4 GPUs (their all-to-alls and the replicas'
    gradient all-reduce over NCCL), over both of 2 GPUs, or over 2 ranks sharing one GPU over gloo."""
    if gpus >= 4:
        placed, world, where = ["--gpus", "4", "--ep", "2"], 4, "4 GPUs (two ep groups of 2)"
    else:
        placed, world, where = _concept_placed(min(gpus, 2), 2)
    return [Item(f"moe-{gpus}gpu", f"demo moe on {where}", "moe",
                 _cli(python, "demo", "moe", *placed, "--timeout-s", COLLECTIVE_TIMEOUT_S, "--json"), 120, "demo",
                 {"world": world})]


def _at_scale_items(gpus: int, python: str) -> list[Item]:
    """`demo straggler` (DDP, rank 1 sleeping 500 ms) on 2 GPUs or 2 ranks sharing one, `demo checkpoint-resume`
    (FSDP2) saved on those 2 ranks and resumed on 4 in a second launch: 4 GPUs where there are, else 4 ranks
    sharing the GPUs the first used (the result is the resume's, on its 4 ranks), and `demo local-sgd` on the
    2 ranks: its averaging all-reduces CUDA parameters after torch.accelerator.synchronize."""
    placed, world, where = _placed(gpus, 2)
    run = ["--timeout-s", COLLECTIVE_TIMEOUT_S, "--json"]
    return [
        Item(f"straggler-{gpus}gpu", f"demo straggler on {where}", "at scale",
             _cli(python, "demo", "straggler", *placed, *run), 120, "demo", {"world": world}),
        Item(f"checkpoint-resume-{gpus}gpu", f"demo checkpoint-resume saved on {where}, resumed on 4 ranks", "at scale",
             _cli(python, "demo", "checkpoint-resume", *placed, "--resume-on", "4", *run), 180, "demo", {"world": 4}),
        Item(f"local-sgd-{gpus}gpu", f"demo local-sgd on {where}", "at scale",
             _cli(python, "demo", "local-sgd", *placed, *run), 120, "demo", {"world": world}),
    ]


def _context_items(gpus: int, python: str) -> list[Item]:
    """`demo cp` on the tiny GPT: ring attention over cp 2 with NCCL's point-to-point sends, FSDP over the
    rest of the N GPUs; on one GPU the ranks would share it over gloo, whose sends take host memory only,
    so the demo must be refused before launch there."""
    placed, world, where = _concept_placed(gpus, 2)
    argv = _cli(python, "demo", "cp", *placed, "--model", "tiny", "--timeout-s", COLLECTIVE_TIMEOUT_S, "--json")
    if world > gpus:
        return [Item(f"cp-{gpus}gpu", f"demo cp on {where}: refused before launch (the ring's point-to-point sends "
                     "on CUDA tensors, which gloo cannot make)", "cp", argv, 60, "refusal", {"gpus": gpus, "shared": True})]
    return [Item(f"cp-{gpus}gpu", f"demo cp on {where} (cp 2 x dp {world // 2})", "cp", argv, 120, "demo",
                 {"world": world})]


def plan(gpus: int, out: Path, work: Path, python: str = sys.executable) -> list[Item]:
    """Every item, in the order it runs, for a machine with `gpus` visible GPUs: the quick and the
    telling first (the guard, the peak, MFU, the N-GPU demos), so a short budget loses the least.
    With several GPUs the one-rank runs of zro and FSDP come last: the N-GPU runs cover them."""
    one_gpu = _one_gpu_items(python, out, work)
    concepts = []
    for name in CONCEPTS:
        placed, world, where = (["--gpus", "1"], 1, _gpus(1)) if name in ONE_RANK_CONCEPTS and gpus < 2 else \
            _concept_placed(gpus, 2)
        argv = _cli(python, "demo", name, *placed, "--timeout-s", COLLECTIVE_TIMEOUT_S, "--json")
        if name in POINT_TO_POINT_CONCEPTS and world > gpus:
            concepts.append(Item(f"concept-{name}", f"demo {name} on {where}: refused before launch (point-to-point "
                                 "sends on CUDA tensors, which gloo cannot make)", "concepts", argv, 60, "refusal",
                                 {"gpus": gpus, "shared": True}))
        else:
            concepts.append(Item(f"concept-{name}", f"demo {name} on {where}", "concepts", argv, 90, "demo",
                                 {"world": world}))
    faults = [*_pipeline_items(gpus, python), *_context_items(gpus, python), *_moe_items(gpus, python),
              *_at_scale_items(gpus, python),
              *(Item(f"fault-{name}", f"demo fault {name} (broken, then fixed)", "faults",
                     _cli(python, "demo", "fault", name, "--json"), 90, "demo") for name in FAULTS),
              _katas_item(gpus, python, work)]
    rest = [*one_gpu[1:], *concepts, *faults] if gpus < 2 else [*concepts, *faults, *one_gpu[1:]]
    return [
        Item("doctor", "ddpfsdp doctor", "machine", _cli(python, "doctor", "--json"), 60, "doctor"),
        Item("refusal", "a training demo asked for one rank on 1 GPU is refused, naming only what runs here", "refusal",
             _cli(python, "demo", "ddp", "--gpus", "1", "--ranks-per-gpu", "1", "--model", "tiny"), 60, "refusal",
             {"gpus": gpus}),
        _guard_item(gpus, python, work),
        one_gpu[0],
        _mfu_item(gpus, python, work),
        *_training_items(gpus, python, out),
        *_compiled_items(gpus, python, work),
        *rest,
    ]


# ----------------------------------------------------------------------------- running


def _stop(proc: subprocess.Popen, marker: str) -> int:
    """End the item's process group (SIGINT first: the CLI then stops its ranks itself), and then
    anything still carrying the item's marker (the launcher's agent runs in a session of its own)."""
    from ddpfsdp.demos.launch.launcher import processes_with_env

    for sig, wait_s in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    left = processes_with_env(MARKER_ENV, marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    give_up = time.monotonic() + 5.0
    # A signal is delivered, not obeyed at once; a dying process loses its environment before it
    # exits, so each is followed by its pid until it is gone or a zombie.
    while any(map(_running, left)) and time.monotonic() < give_up:
        time.sleep(0.05)
    return len(left)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def run_item(item: Item, timeout_s: float, env: dict[str, str]) -> Outcome:
    """Run one item in a process group of its own, its output in files (a process it leaves behind
    could hold a pipe open), stopped at `timeout_s`; then end whatever it left running."""
    marker = uuid.uuid4().hex
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(item.argv, stdout=stdout, stderr=stderr, text=True,
                                env={**env, MARKER_ENV: marker}, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        left = _stop(proc, marker)
        stdout.seek(0)
        stderr.seek(0)
        outcome = Outcome(proc.returncode, stdout.read(), stderr.read(), time.monotonic() - started, timed_out, left)
    data_path = item.expect.get("data")
    if data_path and Path(data_path).is_file():
        try:
            outcome.data = json.loads(Path(data_path).read_text())
        except json.JSONDecodeError:
            outcome.data = None
    return outcome


# ----------------------------------------------------------------------------- judging


def _failed(outcome: Outcome, what: str = "the command") -> Verdict | None:
    """The verdict of an item whose process did not finish cleanly, or None."""
    if outcome.timed_out:
        return Verdict("fail", {"seconds": round(outcome.seconds, 1)}, f"{what} ran out of its time budget and was stopped")
    if outcome.left_running:
        return Verdict("fail", {"left_running": outcome.left_running}, f"{what} left {outcome.left_running} processes running")
    return None


def _json_from(stdout: str) -> dict[str, Any] | None:
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        return json.loads(stdout[start:])
    except json.JSONDecodeError:
        return None


def _mib(n: float | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def _checks(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every named check of a result, a compare's per-strategy ones prefixed with the strategy."""
    found = [(c["name"], c) for c in result.get("checks", [])]
    for name, run in (result.get("runs") or {}).items():
        found += [(f"{name}: {c['name']}", c) for c in run.get("checks", [])]
    return found


def _demo_numbers(result: dict[str, Any]) -> dict[str, Any]:
    numbers: dict[str, Any] = {"world": (result.get("config") or {}).get("world_size")}
    runs = result.get("runs") or {"": result}
    for name, run in runs.items():
        prefix = f"{name} " if name else ""
        ranks = (run.get("memory") or {}).get("ranks") or []
        if ranks:
            numbers[prefix + "peak_mib"] = [_mib(r.get("peak")) for r in ranks]
            if ranks[0].get("blas_workspaces") is not None:
                numbers[prefix + "cublas_workspaces_mib"] = _mib(ranks[0]["blas_workspaces"])
        throughput = run.get("throughput") or {}
        if throughput.get("samples_per_s"):
            numbers[prefix + "samples_per_s"] = round(throughput["samples_per_s"], 1)
            numbers[prefix + "step_ms"] = round(throughput["step_time_s"]["median"] * 1000, 2)
        exposed = ((run.get("timeline") or {}).get("exposed") or {}).get("share")
        if exposed:
            numbers[prefix + "exposed_comm_share"] = [round(s, 3) for s in exposed]
    return numbers


def judge_result(result: dict[str, Any] | None, expect: dict[str, Any]) -> Verdict:
    """A demo's result: every named check passed, on the world asked for, and its trace written."""
    if not result:
        return Verdict("fail", {}, "no result came back")
    numbers = _demo_numbers(result)
    not_judged = expect.get("not_judged") or {}
    failed, skipped = [], []
    for name, check in _checks(result):
        if check.get("passed"):
            continue
        base = name.split(": ")[-1]
        if check.get("passed") is None and check.get("not_judged"):
            skipped.append(f"{name} ({check['not_judged']})")
        elif base in not_judged:
            skipped.append(f"{name} ({not_judged[base]})")
        else:
            failed.append(f"{name}: {check.get('detail', '')}")
    problems = list(failed)
    world = expect.get("world")
    if world is not None and numbers.get("world") not in (None, world):
        problems.append(f"ran on {numbers['world']} ranks, not {world}")
    trace = expect.get("trace")
    if trace:
        problems += _trace_problems(Path(trace), world or 1)
        numbers["trace"] = Path(trace).name
    checks = len(_checks(result))
    detail = (f"{checks - len(failed) - len(skipped)} of {checks} checks passed"
              + (f"; not judged: {'; '.join(skipped)}" if skipped else "")
              + (f"; failed: {' | '.join(problems)}" if problems else ""))
    return Verdict("fail" if problems else "pass", numbers, detail)


def _trace_problems(path: Path, world: int) -> list[str]:
    if not path.is_file():
        return [f"no trace at {path}"]
    try:
        events = json.loads(path.read_text())["traceEvents"]
    except (json.JSONDecodeError, KeyError):
        return [f"{path.name} is not a Chrome trace"]
    ranks = {e["pid"] for e in events if e.get("ph") == "X"}
    collectives = sum(1 for e in events if e.get("cat") == "collective")
    if len(ranks) != world:
        return [f"{path.name} holds spans of {len(ranks)} ranks, not {world}"]
    if not collectives:
        return [f"{path.name} holds no collective"]
    return []


def judge_demo(item: Item, outcome: Outcome) -> Verdict:
    stopped = _failed(outcome)
    if stopped:
        return stopped
    result = outcome.data.get("result") if outcome.data else _json_from(outcome.stdout)
    if outcome.returncode != 0 and not result:
        return Verdict("fail", {"exit": outcome.returncode}, "exited with status "
                       f"{outcome.returncode}: {_tail(outcome.stderr, 3)}")
    return judge_result(result, item.expect)


def judge_doctor(item: Item, outcome: Outcome) -> Verdict:
    report = _json_from(outcome.stdout) or {}
    gpus = report.get("gpus") or []
    numbers = {"torch": report.get("torch_version"), "build": report.get("torch_build"),
               "gpus": [f"{g['name']}, {g['total_memory_bytes'] / 2**30:.0f} GiB, cc {g['capability']}" for g in gpus],
               "nccl": report.get("nccl_available")}
    ok = outcome.returncode == 0 and report.get("cuda_available") and gpus and report.get("nccl_available")
    detail = (f"{len(gpus)} CUDA GPU(s), NCCL {'available' if report.get('nccl_available') else 'missing'}"
              if report else f"no report: {_tail(outcome.stderr, 3)}")
    return Verdict("pass" if ok else "fail", numbers, detail)


def judge_refusal(item: Item, outcome: Outcome) -> Verdict:
    """Refused with a usage error that names only commands this machine runs."""
    text = outcome.stdout + outcome.stderr
    gpus = item.expect.get("gpus", 1)
    problems = []
    if outcome.returncode != 2:
        problems.append(f"exit status {outcome.returncode}, not 2 (a usage error)")
    if "--procs 2" not in text:
        problems.append("no --procs 2 offered")
    said = text.split("Error:")[-1]
    if item.expect.get("shared"):
        if "gloo cannot run on CUDA tensors" not in " ".join(said.split()):
            problems.append("does not say that gloo cannot run it on CUDA tensors")
    elif gpus < 2 and ("--gpus 2" in said or "--ranks-per-gpu 2" not in said):
        problems.append(f"offers a second GPU, or not two ranks sharing the one, on a machine with {gpus} GPU")
    if gpus >= 2 and not item.expect.get("shared") and "--gpus 2" not in text:
        problems.append(f"does not offer --gpus 2 on a machine with {gpus} GPUs")
    message = next((line for line in text.splitlines() if "needs" in line), _tail(text, 1))
    return Verdict("fail" if problems else "pass", {"message": message.strip()}, "; ".join(problems) or "refused as it should be")


def judge_peak(item: Item, outcome: Outcome) -> Verdict:
    """The demo's checks, and its peak against the allocator's own counters and the workspace probe."""
    verdict = judge_demo(item, outcome)
    data = outcome.data or {}
    stats, probe = data.get("memory_stats"), data.get("workspace_probe")
    if not stats or not probe or verdict.status != "pass":
        return verdict
    return judge_peak_numbers(verdict, data["result"]["memory"]["ranks"][0], stats, data["baseline_bytes"], probe)


def judge_peak_numbers(verdict: Verdict, rank: dict[str, Any], stats: dict[str, int], baseline: int,
                       probe: dict[str, Any]) -> Verdict:
    allocator_peak = stats["allocated_bytes.all.peak"] - baseline
    state = sum(int(rank.get(k) or 0) for k in ("params", "grads", "optimizer"))
    numbers = {**verdict.numbers, "peak_mib": _mib(rank["peak"]), "allocator_peak_mib": _mib(allocator_peak),
               "reserved_peak_mib": _mib(stats["reserved_bytes.all.peak"]), "model_state_mib": _mib(state),
               "tracker_peak_mib": _mib(rank.get("tracker_peak")), "alloc_retries": stats["num_alloc_retries"],
               "ooms": stats["num_ooms"], "probe_workspaces_mib": _mib(probe["freed_bytes"]),
               "workspace_bound_mib": _mib(probe["bound_bytes"])}
    problems = []
    if rank["peak"] != allocator_peak:
        problems.append(f"peak {_mib(rank['peak'])} MiB vs memory_stats' {_mib(allocator_peak)} MiB above the baseline")
    if rank["peak"] < state:
        problems.append("peak below the model state")
    if stats["num_ooms"] or stats["num_alloc_retries"]:
        problems.append(f"{stats['num_ooms']} OOMs and {stats['num_alloc_retries']} allocator retries")
    if not probe["clear_available"] or probe["freed_bytes"] <= 0:
        problems.append("clearing the cuBLAS workspaces freed nothing")
    elif probe["freed_bytes"] > probe["bound_bytes"] or probe["held_bytes"] != probe["freed_bytes"]:
        problems.append(f"a matmul step left {_mib(probe['held_bytes'])} MiB, the clear freed "
                        f"{_mib(probe['freed_bytes'])} MiB, the bound is {_mib(probe['bound_bytes'])} MiB")
    detail = verdict.detail + ("; memory: " + " | ".join(problems) if problems else
                               "; peak equals memory_stats' peak above the baseline; the workspaces are within their bound")
    return Verdict("fail" if problems else "pass", numbers, detail)


def judge_mfu(item: Item, outcome: Outcome) -> Verdict:
    """MFU alone decides; the run's own checks are told beside it (other items judge them)."""
    verdict = judge_demo(item, outcome)
    result = outcome.data.get("result") if outcome.data else _json_from(outcome.stdout)
    if not result or outcome.timed_out:
        return verdict
    names = (result.get("env") or {}).get("device_names") or []
    return judge_mfu_numbers(verdict, result.get("throughput") or {}, names[0] if names else "?",
                             (result.get("config") or {}).get("params"))


def judge_mfu_numbers(verdict: Verdict, throughput: dict[str, Any], device: str, params: int | None) -> Verdict:
    mfu = throughput.get("mfu")
    reference = next((v for k, v in TORCHTITAN_MFU.items() if k in device.upper()), None)
    numbers = {**verdict.numbers, "device": device, "params": params, "mfu": mfu,
               "tokens_per_s": round(throughput.get("tokens_per_s") or 0), "torchtitan_mfu": reference}
    if not isinstance(mfu, (int, float)) or math.isnan(mfu):
        problem = f"MFU is {mfu!r}: the FLOP/s table does not know {device}"
    elif reference is None:
        problem = f"torchtitan publishes no MFU for {device}" if 0 < mfu <= 1 else f"MFU {mfu:.1%} is impossible"
    elif not reference / 10 <= mfu <= 1.0:
        problem = f"MFU {mfu:.1%} is outside {reference / 10:.1%} to 100% (torchtitan: {reference:.0%})"
    else:
        problem = ""
    detail = (f"MFU {mfu:.1%} on {device}; torchtitan {reference:.0%} on an 8B model ({TORCHTITAN_SOURCE}); "
              "within an order of magnitude" if not problem else problem)
    return Verdict("fail" if problem else "pass", numbers, f"{detail}; the run's checks: {verdict.detail}")


def judge_guard_cli(item: Item, outcome: Outcome) -> Verdict:
    stopped = _failed(outcome)
    if stopped:
        return stopped
    text = outcome.stdout + outcome.stderr
    refused = outcome.returncode not in (0, None) and "--force" in text and "estimate" in text
    launched = '"schema"' in outcome.stdout
    line = next((ln for ln in text.splitlines() if "estimate" in ln), _tail(text, 1))
    ok = refused and not launched
    return Verdict("pass" if ok else "fail", {"seconds": round(outcome.seconds, 1), "message": line.strip()[:300]},
                   "refused before launch, naming --force" if ok else f"not refused as it should be (exit {outcome.returncode})")


def judge_guard_rank(item: Item, outcome: Outcome) -> Verdict:
    stopped = _failed(outcome)
    if stopped:
        return stopped
    data = outcome.data or {}
    refused, control = data.get("refused") or {}, data.get("control") or {}
    numbers = {"estimate_gib": round((refused.get("estimate_bytes") or 0) / 2**30, 1),
               "free_gib": round((refused.get("available_bytes") or 0) / 2**30, 1),
               "control_estimate_gib": round((control.get("estimate_bytes") or 0) / 2**30, 2)}
    ok = bool(data) and refused.get("fits") is False and control.get("fits") is True and refused.get("available_bytes")
    detail = refused.get("message", f"no verdict: {_tail(outcome.stderr, 3)}")[:400]
    return Verdict("pass" if ok else "fail", numbers, detail)


def judge_katas(item: Item, outcome: Outcome) -> Verdict:
    """Every kata passed where it runs and was refused where it cannot (gpu_kata_check.py's report)."""
    stopped = _failed(outcome)
    if stopped and not outcome.data:
        return stopped
    katas = (outcome.data or {}).get("katas") or {}
    if not katas:
        return Verdict("fail", {"exit": outcome.returncode}, f"no report: {_tail(outcome.stderr, 3)}")
    failed = {name: entry for name, entry in katas.items() if not entry.get("ok")}
    numbers = {name: f"{entry['expected']} in {entry['seconds']} s" for name, entry in katas.items()}
    if failed:
        detail = "; ".join(f"{name}: {', '.join(entry.get('not_passed') or []) or entry.get('said') or 'exit ' + str(entry.get('exit'))}"
                           for name, entry in failed.items())
        return Verdict("fail", numbers, detail)
    refused = sum(entry["expected"] == "refused" for entry in katas.values())
    return Verdict("pass", numbers, f"{len(katas) - refused} katas passed every check"
                   + (f", {refused} refused before launch as they should be" if refused else ""))


EVALUATORS: dict[str, Callable[[Item, Outcome], Verdict]] = {
    "demo": judge_demo, "doctor": judge_doctor, "refusal": judge_refusal, "peak": judge_peak,
    "mfu": judge_mfu, "guard_cli": judge_guard_cli, "guard_rank": judge_guard_rank, "katas": judge_katas,
}


def _tail(text: str, lines: int) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:])


# ----------------------------------------------------------------------------- the report


def report_json(items: list[tuple[Item, Verdict, Outcome | None]], header: dict[str, Any]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for _, verdict, _ in items:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    return {
        "schema": "ddpfsdp.gpu_check/1", **header, "summary": counts,
        "items": [{"key": item.key, "title": item.title, "group": item.group,
                   "command": shlex.join(item.argv) if item.argv else None, "status": verdict.status,
                   "seconds": round(outcome.seconds, 1) if outcome else None, "numbers": verdict.numbers,
                   "detail": verdict.detail, "skip": item.skip,
                   "stderr_tail": _tail(outcome.stderr, 12) if outcome and verdict.status == "fail" else None}
                  for item, verdict, outcome in items],
    }


def report_markdown(report: dict[str, Any]) -> str:
    machine = report.get("machine") or {}
    if report.get("dry_run"):
        where = f"Dry run, planned for {_gpus(report.get('gpus') or 0)}: nothing was run."
    else:
        where = (f"{_gpus(report.get('gpus') or 0)} used of: {', '.join(machine.get('gpus') or ['none seen'])}; torch "
                 f"{machine.get('torch')} ({machine.get('build')}). Wall time {report.get('wall_s', 0):.0f} s of a "
                 f"{report.get('budget_s', 0):.0f} s budget.")
    lines = ["# GPU check", "", where, "",
             "Summary: " + ", ".join(f"{n} {status}" for status, n in sorted(report["summary"].items())), "",
             "| status | item | s | numbers |", "|---|---|---|---|"]
    for entry in report["items"]:
        numbers = ", ".join(f"{k} {v}" for k, v in entry["numbers"].items() if v not in (None, [], ""))
        seconds = "" if entry["seconds"] is None else f"{entry['seconds']:.0f}"
        lines.append(f"| {entry['status']} | {entry['title']} | {seconds} | {numbers.replace('|', '/')} |")
    for status in ("fail", "skip", "not run"):
        chosen = [e for e in report["items"] if e["status"] == status]
        if chosen:
            lines += ["", f"## {status}", ""]
            for entry in chosen:
                lines.append(f"- **{entry['title']}**: {entry['detail']}")
                if entry["command"] and status != "skip":
                    lines.append(f"  - command: `{entry['command']}`")
                if entry.get("stderr_tail"):
                    lines.append(f"  - stderr: {entry['stderr_tail']}")
    passed = [e for e in report["items"] if e["status"] == "pass"]
    if passed:
        lines += ["", "## pass", ""] + [f"- **{e['title']}**: {e['detail']}" for e in passed]
    return "\n".join(lines) + "\n"


def write_report(out: Path, items: list[tuple[Item, Verdict, Outcome | None]], header: dict[str, Any]) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    report = report_json(items, header)
    json_path, md_path = out / "gpu-check.json", out / "gpu-check.md"
    json_path.write_text(json.dumps(report, indent=2))
    md_path.write_text(report_markdown(report))
    return md_path, json_path


# ----------------------------------------------------------------------------- main


def _machine(verdict: Verdict) -> dict[str, Any]:
    return {k: verdict.numbers.get(k) for k in ("torch", "build", "gpus", "nccl")}


def dry_run(gpus: int, out: Path, only: str | None = None) -> list[tuple[Item, Verdict, Outcome | None]]:
    items = plan(gpus, out, Path(tempfile.gettempdir()) / "gpu-check-work")
    print(f"The GPU check on a machine with {_gpus(gpus)} would run, in this order:")
    rows = []
    for item in items:
        skip = item.skip or (f"left out by --only {only}" if only and only not in item.key else None)
        if skip:
            print(f"  skip  {item.title}: {skip}")
            rows.append((item, Verdict("skip", {}, skip), None))
        else:
            print(f"  {item.budget_s:4.0f}s {item.title}\n        {shlex.join(item.argv)}")
            rows.append((item, Verdict("not run", {}, "dry run"), None))
    return rows


def run_all(gpus_wanted: int | None, out: Path, budget_s: float, only: str | None) -> tuple[list, dict[str, Any]]:
    started = time.monotonic()
    deadline = started + budget_s
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work_dir:
        work = Path(work_dir)
        env = {**os.environ, "DDPFSDP_HOME": str(work / "home"), "PYTHONUNBUFFERED": "1"}
        out.mkdir(parents=True, exist_ok=True)
        doctor = plan(1, out, work)[0]
        doctor_outcome = run_item(doctor, doctor.budget_s, env)
        doctor_verdict = judge_doctor(doctor, doctor_outcome)
        visible = len(doctor_verdict.numbers.get("gpus") or [])
        gpus = min(gpus_wanted or visible, visible)
        rows: list[tuple[Item, Verdict, Outcome | None]] = [(doctor, doctor_verdict, doctor_outcome)]
        for item in plan(max(gpus, 1), out, work)[1:]:
            rows.append(_run_one(item, gpus, deadline, env, only))
            print(f"{rows[-1][1].status:7} {item.title}", flush=True)
        rows = compare_compiled(rows)
    header = {"dry_run": False, "gpus": gpus, "machine": _machine(doctor_verdict),
              "budget_s": budget_s, "wall_s": time.monotonic() - started}
    return rows, header


def _run_one(item: Item, gpus: int, deadline: float, env: dict[str, str], only: str | None):
    if gpus == 0:
        return item, Verdict("skip", {}, "no CUDA GPU visible"), None
    if item.skip:
        return item, Verdict("skip", {}, item.skip), None
    if only and only not in item.key:
        return item, Verdict("skip", {}, f"left out by --only {only}"), None
    left_s = deadline - time.monotonic()
    if left_s < MIN_ITEM_S:
        return item, Verdict("not run", {}, f"the budget was spent ({left_s:.0f} s left)"), None
    outcome = run_item(item, min(item.budget_s, left_s), env)
    try:
        verdict = EVALUATORS[item.evaluate](item, outcome)
    except Exception as exc:  # noqa: BLE001 - one item's odd output must not stop the report
        verdict = Verdict("fail", {}, f"its output could not be judged: {type(exc).__name__}: {exc}")
    return item, verdict, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"folder for the report (default ./{DEFAULT_OUT})")
    parser.add_argument("--dry-run", action="store_true", help="list what would run and write an empty report")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs to use (default: all visible; with --dry-run, the machine to plan for, default 1)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="time for the whole check")
    parser.add_argument("--only", default=None, help="run only the items whose key contains this text")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.gpus is not None and args.gpus < 1:
        parser.error("--gpus must be at least 1")
    if args.dry_run:
        gpus = args.gpus or 1
        rows = dry_run(gpus, out, args.only)
        header = {"dry_run": True, "gpus": gpus, "machine": {}, "budget_s": args.budget_s, "wall_s": 0.0}
    else:
        rows, header = run_all(args.gpus, out, args.budget_s, args.only)
    md_path, json_path = write_report(out, rows, header)
    failed = sum(1 for _, verdict, _ in rows if verdict.status == "fail")
    print(f"report: {md_path} and {json_path}; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
