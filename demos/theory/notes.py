"""The table's prose: what its figures mean and the traps they show, in sentences computed from the
configuration (`ddpfsdp calc` prints them under the tables, the JSON document carries them)."""

from __future__ import annotations

from ddpfsdp.demos.theory.comm import step_comm
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.inputs import CalcInputs
from ddpfsdp.demos.theory.offload import OFFLOAD_SUPPORT, offload_refusal
from ddpfsdp.demos.theory.precision import OPTIMIZER_STATES, bytes_per_param_breakdown, check_optimizer, precision_for
from ddpfsdp.demos.theory.sharding import STRATEGIES, STRATEGY_TITLES, shard_ways
from ddpfsdp.demos.theory.state import bytes_per_param, model_state
from ddpfsdp.demos.theory.working_set import PREFETCH_UNITS, working_set
from ddpfsdp.demos.base.units import format_bytes


def estimate_notes(inputs: CalcInputs) -> list[str]:
    """Every note of the table, in the order printed."""
    spec = inputs.precision
    notes = teaching_notes(spec.name, inputs.optimizer, inputs.gpus, inputs.group_size)
    notes.extend(implementation_notes(inputs))
    notes.extend(shape_notes(inputs))
    notes.extend(offload_notes(inputs.offload, list(inputs.strategies), inputs.gpus_per_node, inputs.deepspeed))
    if inputs.deepspeed:
        notes.extend(deepspeed_notes(inputs.params, inputs.gpus, list(inputs.strategies), inputs.offload,
                                     inputs.largest_layer_params, inputs.unit_params, spec.name, inputs.optimizer))
    return notes


def teaching_notes(precision: str, optimizer: str, gpus: int, group_size: int | None = None) -> list[str]:
    """What the table means and the traps it shows, in sentences computed from the inputs."""
    spec = precision_for(precision)
    optimizer = check_optimizer(optimizer)
    per = bytes_per_param_breakdown(precision, optimizer)
    fp32 = bytes_per_param_breakdown("fp32", optimizer)
    mixed = bytes_per_param_breakdown("bf16-mixed", optimizer)
    torch_zero1 = bytes_per_param("zro", "bf16-mixed", optimizer)
    deepspeed_zero1 = bytes_per_param("zero1", "bf16-master", optimizer)
    share = lambda b: f"{b['optimizer']} of {b['total']} bytes ({b['optimizer'] / b['total']:.0%})"  # noqa: E731
    notes = [
        "Theory: every figure is the analytic model's estimate, not a measurement. "
        "GB = 1e9 bytes, GiB = 2**30 bytes.",
        f"{spec.name}: {spec.summary}. Per parameter: params {per['params']} + grads {per['grads']} "
        f"+ optimizer {per['optimizer']} = {per['total']} bytes ({optimizer}: "
        f"{OPTIMIZER_STATES[optimizer]} state tensor(s)), the recipe's; each column's own is its bytes_per_param in --json.",
        f"Mixed precision does not shrink model state: PyTorch's bf16-mixed holds {mixed['params']} + "
        f"{mixed['grads']} + {mixed['optimizer']} = {mixed['total']} bytes per parameter with "
        f"{optimizer}, as fp32 does ({fp32['total']}); autocast and MixedPrecisionPolicy only add bf16 "
        "copies for compute. It shrinks activations and the bytes FSDP all-gathers, and speeds up matmuls.",
        f"Sharding only the optimizer state saves what the optimizer owns: "
        f"{share(torch_zero1)} per parameter for ZeroRedundancyOptimizer under bf16-mixed, whose fp32 "
        f"weights are the parameters it replicates; {share(deepspeed_zero1)} for DeepSpeed's ZeRO-1 under "
        "bf16-master, whose fp32 master weights live in the optimizer.",
        f"Communication per step per rank on {gpus} GPUs, in model sizes: DDP all-reduces the gradients, "
        "2(N-1)/N; ZeroRedundancyOptimizer adds a broadcast of the updated parameters, 3(N-1)/N; ZeRO-1/2 "
        "reduce-scatter gradients and all-gather parameters, 2(N-1)/N; FSDP grad-op all-gathers each unit "
        "once, 2(N-1)/N; ZeRO-3 / FSDP full gathers in forward and again in backward, 3(N-1)/N, 1.5x DDP. "
        "Bytes differ where element sizes do (the implementations note).",
        "Working set (estimate): DDP and ZeroRedundancyOptimizer copy gradients into flat buckets for the "
        "all-reduce, a second copy of the gradients unless gradient_as_bucket_view=True; DeepSpeed's "
        "ZeRO-1/2 copy them into contiguous buckets of reduce_bucket_size (5e8) elements; under "
        "bf16-mixed, autocast keeps a bf16 copy of every replicated weight from forward until backward "
        "has used it. FSDP grad-op holds every unit's gathered parameters from forward until backward; "
        "FSDP full only a few units at a time.",
    ]
    if group_size:
        replicas = gpus // group_size
        notes.append(
            f"HSDP with G = {group_size}: parameters are all-gathered and gradients reduce-scattered "
            f"inside each group of {group_size}, and only a 1/{group_size} shard of the gradients is "
            f"all-reduced across the {replicas} group(s); with G = GPUs per node, that all-reduce is "
            "the only traffic on the slower links between nodes."
        )
    return notes


