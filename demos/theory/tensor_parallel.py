"""Two dimensions: FSDP over "dp" and tensor parallelism over "tp", on a (dp, tp) mesh of dp x tp GPUs.

Inside each block, Megatron-LM's plan (Shoeybi et al., 2019; Narayanan et al., 2021): the qkv
projection and the MLP's up-projection are split column-wise (each rank computes its heads, its
slice of the hidden width), the attention output and the MLP's down-projection row-wise (each rank
multiplies its slice and holds a partial sum of the full output). A column-wise Linear followed by a
row-wise one needs no collective in between; the pair ends in one all-reduce of the b x s x d output
in forward, and its input's gradient is all-reduced once in backward. Per block and step: 2
all-reduces forward, 2 backward, each of b*s*d activations (`compute_bytes` each) on a ring of tp.
Outside the blocks this project's plan shards the token embedding by vocabulary (an all-reduce of
its output in forward) and the LM head by vocabulary (its input's gradient all-reduced in
backward), and the loss runs on vocabulary-sharded logits (`loss_parallel`: three all-reduces of
b*s fp32 values, the max, the sum of exponentials and the picked logits, in forward).

Sequence parallelism (Korthikanti et al., 2022) shards the LayerNorms' work and the residual stream
by sequence: each all-reduce becomes a reduce-scatter (to the sequence-sharded residual) and an
all-gather (back to the whole sequence before the next column-wise Linear), the same bytes on the
wire, as a ring all-reduce is a reduce-scatter then an all-gather. Per block and step: 2 all-gathers
and 2 reduce-scatters forward, 2 of each backward. The LayerNorms' weights are replicated while their
inputs are sharded, so their gradients are partial sums: one all-reduce per weight and bias (4 per
block, 2 for the final LayerNorm) before FSDP reduce-scatters them. At the ends: the head's input is
all-gathered in forward (reduce-scattered in backward); the embedding's output is all-reduced, then
each rank keeps its slice of the sequence, whose gradient is all-gathered in backward.

Memory: the sharded tensors are split tp ways by TP and dp ways by FSDP, model state dp x tp ways:
16 Psi / (dp x tp) bytes with mixed-precision Adam. What TP leaves whole (LayerNorms, the row-wise
Linears' biases, the position table) FSDP still splits dp ways. Activations: `activations`.

Data parallelism: FSDP all-gathers and reduce-scatters each rank's TP shard, Psi / tp, over dp.
The rule of thumb, TP inside a node: TP's collectives sit between one matmul and the next, so every
block waits for them, and they move b*s*d per collective whatever the model's size; FSDP's can be
issued a unit ahead and overlap compute. TP goes on the fastest links (NVLink within a node), FSDP
across nodes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypedDict

from ddpfsdp.demos.base.collectives import wire_factor
from ddpfsdp.demos.theory.activations import ActivationBytes, transformer_activation_bytes
from ddpfsdp.demos.theory.arguments import read_count, read_flag
from ddpfsdp.demos.theory.comm import OpFigures, op_figures, step_comm
from ddpfsdp.demos.theory.implementations import implementation
from ddpfsdp.demos.theory.precision import precision_for
from ddpfsdp.demos.theory.state import ModelState, model_state
from ddpfsdp.demos.theory.working_set import working_set

if TYPE_CHECKING:
    from ddpfsdp.demos.base.shapes import GPTShape

TITLE = "2-D: FSDP x TP"
SHARDS = "all sharded over dp x tp: blocks split by TP, then FSDP"


LOSS_ALL_REDUCES = 3
"""`loss_parallel`'s forward all-reduces over tp: the row max, the sum of exponentials, the picked logits."""

LOSS_BYTES = 4  # the loss runs in fp32 (`train.data.compute_loss`)


class Mesh(TypedDict):
    """The 2-D mesh's degrees."""

    dp: int
    tp: int


class TpTerm(TypedDict):
    """One kind of TP collective at one place in the step: calls, and bytes per call."""

    where: str
    op: str
    count: int
    bytes_each: int


class TpSplit(TypedDict):
    """Parameters one TP rank holds: per FSDP unit (root last), in all, and left whole by TP."""

    units: list[int]
    local_params: int
    replicated_params: int


class TpStepComm(TypedDict):
    """TP's collectives per step per rank: by op, by term, and the b*s*d bytes of one block's collective."""

    ops: dict[str, OpFigures]
    terms: list[TpTerm]
    block_bytes_each: int


