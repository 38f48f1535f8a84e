"""Real DDP and FSDP training, concept demos, measurement and the analytic model.

The package is arranged by stage, so a reader finds a concept by the room it belongs to. Stages import
downwards only (`tests/test_import_graph.py`), bottom to top:

    base/      the ground floor: model shapes and their parameter counts (`shapes`), byte and count
               parsing (`units`), the collectives and their ring wire factor (`collectives`), cores
               and RAM (`host`), table labels (`labels`)
    result/    the result contract: the typed result and its JSON (`schema`), the named-check type
               (`checks`), one rank's recorded step (`step_record`)
    theory/    the analytic model (no torch)
    train/     the training demos: models, data, the run's spec, the loop, the pipeline demo
    parallel/  how a model becomes a parallel one: the one `parallelize()`, the data-parallel wraps,
               tensor parallelism, compile
    claims/    the named checks a run is judged by, each a function of measured numbers
    measure/   what a rank holds and does: memory, collectives, and the printed report
    concepts/  one interview concept per demo (sampler, allreduce, reshard, ...)
    launch/    what a demo is asked, the launch guard, where ranks go, the launcher and its agent,
               the events; beside it the entry points `registry` (every demo by name) and `worker`
               (the per-rank entry point, `python -m ddpfsdp.demos.worker`), and faults/ (the
               failure lab: real distributed-training bugs, broken and fixed on real ranks)
    the quiz   (`ddpfsdp.quiz`: the commands and the app) on top

Importing this package is cheap: modules that need torch import it themselves.
"""
