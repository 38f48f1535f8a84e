"""Stored demo results for the app's tests: the shape of ddpfsdp.demo/1, with the figures of a real
run of the tiny model on 2 gloo ranks (rounded), so screens and charts are tested without a demo."""

from __future__ import annotations

MIB = 2**20
HOST = "study-box"
CPUS = 8
ENV = {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": CPUS, "hostname": HOST}
UNITS = ("embeddings", "blocks.0", "blocks.1", "head")

# Bytes of rank 0 per strategy, from `ddpfsdp demo compare --model tiny --procs 2` (fp32, AdamW).
STATE = {
    "ddp": (3_730_432, 3_730_432, 7_461_076),
    "zro": (3_730_432, 3_730_432, 3_735_592),
    "fsdp-grad-op": (1_865_216, 1_865_216, 3_730_644),
    "fsdp-full": (1_865_216, 1_865_216, 3_730_644),
}
BREAKDOWN = {
    "ddp": {"params": 3_730_432, "optimizer": 7_461_076, "ddp_buckets": 3_730_432, "activations": 9_247_752,
            "temporaries": 1_048_576},
    "zro": {"params": 3_730_432, "grads": 3_730_432, "optimizer": 3_735_592, "ddp_buckets": 3_730_432,
              "activations": 5_600_000},
    "fsdp-grad-op": {"params": 1_865_216, "unsharded_params": 3_730_432, "grads": 1_865_216, "optimizer": 3_730_644,
                     "reduce_scatter": 466_304, "activations": 7_989_000},
    "fsdp-full": {"params": 1_865_216, "unsharded_params": 932_608, "grads": 1_865_216, "optimizer": 3_730_644,
                  "all_gather": 932_608, "reduce_scatter": 466_304, "buffers": 4_096, "inputs": 2_048,
                  "activations": 6_400_000, "temporaries": 524_288, "transient": 262_144},
}
WIRE = {
    "ddp": {"all_reduce": {"count": 1, "bytes": 3_730_432, "wire_bytes_per_rank": 3_730_432}},
    "zro": {"all_reduce": {"count": 1, "bytes": 3_730_432, "wire_bytes_per_rank": 3_730_432},
              "broadcast": {"count": 53, "bytes": 3_730_432, "wire_bytes_per_rank": 1_865_216}},
    "fsdp-grad-op": {"all_gather": {"count": 6, "bytes": 3_730_432, "wire_bytes_per_rank": 1_865_216},
                     "reduce_scatter": {"count": 6, "bytes": 3_730_432, "wire_bytes_per_rank": 1_865_216}},
    "fsdp-full": {"all_gather": {"count": 12, "bytes": 7_460_864, "wire_bytes_per_rank": 3_730_432},
                  "reduce_scatter": {"count": 6, "bytes": 3_730_432, "wire_bytes_per_rank": 1_865_216}},
}
SAMPLES_PER_S = {"ddp": 39.2, "zro": 23.0, "fsdp-grad-op": 15.5, "fsdp-full": 16.0}


def recorded_step(rank: int, strategy: str = "ddp") -> dict:
    """One recorded step: four units forward and backward, the collectives of the strategy, memory
    rising in forward and falling in backward, and the parameter bytes held at each unit's edges."""
    sharded = strategy.startswith("fsdp")
    spans, collectives, t = [], [], 0.002 + 0.001 * rank
    spans.append({"name": "forward", "phase": "forward", "unit": None, "start_s": 0.001, "end_s": 0.041,
                  "seq_start": 0, "seq_end": 9})
    for index, unit in enumerate(UNITS):
        spans.append({"name": unit, "phase": "forward", "unit": unit, "start_s": t, "end_s": t + 0.008,
                      "seq_start": 1 + 2 * index, "seq_end": 2 + 2 * index})
        if sharded:
            collectives.append({"op": "all_gather", "bytes": 932_608, "group_size": 2, "group": "0",
                                "issued_s": t - 0.002, "completed_s": t - 0.0005, "seq": 2 * index})
        t += 0.010
    spans.append({"name": "backward", "phase": "backward", "unit": None, "start_s": 0.042, "end_s": 0.090,
                  "seq_start": 10, "seq_end": 20})
    t = 0.043
    for index, unit in enumerate(reversed(UNITS)):
        spans.append({"name": unit, "phase": "backward", "unit": unit, "start_s": t, "end_s": t + 0.011,
                      "seq_start": 11 + 2 * index, "seq_end": 12 + 2 * index})
        op = "reduce_scatter" if sharded else "all_reduce"
        if sharded or index % 2:
            collectives.append({"op": op, "bytes": 1_865_216, "group_size": 2, "group": "0",
                                "issued_s": t + 0.011, "completed_s": t + 0.016, "seq": 12 + 2 * index})
        t += 0.012
    spans.append({"name": "optimizer", "phase": "optimizer", "unit": None, "start_s": 0.092, "end_s": 0.105,
                  "seq_start": 21, "seq_end": 22})
    memory = [[i * 0.005, (20 + (i if i < 9 else 18 - i)) * MIB] for i in range(22)]
    full, shard, unit = 3_730_432, 1_865_216, 466_304
    if strategy == "fsdp-full":  # each unit gathered for its forward, freed right after
        during, after = [shard + unit] * 4, [shard] * 4
    elif strategy == "fsdp-grad-op":  # each unit kept until backward: the held bytes climb
        during, after = [shard + unit * (i + 1) for i in range(4)], [shard + unit * (i + 1) for i in range(4)]
    else:  # DDP and ZeRO-1 hold every parameter throughout
        during, after = [full] * 4, [full] * 4
    held = [[0.003 + 0.01 * i, during[i], f"{u} forward"] for i, u in enumerate(UNITS)]
    held += [[0.008 + 0.01 * i, after[i], f"{u} after forward"] for i, u in enumerate(UNITS)]
    return {"rank": rank, "clock": "host", "duration_s": 0.106 + 0.004 * rank, "spans": spans,
            "collectives": collectives, "memory": {"kind": "cpu live tensor bytes (profiler)", "samples": memory},
            "params": sorted(held)}


def training_run(strategy: str = "ddp", *, timeline: bool = True) -> dict:
    """The result of `ddpfsdp demo ddp` (or one run of compare) on 2 CPU processes."""
    params, grads, optimizer = STATE[strategy]
    breakdown = BREAKDOWN[strategy]
    rank = {"params": params, "grads": grads, "optimizer": optimizer, "peak": sum(breakdown.values()),
            "peak_breakdown": breakdown, "peak_phase": "backward",
            "peak_module": "blocks.1.mlp" if strategy == "fsdp-full" else None}
    name, _, sharding = strategy.partition("-")
    full_state = sum(STATE["ddp"])
    run = {
        "schema": "ddpfsdp.demo/1",
        "demo": name,
        "config": {"strategy": name, "sharding": sharding or None, "world_size": 2, "device": "cpu",
                   "backend": "gloo", "model": "tiny", "precision": "fp32", "optimizer": "adamw"},
        "env": ENV,
        "memory": {"ranks": [rank, rank]},
        "throughput": {"samples_per_s": SAMPLES_PER_S[strategy], "step_time_s": {"median": 0.2}},
        "comm": {"per_step": WIRE[strategy]},
        "theory": {"model_state_bytes": full_state / 2 if strategy.startswith("fsdp") else (
            full_state - STATE["ddp"][2] / 2 if strategy == "zro" else full_state),
            "comm": WIRE[strategy]},
        "checks": [{"name": "ddp_uses_all_reduce" if name == "ddp" else "model_state_matches_theory", "passed": True,
                    "detail": "1 all_reduce calls per step; no all_gather or reduce_scatter", "values": {}}],
    }
    if timeline:
        run["timeline"] = {"step": 6, "units": list(UNITS), "ranks": [recorded_step(0, strategy), recorded_step(1, strategy)]}
    return run


def compare_result() -> dict:
    runs = {name: training_run(name) for name in STATE}
    return {"schema": "ddpfsdp.demo/1", "demo": "compare",
            "config": {"world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny",
                       "strategies": list(STATE)},
            "env": ENV, "runs": runs,
            "checks": [{"name": "fsdp_wire_1_5x_ddp", "passed": True,
                        "detail": "FSDP full sends 5.336 MiB per rank per step, DDP 3.558 MiB: 1.500x", "values": {}}]}


def wrap_result() -> dict:
    """A concept demo: its own measured figures and checks, no training run."""
    return {
        "schema": "ddpfsdp.demo/1",
        "demo": "wrap",
        "config": {"world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny"},
        "env": ENV,
        "checks": [
            {"name": "per_block_peak_below_root_only", "passed": True,
             "detail": "peak 1.20 MiB with per-block units vs 2.50 MiB root only", "values": {}},
            {"name": "collectives_scale_with_units", "passed": True,
             "detail": "all_gather per step: 2 with 1 unit, 8 with 4 units", "values": {}},
        ],
        "peak_bytes": {"root_only": 2_621_440, "per_block": 1_258_291},
    }


def placed_result(demo: str, config: dict, env: dict, checks: list, **fields):
    """A result as the one place results are made (`result.build`) makes it, placed where `config` says
    the run was (a simulated run's on a fake world, else its device, 2 ranks unless it says)."""
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.result.build import build

    config = config.to_json() if hasattr(config, "to_json") else dict(config)
    device = "fake" if config.get("simulated") else config.get("device") or "cpu"
    if device == "cuda" and config.get("backend") == "gloo":  # ranks sharing a GPU
        placement = Placement("cuda", config.get("world_size") or 2, config.get("ranks_per_gpu") or 2)
    else:
        placement = Placement(device, config.get("world_size") or 2)
    return build(demo, placement, env, config, checks, **fields)
