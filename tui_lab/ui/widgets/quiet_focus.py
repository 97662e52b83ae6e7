"""Focus changes that redraw only what shows focus.

Textual redraws a widget whole when it is given focus, gains it and loses it,
and the focused widget of a pane loses focus whenever the pane is hidden. A
whole redraw marks the widget's area dirty, and the next frame re-renders and
re-cuts all of it: for the preset list that was about half of what showing
the Build pane again cost. Widgets whose look does not depend on focus (or
that draw the part that does themselves) mix this in before their Textual
base class and say in ``focus_changed`` what to redraw.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.dom import NoScreen


class QuietFocus:
    """Mixin for a Widget: no whole redraw on focus changes, ``focus_changed`` instead."""

    def focus(self, scroll_visible: bool = True) -> Any:
        """Take focus, as ``Widget.focus`` does, without its whole redraw."""
        widget: Any = self

        def set_focus(target: Any) -> None:
            try:
                target.screen.set_focus(target, scroll_visible=scroll_visible)
            except NoScreen:
                pass

        widget.app.call_later(set_focus, widget)
        return widget

    def _on_focus(self, event: events.Focus) -> None:
        """Gained focus: say so without redrawing the whole widget."""
        event.prevent_default()  # instead of Widget._on_focus, which redraws
        self._focus_is(True)

    def _on_blur(self, event: events.Blur) -> None:
        """Lost focus: say so without redrawing the whole widget."""
        event.prevent_default()  # instead of Widget._on_blur, which redraws
        self._focus_is(False)

    def _focus_is(self, focused: bool) -> None:
        """What Widget's handlers do, less the whole redraw."""
        widget: Any = self
        widget.has_focus = focused
        self.focus_changed()
        if widget.parent is not None:
            told = events.DescendantFocus if focused else events.DescendantBlur
            widget.parent.post_message(told(widget))

    def focus_changed(self) -> None:
        """Redraw what shows focus (nothing, unless overridden)."""
