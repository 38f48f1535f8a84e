"""`demo pipeline`'s result for a person (rich; no torch): per schedule a table per rank, measured beside
theory, and the recorded step drawn as the whiteboard draws it, one row per rank.

The renderer reads `PipelineView`, the typed view of what it shows; `PipelineView.of(result)` reads one
back from the result, typed or in its JSON form (a saved result included). Keys a view does not name stay
in its `extra`, so reading a result loses nothing. `render` prints it for the CLI; `evidence_view` gives
the quiz's evidence panel the same figures and drawing, fitted to the panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ddpfsdp.demos.base.labels import Fitted
from ddpfsdp.demos.result.schema import Block, DemoResult
from ddpfsdp.demos.base.units import format_iec

WIDTH = 64  # characters of the drawn step
STYLES = {"F": "green", "L": "green", "B": "blue", "I": "cyan", "W": "magenta"}
LEGEND = ("F forward, B backward, I input-gradient part, W weight-gradient part (zero bubble), L loss; "
          "the digit under it is the micro-batch; · idle (waiting for a neighbour)")


ZERO_BUBBLE_NOTE = ("zero bubble: on stage 0 torch computes nothing in I (no input there needs a gradient) and runs "
                    "the whole backward in W (torch/distributed/pipelining/stage.py, backward_one_chunk).")


# ----------------------------------------------------------------------------- the view


@dataclass
class P2PTotal(Block):
    """Sends (or recvs) of one kind in the recorded step: how many, and their tensor bytes."""

    count: int = 0
    bytes: int = 0


@dataclass
class Sent(Block):
    activation: P2PTotal = field(default_factory=P2PTotal)
    gradient: P2PTotal = field(default_factory=P2PTotal)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"activation": ("one", P2PTotal),
                                                         "gradient": ("one", P2PTotal)}

    @property
    def bytes(self) -> int:
        return self.activation.bytes + self.gradient.bytes


@dataclass
class SentTheory(Block):
    """theory.pipeline.p2p_sends for one rank."""

    forward_sends: int = 0
    backward_sends: int = 0
    forward_bytes: int = 0
    backward_bytes: int = 0
    bytes: int = 0


@dataclass
class RankFigures(Block):
    """One rank of a schedule's run, measured beside theory (`claims.pipeline.RankRow`)."""

    rank: int = 0
    pp_rank: int = 0
    dp_rank: int = 0
    stages: list[int] = field(default_factory=list)
    busy_s: float = 0.0
    bubble: float = 0.0
    bubble_theory: float = 0.0
    in_flight_chunks: int = 0
    in_flight_chunks_theory: float = 0.0
    sent: Sent = field(default_factory=Sent)
    received: Sent = field(default_factory=Sent)
    sent_theory: SentTheory = field(default_factory=SentTheory)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"sent": ("one", Sent), "received": ("one", Sent),
                                                         "sent_theory": ("one", SentTheory)}


@dataclass
class BubbleTheory(Block):
    bubble_fraction: float = 0.0
    bubble_ratio: float = 0.0
    source: str | None = None


@dataclass
class ScheduleFigures(Block):
    """A schedule's measured run (`claims.pipeline.ScheduleRun`): the run's `pipeline` block."""

    schedule: str = ""
    torch_schedule: str = ""
    pp: int = 0
    dp: int = 1
    microbatches: int = 0
    stages_per_rank: int = 1
    microbatch_size: int = 0
    window_s: float = 0.0
    ranks: list[RankFigures] = field(default_factory=list)
    theory: BubbleTheory = field(default_factory=BubbleTheory)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"ranks": ("list", RankFigures),
                                                         "theory": ("one", BubbleTheory)}


@dataclass
class DrawnSpan(Block):
    """A compute span of the recorded step (`pipeline_timeline.StageSpan`): what the drawing needs of it."""

    kind: str = ""
    stage: int = 0
    mb: int = 0
    start_s: float = 0.0
    end_s: float = 0.0


@dataclass
class DrawnRank(Block):
    rank: int = 0
    spans: list[DrawnSpan] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"spans": ("list", DrawnSpan)}


@dataclass
class DrawnStep(Block):
    """A schedule's recorded step, one rank per row (`claims.pipeline.StageTimeline`)."""

    ranks: list[DrawnRank] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"ranks": ("list", DrawnRank)}


@dataclass
class ScheduleView(Block):
    """One schedule of the result (`runs[name]`): its figures, recorded step and loss per step."""

    pipeline: ScheduleFigures = field(default_factory=ScheduleFigures)
    timeline: DrawnStep = field(default_factory=DrawnStep)
    loss: list[float | None] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"pipeline": ("one", ScheduleFigures),
                                                         "timeline": ("one", DrawnStep)}


@dataclass
class PipelineView(Block):
    """What the renderer shows of a `demo pipeline` result."""

    runs: dict[str, ScheduleView] = field(default_factory=dict)
    reference_loss: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    NESTED: ClassVar[dict[str, tuple[str, type[Block]]]] = {"runs": ("map", ScheduleView)}

    @classmethod
    def of(cls, result: DemoResult | Mapping[str, Any]) -> PipelineView:
        return cls.from_json(result.to_json() if isinstance(result, DemoResult) else result)


# ----------------------------------------------------------------------------- the tables and the drawing


