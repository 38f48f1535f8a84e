"""Pure pieces of the GPU paths (MFU, placement of meshes) that run the same on CPU."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from ddpfsdp.demos.train.models import build_model, count_params
from ddpfsdp.demos.base.shapes import shape_for
from ddpfsdp.demos.train.loop import flops_per_sample


def _counted_matmul_flops(arch: str) -> tuple[int, float]:
    """(FLOPs torch counts for one sample's forward and backward, without attention; the model's figure)."""
    model = build_model(arch, "tiny", seed=0)
    shape = shape_for(arch, "tiny")
    if arch == "gpt":
        inputs = torch.randint(0, shape.vocab, (1, shape.seq_len))
        tokens = shape.seq_len
    else:
        inputs = torch.randn(1, shape.channels, shape.image_size, shape.image_size)
        tokens = shape.tokens
    with FlopCounterMode(display=False) as counter:
        model(inputs).float().sum().backward()
    counted = sum(
        flops for op, flops in counter.get_flop_counts()["Global"].items()
        if "attention" not in str(op)  # some builds count the fused attention kernel, some do not
    )
    attention = 12 * shape.layers * shape.d_model * tokens * tokens
    return counted, flops_per_sample(arch, shape, count_params(model)) - attention


@pytest.mark.parametrize("arch", ["gpt", "vit"])
def test_flops_per_sample_counts_matmul_weights_only(arch):
    # Embedding tables are lookups, not matmuls: counting them as 6N would inflate MFU on GPUs
    # (by 16% for the GPT base preset).
    counted, modelled = _counted_matmul_flops(arch)
    assert modelled == pytest.approx(counted, rel=0.02)


def test_flops_per_sample_has_no_figure_for_resnet():
    assert flops_per_sample("resnet", shape_for("resnet", "tiny"), 1) is None


@pytest.mark.parametrize("name, bf16_flops_per_s", [
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA A100 80GB PCIe", 312e12),
    ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H100 NVL", 835e12),
    ("NVIDIA H200", 989e12),
    ("NVIDIA H200 NVL", 835e12),
    ("NVIDIA GH200 480GB", 989e12),
    ("NVIDIA A10", None),  # not an A100: no guess
    ("Tesla V100-SXM2-32GB", None),
])
def test_peak_flops_per_s_matches_the_data_sheet(monkeypatch, name, bf16_flops_per_s):
    from ddpfsdp.demos.measure import memory as measure

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    device = torch.device("cuda", 0)
    assert measure.peak_flops_per_s(device, "bf16-mixed") == bf16_flops_per_s
    assert measure.peak_flops_per_s(device, "bf16") == bf16_flops_per_s
    assert measure.peak_flops_per_s(torch.device("cpu"), "bf16") is None


@pytest.mark.parametrize("mfu, peak, shown", [
    (0.4123, 989e12, "MFU: 41.2%"),
    ("n/a", 989e12, "MFU: n/a (this model's FLOPs are not modelled)"),
    ("n/a", None, "MFU: n/a (no dense peak FLOP/s known for this device and precision)"),
])
def test_throughput_lines_say_why_mfu_is_missing(mfu, peak, shown):
    from ddpfsdp.demos.measure.report import throughput_lines

    result = {"throughput": {"samples_per_s": 10.0, "tokens_per_s": None, "timed_steps": 4, "mfu": mfu,
                             "peak_flops_per_s": peak, "step_time_s": {"median": 0.1, "min": 0.1, "max": 0.1}}}
    assert shown in throughput_lines(result)[1]


@pytest.fixture
def fake_world():
    """Rank 5 of a world of 8 in this process (2 nodes x 4 ranks as torchrun numbers them), no peers."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=5, world_size=8)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("device", [torch.device("cpu"), torch.device("cuda", 1)])
def test_hybrid_mesh_shards_within_a_node_and_replicates_across_nodes(fake_world, device):
    from ddpfsdp.demos.parallel.degrees import ParallelDims
    from ddpfsdp.demos.train.spec import RunSpec

    dims = ParallelDims.of(RunSpec(strategy="fsdp", sharding="hybrid", replicas=2), 8)
    mesh = dims.build_mesh(device.type)
    # The mesh's device type is the run's: CPU ranks on a GPU host must not get a CUDA mesh.
    assert mesh.device_type == device.type
    # FSDP2 shards over the last dim (frequent all-gathers and reduce-scatters on the fast links
    # inside a node) and all-reduces over the first (once per step, across nodes).
    assert mesh.mesh_dim_names == ("dp_replicate", "dp_shard") and dims.fsdp_mesh(mesh).ndim == 2
    assert mesh["dp_shard"].mesh.tolist() == [4, 5, 6, 7]
    assert mesh["dp_replicate"].mesh.tolist() == [1, 5]
