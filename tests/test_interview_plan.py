"""The interview's planning follow-ups (quiz/interview/plan_followups.py): the planner's choice among losers
that each lose for their own reason, its memory worked by hand, and the family's own share of the drawn seeds."""

from __future__ import annotations

import math

from ddpfsdp.demos.theory import plan3d
from ddpfsdp.quiz.interview import generate, plan_followups
from ddpfsdp.quiz.interview.scenario import FUNCTIONS, STEP_KINDS

# What calc's zero1 column holds per parameter (DeepSpeed's ZeRO-1): params, grads whole; the optimizer's
# master copy and Adam's two moments over dp. (param, grad, optimizer) bytes by precision.
ZERO1_BYTES = {"bf16-mixed": (4, 4, 4 + 8), "bf16-master": (2, 2, 4 + 8), "fp32": (4, 4, 4 + 8)}
# Activation bytes per element under autocast: (residual stream r, compute c).
ACTIVATION_BYTES = {"bf16-mixed": (4, 2), "bf16-master": (2, 2), "fp32": (4, 4)}


def _scenario(seed: int = 2):
    return generate.generate(seed, family="plan", model="Llama-2-70B-like", cluster="DGX A100 80GB")


def test_the_family_ends_with_the_plan_steps_and_their_topic():
    kinds = [step.kind for step in _scenario().steps]
    assert kinds[-3:] == ["plan-3d", "plan-memory", "explain-plan"]
    assert {STEP_KINDS[kind][1] for kind in kinds[-3:]} == {"at-scale"}
    assert sum(1 for step in _scenario().steps if step.change) >= 2


def test_the_choice_is_the_planners_first_and_the_others_lose_clearly():
    scenario = _scenario()
    step = scenario.steps[-3]
    chosen = FUNCTIONS[step.fn](**step.args)
    assert step.options[int(step.answer) - 1].value == chosen
    plan = plan3d.plan(plan3d.job_from_args(**step.args), top=1)
    best = plan["candidates"][0]
    assert chosen == plan3d.degrees_text(best["tp"], best["pp"], best["dp"])
    others = {plan3d.degrees_text(o["tp"], o["pp"], o["dp"]): o for o in plan["others"]}
    wrong = [option for option in step.options if option.value != chosen]
    assert len(wrong) >= 2 and len({others[o.value]["loses_by"] for o in wrong}) == len(wrong)
    for option in wrong:
        other = others[option.value]
        assert option.reason == other["reason"]
        assert not other["fits"] or other["step_s"] >= 1.05 * best["step_s"]


def test_the_plan_memory_by_hand():
    scenario = _scenario()
    setup, step = scenario.setup, scenario.steps[-2]
    tp, pp, dp = step.args["tp"], step.args["pp"], step.args["dp"]
    assert pp > 1  # rank 0 holds the embeddings and the most micro-batches in flight, not the head
    d, s, b, layers = setup.d_model, setup.seq_len, setup.micro_batch, setup.layers
    m = setup.gpus * b // (dp * b)
    assert m == tp * pp  # the scenario's global batch: one micro-batch per GPU
    # Rank 0 holds the first ceil(L/pp) blocks (12d^2 + 13d each) and the token and position embeddings.
    blocks = -(-layers // pp)
    params = blocks * (12 * d * d + 13 * d) + (setup.vocab + s) * d
    local = -(-params // tp)
    param_b, grad_b, opt_b = ZERO1_BYTES[setup.precision]
    state = local * (param_b + grad_b) + -(-local // dp) * opt_b
    # Each block saves b·s·d·(2r + 2c + 12c/tp); 1F1B keeps min(m, pp) micro-batches on rank 0.
    r, c = ACTIVATION_BYTES[setup.precision]
    elements = b * s * d
    per_block = 2 * r * elements + 2 * c * elements + 12 * c * elements // tp
    checkpointed = step.prompt.count("checkpointed") > 0
    if checkpointed:
        per_block = r * elements
    activations = blocks * per_block * min(m, pp)
    assert step.answer == state + activations
    assert math.isclose(FUNCTIONS[step.fn](**step.args), step.answer)


def test_every_plan_answer_is_recomputed_and_a_broken_one_is_not():
    for seed in range(8):
        scenario = generate.generate(seed, family="plan")
        choose, memory = scenario.steps[-3], scenario.steps[-2]
        assert choose.options[int(choose.answer) - 1].value == FUNCTIONS[choose.fn](**choose.args), seed
        assert FUNCTIONS[memory.fn](**memory.args) == memory.answer, seed
        # Every other option is a wrong answer: none of them is the planner's first.
        chosen = FUNCTIONS[choose.fn](**choose.args)
        assert [o.value for o in choose.options].count(chosen) == 1
        # Other degrees need other memory: an answer kept from them does not agree.
        assert FUNCTIONS[memory.fn](**{**memory.args, "pp": memory.args["pp"] * 2,
                                       "dp": max(1, memory.args["dp"] // 2)}) != memory.answer


def test_talking_points_quote_this_scenarios_plan():
    scenario = _scenario()
    memory = scenario.steps[-2]
    points = " ".join(scenario.steps[-1].talking_points)
    assert f"TP {memory.args['tp']}" in points and f"PP {memory.args['pp']}" in points
    assert memory.answer_text in points


def test_the_plan_family_takes_its_own_share_of_seeds_and_leaves_the_others_theirs():
    families = [generate.generate(seed).family for seed in range(60)]
    assert set(families) == {"fit", "faster", "scale", "pipeline", "plan"}
    assert 0.05 < families.count("plan") / 60 < 0.3  # 1/5 of the 3/4 the pipeline family leaves: 15%
    # A seed the plan family does not draw keeps the family and setup it gave before the family came.
    assert (generate.generate(5).family, generate.generate(5).setup.model) == ("scale", "Llama-2-7B-like")


def test_the_options_come_in_an_order_drawn_from_the_job():
    answers = {int(generate.generate(seed, family="plan").steps[-3].answer) for seed in range(12)}
    assert len(answers) >= 3
    assert plan_followups.CLEAR_MARGIN == 0.05
