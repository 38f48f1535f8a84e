"""Every kata by name: what it asks, what the learner's file defines, what it may call, what it is judged on.

A kata's statement is the top docstring of its starter file (`starters/<file>`), the file a learner
starts from, so the task is written once, where the learner reads it. Its reference solution
(`solutions/<file>`) carries its own explanation the same way. Imports no torch: the CLI lists katas,
writes starters and gives hints from here, and the quiz validates its question links against it.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
STARTERS_DIR = PACKAGE_DIR / "starters"
SOLUTIONS_DIR = PACKAGE_DIR / "solutions"

P2P = ("send", "recv", "isend", "irecv", "batch_isend_irecv")
ALWAYS_ALLOWED = ("barrier",)  # a barrier changes no result; it is counted like any call

# The checks every kata carries: whether the learner's code ran to its end on every rank.
HEALTH_CHECKS = {
    "no_exception": "your code raised no exception on any rank (else: the rank and your traceback, your frames first)",
    "no_forbidden_call": "your code called only what the kata allows (else: the call and what to use instead)",
    "no_deadlock": "no rank waited past the deadline on a peer (else: what every rank waits on, and the cycle)",
    "finishes": "every rank finished your code within the deadline (else: the rank still running, and where)",
}
REQUESTS_CHECK = {"every_request_waited": "every send and receive your code started was waited on before it returned"}


@dataclass(frozen=True)
class Kata:
    name: str
    title: str
    topic: str  # a quiz topic (quiz/bank): its spaced review and readiness count this kata
    level: int  # 1 warm-up, 2 the interview question, 3 the follow-up
    summary: str  # one line for `ddpfsdp kata list`
    defines: str  # the function or class the learner's file must define
    signature: str  # how the checker calls it
    judge: str  # "module:ATTR" of the kata's judge (imports torch)
    hints: tuple[str, ...]  # progressive: `ddpfsdp kata hint NAME` gives the next one
    talking_points: tuple[str, ...]  # what to say about it in an interview, shown with the solution
    checks: dict[str, str]  # the kata's own checks (name -> claim), besides HEALTH_CHECKS
    allowed: tuple[str, ...] = ()  # operations of `comm` the learner may call (and torch.distributed's alike)
    instead: str = ""  # said when a forbidden operation is called: what to use
    forbidden_names: tuple[str, ...] = ()  # names the file may not use at all (the answer itself)
    world_sizes: tuple[int, ...] = (2, 3, 4)  # the --reference runs the tests make
    preload: tuple[str, ...] = ()  # modules the ranks import before they fork, beyond torch.distributed
    uses_comm: bool = True  # False: a pure function, run on every rank over its share of the cases

    @property
    def file_name(self) -> str:
        return self.name.replace("-", "_") + ".py"

    @property
    def starter_path(self) -> Path:
        return STARTERS_DIR / self.file_name

    @property
    def solution_path(self) -> Path:
        return SOLUTIONS_DIR / self.file_name

    @property
    def p2p(self) -> bool:
        """The kata's code sends and receives point to point (gloo cannot do that on CUDA tensors)."""
        return any(op in P2P for op in self.allowed)

    @property
    def all_checks(self) -> dict[str, str]:
        return {**HEALTH_CHECKS, **(REQUESTS_CHECK if self.p2p else {}), **self.checks}

    @property
    def statement(self) -> str:
        return _docstring(self.starter_path)

    @property
    def explanation(self) -> str:
        return _docstring(self.solution_path)

    def allows(self, op: str) -> bool:
        return op in self.allowed or op in ALWAYS_ALLOWED


@functools.cache
def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


_RING_INSTEAD = "write it from point-to-point messages: comm.isend and comm.irecv (or comm.batch_isend_irecv) with your neighbours"

