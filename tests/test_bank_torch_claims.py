"""What the bank teaches about torch 2.13's own runtime, held against torch: FSDP2's all-gathers under a
pipeline schedule (counted on 2 gloo ranks), and the interleaved schedule's sends and warm-up (torch's own
action lists, built without a process group)."""

from __future__ import annotations

import textwrap
from collections import Counter
from fractions import Fraction
from types import SimpleNamespace

import pytest
from conftest import run_script_on_ranks

from ddpfsdp.demos.theory.pipeline import check_pipeline, p2p_sends
from ddpfsdp.quiz.loader import load_bank

MICROBATCHES = 16  # the bank's pipe-fsdp-reshard case
FSDP_UNITS = 2

RANKS_SCRIPT = textwrap.dedent(
    f"""
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from ddpfsdp.demos.measure.comm import CommCounter

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {{"pipeline": {{}}}}

    # FSDP2 under torch's pipelining: one stage per rank (a pipeline group of its own), sharded over both.
    mesh = init_device_mesh("cpu", (2,))
    alone = [dist.new_group([0]), dist.new_group([1])][rank]
    for schedule in (Schedule1F1B, ScheduleGPipe):
        for reshard in (True, False):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
            fully_shard(model[0], mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model[2], mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
            stage = PipelineStage(model, 0, 1, torch.device("cpu"), group=alone)
            run = schedule(stage, n_microbatches={MICROBATCHES}, loss_fn=lambda y, t: ((y - t) ** 2).mean())
            x, target = torch.randn({MICROBATCHES}, 16), torch.randn({MICROBATCHES}, 16)
            run.step(x, target=target)  # shapes and FSDP's lazy init outside the count
            with CommCounter() as comm:
                run.step(x, target=target)
            out["pipeline"][f"{{schedule.__name__}} {{reshard}}"] = comm.per_op()["all_gather"]["count"]
    """
)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return run_script_on_ranks(RANKS_SCRIPT, tmp_path_factory.mktemp("torch-claims"))


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def _flat(text: str) -> str:
    return " ".join(text.split())


# --- FSDP2 under a pipeline schedule: m + 1 all-gathers with resharding, 1 without ------------------------


def _gathers(actions) -> int:
    """All-gathers of one FSDP unit over a stage's actions: a forward or backward gathers when the weights are
    sharded; a forward frees them after (reshard_after_forward=True), a backward keeps them
    (PipelineStage's set_reshard_after_backward(False))."""
    sharded, count = True, 0
    for action in actions:
        kind = getattr(action, "computation_type", None)
        if kind is None or kind.name not in ("FORWARD", "FULL_BACKWARD"):
            continue
        count += sharded
        sharded = kind.name == "FORWARD"
    return count


def _order(schedule: str, stages: int, microbatches: int) -> dict:
    from torch.distributed.pipelining import schedules

    return getattr(schedules, schedule)(SimpleNamespace(num_stages=stages), microbatches).pipeline_order


@pytest.mark.dist
def test_fsdp_units_gather_m_plus_1_times_a_step_when_they_reshard_after_forward(ranks):
    for out in ranks:
        for schedule in ("Schedule1F1B", "ScheduleGPipe"):
            measured = out["pipeline"][f"{schedule} True"]
            assert measured == FSDP_UNITS * (MICROBATCHES + 1), schedule
            # The rule _gathers counts by gives the measured count on torch's order for this one stage.
            assert measured == FSDP_UNITS * _gathers(_order(schedule, 1, MICROBATCHES)[0]), schedule
            assert out["pipeline"][f"{schedule} False"] == FSDP_UNITS, schedule


def test_every_stage_of_a_1f1b_or_gpipe_pipeline_gathers_m_plus_1_times():
    for schedule in ("Schedule1F1B", "ScheduleGPipe"):
        for stage, actions in _order(schedule, 4, MICROBATCHES).items():
            assert _gathers(actions) == MICROBATCHES + 1, (schedule, stage)


def test_the_bank_counts_17_gathers_and_16_saved(bank):
    answer = _flat(bank.questions["pipe-fsdp-reshard"].model_answer())
    assert "17 all-gathers per unit per step" in answer and "saves 16" in answer
    assert "saves 15" not in answer
    question = bank.questions["pipe-fsdp-reshard"]
    assert "m + 1 = 17" in question.why[question.choices.index(question.answer)]


# --- the interleaved schedule: sends and warm-up from torch's own action list ---------------------------


def _interleaved(pp: int, v: int, m: int):
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    stages = [SimpleNamespace(group_size=pp, group_rank=0, num_stages=pp * v, stage_index=k * pp) for k in range(v)]
    return ScheduleInterleaved1F1B(stages, m)


def _sends(pp: int, v: int, m: int) -> list[int]:
    schedule = _interleaved(pp, v, m)
    return [sum(a.computation_type.name in ("SEND_F", "SEND_B") for a in schedule.pipeline_order_with_comms[r])
            for r in range(pp)]


@pytest.mark.parametrize("pp,v,m", [(8, 4, 32), (8, 1, 32), (4, 2, 8), (4, 3, 12), (2, 4, 8)])
def test_the_model_s_sends_per_rank_are_torch_s(pp, v, m):
    pipeline = check_pipeline(pp, m, "interleaved" if v > 1 else "1f1b", v)
    theory = [p2p_sends(pipeline, rank, 1) for rank in range(pp)]
    assert _sends(pp, v, m) == [t["forward_sends"] + t["backward_sends"] for t in theory]


def test_interleaving_8_ranks_by_4_sends_7x_at_the_ends_4x_between_and_31_7_in_all(bank):
    one, four = _sends(8, 1, 32), _sends(8, 4, 32)  # one stage per rank: 1F1B's sends
    ratios = [Fraction(a, b) for a, b in zip(four, one)]
    assert ratios[0] == ratios[-1] == 7 and set(ratios[1:-1]) == {4}
    assert Fraction(sum(four), sum(one)) == Fraction(31, 7)
    question = bank.questions["pipe-interleaved-trade"]
    assert "every rank sends 4x" not in question.answer
    assert "the end ranks send 7x as often, the others 4x" in question.answer
    answer = _flat(question.model_answer())
    assert "31/7, about 4.4x" in answer and "7x on the first and last ranks" in answer


def test_rank_0_s_interleaved_peak_is_the_warm_up_plus_one_forward(bank):
    from torch.distributed.pipelining.schedules import _get_warmup_ops

    pp, v, m = 8, 4, 32
    actions = [a for a in _interleaved(pp, v, m).pipeline_order[0] if a is not None]
    kinds = [a.computation_type.name for a in actions]
    before_backward = Counter(kinds[:kinds.index("FULL_BACKWARD")])["FORWARD"]
    warmup = _get_warmup_ops(0, v, m // max(1, m // pp), pp, m)
    assert warmup == (v - 1) * pp + 2 * (pp - 1) == 38 and before_backward == warmup + 1 == 39
    assert Fraction(before_backward, v) == pp + Fraction(pp - 1, v)
    answer = _flat(bank.questions["pipe-interleaved-trade"].model_answer())
    assert "(V-1)·R + 2(p-1) + 1 chunks at its peak, 39 here" in answer and "(8 + 7/4 = 9.75)" in answer