class TwoDFigures(ModelState):
    """The 2-D configuration's memory and traffic per GPU, before `rows.two_d_row` makes its column."""

    mesh: Mesh
    sequence_parallel: bool
    tp_local_params: int
    tp_replicated_params: int | None  # counted only with a preset's exact layout
    working_set_bytes: int
    working_set: dict[str, int]
    activations: ActivationBytes | None  # needs a block shape
    dp_comm: dict[str, OpFigures]
    tp_comm: TpStepComm | None  # needs a block shape


class TwoDColumn(TypedDict):
    """What the 2-D column of calc's table (`rows.TwoDRow`) adds to every column's figures."""

    mesh: Mesh
    sequence_parallel: bool
    tp_local_params: int
    tp_replicated_params: int | None
    shape_activation_bytes: int | None  # from the block shape, even where the table leaves activations out
    tp_comm: dict[str, OpFigures] | None  # these need a block shape
    tp_terms: list[TpTerm] | None
    dp_wire_bytes_per_rank: int
    tp_wire_bytes_per_rank: int | None


class TwoDRunTheory(ModelState):
    """The analytic model's figures for a 2-D demo run, per rank (bytes), shown beside its measurements."""

    strategy: str
    mesh: Mesh
    held_params: int
    ideal_params_per_rank: float
    replicated_params: int
    working_set_bytes: int
    comm: dict[str, OpFigures]  # both groups' collectives merged by op
    dp_comm: dict[str, OpFigures]
    tp_comm: dict[str, OpFigures]
    tp_terms: list[TpTerm]
    block_terms: list[TpTerm]
    block_activation_bytes: int
    activation_bytes: int
    wire_bytes_per_rank: int


def implementation_name(precision: str, sequence_parallel: bool) -> str:
    """The 2-D column's implementation, as the table names each column's."""
    from ddpfsdp.demos.theory.implementations import fsdp_mode

    plan = "ColwiseParallel / RowwiseParallel" + (" + SequenceParallel" if sequence_parallel else "")
    return f"parallelize_module over tp ({plan}), then FSDP2 fully_shard over dp, {fsdp_mode(precision)}"


def check_tp(tp: Any, gpus: int, heads: int | None = None) -> int:
    """The TP degree, checked: it divides the GPUs (the mesh is dp x tp) and the heads (a rank owns whole heads)."""
    size = read_count(tp, "tp")
    if size < 2:
        raise ValueError(f"tp must be at least 2 (got {size}); tp 1 is plain FSDP, the ZeRO-3 row")
    fitting = ", ".join(str(d) for d in range(2, gpus + 1) if gpus % d == 0 and (heads is None or heads % d == 0))
    choose = f"choose one of {fitting}" if fitting else "no tp of 2 or more divides both"
    if size > gpus or gpus % size:
        raise ValueError(f"tp {size} does not divide the {gpus} GPUs (the mesh is dp x tp, dp = {gpus}/tp); {choose}")
    if heads is not None and heads % size:
        raise ValueError(f"tp {size} must divide the {heads} attention heads: each TP rank computes whole heads; {choose}")
    return size


def tp_local_tensors(shape: GPTShape, tp: int) -> list[tuple[str, int, int]]:
    """Each parameter as TP rank 0 holds it under this plan, in registration order: (unit, rows, columns).

    Rows are dim 0, which FSDP then splits over dp (a 1-D tensor is rows x 1). Sharded: the token
    embedding and the LM head by vocabulary (rows), qkv and the MLP's up-projection by output (rows,
    with their biases), the two row-wise weights by input (columns). Replicated: the position table,
    the LayerNorms and the two row-wise biases (6d per block). A dimension that tp does not divide
    leaves rank 0 the larger part (torch.chunk).
    """
    d, vocab = shape.d_model, shape.vocab
    split = lambda size: math.ceil(size / tp)  # noqa: E731
    block = [(d, 1), (d, 1), (split(3 * d), d), (split(3 * d), 1), (d, split(d)), (d, 1),
             (d, 1), (d, 1), (split(4 * d), d), (split(4 * d), 1), (d, split(4 * d)), (d, 1)]
    tensors = [("embeddings", split(vocab), d), ("embeddings", shape.seq_len, d)]
    for index in range(shape.layers):
        tensors += [(f"blocks.{index}", rows, cols) for rows, cols in block]
    return tensors + [("head", d, 1), ("head", d, 1), ("head", split(vocab), d)]


