"""Choosing answers: a list of choices (one or several) and an ordering of steps.

Both are keyboard first (a digit picks an item, up/down and space work too) and take mouse clicks.
Neither binds Enter, so Enter always submits the answer on the question screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.events import Click
from textual.message import Message
from textual.widgets import Static


class ChoiceItem(Static):
    """One line of a choice list; a click chooses it."""

    def __init__(self, index: int, **kwargs):
        super().__init__(**kwargs)
        self.index = index

    def on_click(self, event: Click) -> None:
        event.stop()
        parent = self.parent
        if isinstance(parent, (ChoiceList, OrderInput)):
            parent.focus()
            parent.press(self.index)


class ChoiceList(Vertical, can_focus=True):
    """Choices in the order given (already shuffled for this attempt); `single` or `multi` selection."""

    DEFAULT_CSS = """
    ChoiceList { height: auto; padding: 0 1; }
    ChoiceList > ChoiceItem { padding: 0 1; }
    ChoiceList:focus > ChoiceItem.-cursor { background: $boost; text-style: bold; }
    ChoiceList > ChoiceItem.-selected { color: $accent; }
    """
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("space", "toggle", "Choose", show=False),
    ]

    @dataclass
    class Changed(Message):
        choice_list: ChoiceList

    def __init__(self, choices: list[str], *, multi: bool, **kwargs):
        super().__init__(**kwargs)
        self.choices = list(choices)
        self.multi = multi
        self.selected: list[int] = []
        self.cursor = 0

    def compose(self):
        for index in range(len(self.choices)):
            yield ChoiceItem(index, id=f"choice-{index + 1}")

    def on_mount(self) -> None:
        self._refresh_items()

    @property
    def value(self) -> list[str]:
        """The chosen texts, in display order."""
        return [self.choices[i] for i in sorted(self.selected)]

    def press(self, index: int) -> None:
        if not 0 <= index < len(self.choices):
            return
        self.cursor = index
        if self.multi:
            if index in self.selected:
                self.selected.remove(index)
            else:
                self.selected.append(index)
        else:
            self.selected = [index]
        self._refresh_items()
        self.post_message(self.Changed(self))

    def action_move(self, delta: int) -> None:
        self.cursor = (self.cursor + delta) % len(self.choices)
        self._refresh_items()

    def action_toggle(self) -> None:
        self.press(self.cursor)

    def _refresh_items(self) -> None:
        for item in self.query(ChoiceItem):
            chosen = item.index in self.selected
            if self.multi:
                marker = "[x]" if chosen else "[ ]"
            else:
                marker = "(•)" if chosen else "( )"
            label = Text.assemble((f"{marker} ", "bold" if chosen else ""), (f"{item.index + 1}. ", "bold"), self.choices[item.index])
            item.update(label)
            item.set_class(chosen, "-selected")
            item.set_class(item.index == self.cursor, "-cursor")


class OrderInput(Vertical, can_focus=True):
    """Steps shown shuffled; pressing their digits (or clicking them) builds the order, backspace undoes."""

    DEFAULT_CSS = """
    OrderInput { height: auto; padding: 0 1; }
    OrderInput > ChoiceItem { padding: 0 1; }
    OrderInput > ChoiceItem.-placed { color: $text-muted; }
    OrderInput:focus > ChoiceItem.-cursor { background: $boost; text-style: bold; }
    OrderInput > #order-so-far { margin-top: 1; padding: 0 1; color: $accent; }
    """
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("space", "place", "Place", show=False),
        Binding("backspace", "undo", "Undo", show=True),
    ]

    @dataclass
    class Changed(Message):
        order_input: OrderInput

    def __init__(self, steps: list[str], **kwargs):
        super().__init__(**kwargs)
        self.steps = list(steps)
        self.placed: list[int] = []
        self.cursor = 0

    def compose(self):
        for index in range(len(self.steps)):
            yield ChoiceItem(index, id=f"step-{index + 1}")
        yield Static(id="order-so-far")

    def on_mount(self) -> None:
        self._refresh_items()

    @property
    def complete(self) -> bool:
        return len(self.placed) == len(self.steps)

    @property
    def value(self) -> list[str]:
        return [self.steps[i] for i in self.placed]

    def press(self, index: int) -> None:
        if not 0 <= index < len(self.steps) or index in self.placed:
            return
        self.cursor = index
        self.placed.append(index)
        self._refresh_items()
        self.post_message(self.Changed(self))

    def action_move(self, delta: int) -> None:
        self.cursor = (self.cursor + delta) % len(self.steps)
        self._refresh_items()

    def action_place(self) -> None:
        self.press(self.cursor)

    def action_undo(self) -> None:
        if self.placed:
            self.placed.pop()
            self._refresh_items()
            self.post_message(self.Changed(self))

    def _refresh_items(self) -> None:
        for item in self.query(ChoiceItem):
            position = self.placed.index(item.index) + 1 if item.index in self.placed else None
            marker = f"[{position}]" if position else "[ ]"
            item.update(Text.assemble((f"{marker} ", "bold"), (f"{item.index + 1}. ", "bold"), self.steps[item.index]))
            item.set_class(position is not None, "-placed")
            item.set_class(item.index == self.cursor, "-cursor")
        so_far = self.query_one("#order-so-far", Static)
        if self.placed:
            text = "Your order: " + " → ".join(str(i + 1) for i in self.placed)
            if not self.complete:
                text += f"   ({len(self.steps) - len(self.placed)} to place; backspace undoes)"
        else:
            text = "Press the steps' numbers in the order they happen (or click them)."
        so_far.update(text)
