"""The Textual app driven with a pilot: every kind answered right and wrong, saved, and kept across a restart;
evidence shown from a saved result; and each failure (broken bank, damaged store, missing answer file,
failing demo) shown as a message, not a traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, UTC

import pytest
from conftest import widget_text
from rich.text import Text

from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.screens.feedback import FeedbackScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.screens.message import NoticeScreen, ProblemScreen
from ddpfsdp.quiz.screens.question import QuestionScreen
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZE = (100, 40)


def mark_result(result: dict, ranks_per_gpu: int, gpus: int) -> dict:
    """`result` as a run of `ranks_per_gpu` ranks on each of `gpus` GPUs has it marked where it is made."""
    from ddpfsdp.demos.base.placement import Placement
    from ddpfsdp.demos.result.build import shared
    from ddpfsdp.demos.result.schema import as_result

    return shared(as_result(result), Placement("cuda", ranks_per_gpu * gpus, ranks_per_gpu)).to_json()


class Clock:
    """A controllable wall clock and monotonic clock, so time taken and due dates are exact."""

    def __init__(self):
        self.wall = T0
        self.mono_s = 1000.0

    def now(self):
        return self.wall

    def monotonic(self):
        return self.mono_s

    def advance(self, seconds: float):
        self.wall += timedelta(seconds=seconds)
        self.mono_s += seconds


def _text(widget) -> str:
    """What a Static shows, as plain text (rich renderables included)."""
    import io

    from rich.console import Console

    console = Console(width=96, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(widget.content)
    # Wrapping is the terminal's business; compare words.
    return " ".join(console.file.getvalue().split())


def _table_rows(widget) -> list[list[str]]:
    """The body rows of a rich table shown in a Static, as lists of cell texts."""
    import io

    from rich.console import Console

    console = Console(width=96, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(widget.content)
    lines = console.file.getvalue().splitlines()
    # The header's borders are heavy (┃); the body's are light (│).
    return [[cell.strip() for cell in line.strip("│ ").split("│")] for line in lines if line.startswith("│")]


def _app(quiz_bank, clock=None, **kwargs):
    clock = clock or Clock()
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=7, clock=clock.now, monotonic=clock.monotonic, **kwargs)


def _typed_numeric(q, right: bool) -> str:
    """A numeric answer as a person types it: bytes in GB, counts and ratios bare; right or 3x off."""
    value = q.value if right else q.value * 3
    return f"{value / 1e9:.6g} GB" if q.unit not in ("", "x") else f"{value:.6g}"


async def _answer_current(pilot, right: bool, clock: Clock | None = None, think_s: float = 15.0):
    """Answer the question on screen, right or wrong, with keys only; return the question."""
    app = pilot.app
    screen = app.screen
    assert isinstance(screen, QuestionScreen)
    q = screen.question
    if clock is not None:
        clock.advance(think_s)
    if q.kind == "single":
        target = q.answer if right else next(c for c in screen.display_choices if c != q.answer)
        await pilot.press(str(screen.display_choices.index(target) + 1))
    elif q.kind == "multi":
        targets = list(q.answer) if right else [c for c in screen.display_choices if c not in q.answer][:1]
        for target in targets:
            await pilot.press(str(screen.display_choices.index(target) + 1))
    elif q.kind == "order":
        steps = list(q.steps) if right else [q.steps[1], q.steps[0], *q.steps[2:]]
        for step in steps:
            await pilot.press(str(screen.display_steps.index(step) + 1))
    elif q.kind == "numeric":
        await pilot.press(*_typed_numeric(q, right))
    else:
        await pilot.press(*"overlap")
    await pilot.press("enter")
    await pilot.pause()
    if q.kind == "explain":
        assert isinstance(app.screen, FeedbackScreen) and app.screen.awaiting_self_grade
        await pilot.press("3" if right else "1")
        await pilot.pause()
    return q


async def test_every_kind_right_and_wrong_is_graded_saved_and_kept(quiz_bank):
    clock = Clock()
    app = _app(quiz_bank, clock)
    seen = {}
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, HomeScreen)
        for right in (True, False):
            for topic in ("ddp", "fsdp-wrap"):
                app.start_session("practice", topic=topic)
                await pilot.pause()
                while isinstance(app.screen, QuestionScreen):
                    q = await _answer_current(pilot, right, clock)
                    feedback = app.screen
                    assert isinstance(feedback, FeedbackScreen)
                    assert feedback.grade.correct is right, (q.id, feedback.grade)
                    verdict = _text(feedback.query_one("#verdict"))
                    assert ("✔" if right else "✘") in verdict
                    seen[(q.kind, right)] = q.id
                    await pilot.press("n")
                    await pilot.pause()
                assert isinstance(app.screen, HomeScreen)
                clock.advance(3600)
    assert {kind for kind, _ in seen} == {"single", "multi", "numeric", "order", "explain"}
    assert len(seen) == 10

    # The store has every answer, committed as it was given.
    store = Store.open()
    attempts = store.attempts()
    assert len(attempts) == 12
    by_question = {}
    for attempt in attempts:
        by_question.setdefault(attempt.question_id, []).append(attempt)
    single = by_question["ddp-grad-sync"]
    assert [a.correct for a in single] == [True, False]
    assert single[0].answer == "all-reduce in buckets during backward"
    assert single[0].time_s == pytest.approx(15.0)
    assert [a.rating for a in single] == [3, 1]  # Good at 15 s for a level-1 single; Again when wrong
    assert by_question["ddp-explain-buckets"][0].answer == {"notes": "overlap"}
    assert [a.rating for a in by_question["ddp-explain-buckets"]] == [3, 1]
    assert by_question["wrap-forward-order"][1].answer[0] == "run the unit's forward"
    assert store.card_json("ddp-grad-sync") is not None
    store.close()

    # A new app on the same data directory shows the progress kept.
    restarted = _app(quiz_bank, clock)
    async with restarted.run_test(size=SIZE) as pilot:
        label = restarted.screen.row_text("topic-ddp")
        assert "4/4 seen" in label
        summary = _text(restarted.screen.query_one("#home-summary"))
        assert "12 answers so far, 50% right" in summary
        await pilot.press("p")
        await pilot.pause()
        table = restarted.screen.query_one("#progress-table")
        assert table.row_count == 2


async def test_numeric_nonsense_asks_again_and_saves_nothing(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        app.start_session("practice", topic="ddp")
        await pilot.pause()
        while app.screen.question.kind != "numeric":
            await pilot.press("n")
            await pilot.pause()
        await pilot.press(*"lots", "enter")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        assert "not a number" in _text(app.screen.query_one("#question-error"))
        await pilot.press("enter")
    assert Store.open().attempts() == []


async def test_enter_without_a_choice_says_what_to_do(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen) and app.screen.question.kind == "single"
        await pilot.press("enter")
        await pilot.pause()
        assert "Choose an answer first" in _text(app.screen.query_one("#question-error"))


async def test_choices_are_clickable(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        index = screen.display_choices.index(screen.question.answer) + 1
        await pilot.click(f"#choice-{index}")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, FeedbackScreen) and app.screen.grade.correct


def _saved_wrap_result(passed: bool = True):
    import os

    return {
        "schema": "ddpfsdp.demo/1",
        "demo": "wrap",
        "config": {"world_size": 2, "device": "cpu", "backend": "gloo", "model": "tiny"},
        "env": {"torch": "2.13.0", "python": "3.11.7", "device_names": ["cpu"], "cpu_count": os.cpu_count(), "hostname": socket.gethostname()},
        "checks": [
            {"name": "per_block_peak_below_root_only", "passed": passed, "detail": "peak 1.20 MiB per block vs 2.50 MiB root only", "values": {}},
            {"name": "collectives_scale_with_units", "passed": True, "detail": "all_gather per step 2 -> 8 with 1 -> 4 units", "values": {}},
        ],
        "peaks": {"root_only": 2621440, "per_block": 1258291},
    }


async def test_feedback_shows_saved_evidence_at_once(quiz_bank):
    clock = Clock()
    with Store.open() as store:
        store.save_demo_result("wrap", ["--model", "tiny", "--procs", "2"], _saved_wrap_result(), saved_at=T0 - timedelta(hours=3))
    app = _app(quiz_bank, clock, topic="fsdp-wrap")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        while app.screen.question.id != "wrap-peak-vs-units":
            await pilot.press("n")
            await pilot.pause()
        await _answer_current(pilot, True)
        panel = app.screen.query_one("#evidence")
        shown = _text(panel.query_one("#evidence-saved"))
        assert "Last measured 3 hours ago on this machine" in shown
        assert "2 CPU processes (gloo)" in shown
        assert "per_block_peak_below_root_only" in shown and "✔" in shown
        assert "peak 1.20 MiB per block" in shown
        assert "gloo throughput" in shown or "does not represent NCCL" in shown


async def test_d_on_feedback_scrolls_the_evidence_into_view(quiz_bank):
    app = _app(quiz_bank, Clock(), topic="fsdp-wrap")
    async with app.run_test(size=(100, 14)) as pilot:
        await pilot.pause()
        while app.screen.question.id != "wrap-peak-vs-units":
            await pilot.press("n")
            await pilot.pause()
        await _answer_current(pilot, True)
        panel = app.screen.query_one("#evidence")
        scroller = app.screen.query_one("#feedback-body")
        top = panel.virtual_region.y  # the panel's offset inside the scrolled body
        assert scroller.scroll_y == 0 and top >= scroller.size.height  # below the fold
        await pilot.press("d")
        await pilot.pause(0.3)
        assert scroller.scroll_y == min(top, scroller.max_scroll_y) > 0


class FakeRun:
    """Stands in for the launcher in UI tests: a scripted event stream."""

    def __init__(self, events, result=None, error=None):
        self._events = events
        self.result = result
        self.error = error
        self.cancelled = False
        self.returncode = None

    def events(self):
        for event in self._events:
            if event.get("event") == "result":
                self.result = event["result"]
            if event.get("event") == "error":
                self.error = event
            yield event
        self.returncode = 1 if self.error else 0

    def cancel(self):
        self.cancelled = True


async def test_a_failing_demo_is_shown_clearly_and_nothing_is_saved(quiz_bank):
    error = {"event": "error", "rank": 1, "message": "InjectedFault: rank 1 failed at step 2 on purpose", "traceback": "Traceback (most recent call last):\n  ...\nInjectedFault: rank 1"}
    events = [
        {"event": "start", "demo": "wrap", "world_size": 2, "device": "cpu", "backend": "gloo", "config": {}},
        {"event": "progress", "step": 0, "steps": 4, "loss": 2.5},
        {"event": "log", "message": "wrapping each block"},
        error,
    ]
    app = _app(quiz_bank, topic="fsdp-wrap", demo_runner=lambda demo, args: FakeRun(events))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        while app.screen.question.id != "wrap-peak-vs-units":
            await pilot.press("n")
            await pilot.pause()
        await _answer_current(pilot, True)
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        panel = app.screen.query_one("#evidence")
        status = _text(panel.query_one("#evidence-status"))
        assert "The demo failed on rank 1" in status
        assert "InjectedFault" in status and "Nothing was saved" in status
        assert "wrapping each block" in "\n".join(str(line.text) for line in panel.query_one("RichLog").lines)
        assert not panel.running
    assert Store.open().last_demo_result("wrap", ["--model", "tiny"]) is None


async def test_a_finished_demo_is_saved_and_shown(quiz_bank):
    result = _saved_wrap_result(passed=False)
    events = [{"event": "progress", "step": i, "steps": 3} for i in range(3)] + [{"event": "result", "result": result}]
    runs = []

    def runner(demo, args):
        runs.append((demo, args))
        return FakeRun(events)

    app = _app(quiz_bank, topic="fsdp-wrap", demo_runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n")  # the order question comes first
        await pilot.pause()
        await pilot.press("d")  # evidence before answering
        await pilot.pause()
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = _text(app.screen.query_one("#evidence-saved"))
        assert "Measured just now" in shown and "✘" in shown
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
    assert runs == [("wrap", ["--model", "tiny"])]
    saved = Store.open().last_demo_result("wrap", ["--model", "tiny"])
    assert saved is not None and saved.result["checks"][0]["passed"] is False


class HeldRun(FakeRun):
    """A run that waits at its start until the test lets it go, placed like the launcher places one."""

    def __init__(self, events):
        import threading

        super().__init__(events)
        self.placement = type("Placement", (), {"world_size": 2, "device": "cpu"})()
        self.go = threading.Event()

    def events(self):
        self.go.wait(timeout=30)
        yield from super().events()


@pytest.mark.parametrize(
    "args, no_gpu, foreseen",
    [
        (["--model", "tiny"], True, "2 ranks on cpu (gloo)"),
        (["--model", "tiny", "--tp", "2"], True, "4 ranks on cpu (gloo)"),  # two data-parallel groups of tp
        (["--model", "tiny"], False, None),  # GPU devices are there: only the launcher can tell
        (["--simulate", "--world", "64", "--params", "7B"], False, "a simulated world of 64 ranks"),
        (["--simulate", "--world=8"], True, "a simulated world of 8 ranks"),
    ],
)
def test_where_a_run_goes_is_foreseen_only_where_it_is_certain(monkeypatch, args, no_gpu, foreseen):
    from ddpfsdp.quiz import placement

    monkeypatch.setattr(placement, "no_gpu_here", lambda: no_gpu)
    assert placement.foreseen_placement("fsdp", args) == foreseen


def test_no_gpu_here_reads_the_device_nodes_and_cuda_visible_devices(monkeypatch):
    from ddpfsdp.quiz import placement

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(placement.glob, "glob", lambda pattern: ["/dev/nvidia0"])
    assert placement.no_gpu_here()  # every GPU hidden
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert not placement.no_gpu_here()
    monkeypatch.setattr(placement.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(placement.os.path, "exists", lambda path: False)
    assert placement.no_gpu_here()


@pytest.mark.parametrize("no_gpu", [True, False])
async def test_a_run_says_so_at_once_and_leaves_no_progress_or_blank_lines_after(quiz_bank, monkeypatch, no_gpu):
    import time

    from ddpfsdp.quiz import placement

    monkeypatch.setattr(placement, "no_gpu_here", lambda: no_gpu)

    result = _saved_wrap_result()
    events = [{"event": "start", "world_size": 2, "device": "cpu", "backend": "gloo"}]
    events += [{"event": "progress", "step": i, "steps": 3, "loss": 2.0 - i / 10} for i in range(3)]
    events += [{"event": "result", "result": result}]
    run = HeldRun(events)
    app = _app(quiz_bank, topic="fsdp-wrap", demo_runner=lambda demo, args: run)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("n")  # the order question comes first
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        panel = app.screen.query_one("#evidence")
        saved = panel.query_one("#evidence-saved")
        assert "Press r to run it now" in _text(saved) and saved.display
        said = []
        show_status = panel.status
        panel.status = lambda text: (said.append((time.monotonic(), str(text))), show_status(text))
        pressed = time.monotonic()
        await pilot.press("r")
        # The key's own handler says the run is starting, before anything is launched: where it goes
        # when that is certain without torch, else what is started.
        first_at, first = said[0]
        assert first == ("Starting 2 ranks on cpu (gloo)… Esc cancels" if no_gpu else "Starting wrap --model tiny… Esc cancels")
        assert first_at - pressed < 0.2
        status = panel.query_one("#evidence-status")
        while "Starting 2 ranks on cpu (gloo)" not in _text(status) and time.monotonic() - pressed < 10:
            await pilot.pause(0.02)
        # Then, as soon as the launcher has placed the run, where it goes.
        assert _text(status) == "Starting 2 ranks on cpu (gloo)… Esc cancels" and status.display
        assert not saved.display  # "Press r" is gone while the run starts
        run.go.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert _text(status).startswith("Finished in ") and _text(status).endswith("the result is saved.")
        # Nothing of the run is left above the result: no progress bar, no log, no blank block.
        assert panel.query_one("#evidence-progress").region.height == 0
        assert panel.query_one("#evidence-log").region.height == 0
        assert saved.display and "Measured just now" in _text(saved)
        assert saved.region.y == status.region.bottom


async def test_a_broken_bank_is_a_message_not_a_traceback(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    path = bank_dir / "ddp.toml"
    path.write_text(path.read_text().replace('kind = "explain"', 'kind = "essay"'))
    app = make_app(bank_dir=bank_dir, answers_dir=answers_dir)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, ProblemScreen)
        message = _text(app.screen.query_one("#problem-message"))
        assert "ddp.toml" in message and "ddp-explain-buckets" in message and "'kind'" in message
        assert "ddpfsdp quiz --check" in _text(app.screen.query_one("#problem-advice"))
        await pilot.press("q")


async def test_a_missing_answer_file_at_runtime_is_a_message(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.question.answer_file.unlink()
        await _answer_current(pilot, True)
        answer = app.screen.query_one("#model-answer")
        assert "could not be read" in answer.source
    assert len(Store.open().attempts()) == 1


async def test_a_damaged_store_is_moved_aside_with_a_warning_and_answers_still_save(quiz_bank, ddpfsdp_home):
    ddpfsdp_home.mkdir(parents=True, exist_ok=True)
    (ddpfsdp_home / "ddpfsdp.sqlite3").write_bytes(b"not a database at all" * 200)
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # Said first, over the home screen, with the way to bring the answers back; Enter goes on.
        notice = app.screen
        assert isinstance(notice, NoticeScreen)
        said = widget_text(notice.query_one("#notice-message"))
        assert "damaged" in said and "moved to" in said and "ddpfsdp progress --recover" in said
        await pilot.press("enter")
        assert isinstance(app.screen, HomeScreen)
        app.start_session("practice", topic="ddp")
        await pilot.pause()
        await _answer_current(pilot, True)
    assert len(Store.open().attempts()) == 1
    assert list(ddpfsdp_home.glob("ddpfsdp.sqlite3.damaged-*"))


async def test_mock_interview_ends_with_a_score_by_topic(quiz_bank):
    clock = Clock()
    app = _app(quiz_bank, clock, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        answered = 0
        while isinstance(app.screen, QuestionScreen):
            await _answer_current(pilot, answered % 2 == 0, clock)
            answered += 1
            await pilot.press("n")
            await pilot.pause()
        from ddpfsdp.quiz.screens.report import MockReportScreen

        assert isinstance(app.screen, MockReportScreen)
        table = _text(app.screen.query_one("#report-table"))
        text = _text(app.screen.query_one("#report-summary"))
        assert f"over {answered} questions ({answered} answered, {answered} asked)" in text
        assert "score by topic" in table and "DDP basics" in table
    attempts = Store.open().attempts()
    assert {a.mode for a in attempts} == {"mock"} and len(attempts) == answered
    assert any(a.kind == "explain" for a in attempts)


async def test_a_mock_skipped_throughout_still_scores_every_topic_asked(quiz_bank):
    app = _app(quiz_bank, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        asked = set()
        while isinstance(app.screen, QuestionScreen):
            asked.add(app.bank.topics[app.screen.question.topic].title)
            await pilot.press("ctrl+n")  # skips from a text box too
            await pilot.pause()
        assert asked == {"DDP basics", "Wrap granularity"}
        rows = _table_rows(app.screen.query_one("#report-table"))
        # Each topic asked has its row: how many were asked, none answered, a score of 0%.
        assert sorted(rows) == [["DDP basics", "4", "0", "0%"], ["Wrap granularity", "2", "0", "0%"]]
        assert "(0 answered, 6 asked)" in _text(app.screen.query_one("#report-summary"))
    assert Store.open().attempts() == []


@pytest.mark.parametrize("width", [80, 120])
async def test_the_mock_header_keeps_position_and_timer_on_question_and_feedback(quiz_bank, width):
    clock = Clock()
    app = _app(quiz_bank, clock, mock=True)
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        clock.advance(61)
        header = app.screen.query_one("#question-header")
        header.title = Text("A topic name long enough to fill any header " * 4)  # the worst case
        header.refresh()
        await pilot.pause()
        shown = header.render().plain
        assert shown.rstrip().endswith("1 of 6  ⏱ 18:59 left"), shown
        assert "…" in shown
        await _answer_current(pilot, True, clock)
        shown = app.screen.query_one("#feedback-header").render().plain
        assert shown.rstrip().endswith("1 of 6  ⏱ 18:44 left"), shown


async def test_a_mock_question_on_screen_when_time_runs_out_ends_the_mock(quiz_bank):
    from ddpfsdp.quiz.screens.report import MockReportScreen

    clock = Clock()
    app = _app(quiz_bank, clock, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        clock.advance(20 * 60)
        await pilot.pause(1.3)  # the header looks at the clock once a second
        assert isinstance(app.screen, MockReportScreen)
        assert "Time is up" in _text(app.screen.query_one("#report-summary"))


async def test_mock_interview_time_runs_out(quiz_bank):
    clock = Clock()
    app = _app(quiz_bank, clock, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await _answer_current(pilot, True, clock)
        clock.advance(21 * 60)
        await pilot.press("n")
        await pilot.pause()
        text = _text(app.screen.query_one("#report-summary"))
        assert "Time is up" in text and "(1 answered, 1 asked)" in text


async def test_review_with_nothing_due_stays_home_and_its_toast_goes_with_the_screen(quiz_bank):
    app = _app(quiz_bank, review=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert any("Nothing is due" in n.message for n in app._notifications)
        app.start_session("practice", topic="ddp")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        assert list(app._notifications) == []
        app.notify("a note about this question")
        await pilot.press("question_mark")  # help is a modal over the question: the toast stays
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["a note about this question"]


async def test_a_numeric_error_is_shown_under_its_input_at_80x24(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        while app.screen.question.kind != "numeric":
            await pilot.press("ctrl+n")
            await pilot.pause()
        await pilot.press(*"lots", "enter")
        await pilot.pause(0.2)
        answer, error = app.screen.query_one("#answer-input"), app.screen.query_one("#question-error")
        assert "not a number" in _text(error)
        # Right below the box it is about, and on screen.
        assert error.region.y == answer.region.bottom
        assert 0 <= error.region.y < 24 - 2


async def test_help_opens_and_closes(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        from ddpfsdp.quiz.screens.help import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)


_NO_TORCH = textwrap.dedent(
    """
    import asyncio, json, socket, sys, os
    from datetime import datetime, timezone
    sys.path.insert(0, {tests!r})
    from conftest import write_quiz_bank
    from pathlib import Path
    bank_dir, answers_dir = write_quiz_bank(Path({root!r}))
    from ddpfsdp.quiz.store import Store
    with Store.open() as store:
        store.save_demo_result("wrap", ["--model", "tiny"], json.loads({result!r}))
    from ddpfsdp.quiz.app import make_app
    from ddpfsdp.quiz.screens.question import QuestionScreen

    async def main():
        app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=1, topic="fsdp-wrap")
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            while app.screen.question.id != "wrap-peak-vs-units":
                await pilot.press("n")
                await pilot.pause()
            q = app.screen.question
            await pilot.press(str(app.screen.display_choices.index(q.answer) + 1), "enter")
            await pilot.pause()
            from rich.console import Console
            console = Console(width=96, record=True, file=open(os.devnull, "w"))
            console.print(app.screen.query_one("#evidence-saved").content)
            shown = console.export_text()
            assert "per_block_peak_below_root_only" in shown, shown
        drill_app = make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=1, drill=True)
        async with drill_app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            drill_app.screen.query_one("#drill-input").value = "1"
            await pilot.press("enter")
            await pilot.pause()
            assert drill_app.screen.grade is not None
    asyncio.run(main())
    print(",".join(m for m in ("torch",) if m in sys.modules))
    """
)


def test_starting_answering_viewing_evidence_and_drilling_never_imports_torch(tmp_path):
    # A fresh interpreter is the only way to prove a deferral defers.
    from pathlib import Path

    code = _NO_TORCH.format(tests=str(Path(__file__).parent), root=str(tmp_path / "bank"), result=json.dumps(_saved_wrap_result()))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch" not in proc.stdout, proc.stdout


def _one_per_topic_every_kind(bank) -> list:
    """A question of each topic, its kind taken in turn, so every kind comes up and every topic too."""
    from ddpfsdp.quiz.loader import KINDS

    picked = []
    for index, topic in enumerate(bank.topics):
        in_topic = bank.in_topic(topic)
        wanted = [KINDS[(index + step) % len(KINDS)] for step in range(len(KINDS))]
        picked.append(next(q for kind in wanted for q in in_topic if q.kind == kind))
    return picked


async def test_real_bank_questions_open_and_take_their_right_answers():
    # The shipped bank end to end: a question of every topic, every kind among them, renders and
    # grades right when answered right with keys.
    app = make_app(seed=2, clock=Clock().now)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        questions = _one_per_topic_every_kind(app.bank)
        assert {q.kind for q in questions} == {"single", "multi", "numeric", "order", "explain"}
        assert {q.topic for q in questions} == set(app.bank.topics)
        app.start_session("practice", questions=questions)
        await pilot.pause()
        graded = 0
        while isinstance(app.screen, QuestionScreen):
            q = await _answer_current(pilot, True)
            assert isinstance(app.screen, FeedbackScreen), q.id
            assert app.screen.grade.correct or q.kind == "explain", (q.id, app.screen.grade)
            graded += 1
            await pilot.press("n")
            await pilot.pause()
    assert graded == len(questions)
    assert len(Store.open().attempts()) == len(questions)


def test_every_real_numeric_question_takes_its_answer_as_a_person_types_it():
    # Without the screens: every numeric question of the shipped bank, its unit and computed answer.
    from ddpfsdp.quiz.grading import grade_numeric
    from ddpfsdp.quiz.loader import load_bank

    numeric = [q for q in load_bank().questions.values() if q.kind == "numeric"]
    assert len(numeric) >= 10
    for q in numeric:
        assert grade_numeric(q, _typed_numeric(q, True)).correct, (q.id, _typed_numeric(q, True))
        assert not grade_numeric(q, _typed_numeric(q, False)).correct, q.id


async def test_predict_then_measure_shows_prediction_theory_and_measurement(quiz_bank):
    with Store.open() as store:
        store.save_demo_result(
            "allreduce", [],
            {"demo": "allreduce", "config": {"world_size": 4, "device": "cpu", "backend": "gloo"},
             "env": {"hostname": socket.gethostname()}, "checks": [], "measured": {"wire_bytes_per_rank": 1.5e9}},
        )
    app = _app(quiz_bank, topic="ddp")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        while app.screen.question.kind != "numeric":
            await pilot.press("n")
            await pilot.pause()
        await pilot.press(*"2 GB", "enter")
        await pilot.pause()
        shown = " ".join(_text(app.screen.query_one("#predict-measure")).replace("│", " ").split())
        assert "your prediction 2 GB" in shown
        assert "analytic model (theory) 1.5 GB wire_bytes_per_rank" in shown
        assert "measured 1.5 GB 1.00x theory" in shown


async def test_r_on_a_one_gpu_machine_runs_two_ranks_sharing_it_and_the_panel_says_so(quiz_bank, monkeypatch):
    """The app's own runner on a machine with one GPU (injected): `r` is placed on two ranks sharing the
    GPU, not refused; the status says so, and the saved result's panel shows the label and the
    not-judged check apart from the others."""
    from ddpfsdp.demos.launch import launcher
    from ddpfsdp.quiz.app import default_demo_runner

    monkeypatch.setattr("ddpfsdp.demos.launch.placement.cuda_device_count", lambda: 1)
    result = _saved_wrap_result()
    result["config"].update(device="cuda", backend="gloo")
    result["checks"].append({"name": "ddp_overlaps_allreduce_with_backward", "passed": False, "detail": "late",
                             "values": {}})
    result = mark_result(result, ranks_per_gpu=2, gpus=1)
    events = [{"event": "start", "world_size": 2, "device": "cuda", "backend": "gloo"},
              {"event": "result", "result": result}]
    placed, held = [], HeldRun(events)

    def runner(demo, args):
        held.placement = default_demo_runner(demo, args).placement
        placed.append(held.placement)
        return held

    app = _app(quiz_bank, topic="fsdp-wrap", demo_runner=runner)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        panel = app.screen.query_one("#evidence")
        await pilot.press("r")
        status = panel.query_one("#evidence-status")
        for _ in range(200):
            if "sharing one GPU" in _text(status):
                break
            await pilot.pause(0.02)
        assert _text(status) == "Starting 2 ranks sharing one GPU (gloo, CUDA tensors)… Esc cancels"
        assert placed == [launcher.Placement("cuda", 2, 2)]
        held.go.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        saved = " ".join(_text(panel.query_one("#evidence-saved")).split())
        assert "2 ranks sharing one GPU" in saved and "2 ranks share one GPU over gloo" in saved
        assert "not NCCL's and not 2 GPUs'" in saved
    from ddpfsdp.quiz import evidence as ev

    items = {item.name: item for item in ev.all_checks(result)}
    assert items["ddp_overlaps_allreduce_with_backward"].not_judged and items["collectives_scale_with_units"].passed


async def test_escape_in_a_mock_asks_first_then_shows_the_score_so_far(quiz_bank):
    """Escape once left a mock at once and lost its score: it asks, n goes on, y shows the score so far."""
    from ddpfsdp.quiz.screens.feedback import FeedbackScreen
    from ddpfsdp.quiz.screens.message import ConfirmScreen
    from ddpfsdp.quiz.screens.report import MockReportScreen

    clock = Clock()
    app = _app(quiz_bank, clock, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await _answer_current(pilot, True, clock)
        assert isinstance(app.screen, FeedbackScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "1 of 6 questions answered" in _text(app.screen.query_one("#notice-message"))
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, FeedbackScreen) and app.session is not None
        await pilot.press("n")  # the next question
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, MockReportScreen) and app.session is None
        summary = _text(app.screen.query_one("#report-summary"))
        assert summary.startswith("Left early.") and "(1 answered, 2 asked)" in summary
