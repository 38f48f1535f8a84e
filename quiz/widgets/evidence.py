"""The evidence panel: the linked demo's last result on this machine, its checks, and a live re-run.

The saved result is shown at once (no torch needed). `r` runs the demo in a thread worker through the
launcher; the worker only posts messages, and a cancel (Escape, or leaving the screen) stops every
rank of the run's process group before the panel says so.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text
from textual import work
from textual.containers import Vertical
from textual.widgets import ProgressBar, RichLog, Static
from textual.worker import get_current_worker

from ddpfsdp.demos.base.labels import Label
from ddpfsdp.demos.launch.events import Event
from ddpfsdp.demos.result.schema import DemoResult, ResultError, as_result
from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz.loader import Question
from ddpfsdp.quiz.messages import (DemoFinished, DemoLaunching, DemoLog, DemoProgress, DemoStarted, RunEnded,
                                   RunStopRequested)
from ddpfsdp.quiz.placement import foreseen_placement
from ddpfsdp.quiz.store import SavedResult


def checks_table(items: list[ev.EvidenceItem], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, expand=True, pad_edge=False)
    table.add_column("", width=2, no_wrap=True)
    table.add_column("check", ratio=2)
    table.add_column("numbers", ratio=3)
    for item in items:
        if item.not_judged:
            mark = Text("–", style="yellow")
        elif item.passed is None:
            mark = Text("?", style="yellow")
        else:
            mark = Text("✔", style="bold green") if item.passed else Text("✘", style="bold red")
        name = Label(item.name, style="bold")
        if item.claim:
            name = Group(name, Text(item.claim, style="bold dim"))  # the claim under the name, as before
        table.add_row(mark, name, item.detail)
    return table


class DemoView:
    """A result drawn by its demo's own view (the registry's `evidence_view`), at the width it is given
    when it is drawn: the panel's, which is known only then."""

    def __init__(self, result: DemoResult):
        from ddpfsdp.demos.registry import evidence_view_of, load

        self.result = result
        self.view = load(evidence_view_of(result.demo))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.view(self.result, options.max_width)


def result_table(result: DemoResult | Mapping[str, Any]) -> DemoView:
    """The figures of a result under its checks (memory and traffic per strategy, a concept demo's numbers,
    a pipeline's schedules, a fault's two runs), as its demo draws them."""
    return DemoView(as_result(result))


