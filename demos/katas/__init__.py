"""Katas: the learner writes the collective, the sampler, the bucket assignment, the FSDP unit, the 1F1B
order; the tool runs that code on real ranks and judges it the way torch's own implementation would be
judged.

    catalog        every kata by name: its texts, the function the learner's file defines, what it may
                   call, the checks it carries (no torch: the CLI and the quiz list katas from it)
    learner_file   what is checked of a learner's file before anything starts: it parses, it defines
                   the function, it names nothing the kata forbids (no torch)
    comm           the object the learner's code receives: send/recv and the collectives a kata allows,
                   counted per rank and peer by a dispatch mode that also sees direct torch.distributed
                   calls, each wait held to a deadline and written on the board
    board          what every rank writes into the process group's store: its wait, its outcome; what
                   rank 0 reads back when a rank stops answering
    referee        rank 0's verdict from the outcomes: the exception with the learner's frames, the wait
                   cycle of a deadlock, a rank that never finished; the checks every kata carries
    rank           the registry's entry: one kata on this rank, from the learner's file to the result
    judge          what a kata's judge is (cases, torch's answer, the call, the measurement, the checks),
                   and the pure katas' judge
    claims         the checks katas share: values equal torch's, bytes and messages against theory
    render         a kata's result for a person (rich; no torch)
    rings, sampler, buckets, accumulation, zero, fsdp_unit, megatron, pipeline_order, memory
                   the judges: each kata's inputs, the torch oracle it is judged against, its checks

starters/ and solutions/ hold, as package data, the file a learner starts from and the reference
solution (`ddpfsdp kata check NAME --reference`), one per kata, each with its task at the top.

The room sits in the "train and measure" stage: it may import the result contract (`result/`), the
ground floor (`base/`) and the analytic model (`theory/`, for the memory kata); the launcher starts its
ranks through the registry like every demo's, and only the registry and the quiz import it.
"""
