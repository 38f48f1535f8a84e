"""Model-state bytes, CPU peak tracking, step timing and the env block, on real tensors."""

from __future__ import annotations

import textwrap

import pytest
import torch
from conftest import run_script_on_ranks

from ddpfsdp.demos.measure.memory import (
    PeakMemory,
    StepTimer,
    environment,
    live_tensor_bytes,
    model_state_bytes,
    unique_storage_bytes,
)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


def _stepped_model():
    """(model, AdamW, a batch) after one step, so the optimizer state exists and grads are freed."""
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(512, 256)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return model, opt, x


def test_model_state_bytes_counts_params_grads_and_adam_state():
    model = _model()
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert model_state_bytes(model, opt) == {"params": 4 * n, "grads": 0, "optimizer": 0}
    model(torch.randn(8, 256)).sum().backward()
    opt.step()
    state = model_state_bytes(model, opt)
    assert state["params"] == 4 * n
    assert state["grads"] == 4 * n
    # two fp32 moments per parameter, plus one scalar step counter per parameter tensor
    tensors = len(list(model.parameters()))
    assert 8 * n <= state["optimizer"] <= 8 * n + 8 * tensors


def test_shared_storage_counts_once():
    weight = torch.zeros(100, 100)
    assert unique_storage_bytes([weight, weight.view(-1), weight[:10]]) == 40_000


def test_sgd_without_momentum_holds_no_state():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(8, 256)).sum().backward()
    opt.step()
    assert model_state_bytes(model, opt)["optimizer"] == 0


def test_live_tensor_bytes_sees_a_new_tensor():
    before = live_tensor_bytes("cpu")
    block = torch.empty(1_000_000)
    after = live_tensor_bytes("cpu")
    assert after - before >= 4_000_000
    del block


def test_cpu_peak_tracks_the_highest_point_not_the_end():
    keep = torch.ones(250_000)  # 1 MB alive at the start
    with PeakMemory("cpu") as peak:
        a = torch.empty(1_000_000)  # 4 MB
        b = torch.empty(2_000_000)  # 8 MB: 12 MB above the start here
        del a, b
        c = torch.empty(500_000)  # 2 MB at the end
        del c
    assert peak.start_bytes >= keep.numel() * 4
    above_start = peak.peak_bytes - peak.start_bytes
    assert 12_000_000 <= above_start < 13_000_000
    assert peak.peak_kind.startswith("cpu")


def test_cpu_peak_of_a_training_step_exceeds_model_state():
    model, opt, x = _stepped_model()
    held = model_state_bytes(model, opt)
    with PeakMemory("cpu") as peak:
        model(x).sum().backward()
        opt.step()
    # at the peak the rank holds params, optimizer state, the new grads and the activations
    assert peak.peak_bytes >= held["params"] * 2 + held["optimizer"] + 512 * 256 * 4
    assert peak.found_bytes == 0  # no collective ran: nothing out of Python's reach to find


def test_since_leaves_out_what_was_alive_before_the_run():
    earlier = torch.ones(500_000)  # 2 MB an earlier run left behind
    before = PeakMemory.before_run("cpu")
    kept = torch.ones(250_000)  # 1 MB made by "this run"
    with PeakMemory("cpu") as everything:
        pass
    with PeakMemory("cpu", since=before) as own:
        pass
    assert 1_000_000 <= own.start_bytes <= everything.start_bytes - 2_000_000
    del kept, earlier


def test_step_timer_summary():
    timer = StepTimer("cpu")
    timer.start()
    for _ in range(3):
        with timer.step():
            sum(range(1000))
    timer.stop()
    summary = timer.summary()
    assert len(timer.times_s) == 3
    assert summary["min"] <= summary["median"] <= summary["max"]
    assert sum(timer.times_s) <= timer.wall_s
    unstopped = StepTimer("cpu")
    unstopped.start()
    with pytest.raises(ValueError, match="stopped"):
        unstopped.summary()


def test_environment_block():
    env = environment(None)
    assert set(env) >= {"torch", "python", "device_names", "cpu_count", "hostname"}
    assert env["torch"] == torch.__version__
    assert env["cpu_count"] >= 1