def describe_ranks(world_size: int | None, device: str | None, backend: str | None = None,
                   ranks_per_gpu: int = 1) -> str:
    """'2 ranks on cpu (gloo)', '8 ranks on cuda (nccl)', 'a simulated world of 64 ranks', '2 ranks sharing
    one GPU (gloo, CUDA tensors)' (ranks on CUDA over gloo share a GPU: NCCL would give each its own)."""
    if device == "fake":
        return f"a simulated world of {world_size} ranks"
    if device == "cuda" and (ranks_per_gpu > 1 or backend == "gloo"):
        gpus = max(1, (world_size or 0) // ranks_per_gpu) if ranks_per_gpu > 1 else None
        where = "one GPU" if gpus == 1 else f"{gpus} GPUs" if gpus else "a GPU"
        return f"{world_size} ranks sharing {where} (gloo, CUDA tensors)"
    backend = backend or {"cuda": "nccl", "cpu": "gloo"}.get(device or "", "")
    return f"{world_size} rank{'s' if world_size != 1 else ''} on {device}" + (f" ({backend})" if backend else "")


def failure_text(error: Event | None) -> Text:
    error = error or {"message": "the demo ended without a result"}
    rank = error.get("rank")
    text = Text.assemble(("The demo failed", "bold red"), (f" on rank {rank}" if rank is not None else "", "red"),
                         (f": {error.get('message', '')}", "red"))
    trace = str(error.get("traceback") or "").strip()
    if trace:
        text.append("\n" + "\n".join(trace.splitlines()[-8:]), style="dim")
    text.append("\nNothing was saved; the last saved result (if any) is still shown. Press r to try again.")
    return text


class EvidencePanel(Vertical):
    DEFAULT_CSS = """
    EvidencePanel { height: auto; border: round $primary-darken-1; padding: 0 1; margin-top: 1; }
    EvidencePanel > #evidence-status { display: none; height: auto; }
    EvidencePanel.-has-status > #evidence-status { display: block; }
    EvidencePanel > ProgressBar { display: none; }
    EvidencePanel > RichLog { display: none; height: auto; max-height: 8; border: none; background: $surface; }
    EvidencePanel.-running > ProgressBar, EvidencePanel.-running > RichLog { display: block; }
    EvidencePanel.-has-log > RichLog { display: block; }
    EvidencePanel > #evidence-saved { height: auto; }
    EvidencePanel > .chart { display: none; margin-top: 1; }
    EvidencePanel.-has-chart > #evidence-chart { display: block; }
    EvidencePanel.-has-compare > #evidence-compare { display: block; }
    EvidencePanel.-has-timeline > #evidence-timeline { display: block; }
    """

    def __init__(self, question: Question, **kwargs):
        super().__init__(**kwargs)
        self.question = question
        self.saved: SavedResult | None = None
        self.shown: DemoResult | None = None  # the result on screen
        self.fresh = False  # measured by a run started here
        self.running = False
        self._run: Any = None
        self._cancelling = False

    def compose(self):
        link = self.question.demo
        assert link is not None
        self.border_title = f"Evidence · {link.command()}"
        # What is happening now comes first: a run's status, its progress and its log.
        yield Static(id="evidence-status")
        yield ProgressBar(total=None, show_eta=False, id="evidence-progress")
        yield RichLog(id="evidence-log", max_lines=400, wrap=True, markup=False)
        yield Static(id="evidence-saved")
        from ddpfsdp.quiz.widgets.charts import CompareChart, MemoryChart
        from ddpfsdp.quiz.widgets.timeline_chart import TimelineChart

        yield MemoryChart(id="evidence-chart", classes="chart")
        yield CompareChart(id="evidence-compare", classes="chart")
        yield TimelineChart(id="evidence-timeline", classes="chart")

    def on_mount(self) -> None:
        link = self.question.demo
        try:
            self.saved = self.app.store.last_demo_result(link.name, list(link.args)) if self.app.store else None
        except Exception as error:  # noqa: BLE001 - a store problem must not hide the question
            self.saved = None
            self.status(Text(f"Could not read saved results: {error}", style="red"))
        self.show_result(self.saved.result if self.saved else None)

    def status(self, text: Text | str) -> None:
        """Say what is happening now, above everything else; an empty text hides the line."""
        self.query_one("#evidence-status", Static).update(text)
        self.set_class(bool(str(text)), "-has-status")

    # --- showing a result ---------------------------------------------------------------------------

    def when(self, result: DemoResult) -> str:
        """Where and when the result was measured, and what r does now."""
        if self.fresh:
            return f"Measured just now, {ev.where(result)}."
        if self.saved is None:
            return ev.where(result)
        place = "on this machine" if self.saved.here else f"on another machine ({self.saved.hostname})"
        then = f"Last measured {ev.age(self.saved.saved_at, self.app.now())} {place}: {ev.where(result)}."
        return then + (" A new run is under way." if self.running else " Press r to run it again.")

    def show_result(self, result: DemoResult | Mapping[str, Any] | None) -> None:
        try:
            result = None if result is None else as_result(result)
        except ResultError as error:
            self.status(Text(f"The saved result cannot be read ({error}); press r to measure it again.", style="red"))
            result = None
        self.shown = result
        saved = self.query_one("#evidence-saved", Static)
        if result is None:
            saved.display = not self.running  # while a run starts, the status says so instead
            saved.update(Text.assemble(("Not measured on this machine yet. ", "bold"), "Press ", ("r", "bold reverse"),
                                       f" to run it now ({self.question.demo.command()})."))
            for name in ("-has-chart", "-has-compare", "-has-timeline"):
                self.remove_class(name)
            return
        saved.display = True
        parts: list[Any] = [Text(self.when(result), style="italic")]
        caveat = result.caveat
        if caveat:
            parts.append(Text(caveat, style="dim"))
        items = ev.evidence(self.question, result) if self.question.evidence else ev.all_checks(result)
        if items:
            parts.append(checks_table(items, "Claims checked against this run" if self.question.evidence else "Checks"))
        parts.append(result_table(result))
        saved.update(Group(*parts))
        self.set_class(self.query_one("#evidence-chart").plot_result(result), "-has-chart")
        self.set_class(self.query_one("#evidence-compare").plot_result(result), "-has-compare")
        self.set_class(self.query_one("#evidence-timeline").plot_result(result), "-has-timeline")

    # --- running the demo ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.running:
            self.app.notify("The demo is already running; Escape cancels it.")
            return
        self.running = True
        self._cancelling = False
        self.add_class("-running")
        self.remove_class("-has-log")
        self.query_one(RichLog).clear()
        self.query_one(ProgressBar).update(total=None, progress=0)
        link = self.question.demo
        # Said at once; where the ranks go, when that is known before the launcher has imported torch.
        where = foreseen_placement(link.name, link.args) or " ".join([link.name, *link.args])
        self.status(Text(f"Starting {where}… Esc cancels", style="bold"))
        self.show_result(self.shown)  # the "press r" line gives way to the run
        # Launched once this is on screen: the launcher imports torch in its thread, which would
        # otherwise hold up the frame that says the run has started.
        self.call_after_refresh(self._run_demo, link.name, tuple(link.args))

    def cancel(self) -> bool:
        """Stop a running demo; True when there was one. The ranks are stopped off the UI thread."""
        if not self.running:
            return False
        if not self._cancelling:
            self._cancelling = True
            self.status(Text("Cancelling: stopping every rank…", style="bold yellow"))
            # Only the run is stopped: its event stream then ends, and the worker reports the cancel.
            if self._run is not None:
                self.app.post_message(RunStopRequested(self._run))
            else:
                for worker in self.workers:
                    worker.cancel()
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="demo")
    def _run_demo(self, demo: str, args: tuple[str, ...]) -> None:
        worker = get_current_worker()
        started = time.monotonic()
        run = None
        try:
            run = self.app.demo_runner(demo, list(args))
            self._run = run
            placement = getattr(run, "placement", None)
            if placement is not None:
                self.post_message(DemoLaunching(demo, placement.world_size, placement.device,
                                                getattr(placement, "ranks_per_gpu", 1)))
            if worker.is_cancelled:
                self.post_message(DemoFinished(demo, args, None, None, True, time.monotonic() - started))
                return
            for event in run.events():
                if worker.is_cancelled:
                    # Leaving the loop ends the stream; cancel() (already started) stops the ranks.
                    break
                kind = event.get("event")
                if kind == "start":
                    self.post_message(DemoStarted(demo, event.get("world_size"), event.get("device"), event.get("backend")))
                elif kind == "progress":
                    metrics = {k: v for k, v in event.items() if k not in ("event", "step", "steps")}
                    self.post_message(DemoProgress(int(event.get("step", 0)), int(event.get("steps", 0)), metrics))
                elif kind == "log":
                    self.post_message(DemoLog(str(event.get("message", ""))))
            cancelled = bool(getattr(run, "cancelled", False)) or worker.is_cancelled
            if cancelled:
                run.cancel()  # idempotent; returns once every rank is gone
            self.post_message(DemoFinished(demo, args, None if cancelled else run.result, None if cancelled else run.error, cancelled, time.monotonic() - started))
        except Exception as error:  # noqa: BLE001 - the launcher could not start, or the stream broke
            if run is not None:
                try:
                    run.cancel()
                except Exception:  # noqa: BLE001 - the error being reported matters more than this one
                    pass
            message = {"event": "error", "rank": None, "message": f"{type(error).__name__}: {error}", "traceback": ""}
            self.post_message(DemoFinished(demo, args, None, message, False, time.monotonic() - started))
        finally:
            if run is not None:
                self.app.post_message(RunEnded(run))

    def on_demo_launching(self, message: DemoLaunching) -> None:
        if not self._cancelling:
            where = describe_ranks(message.world_size, message.device, ranks_per_gpu=message.ranks_per_gpu)
            self.status(Text(f"Starting {where}… Esc cancels", style="bold"))

    def on_demo_started(self, message: DemoStarted) -> None:
        if not self._cancelling:
            where = describe_ranks(message.world_size, message.device, message.backend) if message.world_size else "its ranks"
            self.status(Text(f"Running {message.demo} on {where}… Esc cancels", style="bold"))

    def on_demo_progress(self, message: DemoProgress) -> None:
        bar = self.query_one(ProgressBar)
        if message.steps:
            bar.update(total=message.steps, progress=min(message.step + 1, message.steps))
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in message.metrics.items())
        if not self._cancelling:
            self.status(Text(f"step {message.step + 1}/{message.steps}  {shown}   Esc cancels"))

    def on_demo_log(self, message: DemoLog) -> None:
        self.query_one(RichLog).write(message.line)

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.running = False
        self._run = None
        self.remove_class("-running")
        if message.cancelled:
            self.status(Text(f"Cancelled after {message.elapsed_s:.1f} s; every rank was stopped. The last saved result is unchanged.", style="yellow"))
            self.show_result(self.shown)
            return
        if message.error is not None or message.result is None:
            # The log stays: it is what the failed run said.
            self.set_class(bool(self.query_one(RichLog).lines), "-has-log")
            self.status(failure_text(message.error))
            self.show_result(self.shown)
            return
        try:
            self.app.store.save_demo_result(message.demo, list(message.args), message.result)
        except Exception as error:  # noqa: BLE001 - the result on screen matters more than the copy on disk
            self.app.notify(f"The result could not be saved: {error}", severity="error")
        self.status(Text(f"Finished in {message.elapsed_s:.1f} s; the result is saved.", style="green"))
        self.fresh = True
        self.show_result(message.result)

    def on_unmount(self) -> None:
        # The worker dies with the screen; its processes must not outlive it.
        if self._run is not None:
            self.app.post_message(RunStopRequested(self._run))
