"""The keys of the current screen at the bottom, like Textual's Footer, as one widget.

Footer builds a widget per key and builds them again once the screen's bindings are known; on the
first screen that costs about as much as the rest of the screen together. This draws the same
keys as one line of text, redrawn when the bindings change, and a click on a key presses it. Where
the line is wider than the terminal (a 40-column one), the keys go on as many lines as they need,
each key whole, so none is cut off (the last ones are help and quit).
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.widget import Widget


class KeyBar(Widget, can_focus=False):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: auto;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyBar > .key-bar--key { color: $footer-key-foreground; text-style: bold; }
    KeyBar > .key-bar--description { color: $footer-description-foreground; }
    """
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description"}

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.refresh())

    def keys(self) -> list[tuple[str, str, str]]:
        """(key, how it is shown, what it does) for each key the screen shows, once per action."""
        shown, seen = [], set()
        for binding in (active.binding for active in self.screen.active_bindings.values()):
            if binding.show and binding.action not in seen:
                seen.add(binding.action)
                shown.append((binding.key, self.app.get_key_display(binding), binding.description))
        return shown

    def _lines(self, width: int) -> list[list[tuple[str, str, str]]]:
        """The keys packed into lines of `width` cells, each key and its description kept together."""
        lines: list[list[tuple[str, str, str]]] = [[]]
        used = 0
        for key, display, description in self.keys():
            cells = len(display) + len(description) + 3
            if lines[-1] and used + cells > width:
                lines.append([])
                used = 0
            lines[-1].append((key, display, description))
            used += cells
        return lines

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        text = Text(no_wrap=True, overflow="ellipsis")
        for number, line in enumerate(self._lines(self.size.width or 80)):
            if number:
                text.append("\n")
            for key, display, description in line:
                click = Style(meta={"key": key})
                text.append(f" {display} ", key_style + click)
                text.append(f"{description} ", description_style + click)
        return text

    def on_click(self, event: Click) -> None:
        key = event.style.meta.get("key") if event.style else None
        if key:
            self.app.simulate_key(key)