FSDP_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel
    from ddpfsdp.demos.measure.comm import CommCounter
    from ddpfsdp.demos.measure.memory import PeakMemory, ddp_reducer_bytes, model_state_bytes

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def build():
        torch.manual_seed(0)
        # 3 x 33 rows: odd sizes, so the shards need padding
        return torch.nn.Sequential(torch.nn.Linear(64, 33), torch.nn.Linear(33, 33), torch.nn.Linear(33, 33))

    out = {"full_params": sum(p.numel() * 4 for p in build().parameters())}
    model = build()
    mesh = init_device_mesh("cpu", (2,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    out["fsdp"] = model_state_bytes(model, opt)

    ddp = DistributedDataParallel(build())
    for _ in range(2):
        ddp(torch.randn(4, 64)).sum().backward()
    out["ddp_reducer"] = ddp_reducer_bytes(ddp)
    ddp.zero_grad(set_to_none=True)
    # Before any dispatch mode: the buckets are out of Python's reach and found through the all-reduce.
    with PeakMemory("cpu") as peak:
        ddp(torch.randn(4, 64)).sum().backward()
    out["ddp_peak"] = peak.to_dict()
    ddp.zero_grad(set_to_none=True)
    with CommCounter():  # a Python dispatch mode wraps the buckets: from now on gc reaches them
        ddp(torch.randn(4, 64)).sum().backward()
    ddp.zero_grad(set_to_none=True)
    with PeakMemory("cpu") as again:
        ddp(torch.randn(4, 64)).sum().backward()
    out["ddp_peak_after_dispatch"] = again.to_dict()
    """
)


@pytest.fixture(scope="module")
def fsdp_ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("measure")
    return run_script_on_ranks(FSDP_SCRIPT, folder)


@pytest.mark.dist
def test_fsdp_ranks_hold_their_shards_with_padding(fsdp_ranks):
    full = fsdp_ranks[0]["full_params"]
    for out in fsdp_ranks:
        held = out["fsdp"]
        # each rank holds half, padded up to a row on dim 0 of each odd-sized parameter
        assert full / 2 <= held["params"] <= full / 2 + 6 * 64 * 4
        assert held["grads"] == held["params"]
    # Adam's moments are made like the unpadded local shard, which is uneven across ranks
    # (17 and 16 of 33 rows), so only the sum over ranks is exact: two moments of every
    # parameter plus a scalar step counter per parameter tensor on each rank
    optimizer_total = sum(out["fsdp"]["optimizer"] for out in fsdp_ranks)
    assert 2 * full <= optimizer_total <= 2 * full + 2 * 6 * 8


@pytest.mark.dist
def test_ddp_reducer_buckets_are_counted(fsdp_ranks):
    for out in fsdp_ranks:
        assert out["ddp_reducer"] == out["full_params"]
        assert out["ddp_peak"]["start"] >= out["ddp_reducer"] + out["full_params"]
        assert out["ddp_peak"]["found"] == out["ddp_reducer"]
        assert out["ddp_peak"]["peak"] >= out["ddp_peak"]["start"] + out["full_params"]


@pytest.mark.dist
def test_ddp_buckets_count_once_however_they_became_visible(fsdp_ranks):
    # The same step before and after a dispatch mode made the buckets reachable from Python: the
    # buckets are counted once either way (keyed by storage), so the start level does not move.
    for out in fsdp_ranks:
        before, after = out["ddp_peak"], out["ddp_peak_after_dispatch"]
        assert after["found"] == 0
        assert abs(after["start"] - before["start"]) < out["ddp_reducer"] / 10


def test_cpu_peak_is_relative_to_each_start():
    # the allocator's running total is process-wide and survives a profiling session, so a block
    # allocated under one tracker and freed outside it must not inflate the next one
    with PeakMemory("cpu"):
        leftover = torch.empty(1_000_000)
    del leftover
    with PeakMemory("cpu") as peak:
        block = torch.empty(250_000)
        del block
    assert 1_000_000 <= peak.peak_bytes - peak.start_bytes < 1_500_000


def test_peak_breakdown_from_torch_memtracker():
    from ddpfsdp.demos.measure.breakdown import PeakBreakdown

    model, opt, x = _stepped_model()
    with PeakBreakdown(model, opt, strategy="ddp", device="cpu") as breakdown:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    out = breakdown.to_dict()
    parts = out["peak_breakdown"]
    n = sum(p.numel() for p in model.parameters())
    assert out["breakdown_source"] == "torch MemTracker"
    assert parts["params"] == 4 * n
    assert parts["optimizer"] >= 8 * n
    assert parts["activations"] >= 512 * 256 * 4  # the first layer's output, saved for backward
    assert out["tracker_peak"] == sum(parts.values())
    assert out["peak_phase"] in ("forward", "backward", "optimizer")
    assert breakdown.model is None  # nothing of the step is kept past it


def test_peak_breakdown_falls_back_to_own_accounting(monkeypatch):
    from ddpfsdp.demos.measure.breakdown import PeakBreakdown

    def unavailable(self):
        raise NotImplementedError("no tracker here")

    monkeypatch.setattr(PeakBreakdown, "_make_tracker", unavailable)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with PeakBreakdown(model, opt, strategy="ddp", device="cpu") as breakdown:
        model(torch.randn(8, 256)).sum().backward()
    held = {"params": 1000, "grads": 1000, "optimizer": 0}
    out = breakdown.to_dict(peak_bytes=5000, held=held, ddp_bucket_bytes=1000)
    assert out["peak_breakdown"] == {"params": 1000, "grads": 1000, "optimizer": 0, "ddp_buckets": 1000,
                                     "transient": 2000}
    assert out["peak_phase"] is None and "no tracker here" in out["breakdown_source"]
