"""How a pane reaches the lab: ``self.lab`` is the app, typed as the ``LabApp`` it is.

Panes read the lab's shared state through it (its config, the loaded core,
the model Decode uses, the last decode and report, the heads switched off,
time travel) and tell the app what happened by posting messages, which the
app hands to whichever pane needs them; no pane fetches another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.widget import Widget

if TYPE_CHECKING:  # the app imports the panes: at run time the type is only a name here
    from tui_lab.ui.app import LabApp


class LabWidget(Widget):
    """A widget that lives in the lab (a pane, or a mixin of one)."""

    @property
    def lab(self) -> LabApp:
        """The lab app this widget is mounted in."""
        return cast("LabApp", self.app)
