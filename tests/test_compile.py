"""`--compile` and `--optimizer-impl` in the training demos: the checks fed broken numbers, the options'
refusals, and one real compiled compare on 2 gloo ranks (aot_eager, the cheap backend), shared with the
question bank's evidence for compile."""

from __future__ import annotations

from types import SimpleNamespace

import click
import pytest

from ddpfsdp.demos.parallel import compiled as cc
from ddpfsdp.demos.train.options import validate
from ddpfsdp.demos.train.spec import RunSpec

COMPILED_COMPARE = ("--model", "tiny", "--compile", "--compile-backend", "aot_eager", "--bucket-mb", "1")

MIB = 2**20
BYTES = {"a": MIB, "b": MIB, "bias": 512, "c": MIB, "d": MIB}
BUCKETS = [["c", "d"], ["a", "b", "bias"]]  # DDP's order: the first bucket holds the last parameters


def test_split_check_passes_when_each_piece_is_a_bucket():
    check = cc.ddp_compiled_graph_split_at_buckets([["a", "b", "bias"], [], ["c", "d"]], BUCKETS, BYTES)
    assert check.passed, check.detail
    assert "2 compiled pieces" in check.detail and "100.0%" in check.detail


def test_split_check_allows_a_small_tensor_on_the_other_side():
    check = cc.ddp_compiled_graph_split_at_buckets([["a", "b"], ["bias", "c", "d"]], BUCKETS, BYTES)
    assert check.passed, check.detail
    assert "bias" in check.detail


@pytest.mark.parametrize("pieces", [
    [["a"], ["b", "bias", "c", "d"]],  # cut a whole weight away from its bucket
    [["a", "b", "bias", "c", "d"]],  # one piece: no split at all
    [["a"], ["b", "bias"], ["c", "d"]],  # more pieces than buckets
    [],  # nothing compiled
])
def test_split_check_fails_for_pieces_that_are_not_the_buckets(pieces):
    check = cc.ddp_compiled_graph_split_at_buckets(pieces, BUCKETS, BYTES)
    assert not check.passed, check.detail


def _report(**changes):
    report = {"graphs": 4, "graphs_in_timed_steps": 0, "compile_s": 3.0, "warmup_step_s": [3.2, 0.1],
              "compiled_modules": ["blocks.0", "blocks.1"], "graph_breaks": 0, "graph_break_reasons": []}
    return {**report, **changes}


def test_compiled_before_timed_steps():
    assert cc.compiled_before_timed_steps({"ddp": _report()}).passed
    assert not cc.compiled_before_timed_steps({"ddp": _report(graphs_in_timed_steps=1)}).passed
    assert not cc.compiled_before_timed_steps({"ddp": _report(graphs=0)}).passed  # nothing compiled at all
    assert not cc.compiled_before_timed_steps({"ddp": _report(), "zro": _report(graphs=0)}).passed


def test_fsdp_blocks_check():
    assert cc.fsdp_blocks_compiled_without_graph_breaks(_report(), 2).passed
    broken = _report(graph_breaks=4, graph_break_reasons=[{"reason": "skipping FSDP hooks", "count": 4}])
    check = cc.fsdp_blocks_compiled_without_graph_breaks(broken, 2)
    assert not check.passed and "skipping FSDP hooks" in check.detail
    assert not cc.fsdp_blocks_compiled_without_graph_breaks(_report(), 3).passed  # a block left eager
    assert not cc.fsdp_blocks_compiled_without_graph_breaks(_report(graphs=0), 2).passed


def test_reasons_name_torch_files_by_their_place_in_the_package():
    reason = "Attempted\n  Explanation: in file `/x/lib/python3.11/site-packages/torch/_compile.py` skipped\n  Hint: h"
    assert cc._short(reason) == "Attempted Explanation: in file `torch/_compile.py` skipped"


def test_compile_on_screen():
    from ddpfsdp.demos.measure.report import compile_lines

    result = {"throughput": {"step_time_s": {"median": 0.1}},
              "compile": {**_report(), "backend": "aot_eager", "backend_reason": "asked for", "graph_breaks": 2,
                          "graph_break_reasons": [{"reason": "skipped", "count": 2}]}}
    lines = compile_lines(result)
    assert "4 graphs in 3.00 s" in lines[0] and "timed median 0.100 s" in lines[0] and "0 compiled in the timed" in lines[0]
    assert lines[1:] == ["Graph breaks: 2", "  x2 skipped"]
    assert compile_lines({"throughput": {}}) == []


