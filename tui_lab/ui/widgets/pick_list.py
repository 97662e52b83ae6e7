"""A keyboard list of items, each a title with an optional note and wrapped description.

It stands in for Textual's OptionList where a pane shows one (the presets, the
decode examples): an OptionList redrew all its options on every focus change
and every time its pane was shown again, a fifth of the cost of showing the
Build pane. This one draws its lines once per change of items, width,
highlight or focus, and keeps them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.widgets.quiet_focus import QuietFocus
from tui_lab.ui.widgets.widget_options import WidgetOptions


@dataclass(frozen=True)
class Item:
    """One entry: ``title`` (bold), then ``note`` (italic), ``description`` below (dim)."""

    title: str
    note: str = ""
    description: str = ""


class PickList(ScrollView, QuietFocus, can_focus=True):
    """↑↓ (home, end, page keys) move the highlight; enter or a click picks the item."""

    COMPONENT_CLASSES = {
        "pick-list--title",
        "pick-list--note",
        "pick-list--description",
        "pick-list--highlighted",
        "pick-list--focused",
    }

    BINDINGS = key_bindings.PICK_LIST

    @dataclass
    class Picked(Message):
        """Enter or a click on an item."""

        pick_list: PickList
        index: int

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.items: list[Item] = []
        self._highlighted: int | None = None
        self._lines: list[tuple[int, str, str]] = []  # (item, part, text) per drawn line
        self._first_line: list[int] = []  # item -> its first line
        self._strips: dict[int, Strip] = {}
        self._styles: dict[str, Style] = {}  # resolving a style walks the DOM: once per redraw
        self._width = -1

    # ---- items and the highlight ------------------------------------------------------

    def set_items(self, items: list[Item], highlighted: int | None = 0) -> None:
        """Show ``items`` (the highlight on ``highlighted``, if there are any)."""
        self.items = list(items)
        self._highlighted = None
        self._redraw(relayout=True)
        self.highlighted = highlighted

    @property
    def highlighted(self) -> int | None:
        """The highlighted item's index (None with no items)."""
        return self._highlighted

    @highlighted.setter
    def highlighted(self, index: int | None) -> None:
        if not self.items or index is None:
            index = None
        else:
            index = max(0, min(len(self.items) - 1, index))
        if index != self._highlighted:
            self._highlighted = index
            self._redraw()
        self.call_after_refresh(self._scroll_to_highlight)

    def action_move(self, step: int) -> None:
        """Move the highlight by ``step`` items."""
        current = self._highlighted
        self.highlighted = (
            (0 if step > 0 else len(self.items) - 1) if current is None else current + step
        )

    def action_move_to(self, index: int) -> None:
        """Highlight the first (0) or last (-1) item."""
        self.highlighted = index if index >= 0 else len(self.items) - 1

    def action_page(self, direction: int) -> None:
        """Move the highlight by about a screenful of lines."""
        self._layout_lines()
        if self._highlighted is None or not self._lines:
            return self.action_move(direction)
        target = self._first_line[self._highlighted] + direction * max(1, self.size.height - 1)
        target = max(0, min(len(self._lines) - 1, target))
        self.highlighted = self._lines[target][0]
        return None

    def action_pick(self) -> None:
        """Report the highlighted item as picked."""
        if self._highlighted is not None:
            self.post_message(self.Picked(self, self._highlighted))

    def on_click(self, event: events.Click) -> None:
        """A click highlights and picks the item under the pointer."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        self._layout_lines()
        y = offset.y + self.scroll_offset.y
        if 0 <= y < len(self._lines):
            self.highlighted = self._lines[y][0]
            self.action_pick()

    def _scroll_to_highlight(self) -> None:
        self._layout_lines()
        if self._highlighted is None or not self._first_line:
            return
        lines = self._item_lines(self._highlighted)
        self.scroll_to_region(Region(0, lines.start, 1, len(lines)), animate=False, force=True)

    def _item_lines(self, index: int) -> range:
        """The drawn lines of item ``index`` (its title and description)."""
        after = index + 1
        end = self._first_line[after] if after < len(self._first_line) else len(self._lines)
        return range(self._first_line[index], end)

    # ---- drawing ----------------------------------------------------------------------

    def _redraw(self, relayout: bool = False) -> None:
        if relayout:
            self._width = -1
        self._strips.clear()
        self.refresh()

    def focus_changed(self) -> None:
        """Only the highlight shows focus (by its colour): redraw it alone."""
        self._redraw_highlight()

    def _redraw_highlight(self) -> None:
        if self._highlighted is None or self._width < 0:
            return
        lines = self._item_lines(self._highlighted)
        for y in lines:
            self._strips.pop(y, None)
        self.refresh_lines(lines.start, len(lines))

    def on_resize(self, event: events.Resize) -> None:
        """Descriptions wrap to the width (a pane shown again is "resized" to its old size)."""
        if self.scrollable_content_region.width != self._width:
            self._redraw(relayout=True)

    def notify_style_update(self) -> None:
        """A theme or CSS change: draw again with the new styles."""
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    def _layout_lines(self) -> None:
        width = self.scrollable_content_region.width
        if width == self._width:
            return
        self._width = width
        lines: list[tuple[int, str, str]] = []
        first: list[int] = []
        wrap = max(4, width - 2)  # one cell of padding each side
        for i, item in enumerate(self.items):
            first.append(len(lines))
            lines.append((i, "title", item.title))
            for paragraph in item.description.splitlines():
                for text in textwrap.wrap(paragraph, wrap) or [""]:
                    lines.append((i, "description", text))
        self._lines, self._first_line = lines, first
        size = Size(width, len(lines))
        if size != self.virtual_size:
            self.virtual_size = size

    def render_line(self, y: int) -> Strip:
        """One line of the list (drawn once per change and kept)."""
        self._layout_lines()
        index = y + self.scroll_offset.y
        strip = self._strips.get(index)
        if strip is None:
            strip = self._draw(index)
            self._strips[index] = strip
        return strip

    def _style(self, highlighted: bool, part: str = "") -> Style:
        focused = highlighted and self.has_focus
        key = f"{highlighted}{focused}{part}"
        style = self._styles.get(key)
        if style is None:
            style = self.base_style
            if highlighted:
                name = "pick-list--focused" if focused else "pick-list--highlighted"
                style += self.get_component_rich_style(name)
            if part:
                style += self.get_component_rich_style(f"pick-list--{part}", partial=True)
            self._styles[key] = style
        return style

    @property
    def base_style(self) -> Style:
        """The widget's own style (resolving it walks the DOM: kept until restyled)."""
        style = self._styles.get("base")
        if style is None:
            style = self._styles["base"] = self.rich_style
        return style

    def _draw(self, index: int) -> Strip:
        width = self._width
        if not 0 <= index < len(self._lines):
            return Strip.blank(width, self._style(False))
        item_index, part, text = self._lines[index]
        highlighted = item_index == self._highlighted
        line_style = self._style(highlighted)
        segments = [Segment(" ", line_style), Segment(text, self._style(highlighted, part))]
        note = self.items[item_index].note
        if part == "title" and note:
            segments.append(Segment("  " + note, self._style(highlighted, "note")))
        return Strip(segments).extend_cell_length(width, line_style).crop(0, width)
