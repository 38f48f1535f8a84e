"""Drawing a scenario from a seed: a family, a job from the presets, and its steps in interview order.

The same seed (and the same pinned family, model or cluster) always gives the same scenario. Every
scenario opens the same way (memory under DDP, the lowest strategy that fits, bytes per rank, compute
time, communication time, exposed share, activations, checkpointing), then its family's two
follow-ups, each changing one condition, and its closing explanation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from ddpfsdp.demos.theory import planning, presets
from ddpfsdp.demos.theory.sharding import ZERO_STAGES
from ddpfsdp.quiz.interview import followups, pipeline_followups, plan_followups, steps
from ddpfsdp.quiz.interview.scenario import Scenario, Setup, Step

MFUS = (0.35, 0.40, 0.45, 0.50, 0.55)
SEQ_LENS = (2048, 4096, 8192)
MICRO_BATCHES = (1, 2, 4)
PRECISION_DRAWS = (("bf16-mixed", 4), ("bf16-master", 2), ("fp32", 1))
OPTIMIZER_DRAWS = (("adamw", 4), ("adam", 1))
MAX_DRAWS = 500


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    models: tuple[str, ...]
    nodes: tuple[int, ...]
    followups: tuple[followups.FollowUp, followups.FollowUp]
    explain: object  # (Setup, plan) -> Step
    lowest_stage: int = 0  # draw again (most of the time) when a lower stage already fits
    accepts: object = None  # (Setup) -> bool: draw again when the family's own steps cannot be asked of a setup


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("fit", "Make it fit", ("Llama-2-7B-like", "Llama-2-13B-like", "Llama-2-70B-like", "Llama-3.1-405B-like"),
               (1, 2, 4, 8), (followups.smaller_gpus, followups.longer_sequences), followups.explain_fit,
               lowest_stage=1),
        Family("faster", "Make it faster", ("Llama-2-7B-like", "Llama-2-13B-like", "Llama-2-70B-like",
                                            "Llama-3.1-405B-like"),
               (4, 8, 16, 32, 64), (followups.slower_network, followups.batch_doubles), followups.explain_faster),
        Family("scale", "From one node to many", ("GPT-3-XL-like", "Llama-2-7B-like", "Llama-2-13B-like"),
               (1,), (followups.more_nodes, followups.batch_doubles), followups.explain_scale),
        Family("pipeline", "Past one node: pipeline", ("Llama-2-70B-like", "Llama-3.1-405B-like"), (2, 4, 8),
               (pipeline_followups.across_nodes, pipeline_followups.step_time), pipeline_followups.explain),
        Family("plan", "A 3-D plan", ("Llama-2-70B-like", "Llama-3.1-405B-like"), (16, 32, 64, 128),
               (plan_followups.choose_degrees, plan_followups.plan_memory), plan_followups.explain,
               accepts=plan_followups.has_plan),
    )
}


def _pick(rng: random.Random, weighted: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([name for name, _ in weighted], weights=[weight for _, weight in weighted])[0]


def draw_setup(rng: random.Random, family: Family, model: str | None = None, cluster: str | None = None) -> Setup:
    """A job of this family whose model state fits at some ZeRO stage; pinned presets are kept."""
    for _ in range(MAX_DRAWS):
        chosen = presets.find(presets.MODELS, model, "model") if model else presets.MODELS[rng.choice(family.models)]
        node = presets.find(presets.CLUSTERS, cluster, "cluster") if cluster else rng.choice(list(presets.CLUSTERS.values()))
        setup = Setup.of(
            chosen, node, nodes=rng.choice(family.nodes), seq_len=rng.choice(SEQ_LENS),
            micro_batch=rng.choice(MICRO_BATCHES), precision=_pick(rng, PRECISION_DRAWS), optimizer=_pick(rng, OPTIMIZER_DRAWS),
            mfu=rng.choice(MFUS),
        )
        stage = planning.q_fit_stage(params=setup.params, gpus=setup.gpus, gpu_mem=setup.gpu_mem_bytes,
                                     precision=setup.precision, optimizer=setup.optimizer)
        if stage == planning.NONE_FITS:
            continue
        if stage < family.lowest_stage and rng.random() < 0.8 and not (model and cluster):
            continue
        if family.accepts is not None and not family.accepts(setup):
            continue
        return setup
    pinned = ", ".join(f"{what} {name!r}" for what, name in (("model", model), ("cluster", cluster)) if name)
    if family.accepts is not None:
        raise ValueError(f"no {family.name!r} scenario fits with {pinned or 'these presets'}: its steps need a job "
                         f"where {family.title.lower()} is a real choice; pin another model or cluster")
    raise ValueError(f"no {family.name!r} scenario fits with {pinned or 'these presets'}: even ZeRO-3 cannot hold "
                     "the model state; pin a smaller model or a cluster with more memory")


def _numbered(items: list[Step]) -> tuple[Step, ...]:
    return tuple(replace(step, id=str(number)) for number, step in enumerate(items, start=1))


# The families a seed drew from before the pipeline family joined. The pipeline family, then the plan
# family, each take their share of seeds by a draw of their own, so every other seed keeps the scenario it
# always gave.
FIRST_FAMILIES = ("faster", "fit", "scale")
PIPELINE_SHARE = 1 / 4
PLAN_SHARE = 1 / 5  # of the seeds the pipeline family leaves: 15% of all


def _draw_family(seed: int, rng: random.Random) -> Family:
    if random.Random(f"pipeline:{seed}").random() < PIPELINE_SHARE:
        return FAMILIES["pipeline"]
    if random.Random(f"plan:{seed}").random() < PLAN_SHARE:
        return FAMILIES["plan"]
    return FAMILIES[rng.choice(FIRST_FAMILIES)]


def generate(seed: int, family: str | None = None, model: str | None = None, cluster: str | None = None) -> Scenario:
    """The scenario of this seed; `family`, `model` and `cluster` pin what would otherwise be drawn."""
    rng = random.Random(seed)
    chosen = FAMILIES[check_family(family)] if family else _draw_family(seed, rng)
    setup = draw_setup(rng, chosen, model, cluster)
    stage = planning.q_fit_stage(params=setup.params, gpus=setup.gpus, gpu_mem=setup.gpu_mem_bytes,
                                 precision=setup.precision, optimizer=setup.optimizer)
    plan = ZERO_STAGES[stage]
    items = [
        steps.model_state_ddp(setup), steps.fit_strategy(setup), steps.wire_bytes(setup, plan),
        steps.compute_time(setup), steps.comm_time(setup, plan), steps.exposed_share(setup, plan),
        steps.activations(setup, plan), steps.checkpoint(setup, plan),
    ]
    current, strategy, group = setup, plan, None
    for follow in chosen.followups:
        current, strategy, group, step = follow(current, strategy, group)
        items.append(step)
    items.append(chosen.explain(setup, plan))
    nodes = f"{setup.nodes} node{'s' if setup.nodes > 1 else ''} of {setup.cluster}"
    title = f"{chosen.title}: {setup.model} on {nodes}"
    return Scenario(seed=seed, family=chosen.name, title=title, setup=setup, plan=plan, steps=_numbered(items))


def check_family(name: str) -> str:
    key = str(name).strip().lower()
    if key not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}")
    return key
