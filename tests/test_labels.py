"""At 80 columns no label is cut inside a word: the demos' tables, the check tables and the bank's quotes.

Each case here was cut mid-word before: "checkpoin… off", "configurati…", "reduce-scatt…",
"ddp_overlaps_allreduce_with_backw…", "This is typ'", and a quoted error running off the screen.
"""

from __future__ import annotations

import io
import re

from rich.console import Console
from saved_results import compare_result

from ddpfsdp.demos.concepts import render
from ddpfsdp.demos.faults import verdicts
from ddpfsdp.demos.base.labels import pieces, widest_piece, wrap_label
from ddpfsdp.demos.measure import report
from ddpfsdp.quiz import evidence as ev
from ddpfsdp.demos.result.schema import check_from_json
from ddpfsdp.quiz.commands.results import check_table
from ddpfsdp.quiz.loader import load_bank
from ddpfsdp.quiz.widgets.evidence import checks_table

MIB = 2**20
LONG_CHECK = "ddp_overlaps_allreduce_with_backward"


def printed(renderable, width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def cut_words(text: str) -> list[str]:
    """Words that end in an ellipsis without being followed by a space: "checkpoin…", "configurati…"."""
    return re.findall(r"\S+…", text)


def cells(text: str, column: int, joint: str = "") -> str:
    """The text of one column of a boxed table, its lines joined by `joint`."""
    rows = [re.split(r"[│┃]", line) for line in text.splitlines() if line.count("│") + line.count("┃") > column]
    return joint.join(row[column].strip() for row in rows)


def test_a_label_breaks_after_a_boundary_and_never_inside_a_word():
    assert pieces("ddp_uses_all") == ["ddp_", "uses_", "all"]
    assert wrap_label(LONG_CHECK, 20) == ["ddp_overlaps_", "allreduce_with_", "backward"]
    assert wrap_label("peak: reduce-scatter buffer", 14) == ["peak: reduce-", "scatter buffer"]
    assert wrap_label("short", 20) == ["short"]
    assert widest_piece(LONG_CHECK) == len("allreduce_")
    # One word wider than the column is folded: all of it stays on screen.
    assert "".join(wrap_label("configuration", 5)) == "configuration"


def test_the_checkpoint_table_keeps_its_settings_whole_at_80_columns():
    config = {"peak_bytes_by_rank": [25 * MIB, 24 * MIB], "matmuls": {"forward": 21, "backward": 34},
              "block_matmuls": {"backward": 0}, "step_time_s": {"median": 0.487}}
    result = {"config": {"strategy": "fsdp", "blocks": 4, "backend": "gloo"}, "step_time_ratio": 0.75,
              "configs": [{**config, "label": "checkpointing off"}, {**config, "label": "checkpointing on"}]}
    console = Console(width=80, file=io.StringIO(), color_system=None)
    render.render_checkpoint(result, console)
    text = console.file.getvalue()
    assert not cut_words(text), text
    assert text.count("checkpointing") >= 2
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_wrap_table_keeps_its_headers_whole_at_80_columns():
    comm = {"all_gather": {"count": 8, "bytes": 3 * MIB}, "reduce_scatter": {"count": 4, "bytes": 3 * MIB}}
    configs = [{"label": label, "units_with_params": units, "comm": comm, "peak_bytes_by_rank": [12 * MIB],
                "largest_unit_params": 932608 // units, "largest_unit_bytes": 4 * 932608 // units}
               for label, units in (("root only", 1), ("per block", 5))]
    console = Console(width=80, file=io.StringIO(), color_system=None)
    render.render_wrap({"config": {"params": 932608, "backend": "gloo"}, "configs": configs}, console)
    text = console.file.getvalue()
    assert not cut_words(text), text
    assert "configuration" in text and "reduce-scatters" in text


def test_the_compare_table_keeps_its_figures_whole_at_80_columns():
    result = compare_result()
    for run in result["runs"].values():
        for rank in run["memory"]["ranks"]:
            rank["peak_breakdown"] = {**rank["peak_breakdown"], "reduce_scatter": 257 * 1024}
    console = Console(width=80, file=io.StringIO(), color_system=None)
    report.render_compare(result, console)
    text = console.file.getvalue()
    assert not cut_words(text), text
    assert "reduce-scatter" in cells(text, 1)


def test_the_demo_check_table_shows_a_long_check_name_whole_at_80_columns():
    checks = [{"name": LONG_CHECK, "passed": True, "detail": "4 buckets: the first all-reduce was issued with 4 "
               "units' backward still to run; share of all-reduce time under backward per rank: 89%, 86%"},
              {"name": "timeline_records_every_collective", "passed": True, "detail": "2 ranks recorded"}]
    text = printed(check_table([check_from_json(c) for c in checks]))
    assert not cut_words(text), text
    assert LONG_CHECK in cells(text, 2)


def test_the_evidence_panel_shows_a_long_check_name_whole():
    items = [ev.EvidenceItem(name=LONG_CHECK, passed=True, detail="4 buckets: the first all-reduce was issued early", values={},
                             claim="the first bucket's all-reduce is issued while backward still computes")]
    for width in (72, 60):
        text = printed(checks_table(items, "Claims checked against this run"), width)
        assert not cut_words(text), text
        assert LONG_CHECK in cells(text, 1)
        assert "the first bucket's all-reduce is issued while backward" in cells(text, 1, " ")


def test_the_timeout_check_shortens_another_ranks_error_after_a_whole_word():
    closed = {"type": "RuntimeError", "message": "[/gloo/pair.cc:553] Connection closed by peer [127.0.0.1]:15065. "
              "This is typically caused by a remote worker crashing."}
    timeout = {"type": "RuntimeError", "message": "[/gloo/unbound_buffer.cc:78] Timed out waiting 3000ms for recv"}
    block = {"timeout_s": 3.0,
             "broken": {"ranks": [{"rank": 0, "error": closed, "wall_s": 3.1, "measured": {}},
                                  {"rank": 1, "error": timeout, "wall_s": 3.1, "measured": {}}]},
             "fixed": {"ranks": [{"rank": 0, "error": None, "wall_s": 1.0, "measured": {}},
                                 {"rank": 1, "error": None, "wall_s": 1.0, "measured": {}}]}}
    detail = verdicts.hung_until_timeout("desync_times_out", block).detail
    assert "This is…'" in detail, detail
    assert "This is typ'" not in detail


def test_the_desync_quotes_fit_80_columns():
    """The quoted errors are a fenced block, which the app does not wrap: 70 characters fit at 80 columns."""
    bank = load_bank()
    for qid in ("fault-desync-cause", "fault-timeout-walkthrough"):
        blocks = re.findall(r"```text\n(.*?)\n```", bank.questions[qid].prompt, flags=re.DOTALL)
        assert blocks, qid
        too_long = [line for block in blocks for line in block.splitlines() if len(line) > 70]
        assert not too_long, (qid, too_long)
