"""Context parallelism's theory (demos/theory/context_parallel.py) and `ddpfsdp calc --cp`: every figure
against a hand calculation written here, the ring's sends against what torch 2.13's own ring attention
sends, the balanced split against torch's head-tail load balancer, and bad input."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from fractions import Fraction

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.base.shapes import GPT_SIZES, GPTShape
from ddpfsdp.demos.theory import context_parallel as cp_theory
from ddpfsdp.quiz.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["calc", *args], terminal_width=200)


def document(*args: str) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- causal balance ---------------------------------------------------------------------------------


def test_compute_shares_by_hand():
    # cp 4, contiguous: chunk c costs c + 1/2 blocks of 16/2 = 8: 0.5/8, 1.5/8, 2.5/8, 3.5/8.
    assert cp_theory.causal_work_shares(4, balanced=False) == [Fraction(1, 16), Fraction(3, 16), Fraction(5, 16),
                                                                Fraction(7, 16)]
    # Head-tail over 8 chunks (32 blocks in all): rank r holds r and 7-r, (r + 1/2) + (7 - r + 1/2) = 8 = 1/4.
    assert cp_theory.causal_work_shares(4) == [Fraction(1, 4)] * 4
    for cp in range(1, 17):
        assert cp_theory.slowest_share(cp, balanced=False) == Fraction(2 * cp - 1, cp * cp)
        assert cp_theory.slowest_share(cp) == Fraction(1, cp)
        assert cp_theory.step_over_balanced(cp) == Fraction(2 * cp - 1, cp)
        assert sum(cp_theory.causal_work_shares(cp, balanced=False)) == 1


def _causal_pairs_per_rank(order: list[int], cp: int) -> list[int]:
    """(query, key) pairs with key <= query each rank computes, its queries being its slice of `order`."""
    size = len(order) // cp
    return [sum(position + 1 for position in order[r * size:(r + 1) * size]) for r in range(cp)]


def test_the_balanced_split_is_torchs_head_tail_load_balancer_and_evens_the_work_token_by_token():
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
        _create_default_load_balancer,
        _HeadTailLoadBalancer,
    )

    cp, chunk = 4, 16
    seq = 2 * cp * chunk
    order = _HeadTailLoadBalancer(seq, cp, "cpu")._generate_indices()[0].tolist()
    for rank in range(cp):
        held = order[rank * 2 * chunk:(rank + 1) * 2 * chunk]
        expected = [c * chunk + i for c in cp_theory.rank_chunks(cp, rank) for i in range(chunk)]
        assert held == expected, rank
    # Token by token the head-tail split is exactly even: (2cp - 1)·m² + m(m + 1) pairs per rank.
    pairs = _causal_pairs_per_rank(order, cp)
    assert pairs == [(2 * cp - 1) * chunk**2 + chunk * (chunk + 1)] * cp
    # The contiguous split's last rank does about (2cp-1)/cp² of all pairs (the block count, within 1/m).
    contiguous = _causal_pairs_per_rank(list(range(seq)), cp)
    assert contiguous[-1] / sum(contiguous) == pytest.approx(7 / 16, abs=1 / chunk)
    # torch balances only when S is a multiple of 2·cp; otherwise it runs the contiguous split, silently.
    assert _create_default_load_balancer(seq, cp, "cpu") is not None
    assert _create_default_load_balancer(seq + cp, cp, "cpu") is None


# --- the ring's bytes ---------------------------------------------------------------------------------


def test_ring_bytes_by_hand():
    # b 1, S 8192 over cp 4: 2048 tokens per rank; kv 4096 in bf16: K/V block 2·2048·4096·2 = 32 MiB.
    block = cp_theory.kv_block_bytes(1, 8192, 4, 4096, 2)
    assert block == 2 * 2048 * 4096 * 2 == 33_554_432
    grad = cp_theory.kv_block_bytes(1, 8192, 4, 4096, 4)
    sends = cp_theory.ring_sends(4, block, grad)
    # Forward 3 K/V blocks; backward 3 K/V blocks and 4 fp32 dK/dV blocks.
    assert sends["forward_bytes"] == 3 * 33_554_432
    assert sends["backward_bytes"] == 3 * 33_554_432 + 4 * 67_108_864
    assert sends["bytes"] == 469_762_048
    # Recomputed under checkpointing, the forward's ring runs again.
    assert cp_theory.ring_sends(4, block, grad, recompute=True)["bytes"] == 469_762_048 + 3 * 33_554_432
    # 32 layers: the quiz function gives the step's total.
    assert cp_theory.q_ring_bytes_per_step(layers=32, batch_size=1, seq_len=8192, cp=4, kv_dim=4096,
                                           precision="bf16-mixed") == 32 * 469_762_048


@contextmanager
def fake_world(rank: int, world: int):
    """This process as rank `rank` of a fake world (torch's fake process group: collectives return at once),
    torn down after; refused if a process group is already up, which it would replace."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    assert not dist.is_initialized(), "a process group is already up in this process"
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_ring_sends_are_what_torchs_ring_attention_sends(monkeypatch):
    """torch 2.13's `_templated_ring_attention` and its backward, run for each rank with a rotater that
    records every buffer handed to it: the count and bytes equal `ring_sends` on every rank."""
    import torch
    from torch.distributed.tensor.experimental._context_parallel import _attention as ring

    sent: list[tuple[int, torch.dtype]] = []

    class Recording:
        def __init__(self, pg, seq_dim, method=None):
            self.buffer = None

        def exchange_buffers(self, buffer):
            sent.append((buffer.numel() * buffer.element_size(), buffer.dtype))
            self.buffer = buffer

        def next_buffer(self):
            return self.buffer

    monkeypatch.setattr(ring, "_create_rotater", Recording)

    def forward_op(q, k, v, is_causal=None, **_):
        return torch.zeros_like(q), torch.zeros(q.shape[:-1], dtype=torch.float32)

    def backward_op(query, key, value, out, logsumexp, is_causal=None, **_):
        return torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)

    cp, batch, heads, local_tokens, head_dim = 4, 2, 2, 8, 4
    q = torch.zeros(batch, heads, local_tokens, head_dim, dtype=torch.bfloat16)
    block = cp_theory.kv_block_bytes(batch, local_tokens * cp, cp, heads * head_dim, 2)
    grad_block = cp_theory.kv_block_bytes(batch, local_tokens * cp, cp, heads * head_dim, 4)
    expected = cp_theory.ring_sends(cp, block, grad_block)
    for rank in range(cp):
        with fake_world(rank, cp) as group:
            sent.clear()
            out, lse = ring._templated_ring_attention(group, 2, forward_op, q, q, q, is_causal=True)
            forward = list(sent)
            sent.clear()
            ring._templated_ring_attention_backward(group, 2, backward_op, torch.zeros_like(q), "grad_out", q, q, q,
                                                    out, lse, True)
        assert len(forward) == expected["forward_kv_blocks"] and sum(b for b, _ in forward) == expected["forward_bytes"]
        assert sum(b for b, _ in sent) == expected["backward_bytes"], rank
        assert [dtype for _, dtype in sent].count(torch.float32) == expected["backward_dkv_blocks"]
        assert len(sent) == expected["backward_kv_blocks"] + expected["backward_dkv_blocks"]


