"""A scroll view drawn line by line that keeps every drawn line until its content changes."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from typing_extensions import Unpack

from tui_lab.ui.widgets.widget_options import WidgetOptions


class LineView(ScrollView):
    """Lays its lines out once per change or width and draws each line once.

    A subclass says how many lines it has at a width (``lay_out``) and draws
    one of them (``draw``); ``relayout()`` after a change. Component styles
    (``COMPONENT_PREFIX`` + name) are resolved once per restyle: resolving
    walks the DOM.
    """

    COMPONENT_PREFIX = ""

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self._strips: dict[int, Strip] = {}
        self._styles: dict[tuple[str, ...], Style] = {}
        self._laid_out_width = -1

    def lay_out(self, width: int) -> int:
        """Lay the lines out at ``width``; return how many there are."""
        raise NotImplementedError

    def draw(self, index: int) -> Strip:
        """Line ``index`` (0 at the top of the content) as segments; cropped and padded here."""
        raise NotImplementedError

    def relayout(self) -> None:
        """The content changed: lay out and draw again."""
        self._laid_out_width = -1
        self._strips.clear()
        self.refresh()

    def redraw_lines(self, indices: set[int]) -> None:
        """Lines ``indices`` (content lines) changed but not the layout: draw those again only."""
        if self._laid_out_width < 0:
            return  # a layout pass is due anyway and draws everything
        top, height = self.scroll_offset.y, self.scrollable_content_region.height
        for index in indices:
            self._strips.pop(index, None)
            if top <= index < top + height:
                self.refresh(Region(0, index - top, self.size.width, 1))

    def ensure_laid_out(self) -> None:
        """Lay the lines out if the content or the width changed since the last time."""
        width = self.scrollable_content_region.width
        if width == self._laid_out_width:
            return
        self._laid_out_width = width
        size = Size(width, self.lay_out(width))
        if size != self.virtual_size:
            self.virtual_size = size

    def notify_style_update(self) -> None:
        """A theme or CSS change: draw again with the new styles."""
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    def on_resize(self, event: events.Resize) -> None:
        """Lines wrap to the width (a pane shown again is "resized" to its old size)."""
        if self.scrollable_content_region.width != self._laid_out_width:
            self._laid_out_width = -1
            self._strips.clear()

    def render_line(self, y: int) -> Strip:
        """One line on screen (drawn once per change and kept)."""
        self.ensure_laid_out()
        index = y + self.scroll_offset.y
        strip = self._strips.get(index)
        if strip is None:
            width = self._laid_out_width
            strip = self.draw(index).extend_cell_length(width, self.style_of()).crop(0, width)
            self._strips[index] = strip
        return strip

    def style_of(self, *parts: str) -> Style:
        """The widget's style with these component styles on top (cached until restyled)."""
        style = self._styles.get(parts)
        if style is None:
            style = self.rich_style
            for name in parts:
                style += self.get_component_rich_style(self.COMPONENT_PREFIX + name)
            self._styles[parts] = style
        return style
