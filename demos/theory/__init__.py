"""Theory: the analytic model, one module per concern.

    precision      bytes per element under each precision recipe, per parameter with each optimizer
    sharding       the strategies, what each shards and how many ways (the ZeRO stages, HSDP)
    state          model state per GPU: parameters, gradients, optimizer state between steps
    working_set    what exists only during a step: DDP buckets, unsharded FSDP units
    activations    what autograd saves for backward, with and without checkpointing
    gpt_layout     a GPT preset's tensors, FSDP units and largest module, from its shape
    comm           collectives per step per rank, on rings (`demos.collectives.wire_factor`)
    offload        what moves to host RAM, who implements it, what crosses PCIe; GPUs per node
    buckets        DDP's gradient buckets
    sampler        DistributedSampler's indices
    accounting     whose convention counts the bytes: ours, or DeepSpeed's
    deepspeed_accounting   DeepSpeed 0.19's estimator, formula by formula
    tensor_parallel  the 2-D configuration: FSDP over dp x tensor parallelism over tp, its state,
                   traffic per group and activations, for calc and for a 2-D demo run
    pipeline       pipeline parallelism: stages, schedules and their bubble, activations in flight,
                   point-to-point bytes, and 3-D composition with TP and FSDP
    context_parallel  ring attention over cp ranks: the balanced causal split, K/V and dK/dV bytes as
                   torch sends them, when the ring hides its transfer, Ulysses' all-to-alls beside it
    expert_parallel  a mixture of experts over ep ranks: capacity and drops, the all-to-alls per step by
                   link, the load-balancing and z losses, FSDP's traffic for the same experts
    inputs         one configuration of the whole table, as given and as read
    rows           one strategy's column of the table
    notes          the table's prose, computed from the configuration
    estimate       the whole table: the `ddpfsdp.calc/1` document that `ddpfsdp calc` prints
    run            the figures for a demo's own run, as PyTorch runs it
    quiz_answers   `QUIZ_FUNCTIONS`: how every numeric question and drill computes its answer
    steptime       a step in time: compute from FLOPs, ring collectives over a link, exposed communication
    planning       the plans an interview asks for: the lowest stage that fits, checkpointing, HSDP's group
    presets        the models, GPUs, links and clusters interviews quote, each figure with its source
    arguments      counts and flags as people write them ("7B", "yes")
    bandwidth      bandwidths and durations as people write them ("400Gbps", "5min")
    stragglers     a synchronous step waits for its slowest rank: 1 - (1 - p)^N, the expected step
    checkpointing  checkpoint size and write time, the job's MTBF, Young's and Daly's interval, goodput lost
    topology       links inside and between nodes, oversubscription, flat and hierarchical all-reduce,
                   HSDP by link, scaling efficiency
    plan3d         tensor, pipeline and data-parallel degrees for a model on a cluster, ranked
    optimizer_8bit bitsandbytes' 8-bit Adam state per GPU
    lora           LoRA and QLoRA: a frozen (quantized) base and trained adapters per GPU
    at_scale       the numeric quiz functions of the seven above, gathered

A new strategy is named, titled and given what it shards in `sharding`, then its working set
(`working_set`) and its traffic (`comm`); `rows` puts it in the table. Everything here is computed from counts and
byte sizes; nothing is measured, and nothing imports torch, so the CLI and the quiz can use it at
once. It may import only the bottom stage: the ground floor (`base/`: `units`,
`collectives`, the torch-free model shapes in `shapes`) and the result contract (`result/`) (`tests/test_import_graph.py` holds every stage to that); the launch guard
that asks it whether a run fits is `launch.guard`.
"""
