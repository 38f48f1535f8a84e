"""DDP, ZeRO-1, FSDP2 and FSDP1 wrapping, trained for real on gloo CPU processes.

One group of 2 processes trains the tiny GPT under every configuration in turn (and one of 4
processes the hybrid ones); the per-rank records are reused by the asserts below.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import fork_ranks

from ddpfsdp.demos.train.spec import RunSpec, canonical_sharding
from ddpfsdp.demos.parallel.strategies import ROOT_UNIT

# Starting the process groups dominates; on a busy 2-core machine it can pass the default limit.
pytestmark = pytest.mark.timeout(600)

STEPS = 3
BATCH = 4
SEED = 7

# name -> (arch, RunSpec options, checkpoint_activations)
TWO_RANKS = {
    "ddp": ("gpt", dict(strategy="ddp", bucket_mb=1), False),
    "zro": ("gpt", dict(strategy="zro"), False),
    "fsdp2-full": ("gpt", dict(strategy="fsdp", sharding="full"), False),
    "fsdp2-grad-op": ("gpt", dict(strategy="fsdp", sharding="SHARD_GRAD_OP"), False),
    "fsdp2-layer": ("gpt", dict(strategy="fsdp", sharding="full", wrap="layer"), False),
    "fsdp2-model": ("gpt", dict(strategy="fsdp", sharding="full", wrap="model"), False),
    "fsdp2-no-shard": ("gpt", dict(strategy="fsdp", sharding="no-shard"), False),
    "fsdp2-ckpt": ("gpt", dict(strategy="fsdp", sharding="full"), True),
    "fsdp2-layer-grad-op-ckpt": ("gpt", dict(strategy="fsdp", sharding="grad-op", wrap="layer"), True),
    "fsdp1-ckpt": ("gpt", dict(strategy="fsdp", sharding="full", fsdp_api=1), True),
    "fsdp1-layer-ckpt": ("gpt", dict(strategy="fsdp", sharding="full", fsdp_api=1, wrap="layer"), True),
    "ddp-ckpt": ("gpt", dict(strategy="ddp"), True),
    "fsdp1-full": ("gpt", dict(strategy="fsdp", sharding="FULL_SHARD", fsdp_api=1), False),
    "fsdp1-grad-op": ("gpt", dict(strategy="fsdp", sharding="grad-op", fsdp_api=1, wrap="layer"), False),
    "ddp-bf16-mixed": ("gpt", dict(strategy="ddp", precision="bf16-mixed"), False),
    "fsdp2-bf16-mixed": ("gpt", dict(strategy="fsdp", precision="bf16-mixed"), False),
    "fsdp2-bf16": ("gpt", dict(strategy="fsdp", precision="bf16"), False),
    "fsdp1-bf16-mixed": ("gpt", dict(strategy="fsdp", precision="bf16-mixed", fsdp_api=1), False),
    "ddp-sgd": ("gpt", dict(strategy="ddp", optimizer="sgd", lr=0.1), False),
    "fsdp2-sgd": ("gpt", dict(strategy="fsdp", optimizer="sgd", lr=0.1), False),
    "vit-fsdp2": ("vit", dict(strategy="fsdp"), False),
    "vit-ddp": ("vit", dict(strategy="ddp"), False),
    "resnet-fsdp2": ("resnet", dict(strategy="fsdp"), False),
    "resnet-fsdp1": ("resnet", dict(strategy="fsdp", fsdp_api=1), False),
    "resnet-ddp": ("resnet", dict(strategy="ddp"), False),
    "resnet-fsdp2-bf16-mixed": ("resnet", dict(strategy="fsdp", precision="bf16-mixed", wrap="layer"), False),
    "resnet-zro-bf16-mixed": ("resnet", dict(strategy="zro", precision="bf16-mixed"), False),
    "resnet-fsdp1-bf16-mixed": ("resnet", dict(strategy="fsdp", precision="bf16-mixed", fsdp_api=1), False),
    # Options left None mean RunSpec's defaults, and a number given as text is read as one.
    "fsdp-defaults": ("gpt", dict(strategy="fsdp", sharding=None, wrap=None, fsdp_api="2", precision=None,
                                  optimizer=None, lr=None, replicas=None), False),
}

FOUR_RANKS = {
    "ddp": ("gpt", dict(strategy="ddp"), False),
    "fsdp2-hybrid": ("gpt", dict(strategy="fsdp", sharding="hybrid", replicas=2), False),
    "fsdp1-hybrid": ("gpt", dict(strategy="fsdp", sharding="HYBRID_SHARD", replicas=2, fsdp_api=1), False),
}


def _local_numel(t: torch.Tensor) -> int:
    return t.to_local().numel() if hasattr(t, "to_local") else t.numel()


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _spec_of(options: dict) -> RunSpec:
    """The RunSpec of a case's options ("strategy" and RunSpec's option names)."""
    rest = {k: v for k, v in options.items() if k != "strategy"}
    return RunSpec.from_options(rest, options["strategy"])


def _train(arch: str, options: dict, checkpoint: bool, rank: int, world_size: int) -> dict:
    from ddpfsdp.demos.train.data import compute_loss, make_loader
    from ddpfsdp.demos.train.models import build_model, count_params
    from ddpfsdp.demos.parallel.parallelize import World, parallelize

    model = build_model(arch, "tiny", seed=SEED)
    total = count_params(model)
    prepared = parallelize(model, _spec_of({**options, "checkpoint_activations": checkpoint}), World(world_size),
                           torch.device("cpu"))
    loader, sampler = make_loader(arch, model, batch_size=BATCH, rank=rank, world_size=world_size, seed=SEED,
                                  num_samples=BATCH * world_size * STEPS)
    sampler.set_epoch(0)
    losses = []
    for batch in loader:
        with prepared.autocast():
            loss = compute_loss(arch, prepared.model, batch)
        loss.backward()
        prepared.optimizer.step()
        prepared.optimizer.zero_grad(set_to_none=False)
        losses.append(loss.item())

    params = list(prepared.model.parameters())
    record = {
        "losses": losses,
        "total_params": total,
        "local_params": sum(_local_numel(p) for p in params),
        "param_dtypes": sorted({str(p.dtype) for p in params}),
        "dtensor": all(hasattr(p, "to_local") for p in params),
        "units": prepared.units,
        "unit_params": prepared.unit_params,
        "describe": prepared.describe(),
        "mesh": list(prepared.mesh.shape) if prepared.mesh is not None else None,
    }
    if options.get("strategy") == "zro":
        record["optimizer_state_numel"] = sum(
            t.numel() for state in prepared.optimizer.optim.state.values() for t in state.values()
            if torch.is_tensor(t) and t.dim() > 0
        )
    # Every rank's view of the trained model, assembled whole (all-gathering shards where sharded).
    if options.get("fsdp_api", 2) == 1:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.summon_full_params(prepared.model):
            weights = [p.detach().float().clone() for p in prepared.model.parameters()]
    else:
        weights = [_full(p.detach()).float() for p in prepared.model.parameters()]
    record["checksum"] = float(sum(w.double().sum() for w in weights))
    record["first_weight"] = weights[0].flatten()[:16].tolist()
    return record


def _rank_main(rank: int, world_size: int, store: str, out_dir: str, configs: dict) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        results = {name: _train(*config, rank, world_size) for name, config in configs.items()}
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Leave as the demo worker does, without interpreter teardown, where gloo's destructors can
    # abort a rank after a clean run.
    os._exit(0)


def _run(tmp_path: Path, world_size: int, configs: dict) -> list[dict]:
    fork_ranks(_rank_main, world_size, (world_size, str(tmp_path / "store"), str(tmp_path), configs), timeout_s=240)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("two-ranks"), 2, TWO_RANKS)


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("four-ranks"), 4, FOUR_RANKS)


def test_canonical_sharding():
    assert canonical_sharding("full") == "full"
    assert canonical_sharding("FULL_SHARD") == "full"
    assert canonical_sharding("shard_grad_op") == "grad-op"
    assert canonical_sharding("Hybrid_Shard") == "hybrid"
    assert canonical_sharding("NO_SHARD") == "no-shard"
    assert canonical_sharding("GRAD-OP") == "grad-op"
    with pytest.raises(ValueError, match="full, grad-op, hybrid, no-shard, FULL_SHARD"):
        canonical_sharding("zero3")


@pytest.mark.dist
@pytest.mark.parametrize("name", list(TWO_RANKS))
def test_every_strategy_trains(two, name):
    for rank in two:
        losses = rank[name]["losses"]
        assert len(losses) == STEPS and all(torch.isfinite(torch.tensor(losses)))
    # Every replica / shard group ends with the same model.
    assert two[0][name]["checksum"] == two[1][name]["checksum"]
    assert two[0][name]["first_weight"] == two[1][name]["first_weight"]


@pytest.mark.dist
def test_training_lowers_the_loss(two):
    for name in ("ddp", "fsdp2-full", "fsdp1-full"):
        losses = two[0][name]["losses"]
        assert losses[-1] < losses[0]


@pytest.mark.dist
def test_ddp_and_fsdp_give_the_same_losses_in_fp32(two):
    for rank in two:
        reference = rank["ddp"]["losses"]
        for name in ("zro", "fsdp2-full", "fsdp2-grad-op", "fsdp2-layer", "fsdp2-model", "fsdp2-no-shard",
                     "fsdp2-ckpt", "fsdp2-layer-grad-op-ckpt", "fsdp1-full", "fsdp1-grad-op", "fsdp1-ckpt",
                     "fsdp1-layer-ckpt", "ddp-ckpt"):
            torch.testing.assert_close(rank[name]["losses"], reference, rtol=1e-4, atol=0, msg=name)
    torch.testing.assert_close(two[0]["fsdp2-sgd"]["losses"], two[0]["ddp-sgd"]["losses"], rtol=1e-4, atol=0)
    torch.testing.assert_close(two[0]["fsdp-defaults"]["losses"], two[0]["fsdp2-full"]["losses"], rtol=0, atol=0)
    for arch in ("vit", "resnet"):  # BatchNorm uses each rank's batch statistics under both wrappers
        for name in (f"{arch}-fsdp2", *((f"{arch}-fsdp1",) if arch == "resnet" else ())):
            torch.testing.assert_close(two[0][name]["losses"], two[0][f"{arch}-ddp"]["losses"], rtol=1e-4, atol=0)
    # Same data on each rank in every strategy: rank 0's first loss is bit-identical (same weights, same batch).
    assert two[0]["fsdp2-full"]["losses"][0] == two[0]["ddp"]["losses"][0]
    assert two[0]["fsdp2-full"]["first_weight"] == pytest.approx(two[0]["ddp"]["first_weight"], rel=1e-4, abs=1e-6)


@pytest.mark.dist
def test_fsdp2_holds_half_of_the_parameters_as_dtensor_shards(two):
    total = two[0]["ddp"]["total_params"]
    assert two[0]["ddp"]["local_params"] == total
    for name in ("fsdp2-full", "fsdp2-grad-op", "fsdp2-layer", "fsdp2-model"):
        record = two[0][name]
        assert record["dtensor"]
        assert sum(r[name]["local_params"] for r in two) == total  # every dimension here divides by 2
        assert record["local_params"] == pytest.approx(total / 2, rel=0.01)
    assert two[0]["fsdp2-no-shard"]["local_params"] == total
    assert two[0]["fsdp2-no-shard"]["mesh"] == [2, 1]


@pytest.mark.dist
def test_fsdp1_holds_flat_shards(two):
    total = two[0]["ddp"]["total_params"]
    record = two[0]["fsdp1-full"]
    assert not record["dtensor"]
    # use_orig_params: each rank's original parameters are views into its shard of the flat parameter.
    assert sum(r["fsdp1-full"]["local_params"] for r in two) == total
    assert record["local_params"] == pytest.approx(total / 2, rel=0.01)


@pytest.mark.dist
def test_zro_shards_only_the_optimizer_state(two):
    total = two[0]["ddp"]["total_params"]
    assert two[0]["zro"]["local_params"] == total
    states = [r["zro"]["optimizer_state_numel"] for r in two]
    assert sum(states) == 2 * total  # AdamW's two moments, split between the ranks
    assert min(states) > 0.3 * total  # both ranks own a real share


@pytest.mark.dist
def test_units_and_their_parameters(two):
    total = two[0]["ddp"]["total_params"]
    assert two[0]["ddp"]["units"] == [] and two[0]["ddp"]["unit_params"] == []

    block = two[0]["fsdp2-full"]
    assert block["units"] == ["embeddings", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "head", ROOT_UNIT]
    assert sum(block["unit_params"]) == total and block["unit_params"][-1] == 0
    assert block["unit_params"][0] == 512 * 128 + 64 * 128

    layer = two[0]["fsdp2-layer"]
    assert layer["units"][:4] == ["embeddings", "blocks.0", "blocks.0.attn", "blocks.0.mlp"]
    assert layer["unit_params"][1] == 4 * 128  # the block keeps only its two LayerNorms
    assert sum(layer["unit_params"]) == total

    assert two[0]["fsdp2-model"]["units"] == [ROOT_UNIT]
    assert two[0]["fsdp2-model"]["unit_params"] == [total]

    # FSDP1 reports what its flat parameters actually hold: the same split as FSDP2's per-block units.
    assert two[0]["fsdp1-full"]["units"] == block["units"]
    assert two[0]["fsdp1-full"]["unit_params"] == block["unit_params"]
    assert two[0]["fsdp1-grad-op"]["unit_params"] == layer["unit_params"]


@pytest.mark.dist
def test_precisions(two):
    assert two[0]["fsdp2-bf16"]["param_dtypes"] == ["torch.bfloat16"]
    assert two[0]["fsdp2-bf16-mixed"]["param_dtypes"] == ["torch.float32"]  # bf16 only for compute
    assert two[0]["ddp-bf16-mixed"]["param_dtypes"] == ["torch.float32"]
    # bf16 compute really happens: the losses differ from fp32's, but not by much.
    for name in ("ddp-bf16-mixed", "fsdp2-bf16-mixed", "fsdp1-bf16-mixed", "fsdp2-bf16", "resnet-fsdp2-bf16-mixed",
                 "resnet-zro-bf16-mixed", "resnet-fsdp1-bf16-mixed"):
        reference = "resnet-ddp" if name.startswith("resnet") else "ddp"
        ours, fp32 = two[0][name]["losses"], two[0][reference]["losses"]
        assert ours != fp32
        torch.testing.assert_close(ours, fp32, rtol=0.05, atol=0)


@pytest.mark.dist
def test_describe_says_what_was_built(two):
    assert two[0]["ddp"]["describe"].startswith("DDP, 2 replicas, 1 MB gradient buckets")
    assert "ZeroRedundancyOptimizer" in two[0]["zro"]["describe"]
    assert "FSDP2 fully_shard, sharding grad-op, wrap block: 7 units, mesh dp_shard 2" in two[0]["fsdp2-grad-op"]["describe"]
    assert "FSDP1 FullyShardedDataParallel, sharding full" in two[0]["fsdp1-full"]["describe"]
    assert "SGD (fused) lr 0.1" in two[0]["ddp-sgd"]["describe"]  # the implementation auto chose, named


@pytest.mark.dist
def test_hybrid_on_four_ranks(four):
    total = four[0]["ddp"]["total_params"]
    for name in ("fsdp2-hybrid", "fsdp1-hybrid"):
        assert four[0][name]["mesh"] == [2, 2]
        # Sharded within a group of 2, replicated across the 2 groups.
        assert four[0][name]["local_params"] == pytest.approx(total / 2, rel=0.01)
        assert len({r[name]["checksum"] for r in four}) == 1
        for rank in four:
            torch.testing.assert_close(rank[name]["losses"], rank["ddp"]["losses"], rtol=1e-4, atol=0, msg=name)


def test_bad_choices_are_value_errors():
    from ddpfsdp.demos.train.models import build_model
    from ddpfsdp.demos.parallel.parallelize import World, parallelize

    model = build_model("gpt", "tiny", seed=0, layers=1)
    for options, message in [
        (dict(strategy="zero3"), "choose one of ddp, zro, fsdp"),
        (dict(strategy="ddp", precision="fp16"), "choose one of fp32, bf16-mixed, bf16"),
        (dict(strategy="ddp", optimizer="adam"), "choose one of adamw, sgd"),
        (dict(strategy="fsdp", wrap="unit"), "choose one of block, layer, model"),
        (dict(strategy="fsdp", fsdp_api=3), "choose one of 1, 2"),
        (dict(strategy="fsdp", sharding="hybrid", replicas=3), "replicas must be at least 2, divide the world size"),
    ]:
        with pytest.raises(ValueError, match=message):
            parallelize(model, _spec_of(options), World(4), "cpu")
