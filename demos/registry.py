"""Every demo by name: what it shows, where its code lives, and the named checks its result carries.

This module is cheap to import (no torch): the CLI lists demos from it, the quiz validates the
question bank's demo links and evidence checks against it, and the worker finds a demo's code here.
A demo's code is `module:function`, called on every rank with what it was asked (`launch.request`):
a training demo as `function(ctx, spec)` with its RunSpec, a concept demo as `function(ctx, **options)`
with its options parsed by the demo's click parameters (`options`, "module:ATTR", a list of
click.Option). Demo modules import torch inside their functions, so the CLI can build its commands and
validate input without paying for torch; every string here names a module of the demos' own stages
(train, measure, concepts, faults), never one above them.

Optional hooks, each "module:function" in a module importable without torch:
  validate(asked, world_size: int | None, device: str | None) -> None
                                                     raises click.UsageError on a bad combination; with
                                                     world_size and device ("cpu", "cuda") None it
                                                     checks all the placement does not decide (the CLI
                                                     does so before it places the run, since placing
                                                     imports torch)
  render(result: dict, console) -> None              prints the result for a person (rich)
  evidence_view(result: DemoResult, width: int) -> list
                                                     what the quiz's evidence panel shows under the
                                                     checks: rich renderables (never textual) at most
                                                     `width` columns wide; a training or concept demo
                                                     that names none gets its kind's (EVIDENCE_VIEWS)
  preload(asked: dict) -> tuple[str, ...]             the modules its ranks import before the agent forks
                                                     them (default: the agent's PRELOAD, torch._dynamo
                                                     included, which every optimizer step imports)

A demo whose launch is more than its options (the failure lab: several faults per launch, a deadline per
fault, a folder for the ranks' records; `ddpfsdp demo fault` is its own command) names the run the quiz
starts for evidence, which starts its ranks through the same launcher:
  runner(args: list[str]) -> run                     events(), cancel(), result, error, cancelled, as
                                                     DemoRun has
Its checks are its catalogue's claims, read only when asked for, so listing the demos or running
another one never imports the failure lab's programs.

A demo whose one run is several launches, one after another (checkpoint-resume: save on N ranks, resume
on M), names its plan, which the launcher follows (`launch.launcher.DemoRun`, every launch placed and
checked before the first starts):
  launches(asked, world_size: int, scratch: str) -> [(asked, world_size | None)]
                                                     what each launch is asked and on how many ranks
                                                     (None: the placement given); `scratch` is a folder
                                                     the run may make, removed when it ends
"""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DATA_PARALLEL_MIN_RANKS = 2  # what these demos show happens between ranks: data parallelism, collectives
SPEC_KINDS = ("training", "pipeline", "experts", "at-scale")  # the kinds of demo whose run is a RunSpec


# The evidence panel's view of a demo of each kind that names none of its own.
EVIDENCE_VIEWS = {"training": "ddpfsdp.demos.measure.report:evidence_view",
                  "concept": "ddpfsdp.demos.concepts.render:evidence_view"}


def load(target: str) -> Any:
    """Import "package.module:attribute"."""
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


class LoadedChecks(Mapping):
    """A demo's checks kept in another module ("module:ATTR"), imported the first time they are read."""

    def __init__(self, target: str) -> None:
        self.target = target

    def _checks(self) -> Mapping[str, str]:
        return load(self.target)

    def __getitem__(self, name: str) -> str:
        return self._checks()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._checks())

    def __len__(self) -> int:
        return len(self._checks())


