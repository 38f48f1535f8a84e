"""DDP's gradient buckets: how many all-reduces a step issues, and of what size, once DDP has
rebuilt its buckets in the order gradients arrive (torch/nn/parallel/distributed.py)."""

from __future__ import annotations

from typing import Iterable

DDP_BUCKET_CAP_MB = 25
"""DDP's default bucket cap in MiB (`bucket_cap_mb=None`)."""

DDP_FIRST_BUCKET_BYTES = 1024 * 1024
"""The smaller cap of DDP's first bucket, used only when `bucket_cap_mb` is left at its default."""


def ddp_bucket_bytes(tensor_bytes: Iterable[int], bucket_cap_mb: float | None = None) -> list[int]:
    """Bytes of each gradient bucket DDP all-reduces, once it has rebuilt its buckets.

    `tensor_bytes`: each gradient's size, in the order gradients become ready in backward (about the
    reverse of registration order). DDP's first iteration all-reduces one bucket of everything
    (unless find_unused_parameters=True); the second iteration's forward rebuilds the buckets in
    the order the first one's gradients arrived, once for the whole run. Filling them, a bucket closes as soon as it holds at least its cap, so a
    bucket may overshoot its cap and a tensor larger than the cap is never split. The first bucket's
    cap is 1 MiB when `bucket_cap_mb` is left at its default (25 MiB), and `bucket_cap_mb` itself
    when it is given. One dtype and one device are assumed (DDP buckets those apart).
    """
    cap_bytes = int((DDP_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
    if cap_bytes <= 0:
        raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb!r}")
    limit = DDP_FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap_bytes
    buckets: list[int] = []
    filled = 0
    for size in tensor_bytes:
        filled += int(size)
        if filled >= limit:
            buckets.append(filled)
            filled = 0
            limit = cap_bytes
    if filled:
        buckets.append(filled)
    return buckets
