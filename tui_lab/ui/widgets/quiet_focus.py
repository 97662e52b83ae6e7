"""Focus changes that redraw only what shows focus.

Textual (8.2) redraws a widget whole when it is given focus, gains it and
loses it (``Widget.focus``, ``Widget._on_focus`` and ``Widget._on_blur`` each
call ``self.refresh()``), and the focused widget of a pane loses focus whenever
the pane is hidden. A whole redraw marks the widget's area dirty, and the next
frame re-renders and re-cuts all of it: for the preset list that was about half
of what showing the Build pane again cost.

This is a guard against Textual's private API, kept on purpose: ``QuietFocus``
replaces the private handlers ``_on_focus``/``_on_blur``. No Textual issue asks
for a quieter focus change (searched: the nearest, Textualize/textual#2396 and
its fix #2460, made ``:focus-within`` restyles cheaper, not this redraw).
``tests/ui/widgets/test_quiet_focus.py`` fails once a plain Textual widget no
longer redraws on focus, which is when this class can go.
"""

from __future__ import annotations

from textual import events
from textual.dom import NoScreen
from textual.widget import Widget
from typing_extensions import Self


class QuietFocus(Widget):
    """A widget whose focus changes redraw nothing whole: ``focus_changed`` says what to redraw.

    A base for the widgets whose look does not depend on focus (or that draw the part
    that does themselves): the lab's scrolling lists and the Train pane. List it after the
    widget's own base (``class PickList(ScrollView, QuietFocus)``): Textual takes a widget's
    default CSS along each class's first base, and this class has none to give.
    """

    def focus(self, scroll_visible: bool = True) -> Self:
        """Take focus, as ``Widget.focus`` does, without its whole redraw."""

        def set_focus(target: Widget) -> None:
            try:
                target.screen.set_focus(target, scroll_visible=scroll_visible)
            except NoScreen:
                pass

        self.app.call_later(set_focus, self)
        return self

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
        self.has_focus = focused
        self.focus_changed()
        if self.parent is not None:
            told = events.DescendantFocus if focused else events.DescendantBlur
            self.parent.post_message(told(self))

    def focus_changed(self) -> None:
        """Redraw what shows focus (nothing, unless overridden)."""