@dataclass(frozen=True)
class Demo:
    name: str
    summary: str  # one line for `ddpfsdp demo --help`
    module: str  # "package.module:function"
    kind: str  # "training" (full training run), "pipeline" (a RunSpec too), "concept", "fault", "kata"
    checks: Mapping[str, str] = field(default_factory=dict)  # check name -> the claim it tests
    options: str = ""  # "module:ATTR": the click parameters of this demo
    validate: str | None = None
    render: str | None = None
    evidence_view: str = ""  # "module:function"; empty: its kind's, from EVIDENCE_VIEWS
    min_world_size: int = DATA_PARALLEL_MIN_RANKS  # fewer are refused before launch, with commands that give enough
    runner: str | None = None  # set: the quiz starts the demo through this run object (see above)
    preload: str | None = None  # "module:function": what its ranks import before they are forked (see above)
    launches: str | None = None  # set: one run is these launches in turn (see above)

    def __post_init__(self) -> None:
        if not self.options:
            module = self.module.split(":")[0]
            object.__setattr__(self, "options", f"{module}:OPTIONS")
        if not self.evidence_view:
            if self.kind not in EVIDENCE_VIEWS:
                raise ValueError(f"demo {self.name!r}: a {self.kind} demo names its own evidence_view")
            object.__setattr__(self, "evidence_view", EVIDENCE_VIEWS[self.kind])

    @property
    def takes_spec(self) -> bool:
        """What the demo is asked is a RunSpec (`train.spec`): the training demos and the pipeline."""
        return self.kind in SPEC_KINDS

    def run_on_rank(self, ctx: Any, asked: Any) -> Any:
        """The demo's code on this rank with what it was asked: its RunSpec, or a concept demo's options
        as keywords."""
        function = load(self.module)
        return function(ctx, asked) if self.takes_spec else function(ctx, **asked)


_TRAINING_CHECKS = {
    "loss_decreases": "training works: the loss at the last step is below the loss at the first",
    "model_state_matches_theory": "model-state bytes each rank holds match the analytic model (1%, plus shard padding)",
    "comm_matches_theory": "wire bytes per step per op match the analytic model (5%)",
    "timeline_records_every_collective": "the recorded step holds, on every rank, each collective counted in it, issued and completed",
    "peak_within_bounds": "each rank's peak is at least its model state and at most model state + the analytic working set and activations + 10% (on a GPU, + its cuBLAS workspaces)",
}

# Carried only by a run with --simulate (one process, fake tensors, a fake process group of --world ranks).
_SIMULATED_CHECKS = {
    "simulated_model_state_matches_calc": "simulated: rank 0's model state is within 1% of the analytic model's (plus whole-tensor and padding allowance)",
    "simulated_wire_matches_calc": "simulated: wire bytes per rank per step, over every collective issued, are within 1% of the analytic model's",
}
_SIMULATED_FSDP_CHECKS = {
    **_SIMULATED_CHECKS,
    "simulated_peak_holds_largest_unit": "simulated, FSDP full: the step's peak is above the model state by at least the largest unit's unsharded parameters",
}
SIMULATED_ONLY_CHECKS = frozenset(_SIMULATED_FSDP_CHECKS)

# Carried only by a 2-D run (`demo fsdp --tp N`), in place of the 1-D FSDP checks.
_TWO_D_CHECKS = {
    "loss_matches_reference": "2-D: the loss per step equals one process's on the same global batches (rtol 1e-4 in fp32)",
    "two_d_shards_model_state": "2-D: each rank holds its TP shard of every parameter split again over dp, 1/(dp x tp) of the model but for what TP keeps whole (1%)",
    "tp_comm_matches_theory": "2-D: the tp group's collectives per step, calls exact and bytes within 1% (all-reduces; with sequence parallelism all-gathers and reduce-scatters)",
    "dp_comm_matches_theory": "2-D: the dp group's collectives per step: FSDP's all-gathers and reduce-scatters of each unit's TP shard (calls exact, bytes 1%)",
    "tp_activations_match_theory": "2-D: one block saves for backward what the analytic model says one TP rank saves (5%)",
    "tp_collectives_per_block": "2-D: every block issues its TP collectives inside its own compute, 2 all-reduces forward and 2 backward (with sequence parallelism 2 all-gathers and 2 reduce-scatters in each)",
    "tp_collectives_on_critical_path": "2-D: TP's activation collectives run inside the units' compute and at least half their time nothing else computes: the step waits for them",
}
TWO_D_ONLY_CHECKS = frozenset(_TWO_D_CHECKS)

