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


# cuBLAS workspaces: the sizes torch gives them, and each run paying for its own ---------------------

MIB = 1024 * 1024


def test_cublas_workspace_sizes_follow_torch_defaults_and_environment():
    from ddpfsdp.demos.measure import blas_workspaces as bw

    assert bw.cublas_workspace_config_bytes(None, 9) == 32 * MIB  # Hopper: ":4096:8"
    assert bw.cublas_workspace_config_bytes(None, 10) == 32 * MIB
    assert bw.cublas_workspace_config_bytes(None, 8) == 8 * MIB + 128 * 1024  # A100: ":4096:2:16:8"
    assert bw.cublas_workspace_config_bytes(":4096:8", 8) == 32 * MIB
    assert bw.cublas_workspace_config_bytes(":16:8", 9) == 128 * 1024
    assert bw.cublas_workspace_config_bytes("nonsense", 8) == 8 * MIB + 128 * 1024
    assert bw.cublaslt_workspace_config_bytes(None) == MIB
    assert bw.cublaslt_workspace_config_bytes("2048") == 2 * MIB
    assert bw.cublaslt_workspace_config_bytes("lots") == MIB
    # two handle-stream pairs (forward's thread, backward's thread), a cuBLAS and a cuBLASLt workspace each
    assert bw.blas_workspace_bytes(32 * MIB, MIB) == 66 * MIB == bw.HOPPER_DEFAULT_BYTES
    # the margin this replaced, 16 MiB, was below both an H100's and an A100's workspaces
    assert bw.blas_workspace_bytes(8 * MIB + 128 * 1024, MIB) > 16 * MIB


def test_cuda_workspace_bytes_from_torch_or_from_the_device(monkeypatch):
    """torch's own sizes where it reports them; else the GPU's compute capability and the environment."""
    from types import SimpleNamespace

    from ddpfsdp.demos.measure import blas_workspaces as bw

    monkeypatch.setattr(torch.backends.cuda, "cublas_workspace_size", lambda: 4 * MIB, raising=False)
    monkeypatch.setattr(torch.backends.cuda, "cublaslt_workspace_size", lambda: MIB, raising=False)
    assert bw.cuda_blas_workspace_bytes("cuda:0") == 10 * MIB
    monkeypatch.setattr(torch.backends.cuda, "cublas_workspace_size", None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(major=9))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    assert bw.cuda_blas_workspace_bytes("cuda:0") == 66 * MIB
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2")
    assert bw.cuda_blas_workspace_bytes("cuda:0") == 2 * (8 + 1) * MIB


def test_clear_is_a_no_op_without_cuda():
    from ddpfsdp.demos.measure.blas_workspaces import clear_blas_workspaces

    assert clear_blas_workspaces("cpu") is False


def test_every_run_in_a_process_pays_for_its_own_workspaces(monkeypatch):
    """Two runs in one process, as `compare` makes them, on a stand-in for the CUDA allocator: the
    workspaces a run's warm-up allocates outlive it, and the baseline frees them first, so the
    second run's peak above its baseline holds them as the first run's does."""
    from ddpfsdp.demos.measure import memory

    workspaces = 66 * MIB
    state = {"allocated": 0, "workspaces": 0, "clears": 0}

    def clear(device):
        state["clears"] += 1
        state["allocated"] -= state["workspaces"]
        state["workspaces"] = 0
        return True

    monkeypatch.setattr(memory, "clear_blas_workspaces", clear)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])

    def run_peak() -> int:
        baseline = PeakMemory.before_run("cuda:0")
        model = 100 * MIB
        state["allocated"] += model
        if not state["workspaces"]:  # the warm-up's first matmuls, forward and backward
            state["workspaces"] = workspaces
            state["allocated"] += workspaces
        peak = state["allocated"] + 20 * MIB  # activations at the peak
        state["allocated"] -= model
        return peak - baseline

    first, second = run_peak(), run_peak()
    assert state["clears"] == 2
    assert first == second == (100 + 20 + 66) * MIB


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
