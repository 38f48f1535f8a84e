"""The Katas screen: status per kata, a file opened (its starter written first), a hint, a check run in a
worker and shown; what records goes up as messages the app handles. Snapshots at 80x24 and 120x40.

Checks here run a stand-in for the launcher's run (a saved result, or a refusal); the real launch is
test_kata_cli.py's. Update the snapshots only after looking at the report:
pytest tests/test_kata_screen.py --snapshot-update
"""

from __future__ import annotations

from datetime import datetime, timedelta, UTC

import pytest

from ddpfsdp.demos.katas.catalog import KATAS
from ddpfsdp.demos.result.checks import Check
from ddpfsdp.quiz import katas
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.messages import KataChecked, KataHintAsked, KataOpened
from ddpfsdp.quiz.screens.katas import KatasScreen
from ddpfsdp.quiz.store import Store
from saved_results import placed_result

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


def _deadlock_result() -> dict:
    """A ring all-reduce that deadlocked, as rank 0 reports it."""
    lines = ["deadlock after the 3 s deadline, in case 1 element: rank 0 waits to receive from 2 in step 0; rank 1 "
             "waits to receive from 0 in step 0; rank 2 waits to receive from 1 in step 0: every rank receives "
             "before it sends"]
    checks = [Check("no_exception", True, "no exception on any of 3 ranks"),
              Check("no_forbidden_call", True, "only allowed calls"),
              Check("no_deadlock", False, lines[0].split(": ", 1)[1]),
              Check("finishes", True, "no rank was left running"),
              *(Check(name, None, "not judged", {}, not_judged="your code did not run to its end")
                for name in ("every_request_waited", *KATAS["ring-allreduce"].checks))]
    return placed_result("kata", {"kata": "ring-allreduce", "world_size": 3, "device": "cpu", "backend": "gloo"},
                    {"hostname": "host"}, checks, kata={"name": "ring-allreduce", "passed": False},
                    failure={"lines": lines, "traceback": ""}, ranks=[]).to_json()


class _Run:
    """What the screen's worker reads of a run: events, then a result (or an error), and cancel()."""

    def __init__(self, result=None, error=None):
        self.result, self.error, self.cancelled = result, error, False

    def events(self):
        yield {"event": "start"}
        if self.result is not None:
            yield {"event": "result", "result": self.result}

    def cancel(self):
        self.cancelled = True


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    return tmp_path / "ddpfsdp-katas"


@pytest.fixture
def history(workspace):
    """One kata passed an hour ago, one started."""
    with Store.open() as store:
        katas.start(KATAS["sampler-indices"], store, now=T0 - timedelta(hours=1))
        katas.record_check(KATAS["sampler-indices"], store, True, [], T0 - timedelta(hours=1))
        katas.start(KATAS["ring-allreduce"], store, now=T0 - timedelta(minutes=30))
        katas.record_check(KATAS["ring-allreduce"], store, False, ["no_deadlock"], T0 - timedelta(minutes=20))


def _app(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=11, clock=lambda: T0, monotonic=lambda: 500.0)


async def _to_katas(pilot):
    await pilot.pause()
    await pilot.press("w")
    await pilot.pause()
    assert isinstance(pilot.app.screen, KatasScreen)


def _posted(seen, kind):
    """Each message of `kind` once (the hook sees one at every stop on its way up to the app)."""
    return list({id(m): m for m in seen if isinstance(m, kind)}.values())


async def _on(pilot, name):
    table = pilot.app.screen.query_one("DataTable")
    table.move_cursor(row=list(KATAS).index(name))
    await pilot.pause()


@SIZES
def test_the_katas_screen(snap_compare, quiz_bank, history, size):
    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=_to_katas)


@SIZES
def test_a_deadlocked_check_on_the_katas_screen(snap_compare, quiz_bank, history, size):
    async def checked(pilot):
        await _to_katas(pilot)
        pilot.app.kata_runner = lambda kata, path: _Run(_deadlock_result())
        await _on(pilot, "ring-allreduce")
        await pilot.press("c")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(quiz_bank), terminal_size=size, run_before=checked)


async def test_opening_a_kata_writes_its_starter_and_the_app_records_it(quiz_bank, workspace):
    app = _app(quiz_bank)
    seen = []
    async with app.run_test(size=(100, 40), message_hook=seen.append) as pilot:
        await _to_katas(pilot)
        await _on(pilot, "ddp-buckets")
        await pilot.press("o")
        await pilot.pause()
        path = workspace / "ddp_buckets.py"
        assert path.read_text() == KATAS["ddp-buckets"].starter_path.read_text()
        assert _posted(seen, KataOpened) == [KataOpened("ddp-buckets", str(path), True)]
        assert app.store.kata_files()["ddp-buckets"] == path.resolve()
        assert [e.event for e in app.store.kata_events("ddp-buckets")] == ["start"]
        row = app.screen.query_one("DataTable").get_row("ddp-buckets")
        assert str(row[-1]) == "started"
        # Opening it again never writes over it.
        path.write_text("# mine\n")
        await pilot.press("o")
        await pilot.pause()
        assert path.read_text() == "# mine\n"


