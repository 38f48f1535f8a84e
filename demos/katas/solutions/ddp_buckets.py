"""DDP's bucket assignment, as the Reducer's compute_bucket_assignment_by_size does it
(torch/csrc/distributed/c10d/reducer.cpp).

Walk the tensors in order (the gradient-ready order when given). Each dtype has one open bucket and its
own place in the list of limits. A tensor joins its dtype's bucket; once the bucket's bytes reach the
limit (>=) the bucket is closed and that dtype moves on to the next limit, staying on the last. The
buckets still open are added at the end. Without a ready order, the buckets are sorted by their smallest
index; with one, they stay in the order they were built.
"""


def assign_buckets(sizes_bytes, dtypes, limits_bytes, ready_order=None):
    order = list(range(len(sizes_bytes))) if ready_order is None else list(ready_order)
    result = []
    open_buckets = {}  # dtype -> (indices, bytes)
    limit_of = {}  # dtype -> position in limits_bytes
    for index in order:
        dtype = dtypes[index]
        indices, size = open_buckets.get(dtype, ([], 0))
        indices.append(index)
        size += sizes_bytes[index]
        position = limit_of.setdefault(dtype, 0)
        if size >= limits_bytes[position]:
            result.append(indices)
            indices, size = [], 0
            limit_of[dtype] = min(position + 1, len(limits_bytes) - 1)
        open_buckets[dtype] = (indices, size)
    result += [indices for indices, _ in open_buckets.values() if indices]
    if ready_order is None:
        result.sort(key=min)
    return result