_DTYPES = {4: "fp32", 2: "bf16"}
_SENDS = {
    "zro": "broadcasts them in {dtype} after DDP's all-reduce",
    "zero1": "all-gathers them in {dtype} after the step",
    "zero2": "all-gathers them in {dtype} after the step",
    "grad-op": "all-gathers them in {dtype} once per step and keeps them until backward",
    "zero3": "all-gathers them in {dtype} in forward and again in backward",
    "hsdp": "all-gathers them in {dtype} in its group, in forward and again in backward",
}


_DEEPSPEED_MODES = {
    "fp32": "Under fp32 that copy is a second fp32 copy of the partition, 4 more bytes per parameter / N.",
    "bf16-mixed": "Under bf16-mixed that is DeepSpeed's torch_autocast mode: fp32 weights held whole, an fp32 "
    "copy of the partition, the updated fp32 weights all-gathered, and gradients reduced in bf16 for "
    "Linear layers and in fp32 for the others (all counted in bf16 here).",
    "bf16-master": "Under bf16-master that is DeepSpeed's bf16 mode: bf16 weights and gradients, reduced "
    "and gathered in bf16, with the fp32 master copy and moments in the optimizer.",
    "bf16": "Under bf16 that needs bf16_master_weights_and_grads and bf16_optimizer_states, which keep the "
    "copy and the moments in bf16.",
}


def implementation_notes(inputs: CalcInputs) -> list[str]:
    """Which implementation each column follows under this precision, and where they differ."""
    if inputs.deepspeed:
        return []
    clauses = []
    for name in inputs.strategies:
        held = implementation(name, inputs.precision.name, inputs.offload)
        state = model_state(inputs.params, inputs.gpus, name, inputs.precision.name, inputs.optimizer,
                            inputs.group_size if name == "hsdp" else None, inputs.offload)
        comm = step_comm(name, inputs.params, inputs.gpus, inputs.precision.name,
                         inputs.group_size if name == "hsdp" else None, inputs.unit_params, inputs.offload)
        whole = shard_ways(name, "params", inputs.gpus, inputs.group_size) == 1
        clause = (f"{STRATEGY_TITLES[name]} follows {held.name}; it holds {format_bytes(state['params_bytes'])} of "
                  f"{_DTYPES[held.param_bytes]} parameters {'whole' if whole else 'as shards'}")
        if held.master_bytes:
            clause += f", plus an {_DTYPES[held.master_bytes]} master copy in the optimizer"
        sent = comm.get("broadcast") or comm.get("all_gather")
        if sent is not None and name in _SENDS:
            clause += f", {_SENDS[name].format(dtype=_DTYPES[held.gather_bytes])} ({format_bytes(sent['bytes'])})"
        clauses.append(clause + f", and reduces gradients in {_DTYPES[held.reduce_bytes]}")
    notes = [f"What each column follows under {inputs.precision.name}, and where they differ. " + ". ".join(clauses) + "."]
    if any(name in ("zero1", "zero2") for name in inputs.strategies):
        notes.append(
            "ZeRO-1/2 are DeepSpeed's stages (runtime/zero/stage_1_and_2.py): the optimizer steps its own "
            "copy of the rank's partition, in the master dtype, even when the parameters are fp32, and "
            "after the step the updated partitions are all-gathered in the dtype the parameters are held "
            f"in. {_DEEPSPEED_MODES[inputs.precision.name]} PyTorch's own sharding of the optimizer state is "
            "the zro (ZeroRedundancyOptimizer) column, and FSDP's SHARD_GRAD_OP, often called ZeRO-2, is the "
            "grad-op column: neither holds nor sends what DeepSpeed's stages do."
        )
    return notes


