"""The table's prose: what its figures mean and the traps they show, in sentences computed from the
configuration (`ddpfsdp calc` prints them under the tables, the JSON document carries them)."""

from __future__ import annotations

from ddpfsdp.demos.theory.inputs import CalcInputs
from ddpfsdp.demos.theory.offload import OFFLOAD_SUPPORT, offload_refusal
from ddpfsdp.demos.theory.precision import OPTIMIZER_STATES, bytes_per_param_breakdown, check_optimizer, precision_for
from ddpfsdp.demos.theory.sharding import STRATEGIES, STRATEGY_TITLES
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.theory.working_set import PREFETCH_UNITS, working_set
from ddpfsdp.demos.units import format_bytes


def estimate_notes(inputs: CalcInputs) -> list[str]:
    """Every note of the table, in the order printed."""
    spec = inputs.precision
    notes = teaching_notes(spec.name, inputs.optimizer, inputs.gpus, inputs.group_size)
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
    master = bytes_per_param_breakdown("bf16-master", optimizer)
    share = lambda b: f"{b['optimizer']} of {b['total']} bytes ({b['optimizer'] / b['total']:.0%})"  # noqa: E731
    notes = [
        "Theory: every figure is the analytic model's estimate, not a measurement. "
        "GB = 1e9 bytes, GiB = 2**30 bytes.",
        f"{spec.name}: {spec.summary}. Per parameter: params {per['params']} + grads {per['grads']} "
        f"+ optimizer {per['optimizer']} = {per['total']} bytes ({optimizer}: "
        f"{OPTIMIZER_STATES[optimizer]} state tensor(s)).",
        f"Mixed precision does not shrink model state: bf16-mixed holds {mixed['params']} + "
        f"{mixed['grads']} + {mixed['optimizer']} = {mixed['total']} bytes per parameter with "
        f"{optimizer}, as fp32 does ({fp32['total']}); autocast and MixedPrecisionPolicy only add bf16 "
        "copies for compute. It shrinks activations and the bytes FSDP all-gathers, and speeds up matmuls.",
        f"ZeRO-1 shards only the optimizer state: {share(master)} per parameter under bf16-master, "
        f"{share(mixed)} under bf16-mixed. It saves more under bf16-master because the fp32 master "
        "weights live inside the optimizer there, while bf16-mixed keeps its fp32 weights as the "
        "parameters, which ZeRO-1 replicates.",
        f"Communication per step per rank on {gpus} GPUs: DDP all-reduces the gradients, 2(N-1)/N "
        "of them; ZeRO-1/2 reduce-scatter gradients and all-gather parameters, the same volume; "
        "ZeRO-3 / FSDP full all-gathers parameters in forward and again in backward, then "
        "reduce-scatters gradients: 3(N-1)/N, 1.5x DDP at equal element sizes.",
        "Working set (estimate): DDP, and PyTorch's ZeRO-1 built on it, copies gradients into "
        "flat buckets for the all-reduce, a second copy of the gradients unless "
        "gradient_as_bucket_view=True; under bf16-mixed, autocast keeps a bf16 copy of every weight "
        "from forward until backward has used it. FSDP instead holds a few unsharded units at a time.",
        "ZeRO-1 follows the paper here (reduce-scatter + all-gather). PyTorch's "
        "ZeroRedundancyOptimizer keeps DDP's all-reduce and then broadcasts each rank's updated "
        "parameters: 3(N-1)/N of the model per step.",
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
        + ", plus the head's log-softmax and its gradient. Every strategy holds the same activations.",
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
