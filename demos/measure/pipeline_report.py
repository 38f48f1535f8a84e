"""`demo pipeline`'s result for a person (rich; no torch): per schedule a table per rank, measured beside
theory, and the recorded step drawn as the whiteboard draws it, one row per rank."""

from __future__ import annotations

from typing import Any

from ddpfsdp.demos.labels import Fitted
from ddpfsdp.demos.units import format_iec

WIDTH = 64  # characters of the drawn step
STYLES = {"F": "green", "L": "green", "B": "blue", "I": "cyan", "W": "magenta"}
LEGEND = ("F forward, B backward, I input-gradient part, W weight-gradient part (zero bubble), L loss; "
          "the digit under it is the micro-batch; · idle (waiting for a neighbour)")


ZERO_BUBBLE_NOTE = ("zero bubble: on stage 0 torch computes nothing in I (no input there needs a gradient) and runs "
                    "the whole backward in W (torch/distributed/pipelining/stage.py, backward_one_chunk).")


def _table(title: str, *columns: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def _sent(row: dict) -> str:
    sent = row["sent"]["activation"]["bytes"] + row["sent"]["gradient"]["bytes"]
    theory = row["sent_theory"]["bytes"]
    return f"{format_iec(sent)} / {format_iec(theory)}"


def rank_table(run: dict) -> Any:
    p = run["pipeline"]
    replicas = f", each stage fully_shard'ed over {p['dp']} replicas" if p.get("dp", 1) > 1 else ""
    table = _table(f"{p['torch_schedule']}: {p['pp']} ranks x {p['stages_per_rank']} stage(s){replicas}, {p['microbatches']} "
                   f"micro-batches of {p['microbatch_size']} samples; step {p['window_s'] * 1e3:.0f} ms",
                   "rank", "stages", "compute", "bubble", "theory", "in flight", "theory", "sent / theory")
    for row in p["ranks"]:
        table.add_row(str(row["rank"]), ",".join(map(str, row["stages"])), f"{row['busy_s'] * 1e3:.0f} ms",
                      f"{row['bubble']:.3f}", f"{row['bubble_theory']:.3f}", str(row["in_flight_chunks"]),
                      f"{row['in_flight_chunks_theory']:g}", _sent(row))
    return table


def drawing(timeline: dict, width: int = WIDTH) -> list[tuple[str, str, str]]:
    """Per rank (label, kinds, micro-batches): one character per slice of the step, the action that
    covers the slice's middle, or · where the rank computes nothing."""
    ranks = timeline.get("ranks") or []
    spans = [s for rank in ranks for s in rank["spans"]]
    if not spans:
        return []
    start = min(s["start_s"] for s in spans)
    slot = (max(s["end_s"] for s in spans) - start) / width or 1.0
    rows = []
    for rank in ranks:
        kinds, mbs = [], []
        for i in range(width):
            t = start + (i + 0.5) * slot
            found = next((s for s in rank["spans"] if s["start_s"] <= t < s["end_s"]), None)
            kinds.append(found["kind"] if found else "·")
            mbs.append(str(found["mb"] % 10) if found else " ")
        rows.append((f"rank {rank['rank']}", "".join(kinds), "".join(mbs)))
    return rows


def render_drawing(timeline: dict, console: Any, title: str) -> None:
    from rich.text import Text

    rows = drawing(timeline)
    if not rows:
        return
    console.print(f"[bold]{title}[/] (time runs right, {WIDTH} slices of the step)")
    for label, kinds, mbs in rows:
        line = Text(f"{label:>7} ")
        for char in kinds:
            line.append(char, style=STYLES.get(char, "dim"))
        console.print(line)
        console.print(Text(f"{'':>7} {mbs}", style="dim"))
    console.print(f"[dim]{LEGEND}[/]")
    if any(kinds.count("W") for _, kinds, _ in rows):
        console.print(f"[dim]{ZERO_BUBBLE_NOTE}[/]")


def compare_table(runs: dict) -> Any:
    table = _table("The same ranks, model and batches under each schedule (bubble per rank, measured / theory)",
                   "schedule", "step", "bubble", "theory", "in flight", "sent per rank")
    for name, run in runs.items():
        p = run["pipeline"]
        rows = p["ranks"]
        table.add_row(name, f"{p['window_s'] * 1e3:.0f} ms", " ".join(f"{r['bubble']:.2f}" for r in rows),
                      f"{p['theory']['bubble_fraction']:.3f}", " ".join(str(r["in_flight_chunks"]) for r in rows),
                      " ".join(format_iec(r["sent"]["activation"]["bytes"] + r["sent"]["gradient"]["bytes"])
                               for r in rows))
    return table


def render(result: dict, console: Any) -> None:
    runs = result.get("runs") or {}
    for name, run in runs.items():
        console.print(Fitted(rank_table(run)))
        render_drawing(run.get("timeline") or {}, console, f"{name}, the recorded step")
    if len(runs) > 1:
        console.print(Fitted(compare_table(runs)))
    reference = result.get("reference_loss") or []
    for name, run in runs.items():
        if run.get("loss") and reference:
            console.print(f"loss per step, {name}: {', '.join(f'{x:.5f}' for x in run['loss'])}; one process: "
                          f"{', '.join(f'{x:.5f}' for x in reference)}")
    console.print("[dim]theory: demos/theory/pipeline.py (equal stages, free sends); bubble = idle share of the "
                  "step from the first compute of any rank to the last; in flight in micro-batches x stages.[/]")
    for note in result.get("notes") or []:
        console.print(f"[dim]{note}[/]")
