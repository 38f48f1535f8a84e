"""Every kata's reference solution passes every check on 2, 3 and 4 gloo ranks, and every planted wrong
solution fails with the check meant for it: a wrong chunk index, too much traffic, a missing division by the
world size, a forbidden call, a deadlock (named within seconds, each rank's wait), an exception (the
learner's frame shown), an endless loop.

The ranks are forked from one server that imported torch once (tests/kata_ranks.py) and run the rank side's
own code; the launcher path is tested in test_kata_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpfsdp.demos.katas.catalog import HEALTH_CHECKS, KATAS
from kata_ranks import KataRanks, check_of, planted

PLANTED = Path(__file__).parent / "data" / "katas"
ABORTING = set(HEALTH_CHECKS)  # a plant failing one of these cannot end cleanly: its own run
PLANTS = [plant for plant in planted(PLANTED) if "static" not in plant[2]]

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def kata_ranks(tmp_path_factory):
    ranks = KataRanks(tmp_path_factory.mktemp("kata-ranks"))
    yield ranks
    ranks.close()


def _failed(result: dict) -> list[str]:
    return [c["name"] for c in result["checks"] if c["passed"] is False]


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_every_reference_solution_passes_every_check(kata_ranks, world_size):
    katas = [kata for kata in KATAS.values() if world_size in kata.world_sizes]
    results = kata_ranks.run([(kata.name, kata.solution_path) for kata in katas], nprocs=world_size, deadline_s=5)
    for kata, result in zip(katas, results):
        assert result is not None, f"{kata.name} on {world_size} ranks left no result"
        verdicts = {c["name"]: c["passed"] for c in result["checks"]}
        assert set(verdicts) == set(kata.all_checks), kata.name
        assert all(verdicts.values()), (kata.name, world_size, [c for c in result["checks"] if not c["passed"]])
        assert result["kata"]["passed"] is True and result["config"]["world_size"] == world_size


def test_every_kata_has_two_planted_wrong_solutions():
    per_kata = dict.fromkeys(KATAS, 0)
    for kata, check, _, _ in planted(PLANTED):
        assert check in KATAS[kata].all_checks, (kata, check)
        per_kata[kata] += 1
    assert min(per_kata.values()) >= 2, per_kata


def test_planted_solutions_that_run_to_their_end_fail_the_check_meant_for_them(kata_ranks):
    clean = [plant for plant in PLANTS if plant[1] not in ABORTING]
    direct = PLANTED / "passing" / "ring-allreduce__torch_distributed_directly.py"
    batched = PLANTED / "passing" / "ring-allreduce__batched_with_dist_p2pop.py"
    *results, direct_result, batched_result = kata_ranks.run(
        [*((kata, path) for kata, _, _, path in clean), ("ring-allreduce", direct), ("ring-allreduce", batched)],
        nprocs=3, deadline_s=5)
    # torch.distributed's own isend and irecv are counted as comm's are, and batches of comm's P2POp or torch's
    # go out as their messages: a right ring passes every check either way.
    for result in (direct_result, batched_result):
        assert all(c["passed"] for c in result["checks"]), result["checks"]
        assert "rank 0 sent 2 for 1 element" in check_of(result, "ring_bytes")["detail"]
    for (kata, check, what, _), result in zip(clean, results):
        assert result is not None, f"{kata}/{what} left no result"
        assert check in _failed(result), (kata, what, [(c["name"], c["passed"], c["detail"]) for c in result["checks"]])
        assert all(c["passed"] for c in result["checks"] if c["name"] in HEALTH_CHECKS), (kata, what)
        assert result["kata"]["passed"] is False


STOPPING = [plant for plant in PLANTS if plant[1] in ABORTING]


@pytest.fixture(scope="module")
def stopped_runs(kata_ranks):
    """Every plant that stops the ranks, each on ranks of its own, all at once: their deadlines pass together."""
    results = kata_ranks.run_at_once([[(kata, path)] for kata, _, _, path in STOPPING], nprocs=3, deadline_s=1.0,
                                     limit_s=30)
    return {plant[3]: result for plant, [result] in zip(STOPPING, results)}


@pytest.mark.parametrize("plant", STOPPING, ids=lambda p: f"{p[0]}-{p[2]}")
def test_a_planted_failure_that_stops_the_ranks_is_reported_within_seconds(stopped_runs, plant):
    kata, check, what, path = plant
    result = stopped_runs[path]
    assert result is not None, f"{kata}/{what}: no result"
    assert _failed(result) == [check], [(c["name"], c["passed"], c["detail"]) for c in result["checks"]]
    assert result["test_wall_s"] < 10
    # The kata's own checks cannot be judged when the code did not run to its end.
    assert all(c["passed"] is None for c in result["checks"] if c["name"] in KATAS[kata].checks)
    detail = check_of(result, check)["detail"]
    if check == "no_deadlock":
        for rank in range(3):
            assert f"rank {rank} " in detail
        if "direct" in what:
            assert "torch.distributed.recv called directly" in detail
        assert "waits" in detail and result["failure"]["lines"][0].startswith("deadlock after the 1 s deadline")
    if check == "no_exception":
        traceback = result["failure"]["traceback"]
        assert traceback.splitlines()[1].strip().startswith(f'File "{path.name}"'), traceback
    if check == "no_forbidden_call":
        assert "not allowed" in detail and path.name in detail
    if check == "finishes":
        assert "still running your code" in detail


def test_a_ring_that_receives_first_names_the_cycle(kata_ranks):
    path = PLANTED / "ring-allreduce__no_deadlock__receive_first.py"
    [result] = kata_ranks.run([("ring-allreduce", path)], nprocs=2, deadline_s=1.0)
    detail = check_of(result, "no_deadlock")["detail"]
    assert detail == ("rank 0 waits to receive from 1 in step 0; rank 1 waits to receive from 0 in step 0: "
                      "every rank receives before it sends")