def test_torchs_default_rotation_is_an_all_gather():
    from torch.distributed.tensor.experimental._context_parallel._attention import _cp_options, _RotateMethod

    assert _cp_options.rotate_method == _RotateMethod.ALL_GATHER
    assert _cp_options.convert_to_f32 is True  # dK/dV accumulate and travel in fp32


def test_ulysses_bytes_by_hand_and_its_head_limit():
    # P 4, b 1, S 8192 (2048 per rank), d = kv = 4096, bf16: q, k, v and the output are 4 slices of
    # 2048·4096·2 bytes; each all-to-all sends 3/4 of its slice. Forward + backward: 2 x 4 x 3/4 x 16 MiB.
    sends = cp_theory.ulysses_sends(4, 1, 8192, 4096, 4096, 2)
    assert sends["forward_bytes"] == 4 * 2048 * 4096 * 2 * 3 // 4 == 50_331_648
    assert sends["bytes"] == 2 * 50_331_648 and sends["all_to_alls"] == 8
    # Beside the ring's 3 bf16 K/V blocks of 32 MiB forward: Ulysses sends half of it at P 4 (ring / Ulysses = P/2).
    assert cp_theory.ring_sends(4, 33_554_432, 33_554_432)["forward_bytes"] / sends["forward_bytes"] == 2
    cp_theory.check_ulysses(8, 32)
    with pytest.raises(ValueError, match="capped by the head count"):
        cp_theory.check_ulysses(16, 12)


