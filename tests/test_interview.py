"""The design interview's scenarios: seeded, in interview order, every answer from the analytic model;
its grading, its debrief, its saving, and its command's output and bad input."""

from __future__ import annotations

import itertools
import json
import math
from datetime import datetime, UTC
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddpfsdp.demos.theory import planning, presets
from ddpfsdp.quiz import scheduler
from ddpfsdp.quiz.cli import cli
from ddpfsdp.quiz.grading import QuantityError
from ddpfsdp.quiz.interview import answers, debrief, followups, generate
from ddpfsdp.quiz.interview.scenario import FUNCTIONS, STEP_KINDS, Setup
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
OPENING = ["model-state", "fit-strategy", "wire-bytes", "compute-time", "comm-time", "exposed-share", "activations",
           "checkpoint"]
STORED_SIMULATION = Path(__file__).parent / "data" / "interview_sim_13b_world8.json"


def _json(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["interview", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_gives_every_step_its_prompt_answer_unit_tolerance_and_calc():
    scenario = _json("--seed", "1")
    assert scenario["schema"] == "ddpfsdp.interview/1" and scenario["seed"] == 1
    steps = scenario["steps"]
    assert len(steps) >= 6
    for step in steps:
        assert step["prompt"] and "unit" in step and "tolerance" in step and "answer" in step
        if step["asked_in"] in ("GB", "GiB", "s", "%", "count", "choice"):
            assert set(step["calc"]) == {"fn", "args"} and step["calc"]["fn"] in FUNCTIONS
    assert scenario["simulate"]["command"].startswith("ddpfsdp demo ")
    assert "--simulate --world" in scenario["simulate"]["command"]


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another():
    assert _json("--seed", "7") == _json("--seed", "7")
    assert _json("--seed", "7")["setup"] != _json("--seed", "8")["setup"]


def _recomputed(step: dict):
    value = FUNCTIONS[step["calc"]["fn"]](**step["calc"]["args"])
    if step["asked_in"] == "choice":
        return next(n for n, option in enumerate(step["options"], start=1) if option["value"] == value)
    return value


def test_every_answer_is_recomputed_from_its_calc_for_200_seeds():
    for seed in range(200):
        scenario = generate.generate(seed)
        data = json.loads(json.dumps(scenario.to_dict()))  # arguments survive a JSON round trip
        kinds = [step["kind"] for step in data["steps"]]
        assert kinds[:8] == OPENING, seed
        assert sum(1 for step in data["steps"] if step.get("change")) >= 2, seed
        explain = data["steps"][-1]
        assert explain["asked_in"] == "explain" and len(explain["talking_points"]) >= 3, seed
        for step in data["steps"]:
            if "calc" in step:
                assert _recomputed(step) == pytest.approx(step["answer"]), (seed, step["id"], step["kind"])
            assert STEP_KINDS[step["kind"]] == (step["skill"], step["topic"])


def test_hand_computed_answers_of_one_scenario():
    scenario = generate.generate(0, family="scale", model="Llama-2-13B-like", cluster="DGX A100 40GB")
    setup = scenario.setup
    assert (setup.gpus, setup.precision, setup.optimizer, setup.micro_batch, setup.seq_len) == (8, "bf16-mixed", "adamw", 1, 4096)
    step = {s.kind: s for s in scenario.steps if s.change is None}
    # DDP under bf16-mixed with AdamW: 4 + 4 + 8 = 16 bytes per parameter, 16 * 13e9 = 208 GB.
    assert step["model-state"].answer == 208e9
    # ZeRO-2 holds 4 + 12/8 ... = 4*13e9 + 12*13e9/8 = 52 + 19.5 = 71.5 GB > 40 GB; ZeRO-3 16*13e9/8 = 26 GB fits.
    assert scenario.plan == "zero3" and step["fit-strategy"].answer == 4
    # ZeRO-3 over 8: all-gather twice in bf16 (2 * 13e9 * 2 B = 52 GB) and reduce-scatter in fp32 (52 GB),
    # each rank sending 7/8 of both: 7/8 * 104 GB = 91 GB.
    assert step["wire-bytes"].answer == pytest.approx(91e9)
    # 6 * 13e9 * (8 GPUs * 1 * 4096 tokens = 32768) = 2.555904e15 FLOPs over 8 * 312e12 * MFU.
    mfu = setup.mfu
    assert step["compute-time"].answer == pytest.approx(2.555904e15 / (8 * 312e12 * mfu))


def test_at_least_ten_thousand_distinct_scenarios():
    count = 0
    for family in generate.FAMILIES.values():
        space = itertools.product(family.models, presets.CLUSTERS.values(), family.nodes, generate.SEQ_LENS,
                                  generate.MICRO_BATCHES, generate.PRECISION_DRAWS, generate.OPTIMIZER_DRAWS, generate.MFUS)
        for model, cluster, nodes, _seq, _micro, (precision, _), (optimizer, _), _mfu in space:
            gpus = cluster.gpus_per_node * nodes
            stage = planning.q_fit_stage(params=presets.MODELS[model].params, gpus=gpus,
                                         gpu_mem=cluster.gpu.memory_bytes, precision=precision, optimizer=optimizer)
            count += stage != planning.NONE_FITS
    assert count >= 10_000
    drawn = {json.dumps({"family": (scenario := generate.generate(seed)).family, **scenario.setup.to_dict()},
                        sort_keys=True) for seed in range(300)}
    assert len(drawn) >= 295


def test_each_follow_up_changes_one_condition():
    setup = generate.generate(2, family="faster").setup
    labels = {"inter"}  # the link's name follows its speed
    for follow in (followups.smaller_gpus, followups.longer_sequences, followups.batch_doubles, followups.more_nodes,
                   followups.slower_network):
        changed, _, _, step = follow(setup, "zero3", None)
        differing = {k for k in Setup.__dataclass_fields__ if getattr(changed, k) != getattr(setup, k)} - labels
        assert len(differing) == 1, (follow.__name__, differing)
        assert step.change


# What the exposed-share prompt of each plan must say about when its collectives run (from the sources:
# torch/nn/parallel/distributed.py for DDP's reducer; DeepSpeed runtime/zero/stage_1_and_2.py, step() then
# all_gather_dp_groups; torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py for FSDP2's prefetching).
OVERLAP_WORDS = {
    "ddp": ("all-reduces each gradient bucket as backward produces it", "behind backward"),
    "zero1": ("during backward", "overlap_comm", "all-gather of the updated parameters", "after the optimizer",
              "hides behind nothing"),
    "zero3": ("half the all-gathers run in forward", "1/3 of the compute", "the other half, prefetched in backward",
              "reduce-scatters hide behind backward"),
    "hsdp": ("half the all-gathers run in forward", "1/3 of the compute", "the other half, prefetched in backward",
             "all-reduce across the groups hide behind backward"),
}
OVERLAP_WORDS["zero2"] = OVERLAP_WORDS["zero1"]


def test_every_exposed_share_prompt_states_the_overlap_it_grades():
    seen = set()
    for seed in range(120):
        scenario = generate.generate(seed)
        for step in scenario.steps:
            if step.kind != "exposed-share":
                continue
            plan = step.args["strategy"]
            seen.add(plan)
            prompt = " ".join(step.prompt.split())
            missing = [words for words in OVERLAP_WORDS[plan] if words not in prompt]
            assert not missing, (seed, plan, missing)
            assert "all of the compute" not in prompt, (seed, plan)
        hsdp = [step for step in scenario.steps if step.kind == "hsdp-group"]
        for step in hsdp:
            assert "Overlap as graded" in step.prompt and OVERLAP_WORDS["hsdp"][-1] in " ".join(step.prompt.split())
    assert seen == {"ddp", "zero1", "zero2", "zero3", "hsdp"}


@pytest.mark.parametrize("family", sorted(generate.FAMILIES))
def test_unknown_or_unfitting_pins_say_what_to_do(family):
    with pytest.raises(ValueError, match="choose one of"):
        generate.generate(1, family=family, model="GPT-9")
    with pytest.raises(ValueError, match="choose one of fit, faster, scale"):
        generate.generate(1, family="slower")


# --- grading -------------------------------------------------------------------------------------


def _step(kind: str, seed: int = 0):
    scenario = generate.generate(seed, family="scale", model="Llama-2-13B-like", cluster="DGX A100 40GB")
    return scenario, next(s for s in scenario.steps if s.kind == kind and s.change is None)


def test_sizes_times_shares_and_choices_are_read_with_their_units():
    _, memory = _step("model-state")
    assert answers.read(memory, "208 GB") == 208e9 and answers.read(memory, "208") == 208e9
    assert answers.read(memory, "193.7GiB") == pytest.approx(193.7 * 2**30)
    _, compute = _step("compute-time")
    assert answers.read(compute, "850 ms") == pytest.approx(0.85)
    assert answers.read(compute, "1.2") == 1.2 and answers.read(compute, "1.2 s") == 1.2
    _, share = _step("exposed-share")
    assert answers.read(share, "29%") == pytest.approx(0.29) and answers.read(share, "29") == pytest.approx(0.29)
    _, choice = _step("fit-strategy")
    assert answers.read(choice, "4") == 4


@pytest.mark.parametrize("kind, text, says", [
    ("model-state", "lots", "is not a number"),
    ("compute-time", "3 parsecs", "not a unit of time"),
    ("exposed-share", "29 GB", "unit this step does not take"),
    ("fit-strategy", "9", "there is no option 9"),
    ("fit-strategy", "2.5", "there is no option"),
])
def test_unreadable_answers_are_refused_with_a_hint(kind, text, says):
    _, step = _step(kind)
    with pytest.raises(QuantityError, match=says):
        answers.grade(step, text)


def test_tolerances_relative_with_a_floor_and_exact():
    _, memory = _step("model-state")  # 208 GB within 5%: 197.6 to 218.4
    assert answers.grade(memory, "218 GB").correct and not answers.grade(memory, "219 GB").correct
    _, share = _step("exposed-share")
    expected = share.answer * 100
    allowed = max(0.2 * expected, 1.0)  # within a fifth of the share, never tighter than 1 point
    assert answers.grade(share, f"{expected + 0.98 * allowed:.4f}").correct
    assert not answers.grade(share, f"{expected + 1.02 * allowed:.4f}").correct
    _, choice = _step("fit-strategy")
    assert answers.grade(choice, "4").correct and not answers.grade(choice, "3").correct
    wrong = answers.grade(choice, "3")
    assert "option 3" in wrong.verdict and "ZeRO-3" in wrong.verdict


# --- the debrief ---------------------------------------------------------------------------------


def test_the_simulated_command_maps_the_scenario_honestly():
    scenario, _ = _step("model-state")
    sim = debrief.simulation(scenario)
    assert sim.command == ("ddpfsdp demo fsdp --simulate --world 8 --params 13B --precision bf16-mixed "
                           "--optimizer adamw --batch-size 1 --seq-len 4096")
    big = generate.generate(4, family="faster", model="Llama-3.1-405B-like", cluster="HGX H200")
    far = debrief.simulation(big)
    assert "--params 70B" in far.command and any("nearest size" in note for note in far.notes)
    assert debrief.nearest_size(1_300_000_000) == "1B" and debrief.nearest_size(7 * 10**9) == "7B"


def test_each_plan_is_simulated_by_a_demo_that_exists():
    """A scenario's ZeRO-1 is DeepSpeed's (calc's zero1); what PyTorch runs of it is ZeroRedundancyOptimizer,
    the `zro` demo."""
    from ddpfsdp.demos.registry import DEMOS

    assert all(demo in DEMOS for demo, _, _ in debrief.DEMOS.values())
    assert debrief.DEMOS["zero1"][0] == "zro"


def test_skill_scores_count_unanswered_steps_as_zero():
    scenario, memory = _step("model-state")
    grades = {memory.id: answers.grade(memory, "208 GB")}
    scores = debrief.skill_scores(scenario.steps, grades)
    assert scores["memory"] == {"title": "Memory", "steps": 1, "answered": 1, "score": 1.0}
    assert scores["time"]["answered"] == 0 and scores["time"]["score"] == 0
    assert debrief.overall(scenario.steps, grades) == pytest.approx(1 / len(scenario.steps))


def test_the_stored_simulation_sits_beside_the_answers_and_the_model():
    scenario, wire = _step("wire-bytes")
    result = json.loads(STORED_SIMULATION.read_text())
    rows = {row.figure.split(" (")[0]: row for row in debrief.compare(scenario, {wire.id: answers.grade(wire, "90 GB")}, result)}
    sent = rows["bytes sent per rank per step"]
    assert sent.yours == 90e9 and sent.scenario == pytest.approx(91e9)
    # The simulated 13B shape has 13,004,881,920 parameters (at sequence 4096): 7/8 of 8 bytes each.
    assert sent.measured == pytest.approx(7 / 8 * 8 * 13_004_881_920, rel=1e-6)
    assert abs(sent.difference) < 0.01
    state = rows["model state per GPU"]
    assert state.measured == pytest.approx(16 * 13_004_881_920 / 8, rel=1e-4) and state.yours is None


# --- saving --------------------------------------------------------------------------------------


def test_each_step_is_saved_as_an_attempt_at_its_kind_and_counts_toward_its_topic(quiz_bank):
    from ddpfsdp.quiz.loader import load_bank

    bank = load_bank(*quiz_bank)
    scenario, memory = _step("model-state")
    store = Store.memory()
    answers.record(store, scenario, memory, answers.grade(memory, "208 GB"), time_s=30, now=T0)
    [attempt] = store.attempts()
    assert (attempt.question_id, attempt.kind, attempt.mode, attempt.topic) == (
        "interview:model-state", "interview", "interview", "memory")
    assert attempt.answer["skill"] == "memory" and attempt.answer["scenario"] == scenario.id
    # The fixture bank has no "memory" topic, so nothing counts there; a card of one of its topics does.
    assert [p for p in scheduler.progress(bank, store, T0) if p.interview_steps] == []
    other = Store.memory()
    card = scheduler.interview_card("model-state", "ddp")
    scheduler.record_answer(other, card, answers.grade(memory, "208 GB"), time_s=30, now=T0, mode="interview")
    ddp = {p.topic: p for p in scheduler.progress(bank, other, T0)}["ddp"]
    assert ddp.interview_steps == 1 and ddp.attempts == 1 and ddp.mastery > 0


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, says", [
    (["--model", "Llama-9B"], "unknown model preset 'Llama-9B'; choose one of GPT-3-XL-like"),
    (["--cluster", "DGX Z9000"], "unknown cluster preset 'DGX Z9000'; choose one of DGX H100"),
    (["--seed", "abc"], "'abc' is not a whole number; give a seed such as 7"),
    (["--seed", "-3"], "-3 is negative"),
    (["--family", "slower"], "'slower' is not one of 'fit', 'faster', 'scale'"),
    (["--json", "--plain"], "choose one of --json and --plain"),
    (["--json", "--family", "scale", "--model", "Llama-3.1-405B-like"], "no 'scale' scenario fits"),
])
def test_bad_input_gets_a_clear_message(args, says):
    result = CliRunner().invoke(cli, ["interview", *args])
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split()) and "Traceback" not in result.output


def test_the_plain_interview_saves_each_step_and_stops_cleanly(monkeypatch):
    import io

    from rich.console import Console

    from ddpfsdp.quiz.interview.plain import run_interview_plain

    scenario, _ = _step("model-state")
    monkeypatch.setattr("sys.stdin", io.StringIO("lots\n208 GB\n3\ns\nq\n"))
    out = io.StringIO()
    store = Store.memory()
    code = run_interview_plain(scenario, console=Console(file=out, width=100), store=store, clock=lambda: T0)
    shown = out.getvalue()
    assert code == 0
    assert "'lots' is not a number" in shown and "✔ Correct: 208 GB" in shown and "✘ Not quite" in shown
    assert "Stopped at step 4 of 11. 3 answered steps are saved" in shown
    assert [(a.question_id, a.correct) for a in store.attempts()] == [
        ("interview:model-state", True), ("interview:fit-strategy", False), ("interview:wire-bytes", False)]
    assert math.isclose(store.attempts()[2].score, 0.0)
