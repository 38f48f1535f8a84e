"""Sizing drills: generated problems, each answer worked out again by hand and by torch itself, graded
with units, the working shown on a miss; the CLI's --json and --plain, and the results in progress."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from click.testing import CliRunner
from conftest import CliOutcome, run_cli

from ddpfsdp.quiz import drill as drills
from ddpfsdp.quiz.cli import cli
from ddpfsdp.quiz.grading import QuantityError
from ddpfsdp.quiz.loader import UNITS
from ddpfsdp.quiz.store import Store


# Bytes per parameter, written out from the recipes (the ZeRO paper, section 3.1, and PyTorch's
# autocast / FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)):
# precision -> (param, grad, each optimizer state, fp32 master copy, all-gathered param, reduced grad)
BYTES = {
    "fp32": (4, 4, 4, 0, 4, 4),
    "bf16-mixed": (4, 4, 4, 0, 2, 4),
    "bf16-master": (2, 2, 4, 4, 2, 2),
    "bf16": (2, 2, 2, 0, 2, 2),
}
# DeepSpeed's ZeRO-1/2 (deepspeed/runtime/zero/stage_1_and_2.py): the optimizer steps its own copy of
# the partition (fp32 unless bf16_master_weights_and_grads), the held parameters are all-gathered after
# the step, and under torch_autocast the model stays fp32 while Linear gradients are reduced in bf16.
DEEPSPEED_BYTES = {
    "fp32": (4, 4, 4, 4, 4, 4),
    "bf16-mixed": (4, 4, 4, 4, 4, 2),
    "bf16-master": (2, 2, 4, 4, 2, 2),
    "bf16": (2, 2, 2, 2, 2, 2),
}


def _bytes(strategy: str, precision: str) -> tuple[int, ...]:
    return DEEPSPEED_BYTES[precision] if strategy in ("zero1", "zero2") else BYTES[precision]
STATES = {"adamw": 2, "adam": 2, "sgd-momentum": 1, "sgd": 0}  # Adam's two moments, SGD's momentum buffer
# Activation bytes per element: (residual stream r, compute c, the loss's log-softmax)
ACTIVATION_BYTES = {"fp32": (4, 4, 4), "bf16-mixed": (4, 2, 4), "bf16": (2, 2, 2)}
"""(r, c, loss) per precision under autocast; FSDP2's param_dtype makes the residual stream bf16 (r = 2)."""


