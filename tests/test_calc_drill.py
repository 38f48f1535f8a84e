"""The analytic model's DDP bucket and DistributedSampler rules, checked against torch itself."""

from __future__ import annotations

import random
import textwrap

import pytest
from conftest import run_script_on_ranks

from ddpfsdp.demos.theory.buckets import DDP_BUCKET_CAP_MB, DDP_FIRST_BUCKET_BYTES, ddp_bucket_bytes
from ddpfsdp.demos.theory.gpt_layout import gpt_param_numels
from ddpfsdp.demos.theory.quiz_answers import q_ddp_buckets, q_min_zero_stage, q_sampler_index
from ddpfsdp.demos.theory.sampler import sampler_indices


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_indices_match_distributed_sampler(drop_last):
    from torch.utils.data import DistributedSampler

    for length in range(1, 30):
        for replicas in range(1, 9):
            if drop_last and length < replicas:
                continue  # torch gives every rank nothing here; the drill never asks it
            for rank in range(replicas):
                sampler = DistributedSampler(range(length), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
                assert sampler_indices(length, replicas, rank, drop_last) == list(sampler), (length, replicas, rank)


def test_sampler_pads_from_the_start_and_drop_last_trims():
    assert sampler_indices(10, 4, 1) == [1, 5, 9]
    assert sampler_indices(10, 4, 3) == [3, 7, 1]  # 10, 11 wrap to 0, 1
    assert sampler_indices(10, 4, 3, drop_last=True) == [3, 7]
    assert sampler_indices(3, 8, 7) == [1]  # padding longer than the data repeats it
    assert q_sampler_index(dataset_len=10, num_replicas=4, rank=3, position=3) == 1
    with pytest.raises(ValueError, match="past the end"):
        q_sampler_index(dataset_len=10, num_replicas=4, rank=3, position=4, drop_last=True)
    with pytest.raises(ValueError, match="rank 4"):
        sampler_indices(10, 4, 4)


def test_bucket_rule_matches_torchs_bucket_assignment():
    import torch
    import torch.distributed as dist

    rng = random.Random(0)
    for _ in range(40):
        numels = [rng.choice([1, 17, 4096, 70_000, 300_000, 2_000_000, 7_000_000]) for _ in range(rng.randint(1, 25))]
        tensors = [torch.empty(n) for n in numels]
        for cap_mb in (None, 2, 25):
            cap = (cap_mb or DDP_BUCKET_CAP_MB) * 2**20
            first = DDP_FIRST_BUCKET_BYTES if cap_mb is None else cap
            # The rebuild path: tensors in the order their gradients arrived, limits [first, cap].
            buckets, _ = dist._compute_bucket_assignment_by_size(
                tensors, [first, cap], [False] * len(tensors), list(range(len(tensors)))
            )
            torch_sizes = [sum(numels[i] * 4 for i in bucket) for bucket in buckets]
            assert ddp_bucket_bytes([n * 4 for n in numels], cap_mb) == torch_sizes


def test_first_bucket_is_1mib_only_with_the_default_cap():
    import torch.distributed as dist
    from torch.nn.parallel import distributed

    assert dist._DEFAULT_FIRST_BUCKET_BYTES == DDP_FIRST_BUCKET_BYTES
    assert distributed._DEFAULT_BUCKET_CAP_MB == DDP_BUCKET_CAP_MB
    default = distributed._BucketCapacityConfig.create(None, None, False)
    explicit = distributed._BucketCapacityConfig.create(25, None, False)
    assert default.first_bucket_bytes_cap == 2**20
    assert explicit.first_bucket_bytes_cap == explicit.bucket_bytes_cap == 25 * 2**20


def test_gpt_param_numels_follow_the_models_registration_order():
    from ddpfsdp.demos.train.models import build_model
    from ddpfsdp.demos.base.shapes import GPT_PRESETS

    shape = GPT_PRESETS["small"]
    model = build_model("gpt", "small", seed=0, device="meta")
    assert gpt_param_numels(shape.layers, shape.d_model, shape.vocab, shape.seq_len) == [p.numel() for p in model.parameters()]


_DDP_REBUILD = textwrap.dedent(
    """
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {}
    for cap in (None, 2):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(256, 256 * (1 + i % 3)) if i % 2 == 0 else torch.nn.Linear(256 * (1 + (i - 1) % 3), 256) for i in range(12)])
        ddp = DistributedDataParallel(model) if cap is None else DistributedDataParallel(model, bucket_cap_mb=cap)
        # Buckets are rebuilt at the start of the second iteration, in the order the first one's
        # gradients arrived; the third shows them in use.
        for _ in range(3):
            ddp(torch.randn(2, 256)).sum().backward()
        data = ddp._get_ddp_logging_data()
        out[str(cap)] = {
            "rebuilt": [int(x) for x in data["rebuilt_bucket_sizes"].split(", ")],
            "params": [p.numel() * p.element_size() for p in model.parameters()],
        }
    """
)


@pytest.mark.dist
def test_bucket_rule_matches_a_real_ddp_rebuild(tmp_path):
    # One gloo process is enough: DDP rebuilds its buckets after the first iteration at any world size.
    measured = run_script_on_ranks(_DDP_REBUILD, tmp_path, nprocs=1)[0]
    for cap, run in measured.items():
        cap_mb = None if cap == "None" else float(cap)
        # A Sequential's gradients arrive in reverse registration order.
        assert ddp_bucket_bytes(list(reversed(run["params"])), cap_mb) == run["rebuilt"], cap
    assert len(measured["None"]["rebuilt"]) != len(measured["2"]["rebuilt"])


def test_min_zero_stage_and_buckets_answers():
    # 7B, bf16-mixed AdamW (16 B/param) on 16 GPUs of 40 GB: DDP 112, ZeRO-1 59.5, ZeRO-2 33.25 GB.
    assert q_min_zero_stage(params="7B", gpus=16, gpu_mem="40GB", precision="bf16-mixed", optimizer="adamw") == 2
    assert q_min_zero_stage(params="7B", gpus=16, gpu_mem="120GB", precision="bf16-mixed", optimizer="adamw") == 0
    with pytest.raises(ValueError, match="even ZeRO-3"):
        q_min_zero_stage(params="405B", gpus=8, gpu_mem="24GB", precision="fp32", optimizer="adamw")
    # Every big matrix of a d=4096 block is larger than 25 MiB, so each takes its own bucket:
    # head, 4 per block, and the embeddings at the end (with the first block's LayerNorm).
    assert q_ddp_buckets(layers=32, d_model=4096, vocab=32000, seq_len=4096, grad_bytes=4) == 1 + 4 * 32 + 2