# A --compile run's claims, from what torch recorded of the compile.
_COMPILED_CHECK = {"compiled_before_timed_steps": "every graph was compiled in the warm-up, none in the timed steps"}
_DDP_COMPILE_CHECK = {
    "ddp_compiled_graph_split_at_buckets": "DDPOptimizer cut the compiled forward into as many pieces as DDP has "
                                           "buckets, each holding its bucket's parameters (up to a small tensor)"}
_FSDP_COMPILE_CHECK = {
    "fsdp_blocks_compiled_without_graph_breaks": "each block compiled before fully_shard, FSDP's hooks outside the "
                                                 "graphs: no graph break"}
COMPILE_ONLY_CHECKS = frozenset({**_COMPILED_CHECK, **_DDP_COMPILE_CHECK, **_FSDP_COMPILE_CHECK})

# `demo pipeline`; pipeline_dp_comm_is_fsdp only with --dp, the last two only with --compare (GPipe, 1F1B and interleaved in one launch).
PIPELINE_CHECKS = {
    "pipeline_bubble_matches_theory": "the idle share of the recorded step on the rank that sets the pace (the most "
                                      "compute) is within 0.1 of the schedule's bubble fraction, (pp-1)/(m+pp-1) for "
                                      "GPipe and 1F1B, (pp-1)/(V·m+pp-1) interleaved",
    "pipeline_activations_in_flight_match_theory": "the most micro-batches each rank holds forwarded but not yet "
                                                   "backward is the theory's: GPipe all m, 1F1B min(m, pp - rank)",
    "pipeline_loss_matches_reference": "the loss per step equals one process's on the same batches (rtol 1e-4 in fp32)",
    "pipeline_p2p_matches_theory": "each rank sends one b·s·d activation per micro-batch forward and one gradient "
                                   "back per stage boundary, counted from the real send tensors",
    "pipeline_dp_comm_is_fsdp": "with --dp: each stage's dp group carries FSDP's all-gathers and reduce-scatters "
                                "only, and the pipeline's group only sends and recvs",
    "gpipe_holds_more_activations_than_1f1b": "with --compare: GPipe holds more micro-batches in flight than 1F1B",
    "interleaved_has_smaller_bubble": "with --compare: the interleaved schedule idles a smaller share of the step than 1F1B",
}

