"""CommCounter on real collectives: 2 gloo processes, plain ops, a subgroup, DDP and FSDP2."""

from __future__ import annotations

import textwrap

import pytest

from conftest import run_script_on_ranks

from ddpfsdp.demos.base.collectives import wire_factor

RANKS_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from ddpfsdp.demos.measure.comm import CommCounter

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {}

    t = torch.ones(1000)
    with CommCounter() as plain:
        dist.all_reduce(t)
        gathered = torch.empty(2000)
        dist.all_gather_into_tensor(gathered, t)
        shard = torch.empty(1000)
        dist.reduce_scatter_tensor(shard, gathered)
        dist.broadcast(t, src=0)
        listed = [torch.empty(1000), torch.empty(1000)]
        dist.all_gather(listed, t)
    out["plain"] = plain.per_op()
    out["plain_all_reduce_value"] = t[0].item()

    singles = [dist.new_group([0]), dist.new_group([1])]
    with CommCounter() as sub:
        dist.all_reduce(t, group=singles[rank])
        funcol.all_reduce(t, "sum", dist.group.WORLD).wait()
    out["sub"] = sub.per_op()
    out["sub_sizes"] = sub.group_sizes()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    grad_bytes = sum(p.numel() * 4 for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    per_step = []
    for step in range(3):
        with CommCounter() as comm:
            ddp(torch.randn(4, 64)).sum().backward()
        per_step.append(comm.per_op())
    out["ddp"] = per_step
    out["ddp_grad_bytes"] = grad_bytes

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    mesh = init_device_mesh("cpu", (2,))
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[2], mesh=mesh)
    fully_shard(model, mesh=mesh)
    model(torch.randn(4, 64)).sum().backward()  # lazy init outside the count
    with CommCounter() as comm:
        model(torch.randn(4, 64)).sum().backward()
    out["fsdp"] = comm.per_op()
    out["fsdp_param_bytes"] = param_bytes

    """
)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("comm")
    return run_script_on_ranks(RANKS_SCRIPT, folder)


def test_wire_factors():
    assert wire_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert wire_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert wire_factor("reduce_scatter", 2) == pytest.approx(1 / 2)
    assert wire_factor("all_reduce", 1) == 0.0
    assert wire_factor("all_to_all", 4) == pytest.approx(3 / 4)  # each rank keeps its own quarter
    assert wire_factor("send", 1) == 1.0 and wire_factor("recv", 8) == 0.0
    with pytest.raises(ValueError, match="all_reduce"):
        wire_factor("allreduce", 2)
    with pytest.raises(ValueError, match="at least 1"):
        wire_factor("all_gather", 0)


@pytest.mark.dist
def test_plain_collectives_counted_with_ring_wire_bytes(ranks):
    for out in ranks:
        plain = out["plain"]
        assert out["plain_all_reduce_value"] == 2.0  # the collective really ran
        assert plain["all_reduce"] == {"count": 1, "bytes": 4000, "wire_bytes_per_rank": 4000.0}
        # all_gather: the gathered output is the buffer; the list form counts the same
        assert plain["all_gather"] == {"count": 2, "bytes": 16000, "wire_bytes_per_rank": 8000.0}
        assert plain["reduce_scatter"] == {"count": 1, "bytes": 8000, "wire_bytes_per_rank": 4000.0}
        assert plain["broadcast"] == {"count": 1, "bytes": 4000, "wire_bytes_per_rank": 2000.0}


@pytest.mark.dist
def test_group_size_comes_from_the_op_group(ranks):
    for out in ranks:
        # a one-rank group sends nothing; the functional all_reduce on the world sends 2(n-1)/n
        assert out["sub"]["all_reduce"]["count"] == 2
        assert out["sub"]["all_reduce"]["bytes"] == 8000
        assert out["sub"]["all_reduce"]["wire_bytes_per_rank"] == 4000.0
        assert out["sub_sizes"]["all_reduce"] == [1, 2]


@pytest.mark.dist
def test_ddp_all_reduces_gradients_only(ranks):
    for out in ranks:
        steady = out["ddp"][2]
        assert set(steady) == {"all_reduce"}
        assert steady["all_reduce"]["bytes"] == out["ddp_grad_bytes"]
    # DDP rebuilds its buckets after the first iteration and broadcasts then: why warm-up is skipped
    assert any("broadcast" in step for step in ranks[0]["ddp"][:2])


@pytest.mark.dist
def test_fsdp_all_gathers_params_and_reduce_scatters_grads(ranks):
    for out in ranks:
        fsdp = out["fsdp"]
        assert "all_reduce" not in fsdp
        assert fsdp["reduce_scatter"]["count"] == 2  # one per unit holding parameters
        # the reduce-scatter input is every gradient (plus shard padding)
        assert out["fsdp_param_bytes"] <= fsdp["reduce_scatter"]["bytes"] <= out["fsdp_param_bytes"] * 1.02
        # forward gathers each unit, backward again for those resharded after forward
        assert fsdp["all_gather"]["count"] >= 2
        assert fsdp["all_gather"]["bytes"] >= out["fsdp_param_bytes"]
