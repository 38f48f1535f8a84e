"""Claims: the named checks a run is judged by, each a function of measured numbers.

    training    one training run, and compare's runs side by side
    timeline    what only the recorded step can show: overlap, resharding, prefetch, exposed communication
    two_d       a 2-D run (FSDP over dp x tensor parallelism over tp)
    pipeline    a pipeline run: bubble, activations in flight, point-to-point bytes, the loss
    expert_parallel  an MoE run: the one-process reference, the all-to-alls' bytes, dropped slots, the aux
                loss, the combine's wait, the experts each rank holds
    context_parallel  a cp run: the ring against one process, its sends, activations and compute per rank
    simulated   a simulated run against the analytic model
    local_sgd   a local-SGD run against DDP: torch's averaging schedule, the bytes, the replicas, the loss

Each function takes numbers and returns a `result.checks.Check`; tests feed each one broken numbers and
see it fail. Torch-free at import, so the registry and the quiz can read them without torch.
"""
