"""A line of text whose changes redraw it alone.

``Static.update`` asks for a layout pass of the whole screen every time (its
size may change); a line whose size is fixed by its CSS (a hint under the Build
form that changes on every cursor move) needs only a repaint. Measured on the
Build form: the layout passes were most of a cursor move's cost.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class TextLine(Widget):
    """One line of ``text`` (a string or Rich text); its height and width come from CSS."""

    DEFAULT_CSS = "TextLine { height: 1; }"

    text: reactive[str | Text] = reactive("", layout=False)

    def __init__(self, text: str | Text = "", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.text = text

    def render(self) -> str | Text:
        return self.text

    def update(self, text: str | Text) -> None:
        """Show ``text`` instead (a repaint, no layout pass)."""
        self.text = text
