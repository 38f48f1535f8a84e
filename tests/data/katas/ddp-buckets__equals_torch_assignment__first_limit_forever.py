"""Planted: every bucket closes at the first limit: the cap after the small first bucket is never used."""


def assign_buckets(sizes_bytes, dtypes, limits_bytes, ready_order=None):
    order = list(range(len(sizes_bytes))) if ready_order is None else list(ready_order)
    result, open_buckets = [], {}
    for index in order:
        indices, size = open_buckets.get(dtypes[index], ([], 0))
        indices.append(index)
        size += sizes_bytes[index]
        if size >= limits_bytes[0]:
            result.append(indices)
            indices, size = [], 0
        open_buckets[dtypes[index]] = (indices, size)
    result += [indices for indices, _ in open_buckets.values() if indices]
    if ready_order is None:
        result.sort(key=min)
    return result
