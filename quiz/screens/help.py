"""Keys, in a modal over the current screen, as compact as a terminal of 80 columns needs."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# (key, where, what it does)
KEYS = (
    ("1–9", "question", "choose a choice; for order questions, place the next step"),
    ("space, ↑ ↓", "question", "move and choose without digits"),
    ("backspace", "order question", "undo the last placed step"),
    ("Enter", "question", "submit (explain: reveal the model answer)"),
    ("n", "question, feedback", "next question (on a question: skip it; ctrl+n in a text box)"),
    ("d", "question", "the evidence for this question: its demo and last saved result"),
    ("b, ctrl+b", "question", "bookmark it, or remove its bookmark (ctrl+b in a text box)"),
    ("/", "home", "find a question by any words; ↓ to the results, Enter opens one"),
    ("l, b", "home", "choose the levels sessions ask; study the bookmarked questions"),
    ("n, g", "home", "the numbers page (figures and sources); the glossary"),
    ("g, click", "feedback", "the glossary at this answer's terms; a click on a term opens it"),
    ("r", "feedback, evidence", "run the linked demo now on this machine"),
    ("s", "home", "the sizing drill: napkin-math problems graded by the analytic model"),
    ("Enter, n", "sizing drill", "submit; once graded, the next problem (ctrl+n skips)"),
    ("i", "home", "a design interview: a scenario step by step, graded by the analytic model"),
    ("Enter, ctrl+n", "interview", "submit, then the next step; skip a step (it counts as a miss)"),
    ("ctrl+o", "interview", "open or fold the job: model, cluster, links, batch"),
    ("1–4", "interview's explanation", "after Enter shows the talking points: grade yourself"),
    ("r", "interview debrief", "run the simulated demo of the scenario and set it beside your answers"),
    ("w", "home", "katas: write the collective, the sampler, the FSDP unit yourself, checked on real ranks"),
    ("o, c, h", "katas", "open your file in $EDITOR, check it on real ranks (Escape cancels), take a hint"),
    ("Escape", "while a demo runs", "cancel it (every rank is stopped); otherwise go back"),
    ("Escape", "mock interview", "asks first; y ends it and shows the score so far"),
    ("1–4", "explain feedback", "grade yourself: Again, Hard, Good, Easy"),
    ("?", "anywhere", "this help"),
    ("ctrl+q", "anywhere", "quit (every answer is already saved)"),
)

NOTES = (
    "The mouse works too: click a choice, a step, a menu entry or a key at the bottom.\n"
    "Numeric answers take units: 16 GB, 14.9GiB, 1.5e10 (bytes). GB = 10⁹ bytes, GiB = 2³⁰. "
    "A bare small number is read in the question's unit."
)


def keys_table() -> Table:
    table = Table(box=None, pad_edge=False, expand=True, show_edge=False, header_style="bold")
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("where", style="dim")
    table.add_column("does", ratio=1)
    for key, where, does in KEYS:
        table.add_row(key, where, does)
    return table


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "pages.tcss"
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Group(Text("Keys", style="bold"), keys_table(), Text(""), Text(NOTES, style="dim")))