def shape_notes(inputs: CalcInputs) -> list[str]:
    """How the working set and activations were sized: from the preset's shape, or assumed units."""
    largest = max(inputs.unit_params)
    shape = inputs.shape
    if shape is None:
        return [
            f"Working set (estimate) assumes {len(inputs.unit_params) - 1} equal FSDP units "
            f"({largest:,} parameters each; set the unit count, or give a model preset for real shapes), "
            f"{PREFETCH_UNITS} of them unsharded at once.",
            "Activations are not included: they need the model's shape (give a model preset).",
        ]
    return [
        f"Working set (estimate): FSDP wraps {inputs.model}'s embeddings, each of its {shape.layers} blocks "
        f"and its head as units; the largest holds {largest:,} parameters, and "
        f"{PREFETCH_UNITS} units are unsharded at once with prefetching (params, and grads in backward).",
        f"Activations (estimate) for micro-batch {inputs.batch_size} x seq {inputs.seq_len}, width {shape.d_model}, "
        f"{shape.layers} layers: each block saves about b*s*d*(2r + 14c) bytes (r: residual-stream "
        "bytes, c: compute bytes; fused attention, no seq x seq scores)"
        + ("; with checkpointing only each block's input is kept and one block is recomputed at a time"
           if inputs.checkpoint_activations else "")
        + ", plus the head's log-softmax and its gradient. "
        + ("Data parallelism shards none of them, but their dtype follows how the strategy applies bf16-mixed: "
           "DDP's and DeepSpeed's autocast keep the residual stream fp32 (r = 4), FSDP2's "
           "MixedPrecisionPolicy(param_dtype=bf16) makes it bf16 (r = 2)."
           if inputs.precision.name == "bf16-mixed" else "Every strategy holds the same activations."),
    ]


def offload_notes(offload: str, chosen: list[str], per_node: int, deepspeed: bool) -> list[str]:
    if offload == "none":
        return []
    left_out = [STRATEGY_TITLES[name] for name in STRATEGIES if name not in chosen and offload_refusal(name, offload)]
    notes = [
        f"Offload {offload}: " + "; ".join(f"{STRATEGY_TITLES[name]} by {OFFLOAD_SUPPORT[name][offload]}" for name in chosen) + "."
        + (f" Not shown: {', '.join(left_out)} (no implementation offloads {'the optimizer alone' if offload == 'optimizer' else 'parameters'} there)."
           if left_out else ""),
    ]
    if not deepspeed:
        if offload == "optimizer":
            notes.append(
                "Offload optimizer (DeepSpeed ZeRO-Offload): the optimizer state lives in host RAM and the step "
                "runs on the CPU; each step copies the gradient shard device-to-host and the updated "
                "parameter shard back (PCIe per step). ZeRO-1 still holds the full gradients on the GPU."
            )
        else:
            notes.append(
                "Offload all (FSDP2 CPUOffloadPolicy): sharded parameters, gradients and optimizer state live in "
                "pinned host RAM and the optimizer steps on the CPU. Each parameter shard is copied "
                "host-to-device before each all-gather (forward, and backward after resharding) and each "
                "gradient shard device-to-host after its reduce-scatter; the gathered units still use the GPU."
            )
        notes.append(
            f"Host RAM per node: {per_node} process(es) x each one's offloaded share, with no margin; the "
            "deepspeed accounting adds DeepSpeed's 1.5x buffer factor."
        )
    return notes


def deepspeed_notes(
    count: int, gpus: int, chosen: list[str], offload: str, largest_layer: int, unit_params: list[int], precision: str, optimizer: str
) -> list[str]:
    notes = [
        "Accounting deepspeed: DeepSpeed 0.19's estimate_zero2_model_states_mem_needs and "
        "estimate_zero3_model_states_mem_needs, per GPU and per node (host RAM x 1.5, its "
        f"additional_buffer_factor). Largest layer: {largest_layer:,} parameters (DeepSpeed's ZeRO-3 "
        "working term is 4 bytes x the largest layer: its 16-bit parameters and 16-bit gradients).",
        "Why the two accountings differ, and why both are defensible: DeepSpeed counts 18 bytes per sharded "
        "parameter (fp32 gradient copy 4 + fp32 master 4 + Adam 8 + 16-bit grads or params 2) where ours "
        "counts 14 (ZeRO-2) or 16 (ZeRO-3), because its optimizer converts a whole parameter group's "
        "gradients to fp32 before the update, while FSDP keeps one gradient shard in its held dtype. "
        "DeepSpeed's working term is one layer (one module's own parameters); ours is two FSDP units "
        "(a transformer block each, the one computing and the one prefetched), parameters and gradients.",
    ]
    if offload == "none":
        ours = {
            name: model_state(count, gpus, name, precision, optimizer)["model_state_bytes"]
            + working_set(name, count, precision, unit_params)["working_set_bytes"]
            for name in chosen
        }
        notes.append(
            "The ddpfsdp accounting for the same model and GPUs (model state + working set): "
            + "; ".join(f"{STRATEGY_TITLES[name]} {format_bytes(ours[name])}" for name in chosen) + "."
        )
    return notes
