"""The chunks a simulated FSDP2 reads are the ones torch's own `_chunk_with_empty` makes, view for view."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.fsdp._fully_shard import _fsdp_common, _fsdp_param

from ddpfsdp.demos.train.simulate import RankChunks, _rank_chunks, chunks_made_when_read


def _view(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device.type


@pytest.mark.parametrize(("shape", "num_chunks", "dim"), [
    ((10, 3), 4, 0),        # uneven: 3, 3, 3, 1
    ((7, 5), 8, 0),         # fewer rows than ranks: 7 of one row, then one empty chunk
    ((50304, 16), 8192, 0),  # 70B's embedding rows on 8192 ranks: 7186 chunks of 7, then empty ones
    ((8192,), 8192, 0),     # a norm's weight: one element each
    ((6, 12), 4, 1),        # FSDP2's Shard(1): even on dim 1
    ((1,), 3, 0),
    ((0, 4), 3, 0),         # nothing to cut: torch's own special case
])
def test_every_chunk_is_torchs_view(shape, num_chunks, dim):
    for device in ("cpu", "meta"):
        tensor = torch.empty(shape, device=device)
        expected = _fsdp_common._chunk_with_empty(tensor, num_chunks, dim)
        chunks = _rank_chunks(tensor, num_chunks, dim)
        assert len(chunks) == len(expected) == num_chunks
        indices = sorted({0, 1, num_chunks // 2, num_chunks - 2, num_chunks - 1} & set(range(num_chunks)))
        for i in indices:
            assert _view(chunks[i]) == _view(expected[i]), (shape, num_chunks, dim, i)
            assert _view(chunks[i - num_chunks]) == _view(expected[i]), "negative indices"
        if device == "cpu" and chunks[indices[-1]].numel():
            assert chunks[indices[-1]].data_ptr() == expected[indices[-1]].data_ptr()


def test_reading_past_the_end_fails_as_a_list_does():
    tensor = torch.empty(4, 2)
    chunks = RankChunks(tensor, 3, 0)
    with pytest.raises(IndexError):
        chunks[3]
    assert [_view(c) for c in chunks[1:]] == [_view(c) for c in _fsdp_common._chunk_with_empty(tensor, 3, 0)[1:]]


def test_a_wrong_chunk_is_seen():
    # The comparison above would notice a chunk one row off: the views differ in offset.
    tensor = torch.empty(10, 3)
    assert _view(RankChunks(tensor, 4, 0)[1]) != _view(tensor.narrow(0, 2, 3))


def test_fsdp2_cuts_with_them_only_inside_the_block():
    original = _fsdp_param._chunk_with_empty
    with chunks_made_when_read():
        assert _fsdp_param._chunk_with_empty is _rank_chunks
    assert _fsdp_param._chunk_with_empty is original
    with pytest.raises(RuntimeError), chunks_made_when_read():
        raise RuntimeError("a failed build")
    assert _fsdp_param._chunk_with_empty is original
