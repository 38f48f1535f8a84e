"""A real run and a simulated run of the same spec, field by field: one `parallelize`, one count of the
bytes a rank holds and of the traffic per group, two worlds.

The real runs are the session's shared launches (tests/demo_runs.py): `demo compare --model tiny` on 2
gloo processes (DDP, ZeRO-1, FSDP grad-op, FSDP full), `demo ddp --model tiny --bucket-mb 1` on 2, and
the 2-D `demo fsdp --model tiny --tp 2` on 4 (dp 2 x tp 2). The simulated ones are the same options with
`--simulate --world N`, run in this process (conftest's `simulated`).

Equal, to the byte: every config field both report that names the run (strategy, sharding, wrap, the
model, its parameters and FSDP units, precision, optimizer, batch, world, the description of what was
built); the model's facts (dim-0 rows, FSDP's padding, the largest tensor, tensor count, parameter and
buffer bytes); rank 0's model state (params, grads, optimizer state) and the parameters it holds after
forward; every collective of a step, per op (count, bytes, wire bytes) and per mesh dimension, and the
sizes of the groups they ran in.

Different, and why:
- backend, simulated, steps: the fake world is one process on the "fake" backend and measures one
  step; a real run takes warm-up, timed and two measured steps on gloo.
- the peak and what it is made of (peak, peak_kind, peak_breakdown, peak_phase, peak_module,
  tracker_peak, breakdown_source): a real CPU rank's peak is the profiler's live tensor bytes, with
  what the allocator and gloo hold; the simulation's is torch's tracker following fake allocations.
- DDP's all-reduce count with small buckets: a simulated step is DDP's first synced iteration, which
  puts every gradient in one bucket; a real run measures after DDP has rebuilt its buckets, one per
  `--bucket-mb` of gradients. The bytes are the same.
- wrap and fsdp_api of a DDP or ZeRO-1 run, sequence_parallel of a 2-D run: how each result reports an
  option the run does not use (the real one from the spec's defaults), so they are left out here.
- throughput, loss, timeline: only a real run computes.
"""

from __future__ import annotations

import pytest

TINY = ("--model", "tiny")  # spelled as the question bank and tests/test_simulate.py launch it
SIMULATED = {"model": "tiny", "simulate": True}

DIFFERENT_CONFIG = {"backend", "simulated", "steps"}
UNUSED_OPTIONS = {"ddp": {"wrap", "fsdp_api"}, "zro": {"wrap", "fsdp_api"}, "fsdp": {"sequence_parallel"}}
NAMES_THE_RUN = ("strategy", "sharding", "arch", "model", "params", "seq_len", "world_size", "device", "precision",
                 "optimizer", "batch_size", "checkpoint_activations", "replicas", "bucket_mb", "description",
                 "units", "unit_params")
FACTS = ("unsharded_params", "shard_row_bytes", "largest_param_bytes", "param_tensors", "buffers",
         "fsdp_padding_elements")
MODEL_STATE = ("params", "grads", "optimizer", "params_after_forward")
PEAK = {"peak", "peak_kind", "peak_breakdown", "peak_phase", "peak_module", "tracker_peak", "breakdown_source"}


def differences(real: dict, simulated: dict, *, ddp_counts_differ: bool = False) -> list[str]:
    """Every field that must agree between a real run and the simulated run of its spec and does not."""
    found = []

    def same(where: str, a, b) -> None:
        if a != b:
            found.append(f"{where}: real {a!r}, simulated {b!r}")

    config, sim_config = real["config"], simulated["config"]
    assert (config["backend"], sim_config["backend"], sim_config["simulated"]) == ("gloo", "fake", True)
    assert sim_config["steps"] == 1 < config["steps"]
    for key in NAMES_THE_RUN + (("wrap", "fsdp_api") if config["strategy"] == "fsdp" else ()):
        if key not in config or key not in sim_config:
            found.append(f"config.{key}: reported by {'neither' if key not in sim_config else 'the simulation'} only")
    skip = DIFFERENT_CONFIG | UNUSED_OPTIONS[config["strategy"]]
    for key in sorted((set(config) & set(sim_config)) - skip):
        same(f"config.{key}", config[key], sim_config[key])

    memory, sim_memory = real["memory"], simulated["memory"]
    for key in FACTS:
        same(f"memory.{key}", memory.get(key), sim_memory.get(key))
    rank, sim_rank = memory["ranks"][0], sim_memory["ranks"][0]
    for key in MODEL_STATE:
        assert rank[key] > 0, key
        same(f"memory.ranks[0].{key}", rank.get(key), sim_rank.get(key))
    for key in sorted((set(rank) & set(sim_rank)) - PEAK - set(MODEL_STATE)):
        same(f"memory.ranks[0].{key}", rank[key], sim_rank[key])
    # Both peaks are measured, each its own way, and hold at least the model state at rest.
    for held in (rank, sim_rank):
        assert held["peak"] > held["params"] + held["optimizer"]
    assert sim_rank["peak_kind"].startswith("simulated") and not rank["peak_kind"].startswith("simulated")

    comm, sim_comm = real["comm"], simulated["comm"]
    same("comm.group_sizes", comm["group_sizes"], sim_comm["group_sizes"])
    same("comm.per_group", comm.get("per_group"), sim_comm.get("per_group"))
    same("comm ops", sorted(comm["per_step"]), sorted(sim_comm["per_step"]))
    for op in set(comm["per_step"]) & set(sim_comm["per_step"]):
        figures, sim_figures = dict(comm["per_step"][op]), dict(sim_comm["per_step"][op])
        if ddp_counts_differ and op == "all_reduce":
            # several rebuilt buckets, against the first iteration's one
            assert (figures.pop("count") > 1, sim_figures.pop("count")) == (True, 1)
        same(f"comm.per_step.{op}", figures, sim_figures)
    for only_real in ("throughput", "loss", "timeline"):
        assert only_real in real and only_real not in simulated
    return found