def tp_param_split(shape: GPTShape, tp: int) -> TpSplit:
    """Parameters one TP rank holds of a GPT shape under this plan, per FSDP unit (root last, empty)."""
    units: dict[str, int] = {}
    for unit, rows, cols in tp_local_tensors(shape, tp):
        units[unit] = units.get(unit, 0) + rows * cols
    d = shape.d_model
    replicated = shape.seq_len * d + shape.layers * 6 * d + 2 * d
    return {"units": [*units.values(), 0], "local_params": sum(units.values()), "replicated_params": replicated}


def block_terms(layers: int, activation_bytes: int, sequence_parallel: bool) -> list[tuple[int, str, int, str]]:
    """The blocks' TP collectives per step, (calls, op, bytes each, where): Megatron-LM's four per block,
    or with sequence parallelism a reduce-scatter and an all-gather in place of each."""
    if not sequence_parallel:
        return [
            (2 * layers, "all_reduce", activation_bytes, "blocks, forward: after the two row-wise Linears"),
            (2 * layers, "all_reduce", activation_bytes, "blocks, backward: before qkv and the MLP"),
        ]
    return [
        (2 * layers, "all_gather", activation_bytes, "blocks, forward: before qkv and the MLP"),
        (2 * layers, "reduce_scatter", activation_bytes, "blocks, forward: after the two row-wise Linears"),
        (2 * layers, "all_gather", activation_bytes, "blocks, backward"),
        (2 * layers, "reduce_scatter", activation_bytes, "blocks, backward"),
    ]


def tp_step_comm(shape: GPTShape, batch_size: int, tp: int, precision: str,
                 sequence_parallel: bool = False) -> TpStepComm:
    """TP's collectives per step, per rank, on its ring of tp: {"ops": {op: figures}, "terms": [...]}.

    Each term is one kind of collective at one place: where, op, calls, bytes per call.
    """
    spec = precision_for(precision)
    activation = batch_size * shape.seq_len * shape.d_model * spec.compute_bytes
    terms = block_terms(shape.layers, activation, sequence_parallel)
    if sequence_parallel:
        terms += [
            (4 * shape.layers + 2, "all_reduce", shape.d_model * spec.gather_bytes,
             "LayerNorm weight and bias gradients, backward"),
            (1, "all_reduce", activation, "token embedding output, forward"),
            (1, "all_gather", activation, "embedding output gradient, backward"),
            (1, "all_gather", activation, "head input, forward"),
            (1, "reduce_scatter", activation, "head input gradient, backward"),
        ]
    else:
        terms += [
            (1, "all_reduce", activation, "token embedding output, forward"),
            (1, "all_reduce", activation, "head input gradient, backward"),
        ]
    terms.append((LOSS_ALL_REDUCES, "all_reduce", batch_size * shape.seq_len * LOSS_BYTES, "loss, forward"))
    ops: dict[str, OpFigures] = {}
    for count, op, size, _ in terms:
        before = ops.get(op, {"count": 0, "bytes": 0})
        ops[op] = op_figures(before["count"] + count, before["bytes"] + count * size, wire_factor(op, tp))
    return {
        "ops": ops,
        "terms": [{"where": where, "op": op, "count": count, "bytes_each": size} for count, op, size, where in terms],
        "block_bytes_each": activation,
    }


def q_tp_block_wire_bytes(*, layers: Any, d_model: Any, seq_len: Any, batch_size: Any, tp: Any, precision: str,
                          sequence_parallel: Any = False) -> int:
    """Bytes one rank sends per step on its TP ring for the blocks' collectives (no embedding, head or loss)."""
    activation = (read_count(batch_size, "batch size") * read_count(seq_len, "seq len")
                  * read_count(d_model, "d_model") * precision_for(precision).compute_bytes)
    ranks = read_count(tp, "tp")
    terms = block_terms(read_count(layers, "layers"), activation, read_flag(sequence_parallel))
    return round(sum(count * size * wire_factor(op, ranks) for count, op, size, _ in terms))