async def test_a_hint_is_asked_of_the_app_recorded_and_shown(quiz_bank, workspace):
    app = _app(quiz_bank)
    seen = []
    async with app.run_test(size=(100, 40), message_hook=seen.append) as pilot:
        await _to_katas(pilot)
        await _on(pilot, "one-f-one-b")
        await pilot.press("h", "h")
        await pilot.pause()
        assert _posted(seen, KataHintAsked) == [KataHintAsked("one-f-one-b")] * 2
        assert sum(e.event == "hint" for e in app.store.kata_events("one-f-one-b")) == 2
        detail = str(app.screen.query_one("#kata-detail").content.renderables[0])
        assert detail.startswith("Hint 2 of 3: ")


async def test_a_check_of_a_missing_file_says_so_without_a_launch(quiz_bank, workspace):
    app = _app(quiz_bank)
    seen = []
    async with app.run_test(size=(100, 40), message_hook=seen.append) as pilot:
        await _to_katas(pilot)
        app.kata_runner = lambda kata, path: pytest.fail("a run was launched")
        await pilot.press("c")
        await pilot.pause()
        [checked] = _posted(seen, KataChecked)
        assert checked.result is None and "does not exist" in checked.problem
        assert app.store.kata_events() == []


async def test_a_passing_check_is_recorded_and_reviews_the_card(quiz_bank, workspace):
    app = _app(quiz_bank)
    passing = placed_result("kata", {"kata": "memory-estimate", "world_size": 3}, {}, [Check("equals_calc", True, "equal")],
                       kata={"name": "memory-estimate", "passed": True}, ranks=[]).to_json()
    async with app.run_test(size=(100, 40)) as pilot:
        await _to_katas(pilot)
        await _on(pilot, "memory-estimate")
        await pilot.press("o")  # the starter: a file that reads and parses
        await pilot.pause()
        app.kata_runner = lambda kata, path: _Run(passing)
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        [check] = [e for e in app.store.kata_events("memory-estimate") if e.event == "check"]
        assert check.passed is True
        assert app.store.attempts("kata:memory-estimate")[0].correct
        assert str(app.screen.query_one("DataTable").get_row("memory-estimate")[-1]) == "passed"


async def test_a_running_check_is_cancelled_by_escape_and_stops_with_the_screen(quiz_bank, workspace):
    import threading

    release = threading.Event()

    class Slow(_Run):
        def events(self):
            yield {"event": "start"}
            release.wait(10)

        def cancel(self):
            self.cancelled = True
            release.set()

    app = _app(quiz_bank)
    runs = []
    async with app.run_test(size=(100, 40)) as pilot:
        await _to_katas(pilot)
        await _on(pilot, "memory-estimate")
        await pilot.press("o")
        await pilot.pause()
        app.kata_runner = lambda kata, path: runs.append(Slow()) or runs[-1]
        await pilot.press("c")
        await pilot.pause(0.2)
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert runs and runs[0].cancelled
        assert isinstance(app.screen, KatasScreen)  # escape cancelled the check; it did not leave
        assert "cancelled" in str(app.screen.query_one("#kata-detail").content.renderables[0])
        assert app.store.kata_events("memory-estimate")[-1].event == "start"  # a cancelled check records nothing


async def test_feedback_on_a_question_a_kata_writes_says_write_it_yourself(quiz_bank, workspace):
    bank_dir, answers_dir = quiz_bank
    path = bank_dir / "ddp.toml"
    path.write_text(path.read_text().replace('id = "ddp-grad-sync"\n', 'id = "ddp-grad-sync"\nkata = "grad-accumulation"\n'))
    app = _app(quiz_bank)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        question = app.bank.questions["ddp-grad-sync"]
        app.start_session("practice", questions=[question])
        await pilot.pause()
        screen = app.screen
        await pilot.press(str(screen.display_choices.index(question.answer) + 1), "enter")
        await pilot.pause()
        line = str(app.screen.query_one("#write-it-yourself").content)
        assert line == ("Write it yourself: Gradient accumulation, one sync per step, checked on real ranks: "
                        "ddpfsdp kata start grad-accumulation (or w on the home screen)")