# --- memory -------------------------------------------------------------------------------------------


def test_activations_fall_as_1_over_cp_with_the_rings_buffers_early_in_backward():
    # A tiny shape in fp32 (r = c = 4): 2 layers, d 64, vocab 128, S 256, b 1. At t = S/cp tokens a block saves
    # t·d·(2·4 + 14·4) = 64·t·d bytes, the head t·d·8 and the log-softmax t·128·4: saved. Early in backward the
    # model adds the log-softmax's gradient (t·128·4); the last layer's ring holds 3 K/V blocks (2 at cp 2: the
    # one computed against, the copy sent, the one arriving) of 2·t·64·4 and 3 fp32 dK/dV blocks of the same
    # size here. The peak takes the larger.
    shape = GPTShape(layers=2, d_model=64, heads=4, seq_len=256, vocab=128)
    for cp in (1, 2, 4, 8):
        t = 256 // cp
        saved = 2 * 64 * t * 64 + t * 64 * 8 + t * 128 * 4
        block = 2 * t * 64 * 4
        ring = 0 if cp == 1 else (2 if cp == 2 else 3) * block + 3 * block
        figures = cp_theory.activation_bytes(shape, 1, cp, "fp32")
        assert figures["saved_bytes"] == saved
        assert figures["activation_bytes"] == saved + max(t * 128 * 4, ring)
        gathered = cp_theory.activation_bytes(shape, 1, cp, "fp32", rotation="allgather")
        assert gathered["rotation_backward_bytes"] == (0 if cp == 1 else (cp + 1) * block + 3 * block)
    # t = 64 at cp 4: the ring's 6 blocks of 32 KiB (192 KiB) outweigh the log-softmax's gradient (32 KiB).
    assert cp_theory.q_cp_activation_bytes(layers=2, d_model=64, vocab=128, seq_len=256, batch_size=1, cp=4,
                                           precision="fp32") == 2 * 64 * 64 * 64 + 64 * 64 * 8 + 64 * 128 * 4 + 6 * 32768
    # Checkpointed, the recomputed block (64·t·d = 256 KiB at t = 64) comes back beside the ring's buffers.
    checkpointed = cp_theory.activation_bytes(shape, 1, 4, "fp32", checkpoint_activations=True)
    assert checkpointed["activation_bytes"] == checkpointed["saved_bytes"] + 64 * 64 * 64 + 6 * 32768


def test_the_rotation_buffers_are_what_torch_allocates():
    # One-hop ring at cp 4: forward holds the received block, its torch.cat copy and the block arriving.
    assert cp_theory.rotation_buffer_bytes(4, 100, 200) == {"forward_bytes": 300, "backward_bytes": 300 + 600}
    assert cp_theory.rotation_buffer_bytes(2, 100, 200)["forward_bytes"] == 200  # the last step sends nothing
    assert cp_theory.rotation_buffer_bytes(4, 100, 200, "allgather")["forward_bytes"] == 500  # 4 gathered + the copy
    assert cp_theory.rotation_buffer_bytes(1, 100, 200) == {"forward_bytes": 0, "backward_bytes": 0}


# --- when the ring hides ------------------------------------------------------------------------------


