"""The interview's debrief: a score per skill, the simulated run that measures the scenario, every step's
working; `r` runs the simulation and shows what it measured beside the answers and the model.

The simulation runs in a thread worker through the app's demo runner (torch is imported only then,
in the demo's own process); Escape cancels it, and leaving the screen stops it.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from ddpfsdp.quiz import evidence as ev
from ddpfsdp.quiz.grading import Grade
from ddpfsdp.quiz.interview import debrief, render
from ddpfsdp.quiz.interview.scenario import Scenario
from ddpfsdp.quiz.messages import DemoFinished, DemoLog, RunEnded, RunStopRequested
from ddpfsdp.quiz.widgets.key_bar import KeyBar
from ddpfsdp.quiz.widgets.session_header import SessionHeader, clock
from ddpfsdp.quiz.widgets.target_scroll import TargetScroll


class DebriefScreen(Screen):
    DEFAULT_CSS = """
    #debrief-body > Static { height: auto; margin: 1 0 0 0; }
    #debrief-status { color: $text-muted; }
    """
    BINDINGS = [
        Binding("r", "run", "Run the simulation"),
        Binding("escape", "escape", "Cancel run / Home"),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
        Binding("?", "app.help", "Help"),
    ]

    def __init__(self, scenario: Scenario, grades: dict[str, Grade], *, elapsed_s: float | None = None):
        super().__init__()
        self.scenario = scenario
        self.grades = grades
        self.elapsed_s = elapsed_s  # the interview's time, when it was just taken
        self.simulation = debrief.simulation(scenario)
        self.running = False
        self._run = None

    def compose(self) -> ComposeResult:
        scenario = self.scenario
        with Vertical(id="debrief", classes="page"):
            yield SessionHeader(Text.assemble(("Debrief", "bold"), f" · {scenario.title}"), position=self._position(),
                                id="debrief-header")
            with TargetScroll(id="debrief-body"):
                yield Static(render.skills_table(scenario, self.grades), id="debrief-skills")
                yield Static(render.simulation_block(scenario), id="debrief-simulation")
                yield Static(id="debrief-status")
                yield Static(id="debrief-measured")
                yield Static(render.working_table(scenario, self.grades), id="debrief-working")
        yield KeyBar()

    def _position(self) -> Text:
        """'overall 64% of 11 steps', coloured by the score, and the interview's time when it was just taken."""
        score = debrief.overall(self.scenario.steps, self.grades)
        position = Text(f"overall {score:.0%} of {len(self.scenario.steps)} steps", style=f"bold {render.score_style(score)}")
        if self.elapsed_s is not None:
            position.append(f"  ⏱ {clock(self.elapsed_s)} taken", style="bold yellow")
        return position

    def on_mount(self) -> None:
        saved = None
        try:
            saved = self.app.store.last_demo_result(self.simulation.demo, list(self.simulation.args))
        except Exception as error:  # noqa: BLE001 - a store problem must not hide the debrief
            self._status(f"Could not read saved results: {error}", "red")
        if saved is None:
            self._status("Not simulated yet. Press r to run it now (tens of seconds to minutes; Escape cancels).")
        else:
            self._status(f"Ran {ev.age(saved.saved_at, self.app.now())}, {ev.where(saved.result)}. "
                         "Press r to run it again.")
            self._show(saved.result)
        self.query_one("#debrief-body").focus()

    def _status(self, message: str, style: str = "") -> None:
        self.query_one("#debrief-status", Static).update(Text(message, style=style))

    def _show(self, result: dict) -> None:
        self.query_one("#debrief-measured", Static).update(
            Group(render.comparison_table(self.scenario, self.grades, result)))

    def action_run(self) -> None:
        if self.running:
            self.app.notify("The simulation is already running; Escape cancels it.")
            return
        self.running = True
        self._status(f"Running {self.simulation.command} … (Escape cancels)", "bold")
        self._simulate(self.simulation.demo, self.simulation.args)

    @work(thread=True, exclusive=True, exit_on_error=False, group="simulate")
    def _simulate(self, demo: str, args: tuple[str, ...]) -> None:
        worker = get_current_worker()
        started = self.app.monotonic()
        run = None
        try:
            run = self._run = self.app.demo_runner(demo, list(args))
            for event in run.events():
                if worker.is_cancelled:
                    break
                if event.get("event") == "log":
                    self.post_message(DemoLog(str(event.get("message", ""))))
            cancelled = worker.is_cancelled or bool(getattr(run, "cancelled", False))
            if cancelled:
                run.cancel()
            result, error = (None, None) if cancelled else (run.result, run.error)
            self.post_message(DemoFinished(demo, args, result, error, cancelled, self.app.monotonic() - started))
        except Exception as error:  # noqa: BLE001 - the launcher could not start, or the stream broke
            if run is not None:
                run.cancel()
            message = {"message": f"{type(error).__name__}: {error}"}
            self.post_message(DemoFinished(demo, args, None, message, False, self.app.monotonic() - started))
        finally:
            if run is not None:
                self.app.post_message(RunEnded(run))

    def on_demo_log(self, message: DemoLog) -> None:
        if self.running:
            self._status(f"{message.line}  (Escape cancels)", "bold")

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.running = False
        self._run = None
        if message.cancelled:
            self._status(f"Cancelled after {message.elapsed_s:.1f} s; the simulation was stopped.", "yellow")
            return
        if message.result is None:
            self._status(f"The simulation failed: {(message.error or {}).get('message', 'no result')}. Press r to "
                         "try again.", "red")
            return
        try:
            self.app.store.save_demo_result(message.demo, list(message.args), message.result)
        except Exception as error:  # noqa: BLE001 - the result on screen matters more than the copy on disk
            self.app.notify(f"The result could not be saved: {error}", severity="error")
        self._status(f"Ran just now in {message.elapsed_s:.1f} s, {ev.where(message.result)}; saved.", "green")
        self._show(message.result)
        self.query_one("#debrief-body", TargetScroll).show(self.query_one("#debrief-status"), top=True)

    def action_escape(self) -> None:
        if self.running:
            self._status("Cancelling: stopping the simulation …", "bold yellow")
            if self._run is not None:
                self.app.post_message(RunStopRequested(self._run))
            for worker in self.workers:
                worker.cancel()
            return
        self.app.pop_screen()

    def action_interrupt(self) -> None:
        self.app.notify("Every step is saved. Escape goes home (or cancels a running simulation); ctrl+q quits.",
                        title="Ctrl+C")

    def on_unmount(self) -> None:
        if self._run is not None:
            self.app.post_message(RunStopRequested(self._run))