# `demo moe`: expert parallelism on real ranks.
MOE_CHECKS = {
    "moe_matches_single_process": "the loss per step, and the first step's output and gradients, equal the same MoE "
                                  "on one process given the same batches and expert choices (rtol 1e-4 in fp32)",
    "all_to_all_bytes_match_routed_tokens": "each rank's all-to-alls carry, call by call, exactly the slots the "
                                            "routers kept (its own dispatched, its experts' received) times d x "
                                            "element bytes, each backward call handing back what its forward "
                                            "received",
    "dropped_tokens_match_router": "slots dropped over capacity, routed minus computed, equal what the routers' "
                                   "loads imply, sum of max(0, load - ceil(cf·T·k/E))",
    "aux_loss_matches_measured_load": "the Switch load-balancing loss each layer added, alpha·E·sum f_i·P_i, "
                                      "recomputed from the measured load per expert and router probabilities",
    "all_to_all_waits_for_slowest_rank": "no rank's combine all-to-all returns before the last rank of its group has "
                                         "computed its experts: every layer ends at the slowest rank's pace",
    "ep_holds_experts_per_rank": "each rank holds E/ep whole experts per layer and 1/N of the dense part (FSDP): EP "
                                 "splits only the experts",
    "timeline_records_every_collective": "the recorded step holds, on every rank, each collective counted in it "
                                         "(the all-to-alls among them), issued and completed",
}
# At scale: a straggler, and a sharded checkpoint resumed on another world (two launches, one after the other).
STRAGGLER_CHECKS = {
    "straggler_sets_every_step": "with one rank sleeping d before each step, every rank's step is the slow rank's: "
                                 "its own step without the delay + d (within a quarter of d plus the spread of the "
                                 "steps without it; below that by up to the slow rank's own work on shared CPU "
                                 "cores, never below d): the slowest rank's, not the mean",
    "others_wait_in_first_collective": "in the recorded step every other rank sits in its first collective until "
                                       "the slow rank joins it, d and the slow rank's work later (about d where the "
                                       "ranks' work takes as long): it cannot complete before",
    "slow_rank_does_not_wait": "the slow rank's own first collective completes at once: the others are there already",
}
# `demo local-sgd`: plain DDP and post-local SGD on the same model, seed and data (`claims.local_sgd`).
LOCAL_SGD_CHECKS = {
    "all_reduces_follow_torch_schedule": "DDP all-reduces gradients every step; local SGD all-reduces them on the W "
                                         "warm-up steps, then once per averaging, at steps W, W + H, W + 2H, ... "
                                         "(torch's PeriodicModelAverager), and on no other step, on every rank",
    "local_sgd_all_reduces_fewer_bytes": "over S steps local SGD all-reduces (W + A) / S of DDP's bytes, A the "
                                         "averagings: an averaging moves the parameters, as many bytes as a DDP "
                                         "step's gradients",
    "replicas_drift_and_are_reaveraged": "DDP's replicas are bitwise equal after every step; local SGD's after each "
                                         "warm-up step and each averaging, and apart on the local steps between",
    "loss_matches_ddp_until_local_steps": "the first W + 1 losses equal DDP's (same model, seed, data, synchronous "
                                          "updates); the gap after is this run's measurement, not a claim",
}
RESUME_CHECKS = {
    "checkpoint_bytes_match_theory": "each rank wrote 1/N of the parameters and optimizer state (FSDP: its shards, "
                                     "give or take a row; DDP: whole tensors, deduplicated, give or take the "
                                     "largest), and all ranks together the state once, as the analytic model sizes it",
    "resumed_state_equals_saved": "after dcp.load and set_state_dict on another number of ranks, every parameter "
                                  "and optimizer entry, gathered whole, equals the one saved (difference 0)",
    "resumed_loss_matches_uninterrupted": "the resumed ranks' losses equal those of the run that never stopped: "
                                          "bit for bit on the same world, to fp32 rounding (rtol 1e-4) on another",
    "full_state_dict_gathers_on_rank0": "FSDP: a full state dict (full_state_dict=True, cpu_offload=True) allocates the "
                                        "whole state on rank 0 (at least 90% of it); the sharded one allocates "
                                        "under 1/N of it",
}
# `demo cp`: ring attention over --cp ranks, FSDP over dp x cp (`claims.context_parallel`, `train.context`).
CONTEXT_PARALLEL_CHECKS = {
    "loss_decreases": _TRAINING_CHECKS["loss_decreases"],
    "model_state_matches_theory": _TRAINING_CHECKS["model_state_matches_theory"],
    "fsdp_shards_model_state": "each rank holds 1/N of params, grads and optimizer state (plus padding)",
    "comm_matches_theory": _TRAINING_CHECKS["comm_matches_theory"],
    "timeline_records_every_collective": _TRAINING_CHECKS["timeline_records_every_collective"],
    "ring_matches_full_attention": "the ring's output and q, k, v gradients equal one process's attention on a fixed "
                                   "fp32 input (1e-4, both splits, every rank), and the model's loss per step equals "
                                   "one process's on the same global batches (rtol 1e-4 in fp32)",
    "ring_kv_sends_match_theory": "each rank sends per layer and step what torch's ring attention sends: forward cp-1 "
                                  "K/V blocks, backward cp-1 K/V blocks and cp fp32 dK/dV blocks, counted from the "
                                  "send tensors, the collective counter seeing the same bytes",
    "cp_activations_fall_as_1_over_cp": "one block saves for backward 1/cp of what it saves for the whole sequence on "
                                        "one process (both measured, 1%)",
    "contiguous_split_busiest_rank_matches_theory": "with contiguous chunks the last rank scores (2cp-1)/cp² of the "
                                                    "causal attention's query-key pairs (counted per rank, within 1/n "
                                                    "for n tokens a chunk)",
    "head_tail_split_evens_compute": "with rank r holding chunks r and 2cp-1-r every rank scores 1/cp of the pairs",
    "cp_gradients_reduced_across_cp": "FSDP reduce-scatters over dp x cp, and one step's gradients on every rank "
                                      "equal one process's on the same global batch (rtol 1e-4 in fp32)",
    **_SIMULATED_CHECKS,
}

