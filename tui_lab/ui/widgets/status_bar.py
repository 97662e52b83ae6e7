"""The one-line bar at the top: app name, preset (or opened model), torch/device state, key hints."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui_lab.ui.pane_registry import pane_keys_text


class StatusBar(Static):
    """Shows what the lab is working on; says when torch is still loading."""

    def show(self, preset: str, core_state: str, training: str = "", kind: str = "preset") -> None:
        """Redraw with the preset's (``kind`` "model": the opened model's) name, the core
        state and the training state."""
        text = Text()
        text.append(" tfx-lab ", style="bold reverse")
        text.append(f"  {kind} ", style="dim")
        text.append(preset, style="bold")
        text.append("  ·  ", style="dim")
        style = (
            "yellow"
            if "loading" in core_state or "opening" in core_state
            else ("red" if "failed" in core_state else "green")
        )
        text.append(core_state, style=style)
        if training:
            text.append("  ·  ", style="dim")
            text.append(training, style="bold")
        text.append(f"   {pane_keys_text()} panes · ? help · ctrl+p commands", style="dim")
        self.update(text, layout=False)  # one line, always: no re-layout of the screen