KATAS_LIST: list[Kata] = [
    Kata(
        "ring-allreduce", "Ring all-reduce from send and recv", "collectives", 2,
        "sum a tensor over every rank with 2(N-1) neighbour-to-neighbour steps, as NCCL's ring does",
        "ring_all_reduce", "ring_all_reduce(comm, tensor) -> None   (sums in place, like dist.all_reduce)",
        "ddpfsdp.demos.katas.rings:RING_ALLREDUCE",
        hints=(
            "Split the tensor into N chunks with tensor.tensor_split(N): views, so writing a chunk writes the tensor, "
            "and sizes N does not divide still give N chunks (the first numel % N one element longer).",
            "Two phases of N-1 steps. Reduce-scatter: at step s rank r sends chunk (r - s) % N to rank r+1 and adds "
            "chunk (r - s - 1) % N from rank r-1 into its own. All-gather: rank r sends chunk (r + 1 - s) % N and "
            "overwrites chunk (r - s) % N with what it receives.",
            "Post the receive and the send together (comm.irecv and comm.isend, then wait on both), into a separate "
            "buffer for the receive: a blocking send before a receive deadlocks, since a send completes only once "
            "its receiver has posted the receive.",
        ),
        talking_points=(
            "Each rank sends 2(N-1) chunks of B/N bytes: 2(N-1)/N x B, almost independent of N. That is why the ring "
            "is bandwidth-optimal: every link carries the same load, all at once.",
            "It takes 2(N-1) steps, each paying the latency alpha: for small messages a tree or recursive doubling "
            "(log2 N steps) wins; NCCL picks per message size.",
            "Reduce-scatter then all-gather is exactly the decomposition FSDP uses, stopping halfway: the reduce-scatter "
            "alone leaves each rank its summed shard.",
            "Sums in a different order round differently: the ring's result can differ from another algorithm's in "
            "the last bits of floating point.",
        ),
        checks={
            "equals_all_reduce": "the result on every rank equals dist.all_reduce's on the same inputs",
            "ring_messages": "each rank sends its non-empty chunks only to one neighbour, the same direction around "
                             "the ring, at most 2(N-1) messages per call",
            "ring_bytes": "each rank sends 2(N-1) chunks of about size/N: between 2(N-1)·floor(n/N) and "
                          "2(N-1)·ceil(n/N) elements per call, 2(N-1)·n over all ranks",
        },
        allowed=P2P, instead=_RING_INSTEAD,
    ),
    Kata(
        "ring-reduce-scatter", "Ring reduce-scatter", "collectives", 2,
        "each rank ends with its own chunk summed over every rank, in N-1 neighbour steps",
        "ring_reduce_scatter", "ring_reduce_scatter(comm, output, input) -> None   (like dist.reduce_scatter_single)",
        "ddpfsdp.demos.katas.rings:RING_REDUCE_SCATTER",
        hints=(
            "input holds N chunks of output.numel() elements each: input.chunk(N). Rank r's output is the sum of chunk r "
            "over every rank.",
            "At step s (0 to N-2) rank r sends its running sum of chunk (r - s - 1) % N to rank r+1 and adds what rank "
            "r-1 sends, chunk (r - s - 2) % N, into its running sum of that chunk.",
            "Work on a copy of input, so the caller's tensor is left as it was; after N-1 steps the running sum of chunk "
            "r is complete: copy it into output.",
        ),
        talking_points=(
            "Each rank sends N-1 chunks of B/N bytes: (N-1)/N x B, half of an all-reduce's traffic.",
            "It is how FSDP and ZeRO-2 reduce gradients: each rank needs only the gradients of its own shard.",
            "torch 2.13 names it dist.reduce_scatter_single; reduce_scatter_tensor is its deprecated older name. On gloo "
            "it is run as an all-reduce followed by a copy of the rank's chunk.",
        ),
        checks={
            "equals_reduce_scatter": "the output on every rank equals dist.reduce_scatter_single's on the same inputs",
            "ring_messages": "each rank sends N-1 messages, all to one neighbour, the same direction around the ring",
            "ring_bytes": "each rank sends (N-1)/N of the input: N-1 chunks of output.numel() elements",
        },
        allowed=P2P, instead=_RING_INSTEAD,
    ),
    Kata(
        "ring-allgather", "Ring all-gather", "collectives", 1,
        "every rank ends with every rank's chunk, passed along the ring in N-1 steps",
        "ring_all_gather", "ring_all_gather(comm, output, input) -> None   (like dist.all_gather_single)",
        "ddpfsdp.demos.katas.rings:RING_ALLGATHER",
        hints=(
            "output holds N chunks of input.numel() elements: output.chunk(N) gives views. Put your own input in chunk r "
            "first.",
            "At step s rank r sends chunk (r - s) % N to rank r+1 and receives chunk (r - s - 1) % N from rank r-1.",
            "Receive straight into the output's chunk (a view), and post the receive and the send before waiting on "
            "either.",
        ),
        talking_points=(
            "Each rank sends N-1 chunks: (N-1)/N of the output, the same traffic as a reduce-scatter.",
            "FSDP all-gathers each unit's parameters before its forward and again before its backward.",
            "torch 2.13 names it dist.all_gather_single; all_gather_into_tensor is its deprecated older name.",
        ),
        checks={
            "equals_all_gather": "the output on every rank equals dist.all_gather_single's on the same inputs",
            "ring_messages": "each rank sends N-1 messages, all to one neighbour, the same direction around the ring",
            "ring_bytes": "each rank sends (N-1)/N of the output: N-1 chunks of input.numel() elements",
        },
        allowed=P2P, instead=_RING_INSTEAD,
    ),
    Kata(
        "allreduce-halves", "All-reduce as reduce-scatter then all-gather", "collectives", 2,
        "all-reduce any size from one reduce-scatter and one all-gather, padding what N does not divide",
        "all_reduce_in_halves", "all_reduce_in_halves(comm, tensor) -> None   (sums in place, like dist.all_reduce)",
        "ddpfsdp.demos.katas.rings:ALLREDUCE_HALVES",
        hints=(
            "reduce_scatter_single needs an input of N equal chunks: pad the flat tensor with zeros up to "
            "ceil(n / N) * N elements (zeros change no sum).",
            "comm.reduce_scatter_single(shard, padded) leaves this rank the sum of its chunk; "
            "comm.all_gather_single(padded, shard) puts every summed chunk back.",
            "Copy only the first n elements back into the tensor: the padding is not part of the result.",
        ),
        talking_points=(
            "All-reduce = reduce-scatter + all-gather: the same 2(N-1)/N x B a ring all-reduce sends.",
            "Padding to a multiple of N is what FSDP does to every flat parameter: the last shard carries up to N-1 "
            "padding elements.",
            "Splitting the two halves apart is the whole of ZeRO and FSDP: keep the reduce-scattered shard, and "
            "all-gather only when the full tensor is needed.",
        ),
        checks={
            "equals_all_reduce": "the result on every rank equals dist.all_reduce's on the same inputs",
            "one_reduce_scatter_one_all_gather": "each call makes exactly one reduce-scatter and one all-gather",
            "padding_under_n": "the reduce-scatter's input pads the tensor by fewer than N elements",
        },
        allowed=("reduce_scatter_single", "reduce_scatter_tensor", "all_gather_single", "all_gather_into_tensor"),
        instead="use comm.reduce_scatter_single and then comm.all_gather_single",
    ),
    Kata(
        "recursive-doubling", "Latency-optimal all-reduce: recursive doubling", "collectives", 3,
        "all-reduce in log2(N) exchanges of the whole buffer; fold the ranks beyond a power of two in and out",
        "recursive_doubling_all_reduce", "recursive_doubling_all_reduce(comm, tensor) -> None   (sums in place)",
        "ddpfsdp.demos.katas.rings:RECURSIVE_DOUBLING",
        hints=(
            "With N a power of two: at step k rank r exchanges its whole buffer with rank r XOR 2**k and adds what it "
            "receives. After log2(N) steps every rank holds the sum.",
            "Otherwise let P be the largest power of two not above N. Ranks P..N-1 first send their buffer to rank "
            "r - P, which adds it; ranks 0..P-1 run the doubling; then rank r - P sends the result back.",
            "Receive into a separate buffer each step, and post the receive and the send before waiting on either.",
        ),
        talking_points=(
            "log2(N) steps instead of the ring's 2(N-1), but each step sends the whole buffer: log2(N) x B per rank "
            "instead of 2(N-1)/N x B. With alpha per step and beta per byte, doubling wins when alpha dominates: small "
            "messages, many ranks.",
            "A binary tree (reduce to a root, then broadcast) also takes O(log N) steps, 2 log2 N of them; NCCL's tree "
            "pipelines chunks through a double binary tree to use the bandwidth as well.",
            "N not a power of two costs two extra steps (fold in, fold out) and leaves the extra ranks idle meanwhile.",
        ),
        checks={
            "equals_all_reduce": "the result on every rank equals dist.all_reduce's on the same inputs",
            "log2_steps": "N a power of two: each rank receives exactly log2(N) whole buffers; otherwise at most "
                          "floor(log2 N) + 2 receives on any rank",
            "fewer_steps_than_ring": "the most receives on any rank is below the ring's 2(N-1); the detail weighs the "
                                     "measured steps and bytes against a ring's with alpha and beta",
        },
        allowed=P2P, instead=_RING_INSTEAD,
    ),
    Kata(
        "all-to-all", "All-to-all from send and recv", "collectives", 2,
        "rank r sends its chunk j to rank j and receives chunk r of every rank: expert parallelism's dispatch",
        "all_to_all", "all_to_all(comm, output, input) -> None   (like dist.all_to_all_single, equal splits)",
        "ddpfsdp.demos.katas.rings:ALL_TO_ALL",
        hints=(
            "input.chunk(N)[j] goes to rank j; output.chunk(N)[j] comes from rank j. Your own chunk r is a local copy.",
            "Post every receive and every send first (comm.irecv, comm.isend), then wait on all of them: a fixed order "
            "of blocking sends deadlocks.",
            "Chunk j of the input goes to rank j, not chunk r: an expert-parallel dispatch sends each expert its tokens.",
        ),
        talking_points=(
            "Each rank sends (N-1)/N of its input, one message to every other rank: N-1 messages, not 1, so the "
            "latency term grows with N.",
            "Expert parallelism uses it twice per MoE layer: dispatch tokens to their experts, combine the outputs back.",
            "Unlike a ring, every pair of ranks talks: the network's bisection bandwidth, not a link, is the limit.",
        ),
        checks={
            "equals_all_to_all": "the output on every rank equals dist.all_to_all_single's on the same inputs",
            "one_message_per_peer": "each rank sends exactly one chunk of input.numel()/N elements to every other rank",
        },
        allowed=P2P, instead=_RING_INSTEAD,
    ),
    Kata(
        "sampler-indices", "DistributedSampler's indices", "sampler", 1,
        "the indices one rank reads in one epoch: shuffle, seed, epoch, padding or drop_last, every N-th",
        "distributed_sampler_indices",
        "distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last) -> list[int]",
        "ddpfsdp.demos.katas.sampler:SAMPLER",
        hints=(
            "Shuffle with a torch.Generator seeded with seed + epoch: torch.randperm(dataset_len, generator=g).tolist(). "
            "Every rank draws the same permutation; that is what makes the shards disjoint.",
            "Without drop_last, pad the list to a multiple of num_replicas by repeating its own beginning (wrapping "
            "round as often as needed); with drop_last, cut it to the largest multiple at or below dataset_len.",
            "Then rank r takes every num_replicas-th index starting at r: indices[rank::num_replicas].",
        ),
        talking_points=(
            "Without set_epoch the permutation depends on the seed only: every epoch repeats the same order.",
            "Padding repeats samples, so an evaluation over a sampler without drop_last counts a few samples twice.",
            "Rank r takes a strided slice, not a contiguous block: the shards interleave.",
            "The seed must be the same on every rank, or the shards overlap and miss samples.",
        ),
        checks={"equals_distributed_sampler": "the indices equal torch's DistributedSampler's for every generated case"},
        forbidden_names=("DistributedSampler",), uses_comm=False, preload=("torch.utils.data.distributed",),
    ),
    Kata(
        "ddp-buckets", "DDP's bucket assignment", "ddp", 2,
        "group gradients into buckets by dtype with a small first cap, as DDP's Reducer does",
        "assign_buckets", "assign_buckets(sizes_bytes, dtypes, limits_bytes, ready_order=None) -> list[list[int]]",
        "ddpfsdp.demos.katas.buckets:BUCKETS",
        hints=(
            "Walk the tensors in order (the indices in ready_order when it is given). Keep one open bucket per dtype, "
            "with its own position in limits_bytes; add the tensor's index and bytes to its dtype's bucket.",
            "A bucket closes as soon as its bytes reach the limit (>=, not >): it goes to the result, its dtype starts a "
            "new one, and that dtype moves to the next limit, staying on the last once there.",
            "After the walk, add the buckets still open. Without ready_order, sort the result by each bucket's smallest "
            "index; with it, leave the order as built.",
        ),
        talking_points=(
            "At construction DDP (torch 2.13) uses one limit, sys.maxsize, unless find_unused_parameters=True: one "
            "bucket for the first iteration, since the order gradients become ready is not known yet.",
            "During the first backward the Reducer records the order gradients became ready and rebuilds the buckets in "
            "that order with limits [1 MiB, 25 MiB]: the small first bucket holds the first gradients ready, the last "
            "layers', so its all-reduce starts early in backward. A bucket_cap_mb of your own is then both limits.",
            "With find_unused_parameters=True the assignment at construction uses [1 MiB, cap] over the parameters in "
            "registration order, the Reducer takes the buckets reversed, and they are not rebuilt.",
            "Each bucket is one all-reduce: bigger buckets amortise latency, smaller ones start overlapping sooner.",
        ),
        checks={"equals_torch_assignment": "the buckets equal dist._compute_bucket_assignment_by_size's for every "
                                           "generated case"},
        forbidden_names=("_compute_bucket_assignment_by_size",), uses_comm=False,
    ),
    Kata(
        "grad-accumulation", "Gradient accumulation, one sync per step", "ddp", 2,
        "accumulate k micro-batches locally, then synchronise once: gradients equal one big-batch step",
        "accumulate_gradients", "accumulate_gradients(comm, model, micro_batches, loss_fn) -> None",
        "ddpfsdp.demos.katas.accumulation:ACCUMULATION",
        hints=(
            "Each micro-batch's loss is a mean over its samples: divide it by the number of micro-batches before "
            "backward, so the accumulated .grad is the mean over all of them.",
            "Run every micro-batch's forward and backward first; autograd adds into .grad. Only then synchronise.",
            "comm.all_reduce(p.grad) sums over ranks: divide by comm.world_size for the mean (gloo has no AVG).",
        ),
        talking_points=(
            "Synchronising every micro-batch sends k times the gradient bytes for the same result; DDP's no_sync() "
            "(FSDP: set_requires_gradient_sync(False)) skips the all-reduce on the first k-1.",
            "The loss scaling by 1/k is what makes k micro-batches equal one batch k times larger.",
            "With DDP, skipping the sync keeps the full accumulated gradient on every rank until the last micro-batch; "
            "with FSDP it keeps unsharded gradients, which costs memory.",
        ),
        checks={
            "grads_equal_big_batch": "each parameter's gradient on every rank equals one process's gradient of the mean "
                                     "loss over every rank's micro-batches",
            "one_sync_per_step": "all-reduces start only after the last micro-batch's loss, and carry each gradient once",
        },
        allowed=("all_reduce",), instead="synchronise with comm.all_reduce only",
    ),
    Kata(
        "zero1-adamw", "A ZeRO-1 AdamW step", "sharding", 3,
        "each rank steps AdamW on its shard of the flat parameter with its shard of the state, then all-gathers",
        "ShardedAdamW", "ShardedAdamW(comm, param, lr, betas, eps, weight_decay); .step(grad) -> None",
        "ddpfsdp.demos.katas.zero:ZERO1",
        hints=(
            "Pad the flat parameter to ceil(n / N) * N elements; rank r owns elements [r*s, (r+1)*s) of it, s = the "
            "padded length / N.",
            "In step: reduce-scatter the padded gradient (sum) into your shard and divide by N; update your shard with "
            "AdamW; all-gather the shards into the padded parameter; copy the first n elements into param.",
            "Keep exp_avg and exp_avg_sq for your shard only; a torch.optim.AdamW over a shard-sized tensor does "
            "exactly that. Copy the shard's new values into the gathered tensor, not a stale view.",
        ),
        talking_points=(
            "ZeRO-1 shards the optimizer state: 12 bytes of Adam state per parameter become 12/N.",
            "The traffic is DDP's: a reduce-scatter and an all-gather are together one all-reduce, 2(N-1)/N x B.",
            "PyTorch's ZeroRedundancyOptimizer shards by whole parameters and broadcasts them; this kata shards a flat "
            "buffer, as DeepSpeed's ZeRO-1 and FSDP do.",
        ),
        checks={
            "params_equal_adamw": "after every step the parameter on every rank equals a plain AdamW step on the mean "
                                  "gradient",
            "state_sharded": "the optimizer object holds at most three shard-sized tensors (exp_avg, exp_avg_sq and a "
                             "shard of the parameter), not a full copy",
            "gathers_params_once": "each step all-gathers the parameter exactly once",
        },
        allowed=("reduce_scatter_single", "reduce_scatter_tensor", "all_gather_single", "all_gather_into_tensor",
                 "all_reduce"),
        instead="use comm.reduce_scatter_single, comm.all_gather_single or comm.all_reduce", preload=("torch._dynamo",),
    ),
    Kata(
        "fsdp-unit", "One FSDP unit from scratch", "fsdp-mechanics", 3,
        "a Linear layer kept as a flat 1/N shard: all-gather for forward and free, again for backward, "
        "reduce-scatter the gradients",
        "FSDPLinear", "FSDPLinear(comm, weight, bias); .forward(x) -> y; .backward(x, grad_y) -> None",
        "ddpfsdp.demos.katas.fsdp_unit:FSDP_UNIT",
        hints=(
            "Flatten weight and bias into one vector, pad it with zeros to ceil(n / N) * N, and keep only your rank's "
            "slice (clone it: a view would keep the whole vector alive) as self.shard.",
            "forward: all-gather the shards into a padded full vector, view its first weight.numel() elements as the "
            "weight and the next as the bias, compute x @ W.T + b, and let the full vector go (keep no reference).",
            "backward: all-gather again, grad_W = grad_y.T @ x and grad_b = grad_y.sum(0); flatten and pad them like "
            "the parameters, reduce-scatter (sum) into self.grad_shard and divide by N.",
        ),
        talking_points=(
            "At rest a rank holds 1/N of the unit; the full parameters exist only between the all-gather and the end "
            "of the forward (and again in backward): the peak is one unit's worth, not the model's.",
            "Three collectives per unit per step: all-gather in forward, all-gather in backward, reduce-scatter of the "
            "gradients: 3(N-1)/N x B, 1.5x DDP's traffic.",
            "The gradients equal DDP's: reduce-scatter is the first half of DDP's all-reduce, and each rank keeps only "
            "the shard it updates.",
            "reshard_after_forward=False (SHARD_GRAD_OP) keeps the gathered parameters until backward: one all-gather "
            "less, a higher peak.",
        ),
        checks={
            "shard_is_flat_1_over_n": "each rank keeps one flat shard of ceil(n/N) elements holding its slice of the "
                                      "padded parameters",
            "output_equals_linear": "forward's output equals the full Linear's on every rank",
            "grads_equal_ddp": "each rank's gradient shard equals its slice of the mean gradient over ranks, what DDP "
                               "computes",
            "collectives_per_unit": "forward makes one all-gather; backward one all-gather and one reduce-scatter",
            "frees_after_forward": "no gathered parameters are alive after forward returns, and the peak of gathered "
                                   "parameters is one unit's",
        },
        allowed=("all_gather_single", "all_gather_into_tensor", "reduce_scatter_single", "reduce_scatter_tensor"),
        instead="use comm.all_gather_single and comm.reduce_scatter_single, as FSDP does",
    ),
    Kata(
        "megatron-mlp", "A Megatron MLP: column-parallel then row-parallel", "two-d", 3,
        "split the first Linear by output rows and the second by input columns: one all-reduce each way",
        "parallel_mlp", "parallel_mlp(comm, x, w1, b1, w2, b2) -> y   (autograd through it gives the grads)",
        "ddpfsdp.demos.katas.megatron:MEGATRON",
        hints=(
            "Column-parallel: h = relu(x @ w1.T + b1) is this rank's slice of the hidden layer, no communication. "
            "Row-parallel: h @ w2.T is a partial sum of the output: all-reduce it, then add b2 once.",
            "Autograd does not see comm.all_reduce: write a torch.autograd.Function whose forward all-reduces and whose "
            "backward passes the gradient through (Megatron's g), and one whose forward is the identity and whose "
            "backward all-reduces (Megatron's f) for the input.",
            "Apply f to x before the first Linear: each rank's x.grad is only its slice's contribution until it is "
            "summed.",
        ),
        talking_points=(
            "Two all-reduces per MLP per step (one forward, one backward) of b x s x d elements each, on the critical "
            "path: tensor parallelism needs fast links (inside a node).",
            "Column then row needs no communication between the two Linears: the nonlinearity applies elementwise to "
            "each rank's slice of the hidden layer.",
            "Sequence parallelism splits the all-reduce into a reduce-scatter and an all-gather around the norms, for "
            "the same bytes and less activation memory.",
        ),
        checks={
            "output_equals_mlp": "the output on every rank equals the unsharded MLP's",
            "grads_equal_mlp": "x's gradient and each shard's gradient equal the unsharded MLP's (sliced)",
            "one_all_reduce_each_way": "forward makes one all-reduce of the output, backward one of the input's gradient",
        },
        allowed=("all_reduce",), instead="use comm.all_reduce, inside autograd Functions",
    ),
    Kata(
        "one-f-one-b", "The 1F1B pipeline order", "pipeline", 2,
        "the forward and backward actions of one stage in 1F1B order; its bubble measured by simulation",
        "one_f_one_b", "one_f_one_b(stage, num_stages, num_microbatches) -> list[str]   e.g. ['F0', 'F1', 'B0', ...]",
        "ddpfsdp.demos.katas.pipeline_order:ONE_F_ONE_B",
        hints=(
            "Warm-up: stage s runs min(m, num_stages - s) forwards first (F0, F1, ...): the first stage fills the "
            "pipeline, the last stage runs one.",
            "Then alternate one backward and one forward (B0, F.., B1, F..) until every forward has run.",
            "Finish with the backwards left, in micro-batch order.",
        ),
        talking_points=(
            "Stage s holds at most num_stages - s micro-batches' activations, not all m as GPipe does: that is 1F1B's "
            "point.",
            "The bubble is (p-1)/(m+p-1) of the step when each action takes one unit, the same as GPipe's: 1F1B saves "
            "memory, not time; interleaving stages saves time.",
            "torch's Schedule1F1B refuses fewer micro-batches than stages (ValueError).",
        ),
        checks={
            "equals_schedule_1f1b": "each stage's actions equal torch's Schedule1F1B order for every case",
            "bubble_matches_theory": "with one unit per action, the idle share of the simulated pipeline is "
                                     "(p-1)/(m+p-1), and it runs without deadlock",
            "in_flight_at_most_p_minus_s": "stage s never holds more than min(m, p - s) micro-batches forwarded and not "
                                           "yet backward",
        },
        forbidden_names=("Schedule1F1B", "_get_pipeline_order"), uses_comm=False,
        preload=("torch.distributed.pipelining.schedules",),
    ),
    Kata(
        "memory-estimate", "Per-GPU memory of a strategy", "memory", 1,
        "bytes of parameters, gradients and optimizer state per GPU for DDP and the ZeRO stages, as ddpfsdp calc",
        "model_state_bytes",
        "model_state_bytes(params, gpus, strategy, precision, optimizer) -> {'params_bytes', 'grads_bytes', "
        "'optimizer_bytes'}",
        "ddpfsdp.demos.katas.memory:MEMORY",
        hints=(
            "Bytes per parameter: fp32 and bf16-mixed hold 4 for parameters and 4 for gradients, bf16-master 2 and 2. "
            "Each optimizer state tensor is 4 bytes per parameter: AdamW keeps 2, SGD with momentum 1, plain SGD 0.",
            "The optimizer's own fp32 master copy adds 4 bytes per parameter under bf16-master, and for ZeRO-1 and "
            "ZeRO-2 always: DeepSpeed's optimizer steps a copy of its partition even when the parameters are fp32.",
            "ZeRO-1 splits the optimizer state over the GPUs, ZeRO-2 also the gradients, ZeRO-3 also the parameters: "
            "each split part is ceil(params / gpus) parameters' worth.",
        ),
        talking_points=(
            "Mixed-precision Adam holds 16 bytes per parameter (2 + 2 + 12) before sharding: 7.5B parameters are 120 GB.",
            "ZeRO-3 divides all of it by N; activations and the working set are not divided.",
            "PyTorch's bf16-mixed keeps fp32 parameters and gradients (4 + 4 + 8): the same 16 bytes, a different split.",
        ),
        checks={"equals_calc": "every figure equals ddpfsdp calc's model state for every generated case"},
        forbidden_names=("ddpfsdp",), uses_comm=False,
    ),
]

KATAS: dict[str, Kata] = {kata.name: kata for kata in KATAS_LIST}
ALL_CHECKS: dict[str, str] = {name: claim for kata in KATAS_LIST for name, claim in kata.all_checks.items()}
DEFAULT_PRELOAD = ("torch", "torch.distributed")


def get(name: str) -> Kata:
    """The kata called `name`; ValueError naming them all for another name."""
    try:
        return KATAS[name]
    except KeyError:
        raise ValueError(f"unknown kata {name!r}; choose one of {', '.join(KATAS)} (`ddpfsdp kata list` describes "
                         "them)") from None


def preload(asked: dict) -> tuple[str, ...]:
    """What a kata's ranks import before they are forked (the registry's preload hook): torch.distributed,
    the checker and the kata's judge, and what the kata's own code needs beyond them (an optimizer step
    imports torch._dynamo, a second of every rank's start that the other katas do without)."""
    kata = KATAS.get(str(asked.get("kata")))
    if kata is None:
        return DEFAULT_PRELOAD
    return (*DEFAULT_PRELOAD, "ddpfsdp.demos.katas.comm", "ddpfsdp.demos.result.schema", kata.judge.split(":")[0],
            *kata.preload)

