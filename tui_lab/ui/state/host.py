"""What a pane may ask of the lab: the ``LabHost`` protocol, and ``Hosted``, the widget base
that reaches it.

A pane (or a part of one) reads the shared ``LabState`` through ``self.host.state``
and tells the lab what happened by posting messages (``ui/messages.py``); it never
imports the app or fetches another pane. ``LabApp`` is one host; a test can mount a
pane in any ``App`` that has these members (``tests/ui/fake_host.py``).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, cast

from textual.binding import BindingType
from textual.widget import Widget

from tui_lab.ui.state.lab_state import LabState


class LabHost(Protocol):
    """The app a pane lives in, as the pane sees it."""

    state: LabState

    @property
    def quitting(self) -> bool:
        """True once the app is exiting (a pane mounted now builds nothing)."""
        ...

    @property
    def training_active(self) -> bool:
        """True while a training loop is running or paused."""
        ...

    @property
    def active_pane(self) -> str:
        """The id of the pane on show ("build", "train", ...)."""
        ...

    def register_pane(self, pane_id: str, widget: Widget) -> None:
        """A pane has mounted: the host routes messages to it from now on."""
        ...


class Hosted(Widget):
    """A widget that lives in the lab (a pane, or a part of one): ``self.host`` is the lab."""

    @property
    def host(self) -> LabHost:
        """The app this widget is mounted in, as a ``LabHost``."""
        return cast("LabHost", self.app)


class Pane(Hosted):
    """One of the lab's panes: its id, the keys help lists for it, and where its focus goes.

    ``BINDINGS`` (a list from ``key_bindings.py``) are the pane's own keys; ``KEY_SECTIONS`` adds
    the keys of widgets or screens that belong to it (a title, or "" to list them with
    the pane's); ``HELP_EXTRA`` the keys it handles without a binding (key, what).
    """

    PANE_ID: ClassVar[str] = ""
    KEY_SECTIONS: ClassVar[tuple[tuple[str, list[BindingType]], ...]] = ()
    HELP_EXTRA: ClassVar[tuple[tuple[str, str], ...]] = ()

    def focus_default(self) -> None:
        """Focus the widget the pane's keys work in (the pane shows, or the app starts on it)."""
        self.focus()
