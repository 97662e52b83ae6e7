"""The command palette's lab actions (ctrl+p), derived from the bindings.

Each action the footer and help screen list becomes a command: the title is the
pane and the binding's label ("Train: Start"), the help line the action's
docstring, its key as the user's keymap has it, and the binding's id. Only the
mounted panes' bindings are offered. Nothing here repeats a key or a label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from textual.app import App, SystemCommand
from textual.binding import Binding

from tui_lab.ui import key_bindings, pane_registry
from tui_lab.ui.state.host import Pane
from tui_lab.ui.user_keymap import action_help, as_bindings, bindings_of, first_key, rebound

# App keys with no place in the palette: Textual lists its own Quit, and
# leaving a text field means nothing once the palette has the focus.
APP_ACTIONS_LEFT_OUT = ("quit", "leave_field")


def key_text(app: App[None], binding: Binding, keymap: Mapping[str, str]) -> str:
    """"(t · train.toggle)": the binding's first key as remapped, and its id."""
    key = app.get_key_display(first_key(rebound(binding, keymap)))
    return f"({key} · {binding.id})" if binding.id else f"({key})"


def lab_commands(
    app: App[None],
    panes: list[Pane],
    keymap: Mapping[str, str],
    run_pane_action: Callable[[str, str], None],
) -> Iterator[SystemCommand]:
    """One command per app binding (the panes, help), per mounted pane binding, per basics view."""
    for binding in bindings_of(type(app)):
        if binding.action in APP_ACTIONS_LEFT_OUT:
            continue
        key = key_text(app, binding, keymap)
        if binding.action.startswith("show_pane"):
            title = f"Go to {binding.description}"
            help_text = f"Show the {binding.description} pane {key}"
        else:
            title = binding.description
            help_text = f"{action_help(type(app), binding.action)} {key}"
        yield SystemCommand(title, help_text, lambda a=binding.action: app.run_action(a))
    yield from basics_commands(app, keymap)
    for pane in panes:
        owner = type(pane)
        title = pane_registry.spec(owner.PANE_ID).title
        for binding in bindings_of(owner):
            yield SystemCommand(
                f"{title}: {binding.description}",
                f"{action_help(owner, binding.action)} {key_text(app, binding, keymap)}",
                lambda p=owner.PANE_ID, a=binding.action: run_pane_action(p, a),
            )


def basics_commands(app: App[None], keymap: Mapping[str, str]) -> Iterator[SystemCommand]:
    """One command per view of the basics screen ("Basics: Masks"), opening it on that view."""
    for binding in as_bindings(key_bindings.BASICS):
        if not binding.action.startswith("view("):
            continue
        key = app.get_key_display(first_key(rebound(binding, keymap)))
        yield SystemCommand(
            f"Basics: {binding.description}",
            f"{binding.tooltip} (b, then {key})",
            lambda a=binding.action: app.run_action(a.replace("view(", "basics(", 1)),
        )
