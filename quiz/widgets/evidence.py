"""The evidence panel: the linked demo's last result on this machine, its checks, and a live re-run.

The saved result is shown at once (no torch needed). `r` runs the demo in a thread worker through the
launcher; the worker only posts messages, and a cancel (Escape, or leaving the screen) stops every
rank of the run's process group before the panel says so.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.containers import Vertical
from textual.widgets import ProgressBar, RichLog, Static
from textual.worker import get_current_worker

from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz.loader import Question
from ddpfsdp.quiz.messages import DemoFinished, DemoLog, DemoProgress, DemoStarted
from ddpfsdp.quiz.store import SavedResult


def checks_table(items: list[ev.EvidenceItem], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, expand=True, pad_edge=False)
    table.add_column("", width=2, no_wrap=True)
    table.add_column("check", ratio=2)
    table.add_column("numbers", ratio=3)
    for item in items:
        mark = Text("?", style="yellow") if item.passed is None else (Text("✔", style="bold green") if item.passed else Text("✘", style="bold red"))
        name = Text(item.name, style="bold")
        if item.claim:
            name.append(f"\n{item.claim}", style="dim")
        table.add_row(mark, name, item.detail)
    return table


def fault_table(result: dict[str, Any]) -> Table | None:
    """A failure-lab result: the broken run's symptom beside the fixed run's, as torch produced them."""
    sides = ev.fault_sides(result)
    if not sides:
        return None
    table = Table(title="The symptom, broken and fixed", title_justify="left", show_edge=False, expand=True, pad_edge=False)
    for phase, program, _ in sides:
        table.add_column(Text(f"{phase}: {program}", style="bold red" if phase == "broken" else "bold green"), ratio=1)
    table.add_row(*(Text("\n".join(lines)) for _, _, lines in sides))
    block = result.get("fault") or {}
    table.caption = Text(f"Cause: {block.get('cause', '')}\nFix: {block.get('fix', '')}")  # not markup: "Join([model])"
    table.caption_justify = "left"
    return table


def result_table(result: dict[str, Any]) -> Table | None:
    """Memory per component, throughput and traffic per strategy; a fault's two runs; or a concept demo's figures."""
    if ev.fault_sides(result):
        return fault_table(result)
    runs = ev.runs(result)
    if runs:
        config = result.get("config") or {}
        title = f"Simulated, rank 0 of {config.get('world_size')}" if config.get("simulated") else "Measured, rank 0"
        table = Table(title=title, title_justify="left", show_edge=False, expand=True, pad_edge=False)
        table.add_column("strategy")
        for column in ("params", "grads", "optimizer", "peak", "samples/s", "wire/step"):
            table.add_column(column, justify="right")
        for name, run in runs.items():
            memory = ev.memory_by_component(run)
            speed = ev.throughput(run)
            wire = sum(float(op.get("wire_bytes_per_rank", 0) or 0) for op in ev.comm_per_step(run).values())
            table.add_row(
                name,
                *(ev.format_bytes(memory[k]) if k in memory else "–" for k in ("params", "grads", "optimizer", "peak")),
                f"{speed['samples_per_s']:,.1f}" if "samples_per_s" in speed else "–",
                ev.format_bytes(wire) if ev.comm_per_step(run) else "–",
            )
        where = {name: ev.peak_where(run) for name, run in runs.items()}
        where = {name: text for name, text in where.items() if text}
        if where:
            table.caption = "peak of rank 0: " + "; ".join(
                text if len(runs) == 1 else f"{name} {text}" for name, text in where.items())
            table.caption_justify = "left"
        return table
    rows = ev.scalar_measurements(result)
    if not rows:
        return None
    table = Table(title="Measured", title_justify="left", show_edge=False, expand=True, pad_edge=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


class EvidencePanel(Vertical):
    DEFAULT_CSS = """
    EvidencePanel { height: auto; border: round $primary-darken-1; padding: 0 1; margin-top: 1; }
    EvidencePanel > #evidence-saved { height: auto; }
    EvidencePanel > ProgressBar { display: none; margin-top: 1; }
    EvidencePanel > RichLog { display: none; height: 8; border: none; background: $surface; }
    EvidencePanel.-running > ProgressBar, EvidencePanel.-running > RichLog { display: block; }
    EvidencePanel.-has-log > RichLog { display: block; }
    EvidencePanel > #evidence-status { height: auto; margin-top: 1; }
    EvidencePanel > #evidence-chart { display: none; height: 14; }
    EvidencePanel.-has-chart > #evidence-chart { display: block; }
    EvidencePanel > #evidence-timeline { display: none; height: 16; }
    EvidencePanel.-has-timeline > #evidence-timeline { display: block; }
    """

    def __init__(self, question: Question, **kwargs):
        super().__init__(**kwargs)
        self.question = question
        self.saved: SavedResult | None = None
        self.running = False
        self._run: Any = None
        self._cancelling = False

    def compose(self):
        link = self.question.demo
        assert link is not None
        self.border_title = f"Evidence · {link.command()}"
        yield Static(id="evidence-saved")
        yield ProgressBar(total=None, show_eta=False, id="evidence-progress")
        yield RichLog(id="evidence-log", max_lines=400, wrap=True, markup=False)
        yield Static(id="evidence-status")
        from ddpfsdp.quiz.widgets.charts import ResultChart, TimelineChart

        yield ResultChart(id="evidence-chart")
        yield TimelineChart(id="evidence-timeline")

    def on_mount(self) -> None:
        link = self.question.demo
        try:
            self.saved = self.app.store.last_demo_result(link.name, list(link.args)) if self.app.store else None
        except Exception as error:  # noqa: BLE001 - a store problem must not hide the question
            self.saved = None
            self.query_one("#evidence-status", Static).update(Text(f"Could not read saved results: {error}", style="red"))
        self.show_result(self.saved.result if self.saved else None)

    # --- showing a result ---------------------------------------------------------------------------

    def show_result(self, result: dict[str, Any] | None, *, fresh: bool = False) -> None:
        saved = self.query_one("#evidence-saved", Static)
        if result is None:
            saved.update(
                Text.assemble(
                    ("Not measured on this machine yet. ", "bold"),
                    "Press ",
                    ("r", "bold reverse"),
                    f" to run it now ({self.question.demo.command()}).",
                )
            )
            self.remove_class("-has-chart")
            self.remove_class("-has-timeline")
            return
        now = self.app.now()
        if fresh:
            when = f"Measured just now, {ev.where(result)}."
        elif self.saved is not None:
            place = "on this machine" if self.saved.here else f"on another machine ({self.saved.hostname})"
            when = f"Last measured {ev.age(self.saved.saved_at, now)} {place}: {ev.where(result)}. Press r to run it again."
        else:
            when = ev.where(result)
        parts: list[Any] = [Text(when, style="italic")]
        caveat = ev.gloo_caveat(result)
        if caveat:
            parts.append(Text(caveat, style="dim"))
        items = ev.evidence(self.question, result) if self.question.evidence else ev.all_checks(result)
        if items:
            parts.append(checks_table(items, "Claims checked against this run" if self.question.evidence else "Checks"))
        table = result_table(result)
        if table is not None:
            parts.append(table)
        saved.update(Group(*parts))
        chart = self.query_one("#evidence-chart")
        self.set_class(chart.plot_result(result), "-has-chart")
        self.set_class(self.query_one("#evidence-timeline").plot_result(result), "-has-timeline")

    # --- running the demo ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.running:
            self.app.notify("The demo is already running; Escape cancels it.")
            return
        self.running = True
        self._cancelling = False
        self.add_class("-running")
        log = self.query_one(RichLog)
        log.clear()
        self.query_one(ProgressBar).update(total=None, progress=0)
        self.query_one("#evidence-status", Static).update(Text("Starting the demo … (Escape cancels)", style="bold"))
        self._run_demo(self.question.demo.name, tuple(self.question.demo.args))

    def cancel(self) -> bool:
        """Stop a running demo; True when there was one. The ranks are stopped off the UI thread."""
        if not self.running:
            return False
        if not self._cancelling:
            self._cancelling = True
            self.query_one("#evidence-status", Static).update(Text("Cancelling: stopping every rank …", style="bold yellow"))
            # Only the run is stopped: its event stream then ends, and the worker reports the cancel.
            if self._run is not None:
                self.app.stop_run(self._run)
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
            self.app.track_run(run)
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
                self.app.untrack_run(run)

    def on_demo_started(self, message: DemoStarted) -> None:
        where = f"{message.world_size} × {message.device} ({message.backend})" if message.world_size else ""
        self.query_one("#evidence-status", Static).update(Text(f"Running {message.demo} on {where} … (Escape cancels)", style="bold"))

    def on_demo_progress(self, message: DemoProgress) -> None:
        bar = self.query_one(ProgressBar)
        if message.steps:
            bar.update(total=message.steps, progress=min(message.step + 1, message.steps))
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in message.metrics.items())
        if not self._cancelling:
            self.query_one("#evidence-status", Static).update(Text(f"step {message.step + 1}/{message.steps}  {shown}   (Escape cancels)"))

    def on_demo_log(self, message: DemoLog) -> None:
        self.query_one(RichLog).write(message.line)

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.running = False
        self._run = None
        self.remove_class("-running")
        status = self.query_one("#evidence-status", Static)
        if self.query_one(RichLog).lines:
            self.add_class("-has-log")
        if message.cancelled:
            status.update(Text(f"Cancelled after {message.elapsed_s:.1f} s; every rank was stopped. The last saved result is unchanged.", style="yellow"))
            return
        if message.error is not None or message.result is None:
            error = message.error or {"message": "the demo ended without a result"}
            rank = error.get("rank")
            text = Text.assemble(("The demo failed", "bold red"), (f" on rank {rank}" if rank is not None else "", "red"), (f": {error.get('message', '')}", "red"))
            trace = str(error.get("traceback") or "").strip()
            if trace:
                text.append("\n" + "\n".join(trace.splitlines()[-8:]), style="dim")
            text.append("\nNothing was saved; the last saved result (if any) is still shown. Press r to try again.")
            status.update(text)
            return
        try:
            self.app.store.save_demo_result(message.demo, list(message.args), message.result)
        except Exception as error:  # noqa: BLE001 - the result on screen matters more than the copy on disk
            self.app.notify(f"The result could not be saved: {error}", severity="error")
        status.update(Text(f"Finished in {message.elapsed_s:.1f} s; the result is saved.", style="green"))
        self.saved = None
        self.show_result(message.result, fresh=True)

    def on_unmount(self) -> None:
        # The worker dies with the screen; its processes must not outlive it.
        if self._run is not None:
            self.app.stop_run(self._run)
