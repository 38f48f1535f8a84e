"""What the bank teaches about torch 2.13's own runtime, held against torch: DDP's first iteration, FSDP2's
all-gathers under a pipeline schedule (both counted on 2 gloo ranks, in one launch), and the interleaved
schedule's sends and warm-up (torch's own action lists, built without a process group)."""

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
    from torch.nn.parallel import DistributedDataParallel
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from ddpfsdp.demos.measure.comm import CommCounter

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {{"ddp": {{}}, "pipeline": {{}}}}

    # DDP: eight 1024 x 1024 Linear layers, 32 MiB of fp32 gradients, past the 25 MiB cap.
    for name, options in (("default", {{}}), ("cap_1", {{"bucket_cap_mb": 1}}),
                          ("find_unused", {{"find_unused_parameters": True}})):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
        ddp = DistributedDataParallel(model, **options)
        calls = []
        for _ in range(3):
            with CommCounter() as comm:
                ddp(torch.randn(2, 1024)).sum().backward()
            calls.append(comm.per_op().get("all_reduce", {{}}).get("count", 0))
        data = ddp._get_ddp_logging_data()
        out["ddp"][name] = {{
            "all_reduces": calls,
            "construction_buckets": [int(x) for x in data["bucket_sizes"].split(", ")],
            "rebuilt_buckets": [int(x) for x in str(data.get("rebuilt_bucket_sizes") or "").split(", ") if x],
            "grad_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        }}

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


# --- DDP: the first iteration is one bucket ------------------------------------------------------------


@pytest.mark.dist
def test_ddp_s_first_iteration_is_one_all_reduce_and_the_rebuild_brings_the_buckets(ranks):
    for out in ranks:
        default, cap_1 = out["ddp"]["default"], out["ddp"]["cap_1"]
        # Construction: one bucket of every gradient ([sys.maxsize]), whether or not the cap is given.
        for run in (default, cap_1):
            assert run["construction_buckets"] == [run["grad_bytes"]]
        # Iteration 1 all-reduces it once; the second forward rebuilds capped buckets: a first bucket of one
        # 4 MiB layer (it passes the 1 MiB cap alone), then the other seven; at bucket_cap_mb=1 one per layer.
        assert default["all_reduces"] == [1, 2, 2] and len(default["rebuilt_buckets"]) == 2
        assert default["rebuilt_buckets"][0] == default["grad_bytes"] // 8
        assert cap_1["all_reduces"] == [1, 8, 8] and len(cap_1["rebuilt_buckets"]) == 8


@pytest.mark.dist
def test_ddp_with_find_unused_parameters_buckets_from_the_start_and_never_rebuilds(ranks):
    for out in ranks:
        run = out["ddp"]["find_unused"]
        assert len(run["construction_buckets"]) > 1 and run["rebuilt_buckets"] == []
        assert len(set(run["all_reduces"])) == 1 and run["all_reduces"][0] > 1


def test_torch_s_bucket_limits_are_one_bucket_for_the_first_iteration():
    import sys

    from torch.nn.parallel.distributed import _BucketCapacityConfig

    def limits(cap_mb, find_unused):
        config = _BucketCapacityConfig.create(cap_mb, None, False)
        return config.compute_bucket_size_limits(static_graph=False, find_unused_parameters=find_unused)[0]

    assert limits(None, False) == limits(1, False) == limits(25, False) == [sys.maxsize]
    assert limits(None, True) == [2**20, 25 * 2**20]


def test_the_bank_teaches_the_one_bucket_first_iteration(bank):
    question = bank.questions["ddp-bucket-rebuild"]
    assert question.answer.startswith("In one bucket of every gradient")
    assert "[sys.maxsize]" in question.why[question.choices.index(question.answer)]
    rebuild = _flat(question.model_answer())
    assert "the first iteration all-reduces every gradient at once, after the whole backward" in rebuild
    assert "[sys.maxsize]" in rebuild and "does not change the first iteration" in rebuild
    count = _flat(bank.questions["comm-bucket-count"].model_answer())
    assert "[sys.maxsize]" in count and "the first all-reduces every gradient in one bucket" in count
    assert "which DDP calls with `bucket_cap_mb=25` (25 MiB) and a 1 MiB first bucket" not in count


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
