"""Every screen at 80 columns: what gives way is text, cut after a whole word with an ellipsis, never
a number; the home menu works by keys and by mouse; an input's placeholder fits its box."""

from __future__ import annotations

from datetime import datetime, UTC

import pytest
from rich.cells import cell_len
from textual.app import App

from ddpfsdp.quiz import grading
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.screens.drill import DrillScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.screens.question import QuestionScreen
from ddpfsdp.quiz.widgets.fitting import ellipsize
from ddpfsdp.quiz.widgets.menu_rows import ActionRow, Menu, TopicRow
from ddpfsdp.quiz.widgets.room import Room

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, width, fitted",
    [
        ("short", 10, "short"),
        ("Params, grads, optimizer state and activations", 30, "Params, grads, optimizer…"),
        ("explicit fully_shard calls per block", 20, "explicit…"),
        ("Supercalifragilistic", 8, "Superca…"),
        ("anything", 0, ""),
    ],
)
def test_ellipsize_cuts_after_a_whole_word(text, width, fitted):
    assert ellipsize(text, width) == fitted
    assert cell_len(ellipsize(text, width)) <= width


@pytest.mark.parametrize("width", [40, 72, 116])
def test_a_topic_row_keeps_its_numbers_whole_and_cuts_its_words(width):
    row = TopicRow("FSDP1 vs FSDP2, checkpoints and debugging",
                   "FlatParameter vs DTensor, state dicts and distributed checkpoints, torch.compile, hangs",
                   mastery=0.42, seen=12, questions=28, due=3)
    first, second = (line.plain for line in row.lines(width))
    assert cell_len(first) == width and cell_len(second) <= width
    assert first.rstrip().endswith("12/28 seen   3 due")
    if width < 60:
        assert "FSDP1 vs FSDP2" in first and "…" in first  # the title gave way, not the numbers
    assert second.endswith("…") or second == row.description
    if second.endswith("…"):
        assert row.description.startswith(second[:-1].rstrip(" ,;:"))
        assert row.description[len(second) - 1] in " ,;:"  # cut where a word ended


def test_an_action_row_keeps_its_name():
    (line,) = ActionRow("Mock interview", "8 mixed questions, explain included, 20 minutes, score by topic").lines(50)
    assert line.plain == "Mock interview   8 mixed questions, explain…"


def _home(quiz_bank):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=1, clock=lambda: T0)


async def test_home_at_80x24_shows_every_numbers_column_whole(quiz_bank):
    app = _home(quiz_bank)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        menu = app.screen.query_one(Menu)
        shown = menu.text_lines()
        first_line, _ = menu.row_span(menu.keys.index("topic-ddp"))
        assert "DDP basics" in shown[first_line] and shown[first_line].rstrip().endswith("0/4 seen")
        assert all(cell_len(line) <= menu.text_width for line in shown)
        assert menu.text_width == 80 - 4 - 2 - 2  # page padding, menu border, a blank cell each side
        assert app.screen.query_one("#home-summary").region.bottom <= 23  # above the keys, on screen


async def test_the_home_menu_moves_with_keys_and_chooses_with_enter_or_a_click(quiz_bank):
    app = _home(quiz_bank)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        menu = app.screen.query_one(Menu)
        await pilot.press("down", "down")
        assert menu.highlighted == 2
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DrillScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert menu.highlighted == 2  # where it was left
        await pilot.press("home", "up")  # up from the first row wraps to the last
        assert menu.highlighted == len(menu.rows) - 1
        top, _ = menu.row_span(menu.keys.index("topic-ddp"))
        await pilot.click(Menu, offset=(5, top + 1))
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen) and app.screen.question.topic == "ddp"


@pytest.mark.parametrize("unit", ["GB", "GiB", "bytes", "", "x"])
def test_a_numeric_placeholder_fits_an_input_box_at_80_columns(unit):
    # At 80 columns the input's text area is 80 - 4 (page padding) - 4 (box border and padding) wide.
    assert cell_len(grading.input_placeholder(unit)) <= 72


@pytest.mark.parametrize("width", [40, 80, 120])
async def test_the_session_header_keeps_position_and_clock_whole_at_any_width(width):
    from rich.text import Text
    from textual.app import App

    from ddpfsdp.quiz.widgets.session_header import SessionHeader

    class Headers(App):
        def compose(self):
            title = Text("Interview · memory of a 70B model on 64 GPUs · what each rank holds at rest")
            yield SessionHeader(title, position="step 2 of 6", elapsed_s=lambda: 192.4, id="up")
            yield SessionHeader(title, position="3 of 8", remaining_s=lambda: 0.0, id="down")

    app = Headers()
    async with app.run_test(size=(width, 6)) as pilot:
        await pilot.pause()
        up, down = (app.query_one(f"#{name}").render().plain for name in ("up", "down"))
        assert up.rstrip().endswith("step 2 of 6  ⏱ 03:12") and up.startswith("Interview")
        assert down.rstrip().endswith("3 of 8  ⏱ time is up")
        assert cell_len(up) <= width - 2 and cell_len(down) <= width - 2  # inside its padding


