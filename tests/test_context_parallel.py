"""Context parallelism on real ranks (`demo cp`): the ring written by hand against one process's attention,
the sequence's layout, the degrees, the demo's one shared launch (4 ranks: dp 2 x cp 2, the tiny GPT, the
question bank's configuration) and a simulated world.

The ring's own test runs it on 4 forked ranks (cp 4, both splits, fp32 and bf16) without the demo; the
demo's launch is the session's one (tests/demo_runs.py), shared with tests/test_bank_evidence.py.
"""

from __future__ import annotations

import io

import pytest
from conftest import run_script_on_ranks
from rich.console import Console

from ddpfsdp.demos import registry
from ddpfsdp.demos.parallel.degrees import ParallelDims
from ddpfsdp.demos.registry import CONTEXT_PARALLEL_CHECKS, SIMULATED_ONLY_CHECKS, load
from ddpfsdp.demos.result.schema import DemoResult
from ddpfsdp.demos.theory.context_parallel import kv_block_bytes, ring_sends
from ddpfsdp.demos.train.spec import RunSpec

BANK_ARGS = ("--model", "tiny")  # the question bank's link: 4 ranks by default (two dp groups of cp 2)


# ----------------------------------------------------------------------------- the layout and the degrees


def test_layout_head_tail_and_contiguous():
    from ddpfsdp.demos.parallel.context_parallel import SequenceLayout

    balanced = [SequenceLayout(4, r, 64) for r in range(4)]
    assert [layout.chunks for layout in balanced] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    assert balanced[1].positions("cpu").tolist() == [*range(8, 16), *range(48, 56)]
    contiguous = SequenceLayout(4, 3, 64, balanced=False)
    assert contiguous.chunks == (3,) and contiguous.positions("cpu").tolist() == list(range(48, 64))
    import torch

    tokens = torch.arange(128).view(2, 64)
    assert balanced[0].take(tokens).tolist()[1] == [*range(64, 72), *range(120, 128)]
    # every token on exactly one rank
    assert sorted(p for layout in balanced for p in layout.positions("cpu").tolist()) == list(range(64))
    with pytest.raises(ValueError, match="not a multiple of 8"):
        SequenceLayout(4, 0, 60)


def test_degrees_of_a_cp_run():
    run = RunSpec.for_demo("cp", {})
    assert (run.strategy, run.sharding, run.cp, run.cp_split) == ("fsdp", "full", 2, "head-tail")
    assert ParallelDims.fewest_ranks(run) == 4 and run.ranks_per_batch == 2
    four = ParallelDims.of(run, 4)
    assert (four.dp_shard, four.cp, four.fsdp_size, four.dp, four.mesh_shape) == (2, 2, 4, 2, {"dp_shard": 2, "cp": 2})
    alone = ParallelDims.of(run, 2)
    assert (alone.dp_shard, alone.fsdp_size, alone.mesh_shape) == (1, 2, {"cp": 2})
    with pytest.raises(ValueError, match="--cp 2 must divide the world of 3 ranks"):
        ParallelDims.of(run, 3)
    with pytest.raises(ValueError, match="not with --tp"):
        ParallelDims.of(RunSpec.from_options({"cp": 2, "tp": 2}, "fsdp"), 4)
    assert RunSpec.for_demo("fsdp", {}).cp is None


def test_per_layer_sends_from_the_calls_a_ring_records():
    from ddpfsdp.demos.parallel.context_parallel import CallRecord
    from ddpfsdp.demos.train.context import per_layer_sends

    forward = CallRecord(phase="forward", kv_sends=3, kv_bytes=300, dkv_sends=0, dkv_bytes=0, pairs=1)
    backward = CallRecord(phase="backward", kv_sends=3, kv_bytes=300, dkv_sends=4, dkv_bytes=400, pairs=1)
    two_steps_two_layers = [forward, forward, backward, backward] * 2
    sends = per_layer_sends(two_steps_two_layers, layers=2)
    assert sends == {"forward_kv_blocks": 3, "backward_kv_blocks": 3, "backward_dkv_blocks": 4,
                     "forward_bytes": 300, "backward_bytes": 700, "bytes": 1000}
    recomputed = per_layer_sends([forward, forward, forward, forward, backward, backward], layers=2)
    assert recomputed["forward_kv_blocks"] == 6