def _held(params: int, gpus: int, strategy: str, precision: str, optimizer: str) -> int:
    """Model state per GPU: each kind's bytes over the GPUs that share it (ceil: FSDP pads shards).
    HSDP shards within a node of 8, as the drill's clusters are built."""
    param, grad, state, master, _, _ = _bytes(strategy, precision)
    optimizer_bytes = master + STATES[optimizer] * state
    group = 8 if gpus % 8 == 0 else gpus
    ways = {"ddp": (1, 1, 1), "zro": (1, 1, gpus), "zero1": (1, 1, gpus), "zero2": (1, gpus, gpus),
            "grad-op": (gpus,) * 3, "zero3": (gpus,) * 3, "hsdp": (group,) * 3}[strategy]
    return sum(-(-params // w) * b for w, b in zip(ways, (param, grad, optimizer_bytes)))


def _sent(buffer_bytes: int, ranks: int, all_reduce: bool = False) -> int:
    """What one rank sends on a ring: 2(n-1)/n of the buffer for all-reduce, else (n-1)/n; exact,
    then rounded to a byte."""
    return round(Fraction(buffer_bytes * (ranks - 1) * (2 if all_reduce else 1), ranks))


def _wire(params: int, gpus: int, strategy: str, precision: str) -> int:
    """Wire bytes per rank per step: DDP all-reduces the gradients; ZeroRedundancyOptimizer adds a
    broadcast of the held parameters; ZeRO-1/2 reduce-scatter the gradients and all-gather the held
    parameters; grad-op all-gathers once and reduce-scatters once; ZeRO-3 all-gathers twice and
    reduce-scatters once; HSDP does so in a node of 8 and all-reduces its gradient shard across the
    nodes."""
    param, _, _, _, gathered, reduced = _bytes(strategy, precision)
    if strategy in ("ddp", "zro"):
        broadcast = _sent(params * param, gpus) if strategy == "zro" else 0
        return _sent(params * reduced, gpus, all_reduce=True) + broadcast
    if strategy in ("zero1", "zero2"):
        return _sent(params * reduced, gpus) + _sent(params * param, gpus)
    group = 8 if strategy == "hsdp" and gpus % 8 == 0 else gpus
    gathers = 1 if strategy == "grad-op" else 2
    sent = _sent(gathers * params * gathered, group) + _sent(params * reduced, group)
    if strategy == "hsdp" and gpus > group:
        sent += _sent(-(-params // group) * reduced, gpus // group, all_reduce=True)
    return sent


def _gpt_numels(layers: int, d: int, vocab: int, seq_len: int) -> list[int]:
    """The project's GPT's tensors in registration order: token and position embeddings; per block
    LayerNorm (2), qkv (3d x d, 3d), projection (d x d, d), LayerNorm (2), MLP up (4d x d, 4d) and
    down (d x 4d, d); the final LayerNorm and the untied head (vocab x d, no bias)."""
    block = [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    return [vocab * d, seq_len * d, *block * layers, d, d, vocab * d]


def _torch_buckets(args: dict) -> int:
    """The buckets torch itself assigns on DDP's rebuild: gradients in the order they are ready
    (the reverse of registration), a 1 MiB first bucket only under the default cap."""
    import torch
    import torch.distributed as dist

    dtype = {4: torch.float32, 2: torch.bfloat16}[args["grad_bytes"]]
    numels = _gpt_numels(args["layers"], args["d_model"], args["vocab"], args["seq_len"])
    grads = [torch.empty(n, dtype=dtype, device="meta") for n in reversed(numels)]
    cap = (args["bucket_cap_mb"] or 25) * 2**20
    first = 2**20 if args["bucket_cap_mb"] is None else cap
    buckets, _ = dist._compute_bucket_assignment_by_size(grads, [first, cap], [False] * len(grads), list(range(len(grads))))
    return len(buckets)


def _activation_peak(args: dict) -> int:
    """Each block saves b*s*d*(2r + 14c) (fused attention, no dropout: Korthikanti et al.'s count
    without masks); checkpointed, a block keeps its input (b*s*d*r) and one block is recomputed at a
    time. The head keeps b*s*d*(r + c) and the log-softmax; the peak, early in backward, adds the
    log-softmax's gradient (or, checkpointed, the recomputed block if that is larger)."""
    r, c, loss = ACTIVATION_BYTES[args["precision"]]
    if args["precision"] == "bf16-mixed" and args.get("strategy") == "zero3":
        r = 2  # MixedPrecisionPolicy(param_dtype=bf16): the embeddings' output, so the residual stream, is bf16
    elements = args["batch_size"] * args["seq_len"] * args["d_model"]
    block = elements * (2 * r + 14 * c)
    log_softmax = args["batch_size"] * args["seq_len"] * args["vocab"] * loss
    head = elements * (r + c) + log_softmax
    if args["checkpoint_activations"]:
        return args["layers"] * elements * r + head + max(log_softmax, block)
    return args["layers"] * block + head + log_softmax


def _tp_block_sent(args: dict) -> int:
    """Megatron-LM's tensor parallelism: per block and step, 2 all-reduces of b*s*d activations forward
    and 2 backward; sequence parallelism swaps each for a reduce-scatter and an all-gather of the
    same buffer. Activations are 4 bytes in fp32, 2 in bf16-mixed and bf16."""
    buffer = args["batch_size"] * args["seq_len"] * args["d_model"] * (4 if args["precision"] == "fp32" else 2)
    calls = 4 * args["layers"]
    if args["sequence_parallel"]:
        return calls * _sent(buffer, args["tp"]) * 2
    return calls * _sent(buffer, args["tp"], all_reduce=True)


def _by_hand(fn: str, args: dict) -> float:
    """The answer worked out without the analytic model: from the recipes above, and from torch's
    own bucket assignment and DistributedSampler."""
    if fn == "model_state_bytes":
        return _held(args["params"], args["gpus"], args["strategy"], args["precision"], args["optimizer"])
    if fn == "min_zero_stage":
        held = [_held(args["params"], args["gpus"], strategy, args["precision"], args["optimizer"])
                for strategy in ("ddp", "zero1", "zero2", "zero3")]
        return next(stage for stage, size in enumerate(held) if size <= args["gpu_mem"])
    if fn == "min_gpus":
        def fits(n: int) -> bool:
            return _held(args["params"], n, "zero3", args["precision"], args["optimizer"]) <= args["gpu_mem"]

        total = _held(args["params"], 1, "zero3", args["precision"], args["optimizer"])
        gpus = max(1, total // args["gpu_mem"] - 1)  # the napkin bound, then the exact count near it
        while not fits(gpus):
            gpus += 1
        assert gpus == 1 or not fits(gpus - 1)
        return gpus
    if fn == "step_wire_bytes":
        return _wire(args["params"], args["gpus"], args["strategy"], args["precision"])
    if fn == "ddp_buckets":
        return _torch_buckets(args)
    if fn == "sampler_index":
        from torch.utils.data import DistributedSampler

        sampler = DistributedSampler(range(args["dataset_len"]), num_replicas=args["num_replicas"], rank=args["rank"],
                                     shuffle=False, drop_last=args["drop_last"])
        return list(sampler)[args["position"] - 1]
    if fn == "transformer_activation_bytes":
        return _activation_peak(args)
    if fn == "tp_block_wire_bytes":
        return _tp_block_sent(args)
    if fn.startswith("pipeline_"):
        from test_drill_pipeline import pipeline_by_hand

        return pipeline_by_hand(fn, args)
    if fn.startswith("cp_"):
        from test_drill_context import context_by_hand

        return context_by_hand(fn, args)
    if fn.startswith("ep_"):
        from test_drill_experts import experts_by_hand

        return experts_by_hand(fn, args)
    from test_drill_scale import scale_by_hand

    return scale_by_hand(fn, args)  # which refuses a function it has no hand computation for


def test_every_answer_over_200_seeds_agrees_with_the_model_and_no_prompt_repeats():
    kinds_seen: set[str] = set()
    for seed in range(200):
        problems = drills.generate(seed, 2 * len(drills.KINDS))
        prompts = [p.prompt for p in problems]
        assert len(set(prompts)) == len(prompts), f"seed {seed} repeats a prompt"
        assert len({p.id for p in problems}) == len(problems)
        for problem in problems:
            kinds_seen.add(problem.kind)
            assert _agrees(problem), (seed, problem.id)
            assert drills.compute(problem.fn, problem.args) == problem.answer
            assert isinstance(problem.answer, (int, float)) and problem.answer >= 0
            assert problem.working and problem.answer_text in problem.working or problem.kind == "fit-stage"
    assert kinds_seen == set(drills.KINDS) and len(drills.KINDS) >= 6


def _agrees(problem: drills.Problem) -> bool:
    # Exact for counts and bytes; a float worked in another order may differ in its last bits.
    expected = _by_hand(problem.fn, problem.args)
    if isinstance(problem.answer, int) and isinstance(expected, int):
        return problem.answer == expected
    return math.isclose(problem.answer, expected, rel_tol=1e-12)


def test_a_broken_problem_fails_the_recomputation():
    from dataclasses import replace

    for problem in drills.generate(4, len(drills.KINDS)):
        assert _agrees(problem)
        assert not _agrees(replace(problem, answer=problem.answer + 1)), problem.kind
        if problem.kind in ("model-state", "wire-bytes"):
            assert not _agrees(replace(problem, args={**problem.args, "params": problem.args["params"] * 2}))


def test_the_same_seed_gives_the_same_problems_and_another_seed_others():
    first = [p.to_dict() for p in drills.generate(11, 20)]
    assert first == [p.to_dict() for p in drills.generate(11, 20)]
    assert [p["prompt"] for p in first] != [p["prompt"] for p in (q.to_dict() for q in drills.generate(12, 20))]


def test_a_long_run_of_one_kind_never_repeats_a_prompt():
    problems = drills.generate(3, 150, ["sampler-index"])
    assert len({p.prompt for p in problems}) == 150
    assert {p.kind for p in problems} == {"sampler-index"}


def test_every_kind_maps_to_a_topic_of_the_real_bank():
    from ddpfsdp.quiz.commands.drill import KIND_NAMES
    from ddpfsdp.quiz.loader import load_bank

    topics = load_bank().topics
    assert KIND_NAMES == tuple(drills.KINDS)
    assert all(kind.topic in topics for kind in drills.KINDS.values())


# --- grading -----------------------------------------------------------------------------------------


def _one(kind: str, seed: int = 0) -> drills.Problem:
    return drills.generate(seed, 1, [kind])[0]


def test_bytes_are_graded_with_units_and_the_stated_tolerance():
    problem = _one("model-state")
    exact_gb = problem.answer / 1e9
    for text in (f"{exact_gb:.6g} GB", f"{exact_gb * 1.04:.6g}GB", f"{problem.answer / 2**30:.6g} GiB", f"{problem.answer:.6e}", f"{exact_gb:.6g}"):
        assert drills.grade(problem, text).correct, text
    # The GB/GiB mix-up is 7% off: outside 5%.
    wrong = drills.grade(problem, f"{problem.answer / 2**30:.6g} GB")
    assert not wrong.correct
    assert "the analytic model says" in wrong.verdict and problem.answer_text in wrong.verdict


def test_counts_are_exact():
    problem = _one("sampler-index")
    assert drills.grade(problem, str(problem.answer)).correct
    assert not drills.grade(problem, str(problem.answer + 1)).correct


def test_an_answer_that_is_not_a_number_asks_again_with_a_hint():
    with pytest.raises(QuantityError, match="is not a number; type a whole number"):
        drills.grade(_one("min-gpus"), "two")
    with pytest.raises(QuantityError, match="is not a number; type a ZeRO stage: 0 \\(plain DDP\\), 1, 2 or 3"):
        drills.grade(_one("fit-stage"), "two")
    with pytest.raises(QuantityError, match="type a size such as"):
        drills.grade(_one("model-state"), "lots")


def test_the_working_puts_the_numbers_in_the_formula():
    problem = next(p for p in drills.generate(5, 40, ["sampler-index"]) if not p.args["drop_last"] and p.args["dataset_len"] % p.args["num_replicas"])
    args = problem.args
    per_rank = -(-args["dataset_len"] // args["num_replicas"])
    assert f"ceil({args['dataset_len']} / {args['num_replicas']}) = {per_rank}" in problem.working
    assert "padded" in problem.working
    state = _one("model-state", 9)
    param, grad, each_state, master, _, _ = BYTES[state.args["precision"]]
    total = param + grad + master + STATES[state.args["optimizer"]] * each_state
    assert f"= {total}." in state.working and state.answer_text in state.working


def test_unknown_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown drill kind 'nope'"):
        drills.Drill(1, ["nope"])


# --- the CLI --------------------------------------------------------------------------------------


def test_json_prints_n_problems_with_their_calc_the_same_for_the_same_seed():
    runner = CliRunner()
    first = runner.invoke(cli, ["drill", "--json", "--count", "9", "--seed", "5"])
    assert first.exit_code == 0, first.output
    problems = json.loads(first.output)
    assert len(problems) == 9 and len({p["prompt"] for p in problems}) == 9
    for p in problems:
        assert {"id", "kind", "prompt", "answer", "unit", "tolerance", "calc", "working"} <= set(p)
        assert isinstance(p["answer"], (int, float)) and p["unit"] in ("bytes", "count")
        assert _by_hand(p["calc"]["fn"], p["calc"]["args"]) == p["answer"]
    again = runner.invoke(cli, ["drill", "--json", "--count", "9", "--seed", "5"])
    assert again.output == first.output
    only = json.loads(runner.invoke(cli, ["drill", "--json", "--count", "4", "--seed", "1", "--kind", "ddp-buckets", "--kind", "activations"]).output)
    assert {p["kind"] for p in only} == {"ddp-buckets", "activations"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--kind", "nope", "--json"], "Invalid value for '--kind'"),
        (["--json", "--count", "0"], "Invalid value for '--count'"),
        (["--json", "--plain"], "choose one of --json and --plain"),
        (["--count", "3"], "--count goes with --json or --plain"),
        (["--json", "--seed", "x"], "Invalid value for '--seed'"),
    ],
)
def test_bad_input_is_a_clear_usage_error(argv, message):
    result = CliRunner().invoke(cli, ["drill", *argv])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_help_has_examples():
    result = CliRunner().invoke(cli, ["drill", "--help"])
    assert result.exit_code == 0
    assert "ddpfsdp drill --json --count 5 --seed 7" in result.output


def _plain(*args: str, stdin: str) -> CliOutcome:
    outcome = run_cli("drill", "--plain", *args, stdin=stdin)
    assert outcome.exception is None, repr(outcome.exception)
    return outcome


def _typed(problem: drills.Problem, right: bool) -> str:
    """An answer as a person types it: in the asked unit, right or clearly wrong."""
    if problem.base_unit == "bytes":
        return f"{problem.answer / UNITS[problem.unit] * (1 if right else 2):.6g} {problem.unit}"
    return str(int(problem.answer) * (1 if right else 2) + (0 if right else 1))


def test_plain_grades_asks_again_shows_the_working_and_saves():
    first, second = drills.generate(21, 2, ["model-state", "sampler-index"])
    lines = ["a lot", _typed(first, True), _typed(second, False), "q"]  # "a lot" is not a number: asked again
    outcome = _plain("--seed", "21", "--kind", "model-state", "--kind", "sampler-index", stdin="\n".join(lines) + "\n")
    assert outcome.exit_code == 0, outcome.stderr
    out = " ".join(outcome.stdout.split())
    assert "Traceback" not in outcome.stdout + outcome.stderr
    assert "'a lot' is not a number" in out
    assert "✔ Correct" in out
    assert "✘ Not quite: you said" in out
    assert "Working:" in out and " ".join(second.working.split()) in out
    assert "2 answered, 1 right (50%)" in out
    attempts = Store.open().attempts()
    assert [(a.question_id, a.topic, a.correct, a.mode) for a in attempts] == [
        (f"drill:{first.kind}", first.topic, True, "drill"),
        (f"drill:{second.kind}", second.topic, False, "drill"),
    ]
    assert attempts[0].answer["calc"] == {"fn": first.fn, "args": first.args}


def test_drill_results_appear_in_progress():
    first, second = drills.generate(21, 2, ["model-state", "sampler-index"])
    outcome = _plain("--seed", "21", "--kind", "model-state", "--kind", "sampler-index", "--count", "2",
                     stdin=f"{_typed(first, True)}\n{_typed(second, False)}\n")
    assert outcome.exit_code == 0, outcome.stderr
    runner = CliRunner()
    shown = runner.invoke(cli, ["progress"], terminal_width=160)
    assert shown.exit_code == 0, shown.output
    assert "Sizing drills" in shown.output
    assert "Per-GPU model state" in shown.output and "DistributedSampler indices" in shown.output
    report = json.loads(runner.invoke(cli, ["progress", "--json"]).output)
    drill_rows = {row["kind"]: row for row in report["drills"]}
    assert drill_rows[first.kind]["correct"] == 1 and drill_rows[second.kind]["correct"] == 0
    topics = {row["topic"]: row for row in report["topics"]}
    # A right drill answer lifts its topic's mastery; each tried kind counts as one card of its topic.
    assert topics[first.topic]["drills"] == 1 and topics[first.topic]["attempts"] == 1 and topics[first.topic]["mastery"] > 0
    assert topics[second.topic]["drills"] == 1 and topics[second.topic]["accuracy"] == 0 and topics[second.topic]["mastery"] == 0


# What each prompt must say about the numbers it grades, written out from the sources: the
# implementation a strategy follows under each precision (DeepSpeed: runtime/zero/stage_1_and_2.py,
# runtime/engine.py, runtime/torch_autocast.py; PyTorch: nn/parallel/distributed.py,
# distributed/optim/zero_redundancy_optimizer.py, distributed/fsdp/_fully_shard/) and its mode there.
def _implementation_words(strategy: str, precision: str) -> tuple[str, str]:
    deepspeed_mode = {"fp32": ", fp32", "bf16-mixed": "torch_autocast", "bf16-master": "bf16 enabled",
                      "bf16": "bf16_master_weights_and_grads"}[precision]
    torch_mode = {"fp32": ", fp32", "bf16-mixed": "torch.autocast(bf16)", "bf16-master": "fp32 master weights",
                  "bf16": "a bf16 model"}[precision]
    fsdp_mode = {"fp32": ", fp32", "bf16-mixed": "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)",
                 "bf16-master": "fp32 master weights", "bf16": "a bf16 model"}[precision]
    if strategy in ("zero1", "zero2"):
        return f"DeepSpeed ZeRO stage {strategy[-1]}", deepspeed_mode
    if precision == "bf16-master" and strategy in ("zero3", "hsdp"):
        return ("MiCS" if strategy == "hsdp" else "DeepSpeed ZeRO stage 3"), deepspeed_mode
    return {"ddp": ("PyTorch DDP", torch_mode), "zro": ("ZeroRedundancyOptimizer under DDP", torch_mode),
            "grad-op": ("fully_shard(reshard_after_forward=False)", fsdp_mode),
            "zero3": ("FSDP2 fully_shard", fsdp_mode), "hsdp": ("(replicate, shard) mesh", fsdp_mode)}[strategy]


# Words that belong to another precision's implementations, never to this one's.
_NOT_UNDER = {
    "fp32": ("torch_autocast", "torch.autocast", "MixedPrecisionPolicy", "bf16 enabled", "bf16_master", "bf16 compute"),
    "bf16-mixed": ("bf16 enabled", "bf16_master", "fp32 master weights", "a bf16 model", "fp32 throughout"),
    "bf16-master": ("torch_autocast", "torch.autocast", "MixedPrecisionPolicy", "bf16_master", "a bf16 model",
                    "fp32 throughout"),
    "bf16": ("torch_autocast", "torch.autocast", "MixedPrecisionPolicy", "bf16 enabled", "fp32 master weights",
             "fp32 throughout"),
}


def _graded_strategies(problem: drills.Problem) -> tuple[str, ...]:
    if problem.fn == "min_zero_stage":
        return ("ddp", "zero1", "zero2", "zero3")
    return (problem.args["strategy"],) if "strategy" in problem.args else ()


def _prompt_disagreements(problem: drills.Problem) -> list[str]:
    """What the prompt says that the arguments it is graded with contradict (empty: they agree)."""
    precision = problem.args.get("precision")
    if precision is None:
        return []
    wrong = [f"says {word!r} under {precision}" for word in _NOT_UNDER[precision] if word in problem.prompt]
    strategies = _graded_strategies(problem)
    for strategy in strategies:
        wrong += [f"does not name {word!r} for {strategy}" for word in _implementation_words(strategy, precision)
                  if word not in problem.prompt]
    if "FSDP" in problem.prompt and not set(strategies) & {"grad-op", "zero3", "hsdp"}:
        wrong.append("names FSDP, whose numbers it does not grade")
    return wrong


def test_every_prompt_names_the_implementation_and_precision_it_grades():
    graded = set()
    for seed in range(120):
        for problem in drills.generate(seed, 2 * len(drills.KINDS)):
            assert _prompt_disagreements(problem) == [], (seed, problem.id, problem.prompt)
            graded.update((s, problem.args.get("precision")) for s in _graded_strategies(problem))
    assert {s for s, _ in graded} == {"ddp", "zro", "zero1", "zero2", "grad-op", "zero3", "hsdp"}
    assert {p for _, p in graded} == {"fp32", "bf16-mixed", "bf16-master", "bf16"}


def test_a_prompt_that_disagrees_with_its_arguments_is_caught():
    from dataclasses import replace

    problem = next(p for seed in range(1, 40) for p in drills.generate(seed, 30)
                   if p.kind == "wire-bytes" and p.args["strategy"] == "zero2" and p.args["precision"] == "bf16-mixed")
    # The prompt this drill once printed: FSDP's recipe, graded with ZeRO-2's numbers.
    old = problem.prompt.split(" (as ")[0] + " on 4 nodes of 8 (32 GPUs), in bf16-mixed (PyTorch autocast / FSDP2 " \
        "MixedPrecisionPolicy: fp32 params, grads and optimizer state held; bf16 for compute and FSDP's all-gather)."
    assert _prompt_disagreements(replace(problem, prompt=old))
    for other in ("fp32", "bf16-master", "bf16"):
        if other != problem.args["precision"]:
            assert _prompt_disagreements(replace(problem, args={**problem.args, "precision": other})), other
    assert _prompt_disagreements(replace(problem, args={**problem.args, "strategy": "grad-op"}))


def test_the_activations_drill_says_how_bf16_mixed_is_applied_and_counts_its_residual_stream():
    seen = {}
    for seed in range(300):
        for problem in drills.generate(seed, 2 * len(drills.KINDS)):
            if problem.kind == "activations" and problem.args["precision"] == "bf16-mixed":
                seen.setdefault(problem.args["strategy"], problem)
    assert set(seen) == {"ddp", "zero3"}
    assert "r = 4" in seen["ddp"].prompt and "torch.autocast" in seen["ddp"].prompt
    assert "r = 2" in seen["zero3"].prompt and "MixedPrecisionPolicy" in seen["zero3"].prompt
    assert seen["zero3"].answer == _activation_peak(seen["zero3"].args)


def test_a_kind_with_no_new_problem_left_comes_round_again_with_a_note():
    """ddp-buckets draws from 36 prompts: the 37th problem used to raise "no new ddp-buckets problem after
    200 draws"; now the prompts come round again and the drill says so, once per round."""
    stream = drills.Drill(seed=0, kinds=["ddp-buckets"])
    problems, notes = [], []
    for _ in range(80):
        problems.append(next(stream))
        notes.append(stream.note)
    first_round = len({p.prompt for p in problems[:36]})
    assert first_round == 36 and len({p.prompt for p in problems}) == 36
    said = [(at, note) for at, note in enumerate(notes) if note]
    assert said[0] == (36, "No new ddp-buckets problem is left (36 asked): they come round again from here.")
    assert all(note is None for note in notes[:36]) and len(said) == 2


def test_more_json_problems_than_a_kind_has_are_given_with_a_note():
    result = CliRunner().invoke(cli, ["drill", "--json", "--count", "100", "--kind", "ddp-buckets"])
    assert result.exit_code == 0, result.output
    problems = json.loads(result.stdout)
    assert len(problems) == 100 and len({p["prompt"] for p in problems}) == 36
    assert result.stderr == "note: No new ddp-buckets problem is left (36 asked): they come round again from here.\n"


def test_the_plain_drill_goes_on_past_a_kind_with_no_new_problem():
    outcome = run_cli("drill", "--plain", "--kind", "ddp-buckets", "--seed", "0", stdin="s\n" * 40 + "q\n")
    assert outcome.exception is None and outcome.exit_code == 0, outcome.stderr
    said = " ".join(outcome.stdout.split())
    assert said.count("No new ddp-buckets problem is left (36 asked)") == 1
    assert "No answers this time." in said


def _first(kind: str) -> drills.Problem:
    return next(drills.Drill(seed=3, kinds=[kind]))


@pytest.mark.parametrize("kind, typed, says", [
    ("fit-stage", "5", "'5' is out of range: the answer is a ZeRO stage: 0 (plain DDP), 1, 2 or 3"),
    ("fit-stage", "-1", "'-1' is out of range: the answer is a ZeRO stage: 0 (plain DDP), 1, 2 or 3"),
    ("sampler-index", "-1", "'-1' is out of range: the answer is an index of the dataset, from 0 to "),
    ("fit-stage", "10 GB", "'10 GB' is a size in bytes, and this answer is not one; type a ZeRO stage"),
    ("ddp-buckets", "-3", "'-3' is negative, and no answer here is; type a number"),
])
def test_an_answer_no_question_of_the_kind_has_is_refused_not_graded(kind, typed, says):
    """A ZeRO stage of 5 or an index of -1 answers nothing: refused with what the answer is, not counted wrong."""
    with pytest.raises(QuantityError) as refused:
        drills.grade(_first(kind), typed)
    assert str(refused.value).startswith(says), str(refused.value)


@pytest.mark.parametrize("kind, typed", [("pipeline", "10 GB"), ("pipeline", "10 parsecs"), ("fit-stage", "12 GiB"),
                                         ("sampler-index", "7M apples"), ("model-state", "10 parsecs"),
                                         ("ddp-buckets", "abc")])
def test_a_refusal_gives_the_drill_hint_once(kind, typed):
    """The parser's own advice (a count like 7B, a ratio like 1.5x) and the drill's hint once made two hints
    in one message; the message is now what is wrong, then the hint that fits the question."""
    problem = _first(kind)
    with pytest.raises(QuantityError) as refused:
        drills.grade(problem, typed)
    message = str(refused.value)
    assert message.endswith(problem.hint) and message.count("type ") == 1, message
    assert "write a count like" not in message and "such as 1.5 or 1.5x" not in message
