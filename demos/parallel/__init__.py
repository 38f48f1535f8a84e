"""Parallelism: how a plain model becomes a parallel one.

    parallelize      the one place the parallelism is composed, in a fixed order (torchtitan's
                     `parallelize_llama`), for a real run and a simulated one alike
    strategies       the data-parallel wraps (DDP, zro, FSDP2, FSDP1) and the optimizer
    tensor_parallel  the Megatron plan inside each GPT block over a (dp, tp) mesh
    expert_parallel  each MoE layer's experts split over an ep group, reached by all-to-alls
    context_parallel ring attention over the mesh's "cp" dimension, each rank holding S/cp of every sequence
    compiled         torch.compile's placement and what torch records of it
    local_sgd        post-local SGD: DDP's post-local-SGD hook and torch's periodic model averager

It sits with train/ and measure/: it may import theory/, the ground floor and train/'s models and spec.
Its modules import torch.
"""
