"""Real DDP and FSDP training, concept demos, measurement and the analytic model.

The package is arranged by stage, so a reader finds a concept by the room it belongs to. Stages import
downwards only (`tests/test_import_graph.py`), bottom to top:

    shapes and units  `shapes` (model shapes and their parameter counts), `units` (byte and count
                      parsing), `collectives` (the collectives and their ring wire factor), `checks`
                      (the named-check type), `host` (cores and RAM)
    theory/    the analytic model (no torch)
    train/     the training demos: models, data, strategies, the loop, and the claims a run checks
    measure/   what a rank holds and does: memory, collectives, and the printed report
    concepts/  one interview concept per demo (sampler, allreduce, reshard, ...)
    launch/    what a demo is asked, the launch guard, starting N ranks and streaming their events;
               beside it `registry` (every demo by name), `worker` (the per-rank entry point,
               `python -m ddpfsdp.demos.worker`) and faults/ (the failure lab: real
               distributed-training bugs, broken and fixed on real ranks)
    the quiz   (`ddpfsdp.quiz`: the commands and the app) on top

Importing this package is cheap: modules that need torch import it themselves.
"""