DEMOS: dict[str, Demo] = {
    demo.name: demo
    for demo in [
        Demo(
            "ddp",
            "real DDP training: every rank holds the full model, gradients are all-reduced in buckets",
            "ddpfsdp.demos.train.demo:run_ddp",
            "training",
            options="ddpfsdp.demos.train.options:DDP_OPTIONS",
            validate="ddpfsdp.demos.train.options:validate_ddp",
            render="ddpfsdp.demos.measure.report:render_training",
            checks={
                **_TRAINING_CHECKS,
                "ddp_replicates_model_state": "every rank holds the full params, grads and optimizer state",
                "ddp_uses_all_reduce": "gradients are synchronised with all_reduce only, no all_gather or reduce_scatter",
                "ddp_overlaps_allreduce_with_backward": "with two or more buckets the first bucket's all-reduce is issued while backward still computes (one bucket: only after the last gradient)",
                **_SIMULATED_CHECKS, **_COMPILED_CHECK, **_DDP_COMPILE_CHECK,
            },
        ),
        Demo(
            "zro",
            "real ZeroRedundancyOptimizer (zro), PyTorch's sharding of the optimizer state: DDP's all-reduce, then each rank steps the optimizer state of the whole parameters it owns and broadcasts them",
            "ddpfsdp.demos.train.demo:run_zro",
            "training",
            options="ddpfsdp.demos.train.options:DDP_OPTIONS",
            validate="ddpfsdp.demos.train.options:validate_zro",
            render="ddpfsdp.demos.measure.report:render_training",
            checks={**_TRAINING_CHECKS, **_SIMULATED_CHECKS, **_COMPILED_CHECK, **_DDP_COMPILE_CHECK},
        ),
        Demo(
            "fsdp",
            "real FSDP2 training: sharded params, all-gather before use, reduce-scatter of gradients",
            "ddpfsdp.demos.train.demo:run_fsdp",
            "training",
            options="ddpfsdp.demos.train.options:FSDP_OPTIONS",
            validate="ddpfsdp.demos.train.options:validate_fsdp",
            render="ddpfsdp.demos.measure.report:render_training",
            checks={
                **_TRAINING_CHECKS,
                "fsdp_shards_model_state": "each rank holds 1/N of params, grads and optimizer state (plus padding)",
                "fsdp_reduce_scatters_grads": "gradients are reduce-scattered, not all-reduced (HSDP adds an all_reduce across replicas)",
                "fsdp_all_gathers_params": "parameters are all-gathered per unit: forward, and again in backward when resharded",
                "fsdp_reshards_after_forward": "full sharding: parameter bytes fall right after each unit's forward; grad-op: not until backward",
                "fsdp_prefetches_next_unit": "in backward the next unit's all-gather is issued before the current unit's compute ends (forward only with explicit forward prefetch)",
                **_SIMULATED_FSDP_CHECKS,
                **_TWO_D_CHECKS, **_COMPILED_CHECK, **_FSDP_COMPILE_CHECK,
            },
        ),
        Demo(
            "compare",
            "DDP, ZeroRedundancyOptimizer (zro), FSDP grad-op and FSDP full on one model and seed: memory, speed, traffic in one table",
            "ddpfsdp.demos.train.demo:run_compare",
            "training",
            options="ddpfsdp.demos.train.options:COMPARE_OPTIONS",
            validate="ddpfsdp.demos.train.options:validate_compare",
            render="ddpfsdp.demos.measure.report:render_compare",
            checks={
                "losses_agree": "all strategies give the same losses (fp32, rtol 1e-4): data parallelism is exact",
                "zro_shards_optimizer": "ZeroRedundancyOptimizer (zro) holds 1/N of the optimizer state and the full params and grads",
                "fsdp_full_shards_everything": "FSDP full holds 1/N of params, grads and optimizer state",
                "grad_op_holds_more_params_at_peak": "grad-op keeps unsharded params from forward until backward, so it holds more params at its peak than full",
                "fsdp_wire_1_5x_ddp": "FSDP full sends 1.5x DDP's bytes per step (3 vs 2 passes of (N-1)/N of the model)",
                "fsdp_leaves_activations_whole": "FSDP shards model state, not activations: FSDP full's activations at "
                                                 "its peak are DDP's, not 1/N of them",
                **_COMPILED_CHECK, **_DDP_COMPILE_CHECK, **_FSDP_COMPILE_CHECK,
            },
        ),
        Demo(
            "sampler",
            "DistributedSampler: disjoint shards, set_epoch reshuffling, padding vs drop_last, no sampler",
            "ddpfsdp.demos.concepts.sampler:run",
            "concept",
            {
                "sampler_disjoint_and_covering": "ranks get disjoint indices that together cover the dataset",
                "sampler_set_epoch_reshuffles": "without set_epoch every epoch repeats the order; with it the order changes",
                "sampler_pads_or_drops": "an uneven dataset is padded by repeating indices, or trimmed with drop_last",
                "no_sampler_duplicates_data": "without a sampler every rank trains on the same samples",
            },
        ),
        Demo(
            "allreduce",
            "ring all-reduce step by step with send/recv: reduce-scatter phase, then all-gather phase",
            "ddpfsdp.demos.concepts.allreduce:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_allreduce",
            checks={
                "ring_equals_all_reduce": "the hand-written ring gives the same result as dist.all_reduce",
                "ring_sends_2_n_minus_1_over_n": "each rank sends 2(N-1)/N of the buffer",
            },
        ),
        Demo(
            "reduce-scatter",
            "reduce-scatter and all-gather on real tensors; together they equal all-reduce",
            "ddpfsdp.demos.concepts.reduce_scatter:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_reduce_scatter",
            checks={
                "rs_then_ag_equals_all_reduce": "reduce-scatter followed by all-gather equals all-reduce",
                "rs_ag_send_n_minus_1_over_n": "reduce-scatter and all-gather each send (N-1)/N of the buffer per rank",
            },
        ),
        Demo(
            "wrap",
            "FSDP wrap granularity: root only vs per block vs per layer: peak memory and collective counts",
            "ddpfsdp.demos.concepts.wrap:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_wrap",
            checks={
                "per_block_peak_below_root_only": "wrapping each block gives a lower peak than wrapping only the root",
                "collectives_scale_with_units": "all-gathers and reduce-scatters per step grow with the number of units",
            },
        ),
        Demo(
            "reshard",
            "reshard after forward on vs off (FULL_SHARD vs SHARD_GRAD_OP): peak memory vs all-gathers",
            "ddpfsdp.demos.concepts.reshard:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_reshard",
            checks={
                "reshard_lowers_peak": "resharding after forward lowers peak memory",
                "reshard_adds_all_gathers": "resharding after forward re-all-gathers every unit in backward",
            },
        ),
        Demo(
            "comm",
            "DDP vs FSDP traffic per step, measured per op, beside the 2Ψ and 3Ψ theory",
            "ddpfsdp.demos.concepts.comm:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_comm",
            checks={
                "ddp_traffic_is_2psi": "DDP sends 2(N-1)/N x gradient bytes per rank per step",
                "fsdp_traffic_is_3psi": "FSDP full sends 3(N-1)/N x parameter bytes per rank per step",
            },
        ),
        Demo(
            "no-sync",
            "gradient accumulation with and without no_sync / set_requires_gradient_sync",
            "ddpfsdp.demos.concepts.no_sync:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_no_sync",
            checks={
                "no_sync_cuts_collectives": "skipping sync on k-1 micro-batches gives 1 gradient sync per step instead of k",
                "no_sync_same_gradients": "the final gradients are the same with and without no_sync",
            },
        ),
        Demo(
            "equivalence",
            "DDP, FSDP and one process on the global batch give the same losses and weights",
            "ddpfsdp.demos.concepts.equivalence:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_equivalence",
            checks={
                "ddp_matches_single_process": "DDP's losses and updated weights equal one process on the global batch",
                "fsdp_matches_single_process": "FSDP's losses and updated weights equal one process on the global batch",
            },
        ),
        Demo(
            "checkpoint",
            "activation checkpointing on vs off: peak memory saved vs forward recomputed (saving and resuming "
            "training state is `checkpoint-resume`)",
            "ddpfsdp.demos.concepts.checkpoint:run",
            "concept",
            render="ddpfsdp.demos.concepts.render:render_checkpoint",
            min_world_size=1,  # activation memory and recomputation are one rank's own: one GPU shows them
            checks={
                "checkpoint_lowers_peak": "checkpointing activations lowers peak memory",
                "checkpoint_recomputes_forward": "checkpointing runs the blocks' forward again during backward",
            },
        ),
        Demo(
            "pipeline",
            "pipeline parallelism: the GPT cut into stages over the ranks, GPipe, 1F1B, interleaved or zero-bubble "
            "schedules measured (bubble, activations in flight, point-to-point bytes) beside theory",
            "ddpfsdp.demos.train.pipeline:run",
            "pipeline",
            options="ddpfsdp.demos.train.options:PIPELINE_OPTIONS",
            validate="ddpfsdp.demos.train.pipeline_options:validate_pipeline",
            render="ddpfsdp.demos.measure.pipeline_report:render",
            evidence_view="ddpfsdp.demos.measure.pipeline_report:evidence_view",
            checks=PIPELINE_CHECKS,
        ),
        Demo(
            "moe",
            "expert parallelism: a mixture of experts in every GPT block, its experts over the ranks, tokens "
            "dispatched and combined by all-to-alls, checked against one process",
            "ddpfsdp.demos.train.moe:run",
            "experts",
            options="ddpfsdp.demos.train.moe_options:MOE_OPTIONS",
            validate="ddpfsdp.demos.train.moe_options:validate_moe",
            render="ddpfsdp.demos.measure.moe_report:render",
            evidence_view="ddpfsdp.demos.measure.moe_report:evidence_view",
            checks=MOE_CHECKS,
        ),
        Demo(
            "kata",
            "your own code for a kata, run on real ranks and judged against torch's (`ddpfsdp kata` is its command)",
            "ddpfsdp.demos.katas.rank:run",
            "kata",
            checks=LoadedChecks("ddpfsdp.demos.katas.catalog:ALL_CHECKS"),
            options="ddpfsdp.demos.katas.rank:OPTIONS",
            render="ddpfsdp.demos.katas.render:render",
            evidence_view="ddpfsdp.demos.katas.render:evidence_view",
            preload="ddpfsdp.demos.katas.catalog:preload",
        ),
        Demo(
            "straggler",
            "a straggler on real ranks: one rank sleeps before each step, every rank's step takes its time and the "
            "others wait in their collectives, beside the analytic model's maximum of N",
            "ddpfsdp.demos.train.straggler:run_straggler",
            "at-scale",
            options="ddpfsdp.demos.train.at_scale_options:STRAGGLER_OPTIONS",
            validate="ddpfsdp.demos.train.at_scale_options:validate_straggler",
            render="ddpfsdp.demos.measure.at_scale_report:render_straggler",
            evidence_view="ddpfsdp.demos.measure.at_scale_report:straggler_view",
            checks=STRAGGLER_CHECKS,
        ),
        Demo(
            "checkpoint-resume",
            "failures and checkpoints: a sharded torch.distributed.checkpoint save of the model and optimizer on N "
            "ranks, then a second launch that resumes on M (not the `checkpoint` demo, which is activation "
            "checkpointing)",
            "ddpfsdp.demos.train.resume:run_checkpoint_resume",
            "at-scale",
            options="ddpfsdp.demos.train.at_scale_options:RESUME_OPTIONS",
            validate="ddpfsdp.demos.train.at_scale_options:validate_checkpoint_resume",
            render="ddpfsdp.demos.measure.at_scale_report:render_checkpoint_resume",
            evidence_view="ddpfsdp.demos.measure.at_scale_report:checkpoint_resume_view",
            launches="ddpfsdp.demos.train.checkpoint_folder:launches",
            checks=RESUME_CHECKS,
        ),
        Demo(
            "local-sgd",
            "local SGD on real ranks: plain DDP, then torch's post-local SGD on the same model, seed and data; "
            "the all-reduces per step, the bytes, the replicas drifting and re-averaged, the loss gap measured",
            "ddpfsdp.demos.train.local_sgd:run_local_sgd",
            "at-scale",
            options="ddpfsdp.demos.train.at_scale_options:LOCAL_SGD_OPTIONS",
            validate="ddpfsdp.demos.train.at_scale_options:validate_local_sgd",
            render="ddpfsdp.demos.measure.at_scale_report:render_local_sgd",
            evidence_view="ddpfsdp.demos.measure.at_scale_report:local_sgd_view",
            checks=LOCAL_SGD_CHECKS,
        ),
        Demo(
            "cp",
            "context parallelism: each of --cp ranks holds 1/cp of every sequence, attention a hand-written ring "
            "passing K/V (head-tail or contiguous split), FSDP over dp x cp; sends, activations and compute per "
            "rank beside theory",
            "ddpfsdp.demos.train.context:run",
            "training",
            options="ddpfsdp.demos.train.options:CP_OPTIONS",
            validate="ddpfsdp.demos.train.options:validate_cp",
            render="ddpfsdp.demos.measure.context_report:render",
            evidence_view="ddpfsdp.demos.measure.context_report:evidence_view",
            checks=CONTEXT_PARALLEL_CHECKS,
        ),
        Demo(
            "fault",
            "the failure lab: a real distributed-training bug and its fix on real ranks (--list names them)",
            "ddpfsdp.demos.faults.rank:run",
            "fault",
            checks=LoadedChecks("ddpfsdp.demos.faults.catalog:CLAIMS"),
            options="ddpfsdp.demos.faults.runner:NO_OPTIONS",
            runner="ddpfsdp.demos.faults.runner:run_from_link",
            evidence_view="ddpfsdp.demos.faults.render:evidence_view",
        ),
    ]
}


