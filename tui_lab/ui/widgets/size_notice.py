"""Shown instead of the panes when the terminal is smaller than the lab needs."""

from __future__ import annotations

from textual.widgets import Static

MIN_WIDTH = 80
MIN_HEIGHT = 24


class SizeNotice(Static):
    """A clear message with the current and the needed size."""

    def show_size(self, width: int, height: int) -> None:
        """Say how big the terminal is and how big it needs to be."""
        self.update(
            f"[b]The terminal is too small for the lab[/b]\n\n"
            f"it is {width}×{height}; the lab needs at least {MIN_WIDTH}×{MIN_HEIGHT}\n\n"
            f"enlarge the window (or reduce the font size) · ctrl+q quits"
        )
