"""The quiz's screens and widgets keep to their side: they draw, and post what a person did; the app and
the demos decide.

- No demo is named in quiz/screens or quiz/widgets. A result is drawn by its demo's own view (the
  registry's `evidence_view`), so a new demo edits no quiz code. A registry name as a string literal, or a
  `.demo` compared (`result.demo == ...`), matched or used as a key, is a violation.
  A new demo names its view in its registry entry and is drawn by it; a demo that names none gets its
  kind's.
- Messages go up: no screen or widget calls a method of QuizApp's own (Textual's are fine) other than the
  reads of shared data, nor assigns to what the app holds; it posts a message of quiz/messages.py, which
  the app handles.

Both are read from the source with `ast`, and each is shown to find a planted violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import textual.app
from rich.console import Console
from rich.text import Text

import ddpfsdp.quiz
from ddpfsdp.demos.registry import DEMOS, EVIDENCE_VIEWS, RETIRED, Demo, evidence_view_of
from ddpfsdp.quiz.app import QuizApp
from ddpfsdp.quiz.widgets.evidence import result_table

QUIZ = Path(ddpfsdp.quiz.__file__).parent
SIDES = ("screens", "widgets")
DEMO_NAMES = frozenset(DEMOS) | frozenset(RETIRED)

# What a screen may call on the app beyond Textual's own: reads of what the app shares, and the demo runner
# (the app tracks each run it starts from that moment, so quitting stops its ranks).
APP_READS = frozenset({"now", "monotonic", "session_remaining_s", "demo_runner", "kata_runner"})
# The app's methods that screens called before they posted messages; named here too, so that the rule
# holds even were one of them to become a name Textual's App has.
STATE_CHANGES = frozenset({"answer", "save_explain", "reveal_explain", "record_drill", "record_interview_step",
                           "start_session", "start_drill", "start_interview", "end_session", "leave_session",
                           "next_question", "track_run", "untrack_run", "stop_run"})


def side_sources() -> dict[str, str]:
    """quiz/screens and quiz/widgets, source by file name."""
    return {f"{side}/{path.name}": path.read_text(encoding="utf-8")
            for side in SIDES for path in sorted((QUIZ / side).glob("*.py"))}


def _is_demo(node: ast.AST) -> bool:
    """`x.demo`, or `x.demo.name`: a result's or a link's demo."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "demo"


def _by_line(found: list[tuple[int, str]]) -> list[str]:
    return [text for _, text in sorted(found, key=lambda item: item[0])]


def demos_named(source: str, filename: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in DEMO_NAMES:
            found.append((node.lineno, f"{filename}:{node.lineno} names the demo {node.value!r}"))
        elif (isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
              and any(_is_demo(side) for side in (node.left, *node.comparators))):
            found.append((node.lineno, f"{filename}:{node.lineno} compares a demo: {ast.unparse(node)}"))
        elif isinstance(node, ast.Match) and _is_demo(node.subject):
            found.append((node.lineno, f"{filename}:{node.lineno} matches a demo: {ast.unparse(node.subject)}"))
        elif isinstance(node, ast.Subscript) and _is_demo(node.slice):
            found.append((node.lineno, f"{filename}:{node.lineno} keys by a demo: {ast.unparse(node)}"))
    return _by_line(found)


def _reaches_app(node: ast.AST) -> bool:
    """Whether an expression is the app (`self.app`, `app`) or something reached through it."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr == "app":
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id == "app"


def app_state_changes(source: str, filename: str) -> list[str]:
    own = {name for name in vars(QuizApp) if not hasattr(textual.app.App, name)}
    forbidden = (own - APP_READS) | STATE_CHANGES
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in forbidden
                and _reaches_app(node.func.value)):
            found.append((node.lineno, f"{filename}:{node.lineno} calls the app: {ast.unparse(node.func)}"))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _reaches_app(target.value):
                found.append((node.lineno, f"{filename}:{node.lineno} sets what the app holds: {ast.unparse(target)}"))
    return _by_line(found)


def test_the_sides_are_read():
    sources = side_sources()
    assert "screens/question.py" in sources and "widgets/evidence.py" in sources


@pytest.mark.parametrize("rule", [demos_named, app_state_changes], ids=["no-demo-names", "messages-go-up"])
def test_screens_and_widgets_keep_to_their_side(rule):
    assert [line for name, source in side_sources().items() for line in rule(source, name)] == []


PLANTED = '''

def planted(self, result):
    if result.demo == "pipeline":
        self.app.answer(self, None, 0.0, [])
    app = self.app
    app.start_session("practice")
    self.app.session.index += 1
    self.app.flush_unsaved()
    self.app.push_screen(None)
    self.app.post_message(None)
    return self.app.now()
'''


def test_a_planted_demo_name_is_found():
    source = side_sources()["widgets/evidence.py"]
    last = source.count("\n") + 1
    assert demos_named(source + PLANTED, "widgets/evidence.py") == [
        f"widgets/evidence.py:{last + 3} compares a demo: result.demo == 'pipeline'",
        f"widgets/evidence.py:{last + 3} names the demo 'pipeline'",
    ]
    assert demos_named("def f(result):\n    match result.demo:\n        case _:\n            pass\n", "x.py") == [
        "x.py:2 matches a demo: result.demo"]
    assert demos_named("VIEWS = {}\nVIEWS[saved.demo.name]\n", "x.py") == ["x.py:2 keys by a demo: VIEWS[saved.demo.name]"]


def test_a_planted_call_up_into_the_app_is_found():
    source = side_sources()["screens/question.py"]
    last = source.count("\n") + 1
    assert app_state_changes(source + PLANTED, "screens/question.py") == [
        f"screens/question.py:{last + 4} calls the app: self.app.answer",
        f"screens/question.py:{last + 6} calls the app: app.start_session",
        f"screens/question.py:{last + 7} sets what the app holds: self.app.session.index",
        f"screens/question.py:{last + 8} calls the app: self.app.flush_unsaved",
    ]


def own_view(result, width: int) -> list:
    """A view a demo brings, as a test stands in for one."""
    return [Text(f"{result.demo}: drawn by its own view, {width} columns")]


def test_a_new_demo_is_drawn_by_the_view_its_entry_names(monkeypatch):
    monkeypatch.setitem(DEMOS, "a-new-demo", Demo("a-new-demo", "a demo the quiz has never heard of",
                                                  "ddpfsdp.demos.concepts.sampler:run", "concept",
                                                  evidence_view=f"{__name__}:own_view"))
    console = Console(width=70, record=True)
    console.print(result_table({"demo": "a-new-demo"}))
    assert "a-new-demo: drawn by its own view, 70 columns" in console.export_text()


def test_every_demo_has_a_view_of_its_own_or_its_kinds():
    views = {name: entry.evidence_view for name, entry in DEMOS.items()}
    assert views["pipeline"] == "ddpfsdp.demos.measure.pipeline_report:evidence_view"
    assert views["fault"] == "ddpfsdp.demos.faults.render:evidence_view"
    for name in ("ddp", "zro", "fsdp", "compare"):
        assert views[name] == EVIDENCE_VIEWS["training"], name
    for name in ("sampler", "allreduce", "wrap", "comm", "checkpoint"):
        assert views[name] == EVIDENCE_VIEWS["concept"], name
    assert evidence_view_of("no-such-demo") == evidence_view_of(None) == EVIDENCE_VIEWS["concept"]
    with pytest.raises(ValueError, match="a pipeline demo names its own evidence_view"):
        Demo("another-pipeline", "a kind with no default view", "ddpfsdp.demos.train.pipeline:run", "pipeline")
