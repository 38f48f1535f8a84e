"""A scrolling container that keeps one widget in view while new text above or in it is laid out."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widget import Widget


class TargetScroll(VerticalScroll):
    """Keeps `target` in view (its top at the top, when `top`) as its contents are laid out, which in a
    real terminal can land a frame or two after the update that changed them."""

    target: Widget | None = None
    top: bool = False

    def show(self, widget: Widget, *, top: bool = False) -> None:
        self.target, self.top = widget, top
        self.call_after_refresh(self.show_target)

    def show_target(self) -> None:
        if self.target is not None and self.target.is_mounted:
            self.scroll_to_widget(self.target, animate=False, top=self.top)

    def on_resize(self) -> None:
        self.show_target()

    def watch_virtual_size(self) -> None:
        self.call_after_refresh(self.show_target)