def _table(title: str, *columns: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def _sent(row: RankFigures) -> str:
    return f"{format_iec(row.sent.bytes)} / {format_iec(row.sent_theory.bytes)}"


def rank_table(run: ScheduleView) -> Any:
    p = run.pipeline
    replicas = f", each stage fully_shard'ed over {p.dp} replicas" if p.dp > 1 else ""
    table = _table(f"{p.torch_schedule}: {p.pp} ranks x {p.stages_per_rank} stage(s){replicas}, {p.microbatches} "
                   f"micro-batches of {p.microbatch_size} samples; step {p.window_s * 1e3:.0f} ms",
                   "rank", "stages", "compute", "bubble", "theory", "in flight", "theory", "sent / theory")
    for row in p.ranks:
        table.add_row(str(row.rank), ",".join(map(str, row.stages)), f"{row.busy_s * 1e3:.0f} ms",
                      f"{row.bubble:.3f}", f"{row.bubble_theory:.3f}", str(row.in_flight_chunks),
                      f"{row.in_flight_chunks_theory:g}", _sent(row))
    return table


def drawing(timeline: DrawnStep | Mapping[str, Any], width: int = WIDTH) -> list[tuple[str, str, str]]:
    """Per rank (label, kinds, micro-batches): one character per slice of the step, the action that
    covers the slice's middle, or · where the rank computes nothing."""
    ranks = DrawnStep.from_json(timeline).ranks
    spans = [s for rank in ranks for s in rank.spans]
    if not spans:
        return []
    start = min(s.start_s for s in spans)
    slot = (max(s.end_s for s in spans) - start) / width or 1.0
    rows = []
    for rank in ranks:
        kinds, mbs = [], []
        for i in range(width):
            t = start + (i + 0.5) * slot
            found = next((s for s in rank.spans if s.start_s <= t < s.end_s), None)
            kinds.append(found.kind if found else "·")
            mbs.append(str(found.mb % 10) if found else " ")
        rows.append((f"rank {rank.rank}", "".join(kinds), "".join(mbs)))
    return rows


def drawn_lines(timeline: DrawnStep | Mapping[str, Any], width: int = WIDTH) -> list[Any]:
    """The drawing as styled text, two lines per rank: its actions, then the micro-batch of each."""
    from rich.text import Text

    lines = []
    for label, kinds, mbs in drawing(timeline, width):
        line = Text(f"{label:>7} ")
        for char in kinds:
            line.append(char, style=STYLES.get(char, "dim"))
        lines += [line, Text(f"{'':>7} {mbs}", style="dim")]
    return lines


def render_drawing(timeline: DrawnStep, console: Any, title: str) -> None:
    lines = drawn_lines(timeline)
    if not lines:
        return
    console.print(f"[bold]{title}[/] (time runs right, {WIDTH} slices of the step)")
    for line in lines:
        console.print(line)
    console.print(f"[dim]{LEGEND}[/]")
    if any("W" in line.plain for line in lines[::2]):
        console.print(f"[dim]{ZERO_BUBBLE_NOTE}[/]")


COMPARED_TITLE = "The same ranks, model and batches under each schedule (bubble per rank, measured / theory)"


def compare_table(runs: Mapping[str, ScheduleView], title: str = COMPARED_TITLE) -> Any:
    table = _table(title, "schedule", "step", "bubble", "theory", "in flight", "sent per rank")
    for name, run in runs.items():
        p = run.pipeline
        table.add_row(name, f"{p.window_s * 1e3:.0f} ms", " ".join(f"{r.bubble:.2f}" for r in p.ranks),
                      f"{p.theory.bubble_fraction:.3f}", " ".join(str(r.in_flight_chunks) for r in p.ranks),
                      " ".join(format_iec(r.sent.bytes) for r in p.ranks))
    return table


def render(result: DemoResult | Mapping[str, Any], console: Any) -> None:
    view = PipelineView.of(result)
    for name, run in view.runs.items():
        console.print(Fitted(rank_table(run)))
        render_drawing(run.timeline, console, f"{name}, the recorded step")
    if len(view.runs) > 1:
        console.print(Fitted(compare_table(view.runs)))
    reference = view.reference_loss
    for name, run in view.runs.items():
        if run.loss and reference:
            console.print(f"loss per step, {name}: {', '.join(_loss(x) for x in run.loss)}; one process: "
                          f"{', '.join(_loss(x) for x in reference)}")
    console.print("[dim]theory: demos/theory/pipeline.py (equal stages, free sends); bubble = idle share of the "
                  "step from the first compute of any rank to the last; in flight in micro-batches x stages.[/]")
    for note in view.notes:
        console.print(f"[dim]{note}[/]")


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.5f}"


# ----------------------------------------------------------------------------- the quiz's evidence panel

PANEL_SLICES = 56  # slices of a step drawn in the quiz's panel: with its rank label, 64 columns, room at 80
_LABEL_WIDTH = 8  # "rank 12 " before each drawn row


def evidence_view(result: DemoResult, width: int) -> list[Any]:
    """What the quiz's evidence panel shows of a pipeline run under its checks: each schedule's bubble,
    activations in flight and sends per rank, and its recorded step drawn one row per rank (the picture
    of the schedule drawn at a whiteboard), at most `width` columns wide."""
    from rich.text import Text

    view = PipelineView.of(result)
    if not view.runs:
        return []
    title = COMPARED_TITLE if len(view.runs) > 1 else "Measured per rank (bubble: measured / theory)"
    parts: list[Any] = [compare_table(view.runs, title)]
    slices = max(16, min(PANEL_SLICES, width - _LABEL_WIDTH))
    for name, run in view.runs.items():
        lines = drawn_lines(run.timeline, slices)
        if lines:
            parts += [Text(f"{name}, the recorded step (time runs right)", style="bold"), *lines]
    parts.append(Text(LEGEND, style="dim"))
    return parts