# ----------------------------------------------------------------------------- the ring on real ranks

_RING = '''
import torch, torch.distributed as dist, torch.nn.functional as F
from ddpfsdp.demos.parallel.context_parallel import Ring, SequenceLayout, ring_attention

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
out = {}
for dtype in (torch.float32, torch.bfloat16):
    generator = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(2, 3, 32, 8, generator=generator).to(dtype) for _ in range(4))
    whole = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*whole, is_causal=True)
    expected.backward(dout)
    for balanced in (True, False):
        layout = SequenceLayout(world, rank, 32, balanced)
        ring = Ring(dist.group.WORLD, layout)
        mine = [layout.take(t, 2).requires_grad_() for t in (q, k, v)]
        got = ring_attention(*mine, ring)
        got.backward(layout.take(dout, 2))
        pairs = [(g - layout.take(w, 2)).abs().max().item() for g, w in
                 [(got.detach(), expected.detach())] + [(m.grad, w.grad) for m, w in zip(mine, whole)]]
        out[f"{str(dtype)[6:]} {'head-tail' if balanced else 'contiguous'}"] = {"errors": pairs, "ledger": ring.ledger}
'''


@pytest.mark.dist
def test_ring_equals_one_process_attention_and_sends_what_torch_sends(tmp_path):
    ranks = run_script_on_ranks(_RING, tmp_path, nprocs=4)
    for key in ranks[0]:
        dtype, split = key.split()
        tolerance = 1e-5 if dtype == "float32" else 5e-2
        worst = max(max(rank[key]["errors"]) for rank in ranks)
        assert worst < tolerance, (key, worst)
        element = 4 if dtype == "float32" else 2
        theory = ring_sends(4, kv_block_bytes(2, 32, 4, 3 * 8, element), kv_block_bytes(2, 32, 4, 3 * 8, 4))
        for rank in ranks:
            forward, backward = rank[key]["ledger"]
            assert (forward["kv_sends"], forward["kv_bytes"]) == (theory["forward_kv_blocks"], theory["forward_bytes"])
            assert (backward["kv_sends"], backward["dkv_sends"]) == (theory["backward_kv_blocks"],
                                                                    theory["backward_dkv_blocks"])
            assert backward["kv_bytes"] + backward["dkv_bytes"] == theory["backward_bytes"]  # dK/dV in fp32
        pairs = [rank[key]["ledger"][0]["pairs"] for rank in ranks]
        chunk = 32 // (8 if split == "head-tail" else 4)
        if split == "head-tail":  # (2cp-1)·n² + n(n+1) per batch x head, the same on every rank
            assert pairs == [6 * (7 * chunk * chunk + chunk * (chunk + 1))] * 4
        else:  # rank r: r full blocks and its diagonal
            assert pairs == [6 * (r * chunk * chunk + chunk * (chunk + 1) // 2) for r in range(4)]


# ----------------------------------------------------------------------------- the demo's launch


@pytest.fixture(scope="module")
def cp_run(demo_run):
    run = demo_run("cp", *BANK_ARGS, procs=4)
    run.assert_ok()
    return run


@pytest.fixture(scope="module")
def cp_result(cp_run) -> DemoResult:
    return DemoResult.from_json(cp_run.result)


@pytest.mark.dist
def test_every_check_of_the_run_passes_and_is_the_registrys(cp_result):
    names = [check.name for check in cp_result.checks]
    assert set(names) == set(CONTEXT_PARALLEL_CHECKS) - SIMULATED_ONLY_CHECKS
    failed = [f"{check.name}: {check.detail}" for check in cp_result.checks if not check.passed]
    assert not failed, "\n".join(failed)


@pytest.mark.dist
def test_the_run_reports_its_ring_and_its_groups(cp_result):
    config, block = cp_result.config, cp_result.extra["context_parallel"]
    assert (config.world_size, config.cp, config.cp_split) == (4, 2, "head-tail")
    assert (block["cp"], block["dp"], block["chunks"]) == (2, 2, [[0, 3], [1, 2], [0, 3], [1, 2]])
    assert set(cp_result.comm.per_group) == {"fsdp", "cp"}
    assert set(cp_result.comm.per_group["cp"]) == {"send", "recv"}
    assert {"all_gather", "reduce_scatter"} == set(cp_result.comm.per_group["fsdp"])
    # the recorded step shows each rank's sends and receives, each one completed
    for rank in cp_result.timeline.ranks:
        p2p = [c for c in rank["collectives"] if c["op"] in ("send", "recv")]
        assert len(p2p) == 2 * 4 * (1 + 1 + 2) and all(c["completed_s"] is not None for c in p2p)
    assert cp_result.theory["context_parallel"]["ring_per_layer"]["bytes"] == block["sends"][0]["bytes"]


@pytest.mark.dist
def test_the_trace_shows_every_rank_s_sends(cp_run):
    assert cp_run.trace is not None, "rank 0 wrote no trace"
    events = cp_run.trace["traceEvents"]
    for op in ("send", "recv"):
        ranks = {e["pid"] for e in events if e.get("name") == op and e.get("ph") == "X"}
        assert len(ranks) == 4, (op, ranks)


@pytest.mark.dist
def test_render_and_evidence_view_fit_80_columns(cp_result):
    out = io.StringIO()
    load(registry.get("cp").render)(cp_result, Console(file=out, width=80))
    text = out.getvalue()
    assert "The ring's sends per attention layer and step (measured; cp 2)" in text
    assert "> send, < recv" in text and "head-tail theory" in text
    views = load(registry.get("cp").evidence_view)(cp_result, 78)
    panel = io.StringIO()
    Console(file=panel, width=80).print(*views)
    assert max(map(len, panel.getvalue().splitlines())) <= 80


def test_a_simulated_cp_run_counts_the_same_ring(simulated):
    result = DemoResult.from_json(simulated("cp", {"simulate": True, "world": 8, "model": "tiny"}))
    assert result.config.simulated and (result.config.world_size, result.config.cp) == (8, 2)
    failed = [f"{check.name}: {check.detail}" for check in result.checks if not check.passed]
    assert not failed, "\n".join(failed)
    assert {check.name for check in result.checks} <= set(CONTEXT_PARALLEL_CHECKS)
    assert "ring_kv_sends_match_theory" in {check.name for check in result.checks}


@pytest.mark.parametrize("causal", [True, False])
def test_the_block_kernel_s_two_paths_agree(causal):
    """The plain-matmul path (what a GPU runs) gives what torch's CPU kernel gives, forward and backward,
    for a diagonal block and a rectangular one (the head-tail split's half blocks)."""
    import torch

    from ddpfsdp.demos.parallel.context_parallel import block_backward, block_forward

    generator = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, 8, 4, generator=generator)
    k, v = (torch.randn(2, 3, 8 if causal else 16, 4, generator=generator) for _ in range(2))
    dout = torch.randn(2, 3, 8, 4, generator=generator)
    fused, plain = block_forward(q, k, v, causal, fused=True), block_forward(q, k, v, causal, fused=False)
    for a, b in zip(fused, plain):
        assert torch.allclose(a, b, atol=1e-5)
    out, lse = fused
    for a, b in zip(block_backward(dout, q, k, v, out, lse, causal, fused=True),
                    block_backward(dout, q, k, v, out, lse, causal, fused=False)):
        assert torch.allclose(a, b, atol=1e-5)
