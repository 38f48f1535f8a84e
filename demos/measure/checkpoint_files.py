"""What a sharded checkpoint holds on disk, per rank, read back from the checkpoint's own metadata.

torch.distributed.checkpoint's FileSystemWriter (torch 2.13, checkpoint/filesystem.py) writes each rank's
items into `__<rank>_<n>.distcp` (one file per rank by default) and rank 0 writes `.metadata`: for every
state-dict entry, its global size and dtype and the chunks saved (offsets and sizes), and for every chunk
the file, offset and length it was written at (`storage_data`). A tensor item is written with
`torch.save` into the file (`_write_item`, SerializationFormat.TORCH_SAVE), so each item carries the
bytes of a zip archive of its own beside its data; a non-tensor item (an optimizer's param_groups) is
pickled. This module sums, per rank, the items, their data (elements x element size), their lengths as
written and the file's size, so a run can set the bytes each rank wrote beside theory and say what the
rest of the file is.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

_RANK_FILE = re.compile(r"^__(\d+)_\d+\.distcp$")


@dataclass
class RankFiles:
    """One rank's share of the checkpoint on disk."""

    rank: int
    items: int = 0
    data_bytes: int = 0  # tensor chunks: elements x element size
    object_bytes: int = 0  # pickled non-tensor items
    written_bytes: int = 0  # every item's length as written (torch.save's archive around each tensor)
    file_bytes: int = 0  # the rank's files on disk
    largest_item_bytes: int = 0


def rank_files(folder: str | os.PathLike) -> tuple[list[RankFiles], int]:
    """Per rank that wrote anything, what it wrote (rank order); and the size of `.metadata`."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    folder = Path(folder)
    metadata = FileSystemReader(str(folder)).read_metadata()
    ranks: dict[int, RankFiles] = {}
    for index, stored in metadata.storage_data.items():
        match = _RANK_FILE.match(Path(stored.relative_path).name)
        if match is None:
            raise ValueError(f"{stored.relative_path} is not a rank's file of FileSystemWriter")
        rank = ranks.setdefault(int(match.group(1)), RankFiles(int(match.group(1))))
        entry = metadata.state_dict_metadata[index.fqn]
        rank.items += 1
        rank.written_bytes += stored.length
        if isinstance(entry, TensorStorageMetadata):
            chunk = next(c for c in entry.chunks if tuple(c.offsets) == tuple(index.offset))
            item_bytes = math.prod(chunk.sizes) * entry.properties.dtype.itemsize
            rank.data_bytes += item_bytes
            rank.largest_item_bytes = max(rank.largest_item_bytes, item_bytes)
        else:
            rank.object_bytes += stored.length
    for path in folder.iterdir():
        match = _RANK_FILE.match(path.name)
        if match and int(match.group(1)) in ranks:
            ranks[int(match.group(1))].file_bytes += path.stat().st_size
    return [ranks[r] for r in sorted(ranks)], (folder / ".metadata").stat().st_size
