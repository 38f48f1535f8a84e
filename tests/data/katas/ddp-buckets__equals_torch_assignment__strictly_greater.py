"""Planted: a bucket closes only when its bytes exceed the limit (>), not when they reach it (>=)."""


def assign_buckets(sizes_bytes, dtypes, limits_bytes, ready_order=None):
    order = list(range(len(sizes_bytes))) if ready_order is None else list(ready_order)
    result, open_buckets, limit_of = [], {}, {}
    for index in order:
        dtype = dtypes[index]
        indices, size = open_buckets.get(dtype, ([], 0))
        indices.append(index)
        size += sizes_bytes[index]
        position = limit_of.setdefault(dtype, 0)
        if size > limits_bytes[position]:
            result.append(indices)
            indices, size = [], 0
            limit_of[dtype] = min(position + 1, len(limits_bytes) - 1)
        open_buckets[dtype] = (indices, size)
    result += [indices for indices, _ in open_buckets.values() if indices]
    if ready_order is None:
        result.sort(key=min)
    return result