def test_fake_tensors_hold_no_memory_in_the_cpu_peak():
    """Inductor keeps the patterns its fx passes trace once per process, on FakeTensors that say "cpu"
    (torch/_inductor/pattern_matcher.py, init_once_fakemode; the attention patterns alone trace a
    64 MiB (1024, 128, 128) input): their storage is a meta tensor's, and the CPU peak leaves them out."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ddpfsdp.demos.measure.memory import PeakMemory, live_tensor_bytes

    before_run, before = PeakMemory.before_run("cpu"), live_tensor_bytes("cpu")
    with FakeTensorMode():
        fake = torch.empty(1024, 128, 128)
    real = torch.ones(256, 1024)
    assert fake.device.type == "cpu" and fake.untyped_storage().device.type == "meta"
    assert live_tensor_bytes("cpu") - before == real.nbytes
    with PeakMemory("cpu", since=before_run) as peak:
        held = torch.ones(1024, 1024)
    assert peak.start_bytes == real.nbytes  # what the step found alive: the real tensor, not the fake one
    assert held.nbytes <= peak.peak_bytes - peak.start_bytes < fake.untyped_storage().nbytes()


@pytest.mark.parametrize("bucket_mb,compiled,given", [(25.0, True, None), (25.0, False, 25.0), (4.0, True, 4.0)])
def test_compiled_ddp_leaves_the_default_cap_to_torch(bucket_mb, compiled, given):
    from ddpfsdp.demos.parallel.parallelize import _ddp_bucket_cap_mb

    assert _ddp_bucket_cap_mb(RunSpec(strategy="ddp", compile=compiled, bucket_mb=bucket_mb), compiled) == given


def test_ddp_first_bucket_is_ddp_optimizers_first_piece_only_with_torchs_default_cap(tmp_path):
    """What torch does, on one gloo rank without compiling: DDPOptimizer, built as convert_frame.py builds
    it, cuts its first piece at 1 MiB; DDP's rebuilt first bucket is 1 MiB with bucket_cap_mb left to
    torch (what a compiled run at the default cap gets), the whole cap when 25 is given."""
    import torch
    import torch.distributed as dist
    from torch._dynamo.backends.distributed import DDPOptimizer
    from torch.nn.parallel import DistributedDataParallel

    from ddpfsdp.demos.train.models import build_model

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        first_bucket = {}
        for cap in (None, 25.0):
            ddp = DistributedDataParallel(build_model("gpt", "tiny", seed=0), bucket_cap_mb=cap)
            for _ in range(3):  # the first step's gradients order the rebuild, DDP logs the rebuilt buckets later
                ddp(torch.zeros(1, 8, dtype=torch.long)).sum().backward()
            sizes = [int(n) for n in str(ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"]).split(",")]
            first_bucket[cap] = sizes[0]
            pieces = DDPOptimizer(bucket_bytes_cap=ddp.bucket_bytes_cap, backend_compile_fn=lambda gm, _: gm)
            assert pieces.first_bucket_cap == MIB
    finally:
        dist.destroy_process_group()
    assert MIB <= first_bucket[None] < 2 * MIB  # the first piece's bucket: closed once past 1 MiB
    assert first_bucket[25.0] > 3 * MIB  # every gradient of the tiny GPT (3.6 MiB) in one bucket


def test_parameter_name_from_a_dynamo_source():
    source = SimpleNamespace(name="L['self']._modules['blocks']._modules['0']._parameters['weight']")
    assert cc.parameter_name(source) == "blocks.0.weight"
    assert cc.parameter_name(SimpleNamespace(name=lambda: "L['tokens']")) is None  # a method before torch 2.12
    assert cc.parameter_name(None) is None


def test_auto_backend(monkeypatch):
    assert cc.pick_backend("eager", "cpu")[0] == "eager"
    assert cc.pick_backend("auto", "cuda")[0] == "inductor"
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(cc.shutil, "which", lambda name: None)
    backend, reason = cc.pick_backend("auto", "cpu")
    assert backend == "aot_eager" and "no C++ compiler" in reason
    monkeypatch.setattr(cc.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert cc.pick_backend("auto", "cpu")[0] == "inductor"


@pytest.mark.parametrize("impl,fused,foreach", [("fused", True, None), ("foreach", None, True),
                                                ("for-loop", False, False)])
def test_optimizer_impl_reaches_torch(impl, fused, foreach):
    import torch

    from ddpfsdp.demos.parallel.strategies import build_optimizer, optimizer_impl

    run = RunSpec(strategy="ddp", optimizer_impl=impl)
    assert optimizer_impl(run, torch.device("cpu")) == impl
    optimizer = build_optimizer(run, torch.nn.Linear(4, 4), impl)
    assert optimizer.defaults.get("fused") == fused and optimizer.defaults.get("foreach") == foreach


def test_auto_optimizer_impl_is_fused_where_torch_has_the_kernel():
    import torch

    from ddpfsdp.demos.parallel.strategies import optimizer_impl

    assert optimizer_impl(RunSpec(strategy="fsdp"), torch.device("cpu")) == "fused"
    assert optimizer_impl(RunSpec(strategy="fsdp"), torch.device("meta")) == "foreach"
    # DTensor has fused AdamW but no fused SGD: FSDP2 with SGD steps foreach, DDP with SGD fused
    assert optimizer_impl(RunSpec(strategy="fsdp", optimizer="sgd"), torch.device("cpu")) == "foreach"
    assert optimizer_impl(RunSpec(strategy="ddp", optimizer="sgd"), torch.device("cpu")) == "fused"


@pytest.mark.parametrize("demo,options,says", [
    ("fsdp", {"compile": True, "fsdp_api": 1}, "--fsdp-api 2"),
    ("ddp", {"compile": True, "bucket_mb": 0.5}, "--bucket-mb 1"),
    ("compare", {"compile": True, "bucket_mb": 0.25}, "DDPOptimizer"),
    ("ddp", {"compile_backend": "eager"}, "add --compile"),
    ("fsdp", {"compile": True, "simulate": True, "world": 8}, "drop --compile"),
    ("fsdp", {"optimizer_impl": "fused", "optimizer": "sgd"}, "fused SGD"),
])
def test_compile_refusals_say_what_to_do(demo, options, says):
    with pytest.raises(click.UsageError, match=says):
        validate(demo, options)


@pytest.fixture(scope="module")
def compiled_compare(demo_result):
    return demo_result("compare", *COMPILED_COMPARE)


@pytest.mark.dist
@pytest.mark.timeout(300)
def test_compiled_compare_on_gloo(compiled_compare):
    checks = {c["name"]: c for c in compiled_compare["checks"]}
    for name in ("compiled_before_timed_steps", "ddp_compiled_graph_split_at_buckets",
                 "fsdp_blocks_compiled_without_graph_breaks", "losses_agree"):
        assert checks[name]["passed"], checks[name]["detail"]
    runs = compiled_compare["runs"]
    ddp = runs["ddp"]["compile"]
    assert ddp["backend"] == "aot_eager" and ddp["compiled_modules"] == ["<DDP>"]
    # DDP's forward breaks where DDP hands over to the model (its _inside_ddp_forward is skipped by Dynamo)
    assert ddp["graph_breaks"] >= 1 and any("_inside_ddp_forward" in r["reason"] for r in ddp["graph_break_reasons"])
    assert len([p for p in ddp["graph_params"] if p]) == len(ddp["ddp_buckets"]) >= 2
    # the first warm-up step compiles: it is far slower than the timed steps
    assert ddp["compile_s"] > 0 and ddp["warmup_step_s"][0] > 5 * runs["ddp"]["throughput"]["step_time_s"]["median"]
    fsdp = runs["fsdp-full"]["compile"]
    assert fsdp["compiled_modules"] == [f"blocks.{i}" for i in range(4)] and fsdp["graph_breaks"] == 0
    for run in runs.values():
        assert run["config"]["optimizer_impl"] == "fused"
        assert "AdamW (fused)" in run["config"]["description"] and "compiled (aot_eager)" in run["config"]["description"]
        assert run["compile"]["graphs_in_timed_steps"] == 0
