"""The command palette's lab actions (ctrl+p), derived from the bindings.

Each pane action the footer and help screen list becomes a command: the title
is the pane and the binding's label ("Train: Start"), the help line the
action's docstring and its key. Nothing here repeats a key or a label.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from tui_lab.ui.keymap import action_help, bindings_of, first_key, pane_keys

if TYPE_CHECKING:
    from tui_lab.ui.app import LabApp

# App keys with no place in the palette: Textual lists its own Quit, and
# leaving a text field means nothing once the palette has the focus.
APP_ACTIONS_LEFT_OUT = ("quit", "leave_field")


def lab_commands(app: LabApp) -> Iterator[SystemCommand]:
    """One command per app binding (the panes, help) and per pane binding."""
    for binding in bindings_of(type(app)):
        if binding.action in APP_ACTIONS_LEFT_OUT:
            continue
        key = app.get_key_display(first_key(binding))
        if binding.action.startswith("show_pane"):
            title = f"Go to {binding.description}"
            help_text = f"Show the {binding.description} pane ({key})"
        else:
            title = binding.description
            help_text = f"{action_help(type(app), binding.action)} ({key})"
        yield SystemCommand(title, help_text, lambda a=binding.action: app.run_action(a))
    yield from basics_commands(app)
    for keys in pane_keys():
        for binding in bindings_of(keys.owner):
            key = app.get_key_display(first_key(binding))
            yield SystemCommand(
                f"{keys.title}: {binding.description}",
                f"{action_help(keys.owner, binding.action)} ({key})",
                lambda p=keys.pane, a=binding.action: app.run_pane_action(p, a),
            )


def basics_commands(app: LabApp) -> Iterator[SystemCommand]:
    """One command per view of the basics screen ("Basics: Masks"), opening it on that view."""
    from tui_lab.ui.screens.basics.basics_screen import BasicsScreen

    for binding in bindings_of(BasicsScreen):
        if not binding.action.startswith("view("):
            continue
        key = app.get_key_display(first_key(binding))
        yield SystemCommand(
            f"Basics: {binding.description}",
            f"{binding.tooltip} (b, then {key})",
            lambda a=binding.action: app.run_action(a.replace("view(", "basics(", 1)),
        )
