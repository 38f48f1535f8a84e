"""Real DDP and FSDP training, concept demos, measurement and the analytic model.

The package is arranged by stage, so a reader finds a concept by the room it belongs to:

    launch/    start N ranks, stream their events, know the machine (launcher, context, events, hardware)
    train/     the training demos: models, data, strategies, the loop, and the claims a run checks
    measure/   what a rank holds and does: memory, collectives, and the printed report
    theory/    the analytic model and the launch guard built on it (no torch)
    concepts/  one interview concept per demo (sampler, allreduce, reshard, ...)
    faults/    the failure lab: real distributed-training bugs, broken and fixed on real ranks

At the top level sit what every stage shares: `registry` (every demo by name), `worker` (the
per-rank entry point, `python -m ddpfsdp.demos.worker`), `checks` (the named-check type),
`result` (the typed result every demo returns, to and from its JSON), `units` (byte and count parsing)
and `collectives` (the collectives and their ring wire factor).
Importing this package is cheap: modules that need torch import it themselves.
"""
