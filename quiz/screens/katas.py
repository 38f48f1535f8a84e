"""Katas: every kata with your status; open one in $EDITOR, check it on real ranks, take a hint.

The check runs in a worker that belongs to this screen (a run it started dies with it); what it finds is
posted up as a KataChecked message, which this screen shows and the app records. Opening a kata writes its
starter first when there is no file yet (KataOpened), and a hint is asked of the app (KataHintAsked), which
records it and hands the text back down. Nothing here imports torch: the launcher runs the ranks.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from ddpfsdp.demos.katas.catalog import KATAS, Kata
from ddpfsdp.quiz import katas
from ddpfsdp.quiz.katas import CHECK_PROCS
from ddpfsdp.quiz.messages import KataChecked, KataHintAsked, KataOpened, RunEnded, RunStopRequested
from ddpfsdp.quiz.widgets.key_bar import KeyBar

STATUS_STYLE = {"passed": "green", "failing": "red", "started": "yellow", "gave up": "magenta", "new": "dim"}


class KatasScreen(Screen):
    CSS_PATH = "pages.tcss"
    DEFAULT_CSS = """
    #katas-table { height: auto; max-height: 60%; margin: 1 0 0 0; }
    #kata-detail-scroll { height: 1fr; margin-top: 1; }
    """
    BINDINGS = [
        Binding("o", "open", "Open"),
        Binding("c", "check", "Check"),
        Binding("h", "hint", "Hint"),
        Binding("escape", "cancel_check", "Cancel check"),
        Binding("escape,q", "back", "Back"),
        Binding("?", "app.help", "Help"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._run: Any = None
        self._shown: dict[str, RenderableType] = {}  # kata -> what the detail shows for it (a hint, a check's result)

    def compose(self) -> ComposeResult:
        with Vertical(id="katas", classes="page"):
            yield Static(Text("Katas: write it yourself, checked on real ranks", style="bold"), id="title")
            yield DataTable(id="katas-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="kata-detail-scroll"):
                yield Static(id="kata-detail")
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("name", "topic", "level", "status")
        self.refresh_table()
        table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        checking = self._run is not None
        if action == "cancel_check":
            return checking
        if action == "back":
            return not checking
        return True

    def action_back(self) -> None:
        self.app.pop_screen()

    # --- what is shown -------------------------------------------------------------------------------

    def refresh_table(self) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for status in katas.statuses(self.app.store, self.app.now()):
            state = status.state + (", due" if status.due else "")
            table.add_row(status.name, status.kata.topic, str(status.kata.level),
                          Text(state, style=STATUS_STYLE.get(status.state, "")), key=status.name)
        table.move_cursor(row=min(cursor, len(KATAS) - 1))
        self.show_detail()

    @property
    def current(self) -> Kata:
        table = self.query_one(DataTable)
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return KATAS[str(key)]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def show_detail(self) -> None:
        kata = self.current
        path = katas.learner_path(kata, self.app.store)
        shown = katas.shown_path(path)
        lines: list[Any] = [
            Text.assemble((kata.title, "bold"), f"  ({kata.name}, level {kata.level})"),
            Text(kata.summary),
            Text.assemble(("You define: ", "bold"), kata.signature),
            Text.assemble(("Your file: ", "bold"), shown if path.exists() else f"{shown} (o writes the starter)"),
        ]
        extra = self._shown.get(kata.name)
        if extra is not None:  # what was just asked for (a check's verdict, a hint) comes first
            lines = [extra, Text(""), *lines]
        self.query_one("#kata-detail", Static).update(Group(*lines))
        self.query_one("#kata-detail-scroll", VerticalScroll).scroll_home(animate=False)

    def show_hint(self, kata: str, number: int, text: str) -> None:
        """The app's answer to KataHintAsked: the hint, under the kata it is for."""
        self._shown[kata] = Text.assemble((f"Hint {number} of {len(KATAS[kata].hints)}: ", "bold"), text)
        self.show_detail()

    # --- actions ------------------------------------------------------------------------------------

    def action_open(self) -> None:
        kata = self.current
        path = katas.learner_path(kata, self.app.store)
        started = False
        if not path.exists():
            try:
                path = katas.start(kata, None, path.parent)
            except katas.KataError as error:
                self.app.notify(str(error), title="Cannot write the starter", severity="error", timeout=10)
                return
            started = True
        self.post_message(KataOpened(kata.name, str(path), started))
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.app.notify(f"Set $EDITOR to edit it here; the file is {path}", title=kata.name, timeout=10)
            return
        try:
            with self.app.suspend():
                subprocess.call([*shlex.split(editor), str(path)])
        except Exception as error:  # noqa: BLE001 - no terminal to hand over (a test, a web app): say where the file is
            self.app.notify(f"Could not open {editor} here ({type(error).__name__}); the file is {path}",
                            title=kata.name, timeout=10)
        self.refresh_table()

    def action_hint(self) -> None:
        self.post_message(KataHintAsked(self.current.name))

    def action_check(self) -> None:
        if self._run is not None:
            self.app.notify("A check is running; Esc cancels it.", timeout=4)
            return
        kata = self.current
        path = katas.learner_path(kata, self.app.store)
        from ddpfsdp.demos.katas.learner_file import FileProblem, read_learner_file

        try:
            reading = read_learner_file(path, kata)
        except FileProblem as problem:
            start = " Press o to write the starter." if not path.exists() else ""
            self.post_message(KataChecked(kata.name, None, f"{problem}.{start}", False, 0.0))
            return
        if reading.forbidden:
            self.post_message(KataChecked(kata.name, None, "; ".join(u.message(path) for u in reading.forbidden[:3]),
                                          False, 0.0))
            return
        self._shown[kata.name] = Text(f"Checking {path.name} on {CHECK_PROCS} CPU processes… Esc cancels", style="bold")
        self.show_detail()
        self._run = True  # a check is under way from here on (the run itself follows in the worker)
        self.refresh_bindings()
        self._check(kata.name, path)

    def action_cancel_check(self) -> None:
        run = self._run
        if run is not None and run is not True:
            self.app.post_message(RunStopRequested(run))

    @work(thread=True, exclusive=True, exit_on_error=False, group="kata-check")
    def _check(self, kata: str, path: Path) -> None:
        worker = get_current_worker()
        started = time.monotonic()
        run = None
        try:
            run = self.app.kata_runner(kata, path)  # started and tracked by the app from this moment
            self._run = run
            for _ in run.events():
                if worker.is_cancelled:
                    break
            cancelled = bool(getattr(run, "cancelled", False)) or worker.is_cancelled
            if cancelled:
                run.cancel()
            problem = None if cancelled or run.result is not None else \
                str((run.error or {}).get("message") or "the ranks ended without a result")
            self.post_message(KataChecked(kata, None if cancelled else run.result, problem, cancelled,
                                          time.monotonic() - started))
        except Exception as error:  # noqa: BLE001 - the launcher could not start: said on the screen
            if run is not None:
                run.cancel()
            self.post_message(KataChecked(kata, None, f"{type(error).__name__}: {error}", False,
                                          time.monotonic() - started))
        finally:
            if run is not None:
                self.app.post_message(RunEnded(run))

    def on_kata_checked(self, message: KataChecked) -> None:
        """Show what the check found; the message goes on up to the app, which records it."""
        self._run = None
        self.refresh_bindings()
        if message.cancelled:
            self._shown[message.kata] = Text("Check cancelled: every rank stopped.", style="yellow")
        elif message.result is None:
            self._shown[message.kata] = Text(message.problem or "", style="red")
        else:
            from ddpfsdp.demos.katas.render import renderable, summary
            from ddpfsdp.demos.result.schema import as_result

            passed, line = summary(as_result(message.result).checks)
            verdict = Text(f"{'✔' if passed else '✘'} {line}", style="bold green" if passed else "bold red")
            self._shown[message.kata] = Group(verdict, renderable(message.result))
        if self.is_mounted:
            self.refresh_table()

    def on_unmount(self) -> None:
        run = self._run
        if run is not None and run is not True:
            self.app.post_message(RunStopRequested(run))
