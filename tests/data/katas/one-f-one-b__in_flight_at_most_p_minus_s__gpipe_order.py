"""Planted: GPipe's order, every forward before any backward: right actions, wrong order, all m in flight."""


def one_f_one_b(stage, num_stages, num_microbatches):
    return [f"F{i}" for i in range(num_microbatches)] + [f"B{i}" for i in range(num_microbatches)]