def two_d_figures(
    *,
    params: int,
    gpus: int,
    tp: int,
    precision: str,
    optimizer: str,
    unit_params: list[int],
    shape: GPTShape | None = None,
    batch_size: int = 1,
    sequence_parallel: bool = False,
    checkpoint_activations: bool = False,
    exact_layout: bool = False,
) -> TwoDFigures:
    """Per-GPU memory and per-step traffic of the 2-D configuration (bytes).

    Model state: what each TP rank holds, split dp ways by FSDP. With `exact_layout` (a preset's
    own shape) the TP split is counted tensor by tensor (`tp_param_split`: the replicated
    LayerNorms, biases and position table included); otherwise Psi / tp and `unit_params` / tp.
    DP traffic: FSDP full's over dp of that share. TP traffic and activations need `shape`.
    """
    dp = gpus // tp
    if exact_layout and shape is not None:
        split = tp_param_split(shape, tp)
        local, units, replicated = split["local_params"], split["units"], split["replicated_params"]
    else:
        local, units, replicated = math.ceil(params / tp), [math.ceil(u / tp) for u in unit_params], None
    state = model_state(local, dp, "zero3", precision, optimizer)
    work = working_set("zero3", local, precision, units)
    tp_comm = tp_step_comm(shape, batch_size, tp, precision, sequence_parallel) if shape else None
    activations = None
    if shape is not None:
        activations = transformer_activation_bytes(
            layers=shape.layers, d_model=shape.d_model, tokens=shape.seq_len, batch_size=batch_size,
            head_outputs=shape.vocab, head_tokens=shape.seq_len, precision=precision,
            checkpoint_activations=checkpoint_activations, tp=tp, sequence_parallel=sequence_parallel,
            cast=implementation("zero3", precision).cast,  # FSDP2 over dp applies the precision
        )
    return {
        "mesh": {"dp": dp, "tp": tp},
        "sequence_parallel": sequence_parallel,
        "tp_local_params": local,
        "tp_replicated_params": replicated,
        **state,
        "working_set_bytes": work["working_set_bytes"],
        "working_set": work["parts"],
        "activations": activations,
        "dp_comm": step_comm("zero3", local, dp, precision, unit_params=units),
        "tp_comm": tp_comm,
    }


def node_rule(tp: int, gpus_per_node: int, tp_wire_bytes: int | None, dp_wire_bytes: int) -> str:
    """The rule of thumb, TP inside a node, and where this configuration stands."""
    from ddpfsdp.demos.base.units import format_bytes

    traffic = (f" Here TP sends {format_bytes(tp_wire_bytes)} per rank per step, FSDP over dp "
               f"{format_bytes(dp_wire_bytes)}." if tp_wire_bytes is not None else "")
    verdict = (f"tp {tp} fits in a node of {gpus_per_node} GPUs." if tp <= gpus_per_node and gpus_per_node % tp == 0
               else f"tp {tp} does not fit in a node of {gpus_per_node} GPUs: its all-reduces would cross the "
                    "slower links between nodes.")
    return (
        "Rule of thumb: TP inside a node, FSDP across nodes. TP's collectives sit between one matmul and "
        "the next (the row-wise Linear's partial sums must be summed before the residual add), so every "
        "block waits for them, and each moves b*s*d activations whatever the model's size; FSDP's "
        "all-gathers can be issued a unit ahead and overlap compute. So TP takes the fastest links "
        f"(NVLink within a node) and FSDP the slower ones between nodes.{traffic} {verdict}"
    )


def two_d_notes(row: TwoDColumn, gpus_per_node: int, shape: GPTShape | None, batch_size: int) -> list[str]:
    """The 2-D column's prose: its mesh, what TP sends and why, the rule of thumb."""
    dp, tp = row["mesh"]["dp"], row["mesh"]["tp"]
    sp = row["sequence_parallel"]
    replicated = row["tp_replicated_params"]
    notes = [
        f"2-D (dp {dp} x tp {tp}): model state is split dp x tp = {dp * tp} ways, as ZeRO-3's on all GPUs; "
        "TP splits each block's weights tp ways (qkv and MLP up column-wise, attention output and MLP "
        "down row-wise) and FSDP splits each TP shard dp ways."
        + (f" {replicated:,} parameters (LayerNorms, row-wise biases, the position table) stay whole on "
           "every TP rank and are split dp ways only." if replicated else
           " TP leaves the LayerNorms, two biases per block and the position table whole on every TP "
           "rank; a bare parameter count leaves them out (a model preset counts them)."),
    ]
    from ddpfsdp.demos.base.shapes import describe_gpt_shape

    if shape is None:
        notes.append("TP traffic and activations need the block shape: give a model preset or a named size "
                     "(--params 1B, 7B, 13B, 70B).")
    else:
        per = batch_size * shape.seq_len * shape.d_model
        collectives = ("2 all-gathers and 2 reduce-scatters forward, as many backward (sequence parallel: the "
                       "same wire bytes as the all-reduces they replace, and the residual stream sharded by "
                       "sequence)") if sp else "2 all-reduces forward and 2 backward"
        notes.append(
            f"TP traffic per block per step: {collectives}, each of b*s*d = {per:,} activations, "
            f"on a ring of {tp} (Megatron-LM); {shape.layers} blocks, plus the embedding, the head and "
            f"the vocabulary-parallel loss (tp_terms). TP traffic and activations use the blocks of "
            f"{describe_gpt_shape(shape)}."
        )
    notes.append(node_rule(tp, gpus_per_node, row["tp_wire_bytes_per_rank"], row["dp_wire_bytes_per_rank"]))
    return notes


