"""The failure lab: real distributed-training bugs, each broken and fixed on real gloo ranks.

`ddpfsdp demo fault NAME` runs a fault's fixed program and its broken program on N CPU processes and
shows the symptom exactly as torch produced it (its error text, the flight recorder's per-rank
collectives, or the measured quantity that is wrong), the cause, the fix, and named checks: the
symptom is there in the broken run and gone in the fixed one.

    fault          the Fault type: a fault's texts, its program, its checks
    catalog        every fault by name, and every check name (no torch: the registry reads it)
    collectives    hangs: desync, a collective on rank 0 only, uneven inputs
    gradients      DDP's unused-parameter error, accumulation without no_sync, an unscaled accumulated loss
    data           DistributedSampler without set_epoch, BatchNorm statistics per rank
    initialisation an optimizer built before fully_shard, ranks initialised from different seeds
    pipeline       a pipeline batch that the micro-batch count does not divide (torch.distributed.pipelining)
    steps          what the programs share: a training step, seeded data, a named mesh, a straggler
    verdicts       the checks several faults share (timed out, raised, diverged)
    fr_table       the project's own flight-recorder table: per-rank collectives, the first divergence
    flight_recorder  the rank side of the flight recorder: entries, dumps, torch's analyzer
    rank           each rank's part: the programs in turn, and rank 0's result of each fault
    runner         FaultRun: the lab's launch through the one launcher, held to each fault's deadline
    report         a fault's result from its ranks' records: symptom lines and checks
    symptom        the normalisation that makes a symptom comparable across runs
    render         the result printed for a person (rich)

It may import the result contract (`result/`), the `worker`, `launch` (the launcher's
process bookkeeping) and `measure.memory` (a rank's environment); it never imports `train`,
`theory` or `concepts`; only `registry` and the quiz (its command, the app's runner hook) import it
(tests/test_import_graph.py holds both rules). The modules that run on ranks import torch inside
their functions, so the catalog, the checks and the report load without torch.
"""