class _RoomPage(App):
    """A scroll of 30 lines, a line under it, and the Room; `race` shrinks at once after the first growth, as a
    sibling's change can in the same frame."""

    def __init__(self, race: bool):
        super().__init__()
        self.race = race
        self.grown: list[int] = []

    def compose(self):
        from textual.containers import Vertical, VerticalScroll
        from textual.widgets import Static

        with Vertical():
            with VerticalScroll(id="scroll"):
                yield Static("\n".join(f"line {n}" for n in range(30)))
            yield Static("under the scroll", id="under")
            yield Room("#scroll")

    def on_mount(self) -> None:
        self.query_one("#scroll").styles.height = "auto"
        self.query_one("#scroll").styles.max_height = 3

    def on_room_grown(self, event) -> None:
        self.grown.append(event.rows)
        if self.race and len(self.grown) == 1:
            event.room.shrink()


@pytest.mark.parametrize("race", [False, True])
async def test_the_room_grows_a_scroll_into_the_rows_left_and_no_further(race):
    app = _RoomPage(race)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        await pilot.pause()
        scroll, under = app.query_one("#scroll"), app.query_one("#under")
        assert scroll.size.height == 11  # 12 rows, one for the line under it
        assert under.region.bottom == 12  # still on screen
        app.query_one("#under").update("under\nthe\nscroll")
        app.query_one(Room).shrink()
        await pilot.pause()
        await pilot.pause()
        assert scroll.size.height == 9 and under.region.bottom == 12


async def test_home_at_40x12_keeps_its_menu_and_every_key(quiz_bank):
    """At 40x12 the footer once ended after the fourth key (p, ? and q cut off) and the subtitle and summary
    left the menu no row: the keys now wrap whole onto more lines, and the menu keeps its rows."""
    from ddpfsdp.quiz.widgets.key_bar import KeyBar

    app = _home(quiz_bank)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        shown = [line.rstrip() for line in bar.render().plain.splitlines()]
        assert 2 <= len(shown) <= 3 and all(cell_len(line) <= 40 for line in shown), shown
        words = " ".join(shown).split()
        assert all(key in words for key in ("w", "p", "?", "q")), shown
        assert bar.region.height == len(shown) and bar.region.bottom == 12
        menu = app.screen.query_one(Menu)
        assert menu.region.height >= 5 and not app.screen.query_one("#home-summary").display
    app = _home(quiz_bank)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.query_one(KeyBar).region.height == 1  # one line where it fits
        assert app.screen.query_one("#home-summary").display and app.screen.query_one("#subtitle").display


async def test_a_question_on_a_small_terminal_opens_at_its_text(quiz_bank):
    """Focusing the answer once scrolled the question past its own text at 40x12."""
    from ddpfsdp.quiz.loader import load_bank

    app = _home(quiz_bank)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        app.start_session("practice", questions=[load_bank(*quiz_bank).questions["ddp-grad-sync"]])
        await pilot.pause()
        body = app.screen.query_one("#question-body")
        assert body.max_scroll_y > 0  # the question is taller than its room
        assert body.scroll_y == 0 and app.screen.focused.id == "answer-input"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_progress_scrolls_by_keys_from_the_start_to_the_readiness_tables(size):
    """The readiness tables sat below a table of every topic: at 80x24 no key reached them (the table took
    PageDown and End, and the tables had no room), at 120x40 only after Tab. The page now scrolls as one."""
    from ddpfsdp.quiz.screens.progress import ProgressScreen

    app = make_app(seed=1, clock=lambda: T0)  # the real bank: every topic, as a person sees it
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProgressScreen)
        page, readiness = screen.query_one("#progress-page"), screen.query_one("#progress-readiness")

        def shown() -> bool:  # some of the readiness tables is on screen
            return readiness.region.y < page.region.bottom and readiness.region.bottom > page.region.y

        if size == (80, 24):
            assert not shown()
            await pilot.press("pagedown")
            await pilot.pause()
            assert shown()
            await pilot.press("home")
            await pilot.pause()
            assert page.scroll_y == 0
        await pilot.press("end")
        await pilot.pause()
        assert shown() and page.scroll_y == page.max_scroll_y > 0
        await pilot.press("home", "down", "enter")  # the table still chooses a topic to practise
        await pilot.pause()
        assert type(app.screen).__name__ == "QuestionScreen"
