"""The footer: the keys that work right now, as one line of text.

Textual's ``Footer`` rebuilds one widget per key whenever focus moves, which
made switching panes cost tens of milliseconds more (hundreds while training
on two cores). This bar redraws a single line of text instead.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static


def _keys_label(keys: list[str]) -> str:
    """'1','2','3','4','5' -> '1-5'; other keys of one action are joined with spaces."""
    if len(keys) > 2 and all(k.isdigit() and len(k) == 1 for k in keys):
        digits = [int(k) for k in keys]
        if digits == list(range(digits[0], digits[0] + len(digits))):
            return f"{keys[0]}-{keys[-1]}"
    return " ".join(keys)


class KeyBar(Static):
    """Shows each active binding (key and description); disabled ones are dimmed."""

    def on_mount(self) -> None:
        """Follow the screen's bindings as focus moves."""
        self._pending = False
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._schedule()

    def on_unmount(self) -> None:
        """Stop following the screen."""
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if screen is self.screen:
            self._schedule()

    def _schedule(self) -> None:
        if not self._pending:
            self._pending = True
            self.call_after_refresh(self._redraw_keys)

    def _redraw_keys(self) -> None:
        self._pending = False
        variables = self.app.theme_variables
        key_style = Style.parse(
            f"bold {variables.get('footer-key-foreground', variables.get('accent', 'yellow'))}"
        )
        dim = Style(dim=True)
        groups: dict[object, tuple[list[str], str, bool]] = {}
        order: list[object] = []
        palette: str | None = None
        for _key, active in self.screen.active_bindings.items():
            binding: Binding = active.binding
            if binding.action in ("command_palette", "app.command_palette"):
                palette = self.app.get_key_display(binding)
                continue
            if not binding.show:
                continue
            ident: object = binding.group or binding.action
            shown = self.app.get_key_display(binding)
            if ident not in groups:
                description = binding.group.description if binding.group else binding.description
                groups[ident] = ([], description, active.enabled)
                order.append(ident)
            if shown not in groups[ident][0]:
                groups[ident][0].append(shown)
        text = Text(no_wrap=True, overflow="crop")
        for ident in order:
            keys, description, enabled = groups[ident]
            text.append(f" {_keys_label(keys)} ", style=key_style if enabled else dim)
            text.append(f"{description} ", style="" if enabled else dim)
        if palette:
            width = self.size.width or 80
            tail = f" {palette} palette "
            gap = width - text.cell_len - len(tail)
            if gap > 0:
                text.append(" " * gap)
                text.append(f" {palette}", style=key_style)
                text.append(" palette ")
        self.update(text, layout=False)  # docked, one line: no re-layout of the screen

    def on_resize(self) -> None:
        """Re-place the palette hint on the right."""
        self._schedule()