# Names no demo goes by: (the demo to run instead, why). The demo of PyTorch's ZeroRedundancyOptimizer
# was once `zero1`, the name calc gives DeepSpeed's ZeRO-1: one name, two implementations.
RETIRED: dict[str, tuple[str, str]] = {
    "zero1": ("zro", "calc's zero1 is DeepSpeed's ZeRO-1 (gradients reduce-scattered, parameters all-gathered), "
                     "which the demos do not run (`ddpfsdp calc --strategy zero1` sizes it); PyTorch's "
                     "ZeroRedundancyOptimizer under DDP, calc's zro, is"),
}


def retired(name: str, args: Sequence[str] = ()) -> str | None:
    """Why `name` is no demo, ending in the command to run instead (with `args`); None for any other name."""
    if name not in RETIRED:
        return None
    instead, why = RETIRED[name]
    return f"there is no `{name}` demo: {why} `{shlex.join(['ddpfsdp', 'demo', instead, *args])}`"


def evidence_view_of(name: str | None) -> str:
    """The evidence view of the demo called `name`; a name no demo goes by gets the concept demos' view,
    which shows the measured numbers of any result."""
    entry = DEMOS.get(name or "")
    return entry.evidence_view if entry is not None else EVIDENCE_VIEWS["concept"]


def get(name: str) -> Demo:
    """The demo called `name`; ValueError saying what to run for a retired name or an unknown one."""
    try:
        return DEMOS[name]
    except KeyError:
        if name in RETIRED:
            raise ValueError(retired(name)) from None
        raise ValueError(f"unknown demo {name!r}; choose one of {', '.join(DEMOS)}") from None