def test_min_tokens_per_rank_is_liu_et_als_f_over_b_and_twice_it_causal():
    # Full attention, d = kv, 16 bits: 4·n²·d / F >= 2·n·d·2 / B  <=>  n >= F / B.
    peak, link = 989e12, 450e9
    assert cp_theory.min_tokens_per_rank(4096, 4096, 2, peak, link, causal=False) == pytest.approx(peak / link)
    # The balanced causal step computes half a block and sends a whole one: 2F/B.
    assert cp_theory.min_tokens_per_rank(4096, 4096, 2, peak, link) == pytest.approx(2 * peak / link)
    # Grouped-query attention with 8 of 32 heads for K/V: a quarter of the bytes, a quarter of the tokens.
    assert cp_theory.min_tokens_per_rank(4096, 1024, 2, peak, link) == pytest.approx(peak / link / 2)
    # Backward: 5/2 of the forward's FLOPs against K/V (2 bytes) plus fp32 dK/dV (4): (2 + 4)/(2 · 5/2) = 1.2x.
    assert cp_theory.min_tokens_per_rank(4096, 4096, 2, peak, link, backward=True) == pytest.approx(1.2 * 2 * peak / link)


def test_ring_overlap_by_hand():
    # b 1, S 65,536 over cp 8 (n = 8192), d 4096, bf16, 1e15 FLOP/s, 100 GB/s, no latency.
    figures = cp_theory.ring_overlap(1, 65536, 8, 4096, 4096, 2, 1e15, 100e9)
    n = 8192
    forward_compute = 4 * n * n * 4096 / 2 / 1e15
    forward_transfer = 2 * n * 4096 * 2 / 100e9
    assert figures["forward_compute_s"] == pytest.approx(forward_compute)
    assert figures["forward_transfer_s"] == pytest.approx(forward_transfer)
    assert figures["backward_compute_s"] == pytest.approx(2.5 * forward_compute)
    assert figures["backward_transfer_s"] == pytest.approx(3 * forward_transfer)
    # 0.55 ms of compute against 0.67 ms of transfer: not hidden; 7 hops show 0.12 ms each forward, 7 show
    # 3·0.67 - 1.37 ms backward, and the last dK/dV hop (1.34 ms) shows whole.
    assert not figures["hidden"]
    exposed = 7 * (forward_transfer - forward_compute) + 7 * (3 * forward_transfer - 2.5 * forward_compute) \
        + 2 * forward_transfer
    assert figures["exposed_s_per_layer"] == pytest.approx(exposed)
    # A recomputed forward runs its 7 hops again.
    again = cp_theory.ring_overlap(1, 65536, 8, 4096, 4096, 2, 1e15, 100e9, recompute=True)
    assert again["exposed_s_per_layer"] == pytest.approx(exposed + 7 * (forward_transfer - forward_compute))


# --- calc --cp ----------------------------------------------------------------------------------------


