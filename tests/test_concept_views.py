"""A concept demo's measurements read back as typed fields (demos/concepts/measured.py): the renderers
read them, from the JSON form and the typed result alike, and reading one loses nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ddpfsdp.demos.concepts import render
from ddpfsdp.demos.concepts.measured import NoSync, Traffic, Trials
from ddpfsdp.demos.result.schema import as_result
from saved_results import placed_result

SAVED = Path(__file__).parent / "data" / "saved"
OP = {"count": 1, "bytes": 4096, "wire_bytes_per_rank": 2048.0}
PLACED = {"world_size": 2, "device": "cpu", "backend": "gloo"}


def _result(demo: str, config: dict, **measured) -> dict:
    return placed_result(demo, {**PLACED, **config}, {}, [], **measured).to_json()


COMM = _result("comm", {"params": 1024}, param_bytes=4096, fsdp_to_ddp_wire_ratio=1.5, runs={
    "ddp": {"describe": "DDP", "comm": {"all_reduce": OP}, "wire_bytes_per_rank": 2048.0,
            "theory": {"all_reduce": {**OP, "wire_bytes_per_rank": 4096.0}}},
    "fsdp": {"describe": "FSDP", "comm": {"all_gather": OP, "reduce_scatter": OP}, "wire_bytes_per_rank": 4096.0,
             "theory": {}},
})
NO_SYNC = _result("no-sync", {"micro_batches": 4}, runs={
    "ddp": {"sync every micro-batch": {"comm": {"all_reduce": {**OP, "count": 4}}, "describe": "DDP"},
            "skip sync until the last": {"comm": {"all_reduce": OP}, "describe": "DDP"}},
}, gradient_diff_by_rank={"ddp": [{"max_abs_diff": 1e-7, "max_abs_grad": 0.5, "numel": 10},
                                  {"max_abs_diff": 3e-7, "max_abs_grad": 0.5, "numel": 10}]})
EQUIVALENCE = _result("equivalence", {"global_batch_size": 8}, single_process={"losses": [2.0, 1.5],
                      "max_abs_weight_update": 0.01},
                      ddp={"losses": [2.0, 1.5], "max_abs_weight_diff": 1e-8},
                      fsdp={"losses": [2.0, 1.5000001], "max_abs_weight_diff": 2e-8})
CHECKPOINT = _result("checkpoint", {"strategy": "ddp", "blocks": 2}, step_time_ratio=1.3, configs=[
    {"label": label, "peak_bytes_by_rank": [peak, peak - 10], "matmuls": {"forward": 8, "backward": backward},
     "block_matmuls": {"forward": 6, "backward": recomputed}, "step_time_s": {"median": 0.01, "min": 0.01, "max": 0.02}}
    for label, peak, backward, recomputed in (("off", 3 * 2**20, 16, 0), ("on", 2 * 2**20, 22, 6))
])
ALLREDUCE = _result("allreduce", {}, buffer_bytes=64, sent_bytes_per_rank=[64, 64],
                    intercepted_send_bytes_per_rank=[64, 64],
                    theory={"ring_wire_bytes_per_rank": 64.0, "formula": "2(N-1)/N x buffer bytes"})
REDUCE_SCATTER = _result("reduce-scatter", {}, buffer_bytes=64,
                         sent_bytes_per_rank={"reduce_scatter": [32, 32], "all_gather": [32, 32]},
                         theory={"wire_bytes_per_rank_each": 32.0})


def _printed(renderer, result) -> str:
    out = io.StringIO()
    renderer(result, Console(file=out, width=140, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("renderer, result, shown", [
    (render.render_comm, COMM, ["all_reduce", "MiB (theory)", "1.500x"]),
    (render.render_no_sync, NO_SYNC, ["4 micro-batches", "3e-07"]),
    (render.render_equivalence, EQUIVALENCE, ["global batch 8", "1.5000001", "2e-08"]),
    (render.render_checkpoint, CHECKPOINT, ["DDP, 2 blocks", "3.00 MiB", "x1.30"]),
    (render.render_allreduce, ALLREDUCE, ["64 B on 2 ranks", "1.000"]),
    (render.render_reduce_scatter, REDUCE_SCATTER, ["reduce_scatter", "rank 1"]),
])
def test_each_concept_table_reads_its_fields_from_json_and_typed_alike(renderer, result, shown):
    text = _printed(renderer, result)
    assert all(part in text for part in shown), text
    assert _printed(renderer, as_result(result)) == text


def test_a_saved_wrap_result_reads_back_whole():
    saved = json.loads((SAVED / "wrap_procs2.json").read_text())
    trials = Trials.of(saved)
    assert trials.config.params and [t.label for t in trials.configs]
    assert all(t.peak_bytes == max(t.peak_bytes_by_rank) for t in trials.configs)
    assert trials.to_json() == saved


@pytest.mark.parametrize("view, result", [(Traffic, COMM), (NoSync, NO_SYNC)])
def test_a_view_of_runs_keeps_their_own_shape(view, result):
    read = view.of(result)
    assert read.to_json() == result
    assert view.of(as_result(result)).to_json() == result


def test_no_sync_worst_difference_is_the_largest_over_ranks():
    assert NoSync.of(NO_SYNC).worst_gradient_diff("ddp") == pytest.approx(3e-7)
    assert NoSync.of(NO_SYNC).worst_gradient_diff("fsdp") == 0.0