def two_d_run_theory(*, shape: GPTShape, world_size: int, tp: int, precision: str, optimizer: str,
                     batch_size: int, sequence_parallel: bool = False) -> TwoDRunTheory:
    """The analytic model's figures for a 2-D demo run, as PyTorch runs it, per rank (bytes).

    Model state: each parameter as TP rank 0 holds it (`tp_local_tensors`), its dim 0 split over dp
    by FSDP, padded up to a multiple of dp as FSDP2 pads it (rank 0's shard is the padded size), so
    the figure is exact, not a share. `ideal_params_per_rank` is the model's parameters / (dp x tp),
    the share the 1/(dp x tp) rule states. DP traffic: FSDP full over dp of each unit's padded TP shard;
    TP traffic: `tp_step_comm`; activations: `transformer_activation_bytes` on one rank of tp.
    `comm` merges both groups per op, as a counter that sees every collective reports them.
    """
    spec = precision_for(precision)
    dp = world_size // tp
    tensors = tp_local_tensors(shape, tp)
    held = sum(math.ceil(rows / dp) * cols for _, rows, cols in tensors)
    units: dict[str, int] = {}
    for unit, rows, cols in tensors:
        units[unit] = units.get(unit, 0) + math.ceil(rows / dp) * cols * dp
    padded_units = [*units.values(), 0]
    kinds = {"params": spec.param_bytes, "grads": spec.grad_bytes, "optimizer": spec.optimizer_bytes_per_param(optimizer)}
    state = {f"{kind}_bytes": held * size for kind, size in kinds.items()}
    dp_comm = step_comm("zero3", sum(padded_units), dp, precision, unit_params=padded_units)
    tp_comm = tp_step_comm(shape, batch_size, tp, precision, sequence_parallel)
    merged: dict[str, OpFigures] = {}
    for ops in (dp_comm, tp_comm["ops"]):
        for op, figures in ops.items():
            before = merged.get(op, {"count": 0, "bytes": 0, "wire_bytes_per_rank": 0})
            merged[op] = {key: (before[key] or 0) + (figures[key] or 0) for key in before}
    activations = transformer_activation_bytes(
        layers=shape.layers, d_model=shape.d_model, tokens=shape.seq_len, batch_size=batch_size,
        head_outputs=shape.vocab, head_tokens=shape.seq_len, precision=precision, checkpoint_activations=False,
        tp=tp, sequence_parallel=sequence_parallel, cast=implementation("zero3", precision).cast,
    )
    return {
        "strategy": "2d",
        "mesh": {"dp": dp, "tp": tp},
        **state,
        "model_state_bytes": sum(state.values()),
        "held_params": held,
        "ideal_params_per_rank": shape.params / (dp * tp),
        "replicated_params": tp_param_split(shape, tp)["replicated_params"],
        "working_set_bytes": working_set("zero3", sum(padded_units) // dp, precision, padded_units)["working_set_bytes"],
        "comm": merged,
        "dp_comm": dp_comm,
        "tp_comm": tp_comm["ops"],
        "tp_terms": tp_comm["terms"],
        # One block's TP collectives per step (block_terms of a single layer).
        "block_terms": [{"op": op, "count": count, "bytes_each": size, "where": where}
                        for count, op, size, where in block_terms(1, tp_comm["block_bytes_each"], sequence_parallel)],
        "block_activation_bytes": activations["block_bytes"],
        "activation_bytes": activations["activation_bytes"],
        "wire_bytes_per_rank": sum(figures["wire_bytes_per_rank"] or 0 for figures in merged.values()),
    }