def test_calc_json_section_by_hand():
    # The 7B shape (32 layers, d 4096, 32 heads) at S 131,072 over cp 8 on 8 GPUs, b 1, bf16-mixed.
    doc = document("--params", "7B", "--gpus", "8", "--seq-len", "131072", "--cp", "8")
    section = doc["context_parallel"]
    assert section["theory"] is True and section["tokens_per_rank"] == 16384
    assert section["chunks_by_rank"][0] == [0, 15] and section["chunks_by_rank"][7] == [7, 8]
    assert section["compute_share_unbalanced"][-1] == pytest.approx(15 / 64)
    assert section["unbalanced_step_over_balanced"] == pytest.approx(15 / 8)
    block = 2 * 16384 * 4096 * 2
    assert section["kv_block_bytes"] == block
    assert section["ring_bytes_per_step"] == 32 * (7 * block + 7 * block + 8 * 2 * block)
    assert section["ulysses_bytes_per_step"] == 32 * 2 * (4 * 16384 * 4096 * 2 * 7 // 8)
    assert section["ring_links"]["paced_by"] == "nvlink"
    shape = replace(GPT_SIZES["7B"], seq_len=131072)
    assert section["activation_bytes_cp1"] == cp_theory.activation_bytes(shape, 1, 1, "bf16-mixed")["activation_bytes"]
    assert section["activation_bytes"] < section["activation_bytes_cp1"] / 7
    # 16,384 tokens per rank hide on H100 NVLink (needs 2F/B x 1.2 = 5,275) but not over 400 Gb/s InfiniBand.
    assert section["pays"]["H100 + nvlink4"]["hidden"] and not section["pays"]["H100 + ndr400"]["hidden"]
    assert section["pays"]["H100 + nvlink4"]["min_tokens_per_rank"] == pytest.approx(1.2 * 2 * 989e12 / 450e9)


def test_calc_cp_across_nodes_and_its_table():
    doc = document("--params", "7B", "--gpus", "32", "--seq-len", "131072", "--cp", "16")
    assert doc["context_parallel"]["ring_links"] == {"nodes": 2, "hops": 16, "network_hops": 2, "paced_by": "network"}
    # Ulysses over 16 ranks, 8 per node: 7 of the 15 slices stay in the node, 8 cross.
    assert doc["context_parallel"]["ulysses_link_shares"] == {"intra": pytest.approx(7 / 15), "inter": pytest.approx(8 / 15)}
    result = invoke("--params", "7B", "--gpus", "32", "--seq-len", "131072", "--cp", "16")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Context parallelism (theory)" in text and "2 of its 16 hops cross the network" in text
    assert "When the ring hides its transfer" in text


def test_existing_documents_gain_no_section():
    doc = document("--params", "7B", "--gpus", "8")
    assert "context_parallel" not in doc and "expert_parallel" not in doc


@pytest.mark.parametrize("args, words", [
    (("--params", "7B", "--seq-len", "1000", "--cp", "8"), "not a multiple of 16"),
    (("--params", "7B", "--cp", "3"), "does not divide the 8 GPUs"),
    (("--params", "3B", "--cp", "2"), "needs the model's shape"),
    (("--params", "7B", "--cp", "2", "--offload", "all", "--strategy", "zero3"), "ddpfsdp accounting and no offload"),
    (("--params", "7B", "--cp", "1"), "--cp"),
])
def test_bad_cp_is_a_usage_error(args, words):
    result = invoke("--gpus", "8", *args)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())
    assert "Traceback" not in result.output


def quoted_calc_commands(prefix: str) -> list[tuple[str, str, bool]]:
    """(answer id, the command's arguments, whether the answer says calc refuses it) for every `ddpfsdp calc`
    the model answers whose ids start with `prefix` quote."""
    import re

    from ddpfsdp.quiz.loader import default_answers_dir

    found = []
    for path in sorted(default_answers_dir().glob(f"{prefix}*.md")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"`(ddpfsdp calc [^`]*)`([^.]*)", text):
            found.append((path.stem, " ".join(match.group(1).split()[2:]), "refuses" in match.group(2)))
    return found


def test_every_calc_command_a_context_parallel_answer_quotes_runs_as_it_says():
    quoted = quoted_calc_commands("cp-")
    assert len(quoted) >= 12
    for answer, args, refused in quoted:
        result = invoke(*args.split())
        assert result.exit_code == (2 if refused else 0), (answer, args, result.output[-300:])


def test_the_figures_the_answers_quote_are_the_ones_calc_prints():
    at_128k = document("--params", "7B", "--gpus", "8", "--seq-len", "131072", "--cp", "8")["context_parallel"]
    assert round(at_128k["activation_bytes_cp1"] / 1e9) == 690 and round(at_128k["activation_bytes"] / 1e9) == 86
    checkpointed = document("--params", "7B", "--gpus", "8", "--seq-len", "131072", "--cp", "8",
                            "--checkpoint-activations")["context_parallel"]
    assert round(checkpointed["activation_bytes_cp1"] / 1e9) == 141 and round(checkpointed["activation_bytes"] / 1e9) == 18
    assert round(at_128k["ring_bytes_per_step"] / 1e9, 1) == 257.7
    large = document("--model", "large", "--gpus", "8", "--seq-len", "8192", "--cp", "4")["context_parallel"]
    assert round(large["activation_bytes"] / 2**30, 2) == 2.07
