"""The debrief: a score per skill, and the simulated run that measures the scenario's configuration.

The simulated demo (`ddpfsdp demo NAME --simulate --world N --params SIZE`) wraps a GPT of the
nearest size it builds with the same strategy code the real demos run, on fake tensors over a fake
process group, and measures rank 0's model state, collectives and peak. Where the simulation cannot
be the scenario exactly (another size, a precision or optimizer the demos lack, PyTorch's own
ZeRO-1 or ZeRO-2), the notes say so, and its figures are set beside the analytic model's figures
for what was simulated as well as for the scenario. It measures no time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ddpfsdp.demos.theory import planning
from ddpfsdp.demos.theory.precision import bytes_per_param_breakdown
from ddpfsdp.demos.theory.quiz_answers import q_transformer_activation_bytes
from ddpfsdp.demos.theory.state import model_state
from ddpfsdp.demos.result.schema import Config, DemoResult, JsonObject, Memory, RankMemory, as_result
from ddpfsdp.demos.base.shapes import GPT_SIZES
from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.interview.scenario import SKILLS, Scenario, Step, gb

# What each plan runs as in PyTorch: the demo, its extra options, and what differs from the paper.
DEMOS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "ddp": ("ddp", (), ""),
    "zero1": ("zro", (), "The scenario's ZeRO-1 is DeepSpeed's: it reduce-scatters the gradients, all-gathers the "
              "updated partitions and steps its own fp32 copy of each partition. The simulation runs zro, PyTorch's "
              "ZeroRedundancyOptimizer, which all-reduces the gradients and broadcasts the updated parameters, 3(N-1)/N "
              "of the model per rank against 2(N-1)/N, and keeps no copy; the column for what was simulated counts "
              "PyTorch's way (calc's zro)."),
    "zero2": ("fsdp", ("--sharding", "grad-op"), "The scenario's ZeRO-2 is DeepSpeed's; PyTorch has none. FSDP's "
              "grad-op sharding (reshard_after_forward=False), simulated here, shards gradients and optimizer state "
              "as ZeRO-2 does, but rests parameters sharded between steps, as ZeRO-3 does, and all-gathers each unit "
              "in the compute dtype before its forward, where DeepSpeed gathers the stored dtype after the step; the "
              "column for what was simulated counts grad-op (calc's grad-op)."),
    "zero3": ("fsdp", (), ""),
}
DEMO_PRECISIONS = ("fp32", "bf16-mixed", "bf16")
DEMO_OPTIMIZERS = ("adamw", "sgd")


class SimulationDocument(TypedDict):
    """A Simulation as `--json` writes it."""

    demo: str
    args: list[str]
    size: str
    notes: tuple[str, ...]
    command: str


@dataclass(frozen=True)
class Simulation:
    demo: str
    args: tuple[str, ...]
    size: str
    notes: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(("ddpfsdp", "demo", self.demo, *self.args))

    def to_dict(self) -> SimulationDocument:
        return SimulationDocument(demo=self.demo, args=list(self.args), size=self.size, notes=self.notes,
                                  command=self.command)


def nearest_size(params: int) -> str:
    """The simulated GPT size nearest the parameter count, on a log scale."""
    return min(GPT_SIZES, key=lambda size: abs(math.log(GPT_SIZES[size].params / params)))


def simulation(scenario: Scenario) -> Simulation:
    setup = scenario.setup
    size = nearest_size(setup.params)
    demo, extra, strategy_note = DEMOS[scenario.plan]
    precision = setup.precision if setup.precision in DEMO_PRECISIONS else "bf16-mixed"
    optimizer = setup.optimizer if setup.optimizer in DEMO_OPTIMIZERS else "adamw"
    args = ("--simulate", "--world", str(setup.gpus), "--params", size, "--precision", precision, "--optimizer",
            optimizer, "--batch-size", str(setup.micro_batch), "--seq-len", str(setup.seq_len), *extra)
    shape = GPT_SIZES[size]
    notes = [f"The simulation builds this project's {size} GPT ({shape.layers} layers, d_model {shape.d_model}, "
             f"vocabulary {shape.vocab:,}, at sequence length {setup.seq_len:,}) for the scenario's {setup.model} "
             f"({setup.params / 1e9:g}B parameters)."]
    if abs(math.log(shape.params / setup.params)) > math.log(1.5):
        notes.append(f"{size} is the nearest size the simulation has, far from {setup.params / 1e9:g}B: compare its "
                     "figures with the analytic model's for what was simulated, not with your answers.")
    if precision != setup.precision:
        notes.append(f"The demos have no {setup.precision}; the run uses {precision}, which holds "
                     f"{bytes_per_param_breakdown(precision, optimizer)['total']} bytes per parameter with "
                     f"{optimizer} against the scenario's {bytes_per_param_breakdown(setup.precision, setup.optimizer)['total']}, split differently.")
    if optimizer != setup.optimizer:
        notes.append(f"The demos have no {setup.optimizer}; {optimizer} keeps the same two moments per parameter.")
    if strategy_note:
        notes.append(strategy_note)
    notes.append("A simulation measures memory and collectives, not time: the step-time answers have nothing "
                 "here to compare with.")
    return Simulation(demo=demo, args=args, size=size, notes=tuple(notes))


# --- scores ----------------------------------------------------------------------------------------


class SkillScore(TypedDict):
    title: str
    steps: int
    answered: int
    score: float  # the mean over the skill's steps, unanswered ones 0


def skill_scores(steps: Sequence[Step], grades: dict[str, Grade]) -> dict[str, SkillScore]:
    """Per skill: the mean score over its steps (unanswered ones count 0), and how many were answered."""
    scores: dict[str, SkillScore] = {}
    for skill, title in SKILLS.items():
        own = [step for step in steps if step.skill == skill]
        if not own:
            continue
        answered = [grades[step.id] for step in own if step.id in grades]
        scores[skill] = SkillScore(title=title, steps=len(own), answered=len(answered),
                                   score=sum(g.score for g in answered) / len(own))
    return scores


def overall(steps: Sequence[Step], grades: dict[str, Grade]) -> float:
    return sum(grades[s.id].score for s in steps if s.id in grades) / len(steps) if steps else 0.0


# --- what the simulation measured, beside the answers ------------------------------------------------


@dataclass(frozen=True)
class Row:
    figure: str
    yours: float | None  # what the person answered, where a step asked for this figure
    scenario: float | None  # the analytic model for the scenario
    simulated_theory: float | None  # the analytic model for what was simulated
    measured: float | None  # what the simulation measured
    why: str = ""  # what the simulation measures that the model does not, where the two can differ
    comparable: bool = True  # False where the simulation measured another quantity (why says which)

    @property
    def difference(self) -> float | None:
        """Measured against the model for what was simulated, as a fraction; None where not comparable."""
        if self.measured is None or not self.simulated_theory or not self.comparable:
            return None
        return self.measured / self.simulated_theory - 1


def _given(grades: dict[str, Grade], step: Step | None) -> float | None:
    grade = grades.get(step.id) if step else None
    value = grade.given.get("value") if grade is not None and isinstance(grade.given, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _first(scenario: Scenario, kind: str) -> Step | None:
    return next((s for s in scenario.steps if s.kind == kind and s.change is None), None)


def compare(scenario: Scenario, grades: dict[str, Grade], result: DemoResult | Mapping[str, Any]) -> list[Row]:
    """Model state, bytes sent, activations and peak: your answer, the model's, and the simulation's."""
    result = as_result(result)
    config = result.config
    rank = (result.memory or Memory()).rank(0) or RankMemory()
    theory = result.theory or {}
    setup = scenario.setup
    state = [rank.params, rank.grads, rank.optimizer]
    measured_state = sum(state) if all(isinstance(v, (int, float)) for v in state) else None
    wire = [op.wire_bytes_per_rank for op in (result.comm.per_step if result.comm else {}).values()]
    measured_wire = sum(wire) if wire and all(isinstance(w, (int, float)) for w in wire) else None
    scenario_state = model_state(setup.params, setup.gpus, scenario.plan, setup.precision, setup.optimizer)
    plan = planning.memory_plan(params=setup.params, gpus=setup.gpus, strategy=scenario.plan,
                                precision=setup.precision, optimizer=setup.optimizer, gpu_mem=setup.gpu_mem_bytes,
                                **setup.shape_args(), micro_batch=setup.micro_batch)
    simulated_acts = _simulated_activations(config)
    first = {kind: _first(scenario, kind) for kind in ("model-state", "wire-bytes", "activations")}
    rows = [
        Row(f"model state per GPU ({scenario.plan})", _given(grades, first["model-state"]) if scenario.plan == "ddp" else None,
            scenario_state["model_state_bytes"], theory.get("model_state_bytes"), measured_state),
        Row("bytes sent per rank per step", _given(grades, first["wire-bytes"]), first["wire-bytes"].answer,
            theory.get("wire_bytes_per_rank"), measured_wire),
        _activations_row(grades, first["activations"], simulated_acts, rank, config),
        _peak_row(plan["kept_total_bytes"], theory, simulated_acts, rank),
    ]
    return rows


def _at(rank: RankMemory) -> str:
    phase, module = rank.peak_phase or "its step", rank.peak_module
    return f"{phase}{f', at {module}' if module else ''}"


def _activations_row(grades: dict[str, Grade], step: Step | None, model: float | None, rank: RankMemory,
                     config: Config) -> Row:
    """The model's activation peak (early in backward) beside what was live at the simulated step's peak."""
    live = (rank.peak_breakdown or {}).get("activations")
    phase = rank.peak_phase
    if phase in ("forward", "backward"):
        why = (f"The simulation counts the activations live at its step's peak ({_at(rank)}); the model counts every "
               "block's saved tensors and the head's, plus the log-softmax's gradient, as all alive at once early in "
               "backward. Tensors freed or not yet made at the simulated peak make the difference.")
        if config.precision == "bf16-mixed" and config.strategy != "fsdp" and config.params:
            why += (f" Under autocast, the bf16 copies of the weights that the blocks save for backward (up to "
                    f"{gb(2 * config.params)}) are activations to torch's tracker; the model counts them in the "
                    "working set.")
        return Row("activations at the peak", _given(grades, step), step.answer if step else None, model, live, why)
    why = (f"The simulated step peaks in its {phase or 'step'}, after backward has freed the activations "
           f"({gb(live or 0)} live then): its activation peak, early in backward, was lower than its overall peak, "
           "so the simulation has no activation peak to set beside the model's.")
    return Row("activations at the peak", _given(grades, step), step.answer if step else None, model, live, why,
               comparable=False)


def _peak_row(scenario: float, theory: JsonObject, acts: float | None, rank: RankMemory) -> Row:
    """The model's peak (model state + working set + activations) beside the simulated step's, part by part."""
    model = (None if acts is None or theory.get("model_state_bytes") is None
             else theory["model_state_bytes"] + theory.get("working_set_bytes", 0) + acts)
    parts = rank.peak_breakdown or {}
    live = ", ".join(f"{kind} {gb(value)}" for kind, value in parts.items() if value)
    why = (f"At the simulated peak ({_at(rank)}): {live or 'no breakdown'}. The model adds every gradient "
           f"({gb(theory.get('grads_bytes') or 0)}), held between steps; in a step, zero_grad(set_to_none=True) "
           f"(torch's default) has freed them, so only the {gb(parts.get('grads', 0))} made before the peak are live. "
           f"Its working set ({gb(theory.get('working_set_bytes') or 0)}) estimates what the step's temporaries "
           f"({gb(parts.get('temporaries', 0))} at the peak) hold, and its activations are their peak early in "
           "backward, not those live at this moment.")
    return Row("peak per GPU", None, scenario, model, rank.peak, why)


def _simulated_activations(config: Config) -> float | None:
    # the simulated GPT's own shape: the spec's overrides, which the config keeps beside its named fields
    shape = {k: config.extra.get(k) for k in ("layers", "d_model", "vocab")}
    asked = {**shape, "seq_len": config.seq_len, "batch_size": config.batch_size, "precision": config.precision}
    if not all(asked.values()):
        return None
    # FSDP2 applies bf16-mixed by param_dtype (a bf16 residual stream); DDP and ZeRO-1 by autocast.
    strategy = "zero3" if config.strategy == "fsdp" else "ddp"
    return q_transformer_activation_bytes(**asked, strategy=strategy,
                                          checkpoint_activations=bool(config.checkpoint_activations))
