"""The app's search, level picker, bookmarks, numbers and glossary, driven by keys; screens post messages
and the app acts on them."""

from __future__ import annotations

from datetime import datetime, UTC

from textual.widgets import Markdown

from ddpfsdp.quiz import glossary
from ddpfsdp.quiz.app import make_app
from ddpfsdp.quiz.levels import LevelRange
from ddpfsdp.quiz.messages import BookmarkToggled, LevelsChosen, SessionRequested
from ddpfsdp.quiz.screens.feedback import FeedbackScreen
from ddpfsdp.quiz.screens.glossary import GlossaryScreen
from ddpfsdp.quiz.screens.home import HomeScreen
from ddpfsdp.quiz.screens.levels import LevelScreen
from ddpfsdp.quiz.screens.numbers import NumbersScreen
from ddpfsdp.quiz.screens.question import QuestionScreen
from ddpfsdp.quiz.screens.search import SearchScreen
from ddpfsdp.quiz.store import Store

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SIZE = (100, 30)


def _app(quiz_bank, **kwargs):
    bank_dir, answers_dir = quiz_bank
    return make_app(bank_dir=bank_dir, answers_dir=answers_dir, seed=5, clock=lambda: T0, **kwargs)


async def test_slash_searches_and_enter_opens_the_best_match(quiz_bank):
    app = _app(quiz_bank)
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"peak units")
        await pilot.pause()
        assert app.screen.hits[0].question_id == "wrap-peak-vs-units"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen) and app.screen.question.id == "wrap-peak-vs-units"
        requests = [m for m in seen if isinstance(m, SessionRequested)]
        assert [(r.mode, [q.id for q in r.questions]) for r in requests] == [("practice", ["wrap-peak-vs-units"])]


async def test_a_search_without_words_or_matches_says_so(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash")
        await pilot.press(*"zzzqqq")
        await pilot.pause()
        status = str(app.screen.query_one("#search-status").content)
        assert "No question matches 'zzzqqq'" in status
        await pilot.press("enter")  # nothing to open: stays, no error
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*["backspace"] * 6)
        await pilot.pause()
        assert "prompt, choices, reasons or model answer" in str(app.screen.query_one("#search-status").content)
        await pilot.press("escape")
        assert isinstance(app.screen, HomeScreen)


async def test_b_bookmarks_a_question_and_b_on_home_studies_the_marked_set(quiz_bank):
    app = _app(quiz_bank, topic="ddp")
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.pause()
        first = app.screen.question
        await pilot.press("b")
        await pilot.pause()
        assert [m.question_id for m in seen if isinstance(m, BookmarkToggled)] == [first.id]
        assert list(Store.open().bookmarks()) == [first.id]
        await pilot.press("escape")
        await pilot.pause()
        assert "1 question you marked" in app.screen.row_text("item-bookmarked")
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen) and [q.id for q in app.session.questions] == [first.id]
        await pilot.press("b")  # again: the mark comes off
        await pilot.pause()
        assert Store.open().bookmarks() == {}


async def test_ctrl_b_marks_from_a_text_box(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.post_message(SessionRequested("practice", questions=[app.bank.questions["ddp-allreduce-wire"]]))
        await pilot.pause()
        await pilot.press("b", "ctrl+b")
        await pilot.pause()
        assert app.screen.query_one("#answer-input").value == "b"
        assert list(Store.open().bookmarks()) == ["ddp-allreduce-wire"]


async def test_the_level_picker_limits_the_next_session(quiz_bank):
    app = _app(quiz_bank)
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.pause()
        await pilot.press("l")
        assert isinstance(app.screen, LevelScreen)
        await pilot.press("down", "down", "enter")  # all levels, level 1, level 2
        await pilot.pause()
        assert [m.levels for m in seen if isinstance(m, LevelsChosen)] == [LevelRange(2, 2)]
        assert app.levels == LevelRange(2, 2) and isinstance(app.screen, HomeScreen)
        assert "Asking level 2 (working knowledge)" in str(app.screen.query_one("#home-summary").content)
        app.post_message(SessionRequested("practice", topic="ddp"))
        await pilot.pause()
        assert {q.level for q in app.session.questions} == {2}


async def test_numbers_and_glossary_open_from_home(quiz_bank):
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n")
        assert isinstance(app.screen, NumbersScreen)
        await pilot.press("escape", "g")
        await pilot.pause()
        assert isinstance(app.screen, GlossaryScreen) and app.screen.shown == "all-reduce"
        await pilot.press("down")
        await pilot.pause()
        assert app.screen.shown == "reduce-scatter"
        await pilot.press("tab")
        await pilot.pause()
        # Only the fixture bank's questions that name a reduce-scatter are listed: none of them does.
        assert app.screen.query_one("#glossary-questions").option_count == 0
        await pilot.press("shift+tab", "up")
        await pilot.pause()
        listed = app.screen.query_one("#glossary-questions")
        assert [listed.get_option_at_index(i).id for i in range(listed.option_count)] == glossary.uses(
            app.bank, names=["all-reduce"])["all-reduce"] != []


async def test_a_model_answers_terms_open_the_glossary(quiz_bank):
    _, answers_dir = quiz_bank
    (answers_dir / "ddp-grad-sync.md").write_text("DDP all-reduces each **bucket** as it fills; `bucket_cap_mb` sets it.\n")
    app = _app(quiz_bank)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        question = app.bank.questions["ddp-grad-sync"]
        app.post_message(SessionRequested("practice", questions=[question]))
        await pilot.pause()
        await pilot.press(str(app.screen.display_choices.index(question.answer) + 1), "enter")
        await pilot.pause()
        feedback = app.screen
        assert isinstance(feedback, FeedbackScreen)
        source = feedback.query_one("#model-answer", Markdown).source
        assert "[all-reduces](glossary:all-reduce)" in source and "**[bucket](glossary:bucket)**" in source
        assert "`bucket_cap_mb`" in source
        markdown = feedback.query_one("#model-answer", Markdown)
        markdown.post_message(Markdown.LinkClicked(markdown, "glossary:bucket"))
        await pilot.pause()
        assert isinstance(app.screen, GlossaryScreen) and app.screen.shown == "bucket"
        await pilot.press("escape", "g")
        await pilot.pause()
        assert isinstance(app.screen, GlossaryScreen) and app.screen.shown == "all-reduce"  # the answer's first term


async def test_quiz_bookmarked_starts_on_the_marked_questions(quiz_bank):
    with Store.open() as store:
        store.add_bookmark("wrap-peak-vs-units", T0)
        store.add_bookmark("ddp-grad-sync", T0)
    app = _app(quiz_bank, bookmarked=True, levels=LevelRange(1, 1))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # Both marked, but only the level-1 one is asked at --level 1.
        assert [q.id for q in app.session.questions] == ["ddp-grad-sync"]