@pytest.mark.dist
@pytest.mark.timeout(400)
def test_the_four_strategies_of_compare_agree_real_and_simulated(demo_result, simulated):
    real = demo_result("compare", *TINY)["runs"]
    fake = simulated("compare", {**SIMULATED, "world": 2})["runs"]
    assert list(real) == list(fake) == ["ddp", "zro", "fsdp-grad-op", "fsdp-full"]
    found = [f"{name}: {line}" for name in real for line in differences(real[name], fake[name])]
    assert not found, "\n".join(found)


@pytest.mark.dist
@pytest.mark.timeout(400)
def test_ddp_with_small_buckets_agrees_but_for_its_bucket_count(demo_result, simulated):
    real = demo_result("ddp", *TINY, "--bucket-mb", "1")  # tests/test_training.py's launch
    fake = simulated("ddp", {**SIMULATED, "world": 2, "bucket_mb": 1})
    assert not (found := differences(real, fake, ddp_counts_differ=True)), "\n".join(found)


@pytest.mark.dist
@pytest.mark.timeout(400)
def test_the_2d_run_agrees_real_and_simulated_per_mesh_dimension(demo_result, simulated):
    real = demo_result("fsdp", *TINY, "--tp", "2", procs=4)  # tests/test_two_d_run.py's launch
    fake = simulated("fsdp", {**SIMULATED, "world": 4, "tp": 2})
    assert set(real["comm"]["per_group"]) == {"dp", "tp"}
    assert not (found := differences(real, fake)), "\n".join(found)


def test_a_moved_figure_is_found():
    """The comparison itself, on a real-shaped pair: one byte, one call or one unit apart is named."""
    rank = {"params": 8, "grads": 8, "optimizer": 16, "params_after_forward": 8, "peak": 100}
    real = {
        "config": {"backend": "gloo", "steps": 8, "strategy": "fsdp", "wrap": "block", "fsdp_api": 2,
                   **{key: 1 for key in NAMES_THE_RUN if key != "strategy"}},
        "memory": {"ranks": [{**rank, "peak_kind": "cpu live tensor bytes (profiler)"}], **dict.fromkeys(FACTS, 4)},
        "comm": {"group_sizes": {"all_gather": [2]},
                 "per_step": {"all_gather": {"count": 12, "bytes": 64, "wire_bytes_per_rank": 32.0}}},
        "throughput": {}, "loss": [], "timeline": None,
    }
    fake = {**real, "config": {**real["config"], "backend": "fake", "simulated": True, "steps": 1},
            "memory": {**real["memory"], "ranks": [{**rank, "peak": 90, "peak_kind": "simulated: ..."}]}}
    for key in ("throughput", "loss", "timeline"):
        del fake[key]
    assert differences(real, fake) == []
    moved = {**fake, "memory": {**fake["memory"], "ranks": [{**fake["memory"]["ranks"][0], "optimizer": 17}]},
             "comm": {**fake["comm"], "per_step": {"all_gather": {"count": 11, "bytes": 64, "wire_bytes_per_rank": 32.0}}},
             "config": {**fake["config"], "units": 2}}
    assert differences(real, moved) == [
        "config.units: real 1, simulated 2",
        "memory.ranks[0].optimizer: real 16, simulated 17",
        "comm.per_step.all_gather: real {'count': 12, 'bytes': 64, 'wire_bytes_per_rank': 32.0}, "
        "simulated {'count': 11, 'bytes': 64, 'wire_bytes_per_rank': 32.0}",
    ]
